"""The one place that knows URL shapes: every link the inspector makes is built here.

Path parts are percent-encoded completely (``/`` included), so a hostile
sample key stays one path segment. Keys that a browser would treat as a dot
segment (``.``, ``..``), that are empty or that hold a line feed travel as
``?key=`` instead.

>>> version("web-text", "0123abcd")
'/datasets/web-text/versions/0123abcd'
>>> sample("web-text", "0123abcd", "a/b c")
'/datasets/web-text/versions/0123abcd/samples/a%2Fb%20c'
>>> api(sample("web-text", "0123abcd", "k1"))
'/api/datasets/web-text/versions/0123abcd/samples/k1'
"""

from __future__ import annotations

import re
from typing import Any, Protocol, Union
from urllib.parse import quote, urlencode

API_PREFIX = "/api"


class _HasId(Protocol):
    id: str


VersionLike = Union[str, _HasId]


def _q(part: Any) -> str:
    return quote(str(part), safe="")


def _vid(version_: VersionLike) -> str:
    return version_ if isinstance(version_, str) else version_.id


def with_query(url: str, **params: Any) -> str:
    """Append query parameters, dropping ``None`` and ``False`` values (``True`` becomes ``1``).

    >>> with_query("/flags", dataset="web", tag=None)
    '/flags?dataset=web'
    """
    pairs = [(k, "1" if v is True else str(v)) for k, v in params.items() if v is not None and v is not False]
    return f"{url}?{urlencode(pairs)}" if pairs else url


def add_query(url: str, **params: Any) -> str:
    """Like ``with_query`` for a URL that may already have a query: the parameters are appended.

    >>> add_query("/media/x?field=image", thumb=256)
    '/media/x?field=image&thumb=256'
    """
    pairs = [(k, "1" if v is True else str(v)) for k, v in params.items() if v is not None and v is not False]
    if not pairs:
        return url
    return f"{url}{'&' if '?' in url else '?'}{urlencode(pairs)}"


def route_path(template: str, params: dict[str, Any]) -> str:
    """A route's path ``template`` with every ``{param}`` (or ``{param:convertor}``) filled in, percent-encoded as every builder here does.

    >>> route_path("/datasets/{name}/versions/{version}/samples/{key:path}", {"name": "web", "version": "0123", "key": "a/b"})
    '/datasets/web/versions/0123/samples/a%2Fb'
    """
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda match: _q(params[match.group(1)]), template)


def api(url: str) -> str:
    """The JSON twin of a page URL: the same path under ``/api``."""
    return API_PREFIX + (url if url != "/" else "")


def is_api(path: str) -> bool:
    """True for a path under ``/api``."""
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


# -- pages ---------------------------------------------------------------
def home() -> str:
    return "/"


def runs() -> str:
    """``/runs``: every run with its progress and status."""
    return "/runs"


def datasets() -> str:
    """``/datasets``: every dataset with its latest version."""
    return "/datasets"


def run(run_: str) -> str:
    """``/runs/{run}``: plan, sources, world-size history and metric curves."""
    return f"/runs/{_q(run_)}"


def run_live(run_: str) -> str:
    """``/runs/{run}/live``: how far the run has got (what live pages poll)."""
    return f"{run(run_)}/live"


def step(run_: str, step_: int) -> str:
    """``/runs/{run}/steps/{step}``: the global batch across ranks."""
    return f"{run(run_)}/steps/{int(step_)}"


def rank(run_: str, step_: int, rank_: int) -> str:
    """``/runs/{run}/steps/{step}/ranks/{rank}``: exactly what that rank consumed."""
    return f"{step(run_, step_)}/ranks/{int(rank_)}"


def run_health(run_: str, **query: Any) -> str:
    """``/runs/{run}/health``: what the checks found over the run (``?check=``, ``?steps=A:B``, ``?start=``)."""
    return with_query(f"{run(run_)}/health", **query)


