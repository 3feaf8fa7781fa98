"""The one place that knows URL shapes: every link the inspector makes is built here.

Path parts are percent-encoded completely (``/`` included), so a hostile
sample key stays one path segment. Keys that a browser would treat as a dot
segment (``.``, ``..``) or that are empty travel as ``?key=`` instead.

>>> version("web-text", "0123abcd")
'/datasets/web-text/versions/0123abcd'
>>> sample("web-text", "0123abcd", "a/b c")
'/datasets/web-text/versions/0123abcd/samples/a%2Fb%20c'
>>> api(sample("web-text", "0123abcd", "k1"))
'/api/datasets/web-text/versions/0123abcd/samples/k1'
"""

from __future__ import annotations

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


def api(url: str) -> str:
    """The JSON twin of a page URL: the same path under ``/api``."""
    return API_PREFIX + (url if url != "/" else "")


def is_api(path: str) -> bool:
    """True for a path under ``/api``."""
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


# -- pages ---------------------------------------------------------------
def home() -> str:
    return "/"


def run(run_: str) -> str:
    """``/runs/{run}``: plan, sources, world-size history and metric curves."""
    return f"/runs/{_q(run_)}"


def step(run_: str, step_: int) -> str:
    """``/runs/{run}/steps/{step}``: the global batch across ranks."""
    return f"{run(run_)}/steps/{int(step_)}"


def rank(run_: str, step_: int, rank_: int) -> str:
    """``/runs/{run}/steps/{step}/ranks/{rank}``: exactly what that rank consumed."""
    return f"{step(run_, step_)}/ranks/{int(rank_)}"


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
    return key.strip(".") == ""


def sample(name: str, version_: VersionLike, key: str, **query: Any) -> str:
    """``/datasets/{name}/versions/{version}/samples/{key}``: one sample, every field rendered."""
    base = version(name, version_) + "/samples/"
    if _dot_or_empty(key):
        return with_query(base, key=key, **query)
    return with_query(base + _q(key), **query)


def diff(name: str, a: VersionLike, b: VersionLike, **query: Any) -> str:
    """``/datasets/{name}/diff/{a}..{b}``: what changed between two versions."""
    return with_query(f"{dataset(name)}/diff/{_q(_vid(a))}..{_q(_vid(b))}", **query)


def flags(**query: Any) -> str:
    """``/flags``: flagged samples, filterable by ``dataset`` and ``tag``."""
    return with_query("/flags", **query)


def flag(flag_id: int) -> str:
    """``/flags/{id}``: one flag's permanent page."""
    return f"/flags/{int(flag_id)}"


def flags_jsonl(**query: Any) -> str:
    """``/flags.jsonl``: every flag (filtered like ``/flags``) as JSON lines."""
    return with_query("/flags.jsonl", **query)


def flags_keys(**query: Any) -> str:
    """``/flags/keys.txt``: flagged keys, one a line, for ``batchscope register --exclude``."""
    return with_query("/flags/keys.txt", **query)


def login(next_: str | None = None) -> str:
    """``/login``: the access-token form (only when a token is set)."""
    return with_query("/login", next=next_)


# -- media and static ------------------------------------------------------
def media(name: str, version_: VersionLike, key: str, field: str) -> str:
    """``/media/datasets/{name}/versions/{version}/samples/{key}?field=``: a field's stored bytes (immutable)."""
    base = f"/media{version(name, version_)}/samples/"
    if _dot_or_empty(key):
        return with_query(base, key=key, field=field)
    return with_query(base + _q(key), field=field)


def static(path: str, revision: str | None = None) -> str:
    """``/static/{path}``, with ``?v=`` so a changed file gets a new URL."""
    return with_query(f"/static/{path}", v=revision)


def api_docs() -> str:
    return f"{API_PREFIX}/docs"


def openapi() -> str:
    return f"{API_PREFIX}/openapi.json"
