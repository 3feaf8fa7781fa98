"""Page data of episodes: a version's episodes sortable by return and length, and one episode's timeline.

The table reads the version's episode index (``loaders.rl.episode_index``:
per-episode length, return, list lengths, termination, built once and kept in
the catalog's ``indexes`` directory); the timeline lays out one episode's facts
(``loaders.rl.episodes``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from markupsafe import Markup

from loaders import Catalog, DatasetVersion
from loaders.errors import CorruptData
from loaders.rl import EpisodeFacts, episode_column, episode_facts, episode_order, episode_table, episode_warnings
from loaders.rl.episode_index import confirm_episodes, rebuild_episode_table
from loaders.rl.facts import number_text

from .. import urls
from ..jsonable import html_only
from ..renderers.episode import action_ticks, action_value
from ..svg import line_chart
from .common import Link, Pager

log = logging.getLogger(__name__)


# -- the table -----------------------------------------------------------------------------
@dataclass
class EpisodeRow:
    index: int
    key: str
    url: str
    sample_url: str
    env: str | None
    length: int
    frames: int
    return_: float
    excluded: int
    termination: str | None
    warnings: list[str]
    return_text: str = html_only("")


@dataclass
class EpisodesPage:
    dataset: str
    version: str
    ref: str
    column: str
    url: str
    sort: str
    total: int
    start: int
    rows: list[EpisodeRow]
    pager: Pager
    mean_return: float | None
    mean_length: float | None
    excluded: int
    sorts: list[Link] = html_only(default_factory=list)
    #: Column header links: each sorts by its column, descending first, ascending when already descending.
    headers: dict[str, str] = html_only(default_factory=dict)
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)
    version_url: str = html_only("")


def episodes_page(
    catalog: Catalog, version: DatasetVersion, *, column: str | None = None, sort: str = "index", start: int = 0, page_size: int = 50
) -> EpisodesPage:
    """One page of ``version``'s episodes in ``sort`` order (``return``, ``length``, ``-`` for descending; NaN last)."""
    chosen = episode_column(version, column)
    index = episode_table(catalog.root, version, chosen)
    size = max(1, page_size)
    for attempt in range(2):
        order = episode_order(index, sort)
        total = len(order)
        start = min(max(0, start), max(0, (total - 1) // size * size)) if total else 0
        page = [int(i) for i in order[start : start + size]]
        problem = confirm_episodes(version, chosen, index, page)  # what the page shows, against the verified rows
        if problem is None:
            break
        if attempt:
            raise CorruptData(f"episode index of {version.ref} column {chosen!r}: {problem}, even after rebuilding it")
        log.warning("episode index of %s column %r disagrees with its rows (%s); rebuilding it", version.ref, chosen, problem)
        index = rebuild_episode_table(catalog.root, version, chosen)
    name = version.name
    keep = {"column": column} if column else {}
    sort_param = sort if sort != "index" else None
    keys = index.column("key").take(pa.array(page, pa.int64())).to_pylist() if page else []
    if (version.key is None or version.manifest.key_suffixes) and page:
        locations = [version.locate(int(index.column("row")[i].as_py())) for i in page]
        keys = [version.key_at(shard, row, r) for (shard, row), r in zip(locations, version.read_many(locations))]
    rows = []
    for i, key in zip(page, keys):
        ret = float(index.column("ret")[i].as_py())
        excluded = int(index.column("excluded")[i].as_py())
        rows.append(
            EpisodeRow(
                index=int(index.column("row")[i].as_py()),
                key=str(key),
                url=urls.episode(name, version, str(key), **keep),
                sample_url=urls.sample(name, version, str(key)),
                env=index.column("env")[i].as_py(),
                length=int(index.column("length")[i].as_py()),
                frames=int(index.column("frames")[i].as_py()),
                return_=ret,
                excluded=excluded,
                termination=index.column("termination")[i].as_py(),
                warnings=episode_warnings(index, i),
                return_text=number_text(ret) + (" ⚠" if excluded else ""),
            )
        )
    link = lambda at: urls.episodes(name, version, **keep, sort=sort_param, start=at or None)  # noqa: E731
    end = min(total, start + size)
    pager = Pager(
        first=link(0) if start > 0 else None,
        prev=link(max(0, start - size)) if start > 0 else None,
        next=link(end) if end < total else None,
        last=link(max(0, (total - 1) // size * size)) if end < total else None,
        summary=f"episodes {start + 1:,}–{end:,} of {total:,}" if total else "no episodes",
    )
    rets = index.column("ret").to_numpy(zero_copy_only=False)
    clean = index.column("excluded").to_numpy() == 0
    sorts = [
        Link(label, urls.episodes(name, version, **keep, sort=value), "current" if value == sort else None)
        for label, value in (
            ("dataset order", "index"),
            ("return ↓", "-return"),
            ("return ↑", "return"),
            ("length ↓", "-length"),
            ("length ↑", "length"),
        )
    ]
    sorts[0] = Link(sorts[0].label, urls.episodes(name, version, **keep), sorts[0].rel)
    return EpisodesPage(
        dataset=name,
        version=version.id,
        ref=version.ref,
        column=chosen,
        url=link(start),
        sort=sort,
        total=total,
        start=start,
        rows=rows,
        pager=pager,
        mean_return=float(rets[clean].mean()) if clean.any() else None,
        mean_length=float(index.column("length").to_numpy().mean()) if total else None,
        excluded=int((~clean).sum()),
        sorts=sorts,
        headers={c: urls.episodes(name, version, **keep, sort=c if sort == f"-{c}" else f"-{c}") for c in ("return", "length")},
        title=f"episodes · {version.ref}",
        crumbs=[
            Link("datasets", urls.home()),
            Link(name, urls.dataset(name)),
            Link(version.short_id, urls.version(name, version)),
            Link("episodes", urls.episodes(name, version, **keep)),
        ],
        version_url=urls.version(name, version),
    )


# -- one episode ---------------------------------------------------------------------------
@dataclass
class StepRow:
    t: int
    action: Any
    reward: float | None
    return_: float
    done: Any
    frame: bool
    action_text: str = html_only("")
    reward_text: str = html_only("")
    return_text: str = html_only("")
    url: str = html_only("")


@dataclass
class EpisodePage:
    dataset: str
    version: str
    key: str
    column: str
    url: str
    t: int
    length: int
    total_return: float
    termination: str
    frames: int
    frame_url: str | None
    frame_base: str
    warnings: list[str]
    where: str
    sample_url: str
    episodes_url: str
    steps: list[StepRow]
    prev_url: str | None = None
    next_url: str | None = None
    charts: list[tuple[str, Markup]] = html_only(default_factory=list)
    current: StepRow | None = html_only(None)
    return_text: str = html_only("")
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)


def _action_text(action: Any, names: Any) -> str:
    if isinstance(action, int) and isinstance(names, list) and 0 <= action < len(names):
        return f"{action} {names[action]}"
    if isinstance(action, float):
        return number_text(action)
    return "—" if action is None else str(action)[:80]


def _facts(version: DatasetVersion, key: str, column: str) -> tuple[EpisodeFacts, int, int]:
    shard, row = version.find(key)
    record = version.read(shard, [row])[0]
    return episode_facts(record.get(column), record=record), shard, row


def episode_page(catalog: Catalog, version: DatasetVersion, key: str, *, column: str | None = None, t: int = 0) -> EpisodePage:
    """One episode's timeline opened at step ``t`` (clamped to the episode): frame, charts, per-step table."""
    chosen = episode_column(version, column)
    facts, shard, row = _facts(version, key, chosen)
    last = max(0, facts.length - 1)
    t = min(max(0, t), last)
    name = version.name
    keep = {"column": column} if column else {}
    page_url = lambda at: urls.episode(name, version, key, **keep, t=at)  # noqa: E731
    # action names from the notes, only when the version id covers them (not for versions registered before it did)
    names = version.manifest.notes.get("actions") if version.manifest.covers_meta else None
    steps = [
        StepRow(
            t=i,
            action=facts.actions[i] if i < len(facts.actions) else None,
            reward=facts.rewards[i] if i < len(facts.rewards) else None,
            return_=facts.returns[i] if i < len(facts.returns) else facts.total_return,
            done=facts.dones[i] if i < len(facts.dones) else None,
            frame=facts.frame(i) is not None,
            action_text=_action_text(facts.actions[i] if i < len(facts.actions) else None, names),
            reward_text=number_text(facts.rewards[i] if i < len(facts.rewards) else None),
            return_text=number_text(facts.returns[i] if i < len(facts.returns) else None),
            url=page_url(i),
        )
        for i in range(facts.length)
    ]
    chart = dict(width=560, height=150, x_label="step", point_url=page_url, cursor=t)
    charts = [
        ("reward", line_chart(list(enumerate(facts.rewards)), y_label="reward", title="reward per step", **chart)),  # type: ignore[arg-type]
        ("return", line_chart(list(enumerate(facts.returns)), y_label="return", title="cumulative return", **chart)),  # type: ignore[arg-type]
        (
            "action",
            line_chart(
                [(i, action_value(a)) for i, a in enumerate(facts.actions)],
                y_label="action",
                title="action",
                step=True,
                y_ticks=action_ticks(names),
                **chart,
            ),
        ),  # type: ignore[arg-type]
    ]
    frame_base = urls.episode_frame(name, version, key, column=column, t=0)
    return EpisodePage(
        dataset=name,
        version=version.id,
        key=key,
        column=chosen,
        url=page_url(t),
        t=t,
        length=facts.length,
        total_return=facts.total_return,
        termination=facts.termination,
        frames=sum(1 for f in facts.frames if f is not None),
        frame_url=urls.episode_frame(name, version, key, column=column, t=t) if facts.frame(t) is not None else None,
        frame_base=frame_base,
        warnings=facts.warnings,
        where=version.where(shard, row),
        sample_url=urls.sample(name, version, key),
        episodes_url=urls.episodes(name, version, **keep),
        steps=steps,
        prev_url=page_url(t - 1) if t > 0 else None,
        next_url=page_url(t + 1) if t < last else None,
        charts=charts,
        current=steps[t] if steps else None,
        return_text=number_text(facts.total_return),
        title=f"{key} · t={t} · {version.ref}",
        crumbs=[
            Link("datasets", urls.home()),
            Link(name, urls.dataset(name)),
            Link(version.short_id, urls.version(name, version)),
            Link("episodes", urls.episodes(name, version, **keep)),
            Link(key, page_url(t)),
        ],
    )