def finding(run_: str, step_: int, rank_: int | None, position: int | None) -> str:
    """Where a lint finding points: the sample's anchor on its step/rank page, the rank page, or the step page."""
    if rank_ is None:
        return step(run_, step_)
    return rank(run_, step_, rank_) + (sample_anchor(position) if position is not None else "")


def rank_sample(run_: str, step_: int, rank_: int, position: int) -> str:
    """Base of one sample of a step/rank page: ``.../ranks/{rank}/samples/{position}``."""
    return f"{rank(run_, step_, rank_)}/samples/{int(position)}"


def input_view(run_: str, step_: int, rank_: int, position: int, name: str) -> str:
    """One model input of a step/rank sample rendered alone and in full (an htmx fragment)."""
    return f"{rank_sample(run_, step_, rank_, position)}/view/{_q(name)}"


def input_media(run_: str, step_: int, rank_: int, position: int, name: str, index: int | None = None) -> str:
    """Pixels of a model input (a crop, or frame ``index`` of sampled frames) of a step/rank sample."""
    base = f"{rank_sample(run_, step_, rank_, position)}/inputs/{_q(name)}"
    return base if index is None else f"{base}/{int(index)}"


def sample_id(i: int) -> str:
    """The element id of the ``i``-th sample on a page."""
    return f"sample-{int(i)}"


def sample_anchor(i: int) -> str:
    """``#sample-{i}``: the fragment that anchors one sample of a page."""
    return f"#{sample_id(i)}"


def dataset(name: str) -> str:
    """``/datasets/{name}``: versions and tags."""
    return f"/datasets/{_q(name)}"


def version(name: str, version_: VersionLike, **query: Any) -> str:
    """``/datasets/{name}/versions/{version}``: schema, stats, rows (``start``/``end`` cursor, ``q``/``column`` search)."""
    return with_query(f"{dataset(name)}/versions/{_q(_vid(version_))}", **query)


def _dot_or_empty(key: str) -> bool:
    """True for keys that cannot be a path segment: empty, only dots, or holding a line feed (no route pattern matches one)."""
    return key.strip(".") == "" or "\n" in key


def sample(name: str, version_: VersionLike, key: str, **query: Any) -> str:
    """``/datasets/{name}/versions/{version}/samples/{key}``: one sample, every field rendered."""
    base = version(name, version_) + "/samples/"
    if _dot_or_empty(key):
        return with_query(base, key=key, **query)
    return with_query(base + _q(key), **query)


def diff(name: str, a: VersionLike, b: VersionLike, **query: Any) -> str:
    """``/datasets/{name}/diff/{a}..{b}``: what changed between two versions."""
    return with_query(f"{dataset(name)}/diff/{_q(_vid(a))}..{_q(_vid(b))}", **query)


def diff_compare(name: str, **query: Any) -> str:
    """``/datasets/{name}/diff/?a=&b=``: where the compare form goes; redirects to ``diff(name, a, b)``."""
    return with_query(f"{dataset(name)}/diff/", **query)


def diff_heatmap(name: str, a: VersionLike, b: VersionLike, key: str, field: str, *, b_key: str | None = None) -> str:
    """``/media/datasets/{name}/diff/{a}..{b}/heatmap?key=&field=``: an image field's per-pixel difference (PNG, immutable).

    ``b_key`` names B's row when its key differs from A's (keyless datasets pair rows by content).
    """
    spec = f"{_q(_vid(a))}..{_q(_vid(b))}"
    return with_query(f"/media{dataset(name)}/diff/{spec}/heatmap", key=key, b_key=b_key, field=field)


def flags(**query: Any) -> str:
    """``/flags``: flagged samples, filterable by ``dataset`` and ``tag``."""
    return with_query("/flags", **query)


def flag(flag_id: int) -> str:
    """``/flags/{id}``: one flag's permanent page."""
    return f"/flags/{int(flag_id)}"


def flag_edit(flag_id: int) -> str:
    """Where the flag page's edit form posts (a note and tags)."""
    return f"{flag(flag_id)}/edit"


def flag_delete(flag_id: int) -> str:
    """Where the flag page's delete form posts."""
    return f"{flag(flag_id)}/delete"


def flags_jsonl(**query: Any) -> str:
    """``/flags.jsonl``: every flag (filtered like ``/flags``) as JSON lines."""
    return with_query("/flags.jsonl", **query)


def flags_keys(**query: Any) -> str:
    """``/flags/keys.txt``: flagged keys, one a line, for ``batchscope register --exclude``."""
    return with_query("/flags/keys.txt", **query)


def login(next_: str | None = None) -> str:
    """``/login``: the access-token form (only when a token is set)."""
    return with_query("/login", next=next_)


# -- queries: SQL over versions, column statistics, counts, find -------------
def sql(**query: Any) -> str:
    """``/sql?q=``: a SQL query over every registered version (each a table named by its ref), ``start`` paging its rows."""
    return with_query("/sql", **query)


def sql_csv(**query: Any) -> str:
    """``/sql.csv?q=``: every row of a SQL query (up to the row cap) as CSV."""
    return with_query("/sql.csv", **query)


def version_sql(name: str, version_: VersionLike, **query: Any) -> str:
    """``/datasets/{name}/versions/{version}/sql?q=``: the SQL page opened on one version (its rows by default)."""
    return with_query(version(name, version_) + "/sql", **query)


def version_columns(name: str, version_: VersionLike, **query: Any) -> str:
    """``/datasets/{name}/versions/{version}/columns``: per-column statistics, histograms and facets."""
    return with_query(version(name, version_) + "/columns", **query)


def version_count(name: str, version_: VersionLike, **query: Any) -> str:
    """``/datasets/{name}/versions/{version}/count?q=&column=``: how many rows a search matches in all."""
    return with_query(version(name, version_) + "/count", **query)


def find(run_: str, **query: Any) -> str:
    """``/runs/{run}/find?where=&steps=``: every read of a row matching a SQL predicate over the run's sources."""
    return with_query(run(run_) + "/find", **query)


# -- reinforcement learning: rollout groups and episodes ---------------------
def _keyed(base: str, key: str, **query: Any) -> str:
    if _dot_or_empty(key):
        return with_query(base, key=key, **query)
    return with_query(base + _q(key), **query)


def rollout_groups(name: str, version_: VersionLike, **query: Any) -> str:
    """``/datasets/{name}/versions/{version}/groups``: rollout groups, sorted and filtered by the query (``sort``, ``zero_variance``, ``finish``…)."""
    return with_query(version(name, version_) + "/groups", **query)


def rollout(name: str, version_: VersionLike, key: str, **query: Any) -> str:
    """``/datasets/{name}/versions/{version}/rollouts/{key}``: one rollout's token layers (logprob heat, logprob − ref)."""
    return _keyed(version(name, version_) + "/rollouts/", key, **query)


def step_rollouts(run_: str, step_: int, **query: Any) -> str:
    """``/runs/{run}/steps/{step}/rollouts``: the rollout groups of a step's global batch."""
    return with_query(step(run_, step_) + "/rollouts", **query)


def rank_rollouts(run_: str, step_: int, rank_: int, **query: Any) -> str:
    """``/runs/{run}/steps/{step}/ranks/{rank}/rollouts``: the rollout groups one rank consumed."""
    return with_query(rank(run_, step_, rank_) + "/rollouts", **query)


def episodes(name: str, version_: VersionLike, **query: Any) -> str:
    """``/datasets/{name}/versions/{version}/episodes``: episodes sortable by return and length (``sort``, ``start``)."""
    return with_query(version(name, version_) + "/episodes", **query)


def episode(name: str, version_: VersionLike, key: str, **query: Any) -> str:
    """``/datasets/{name}/versions/{version}/episodes/{key}?t=``: an episode's timeline, opened at step ``t``."""
    return _keyed(version(name, version_) + "/episodes/", key, **query)


def episode_frame(name: str, version_: VersionLike, key: str, *, column: str | None = None, t: int) -> str:
    """``/media/datasets/{name}/versions/{version}/episodes/{key}?column=&t=``: frame ``t`` of an episode (immutable)."""
    return _keyed(f"/media{version(name, version_)}/episodes/", key, column=column, t=int(t))


def sample_parts(url: str) -> tuple[str, str, str] | None:
    """``(dataset, version, key)`` of a ``sample(...)`` URL, else ``None``.

    >>> sample_parts(sample("web-text", "0123abcd", "a/b", field="text"))
    ('web-text', '0123abcd', 'a/b')
    """
    from urllib.parse import parse_qs, unquote, urlsplit

    parts = urlsplit(url)
    pieces = parts.path.split("/")
    if len(pieces) != 7 or pieces[:2] != ["", "datasets"] or pieces[3] != "versions" or pieces[5] != "samples":
        return None
    key = unquote(pieces[6]) if pieces[6] else parse_qs(parts.query, keep_blank_values=True).get("key", [None])[0]
    return None if key is None else (unquote(pieces[2]), unquote(pieces[4]), key)


# -- media and static ------------------------------------------------------
def media(name: str, version_: VersionLike, key: str, field: str) -> str:
    """``/media/datasets/{name}/versions/{version}/samples/{key}?field=``: a field's stored bytes (immutable)."""
    base = f"/media{version(name, version_)}/samples/"
    if _dot_or_empty(key):
        return with_query(base, key=key, field=field)
    return with_query(base + _q(key), field=field)


#: Longest side of the thumbnails listings show.
THUMBNAIL_SIDE = 256
_MEDIA_PREFIX, _VIEW_PREFIX = "/media", "/view"


def thumbnail(name: str, version_: VersionLike, key: str, field: str, *, size: int = THUMBNAIL_SIDE) -> str:
    """``/media/...?field=&thumb=``: a server-made thumbnail of an image (or of a video's first frame), immutable."""
    return add_query(media(name, version_, key, field), thumb=int(size))


def frame(name: str, version_: VersionLike, key: str, field: str, index: int, *, size: int | None = None) -> str:
    """``/media/...?field=&frame=N``: frame ``N`` of a video (JPEG), or with ``size`` a thumbnail of it; immutable."""
    return add_query(media(name, version_, key, field), frame=int(index), thumb=size)


def boxed(
    name: str, version_: VersionLike, key: str, field: str, box: "tuple[int, int, int, int] | list[int]", *, size: int | None = None
) -> str:
    """``/media/...?field=&box=l,t,r,b``: the image upright with ``box`` outlined (PNG; with ``size`` a thumbnail)."""
    return add_query(media(name, version_, key, field), box=",".join(str(int(v)) for v in box), thumb=size)


def view_of(media_url: str, **query: Any) -> str:
    """The page showing the media behind a ``media(...)`` URL: the same address under ``/view``.

    >>> view_of(media("clips", "0123abcd", "c1", "video"), frame=12)
    '/view/datasets/clips/versions/0123abcd/samples/c1?field=video&frame=12'
    """
    if not media_url.startswith(_MEDIA_PREFIX + "/"):
        raise ValueError(f"not a media URL: {media_url!r}")
    return add_query(_VIEW_PREFIX + media_url[len(_MEDIA_PREFIX) :], **query)


def media_view(name: str, version_: VersionLike, key: str, field: str, **query: Any) -> str:
    """``/view/datasets/{name}/versions/{version}/samples/{key}?field=``: one image or video field alone (``frame``/``t`` pick a frame)."""
    return view_of(media(name, version_, key, field), **query)


def static(path: str, revision: str | None = None) -> str:
    """``/static/{path}``, with ``?v=`` so a changed file gets a new URL."""
    return with_query(f"/static/{path}", v=revision)


def api_docs() -> str:
    return f"{API_PREFIX}/docs"


def openapi() -> str:
    return f"{API_PREFIX}/openapi.json"
