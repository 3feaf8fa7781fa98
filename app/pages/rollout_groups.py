"""View models of rollout groups (the prompt once, then its completions) and of one page of a ``RolloutQuery``.

The dataset page and the step/rank batch view both call ``groups_block`` with
a ``RolloutIndex`` and a function that loads the rollouts of some index rows;
only the rollouts on the page are ever read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

import numpy as np

from loaders.rl import RolloutFacts, RolloutIndex, RolloutQuery, Summary, advantage_warning
from loaders.rl.confirm import confirm
from loaders.rl.facts import number_text
from loaders.rl.query import GROUP_SORTS, ROW_SORTS

from .. import urls
from ..cut import DEFAULT_LIMIT, Cut, cut_value
from ..jsonable import html_only
from ..renderers.chat import ChatView
from ..renderers.registry import FieldContext
from ..renderers.rollout import card_classes, turns_view
from ..renderers.text import TextView, text_view
from .common import Link, Pager

PROMPT_CHARS = 1200
COMPLETION_CHARS = 800
SORT_LABELS = {
    "index": "dataset order",
    "reward": "reward",
    "advantage": "advantage",
    "length": "length",
    "finish": "finish reason (groups: truncation share)",
    "std": "reward std (groups)",
    "size": "group size (groups)",
    "truncation": "truncation share (groups)",
}


@dataclass
class Entry:
    """One rollout as the page needs it: its facts and where it lives."""

    facts: RolloutFacts
    dataset: str
    version: str
    key: str
    index: int
    where: str
    column: str
    #: The sample on a step/rank page (``…/ranks/{r}#sample-{i}``), for rollouts of a batch.
    anchor_url: str | None = None
    position: int | None = None
    #: True when ``column`` is not the version's first rollout column (links then name it).
    explicit_column: bool = False


#: Loads the rollouts at some positions of the index (group order), in that order.
Loader = Callable[[list[int]], list[Entry]]


@dataclass
class RolloutCard:
    """One completion: its numbers, warnings (naming where), links, and (HTML) its text or chat turns."""

    key: str
    dataset: str
    version: str
    index: int
    url: str
    tokens_url: str
    reward: float | None
    advantage: float | None
    length: int | None
    finish_reason: str | None
    group_id: str | None
    completion: str
    warnings: list[str]
    where: str
    match: bool = True
    #: When the completion is longer than the answer shows: how much of it is, and the rollout's whole value.
    cut: Cut | None = None
    anchor_url: str | None = None
    position: int | None = None
    text: TextView | None = html_only(None)
    turns: ChatView | None = html_only(None)
    reward_text: str = html_only("")
    advantage_text: str = html_only("")
    classes: str = html_only("")
    #: The view of this rollout's group (a listing of single rollouts links each to its group).
    group_url: str | None = html_only(None)


@dataclass
class GroupStats:
    """Reward statistics of one group over its finite rewards (population std); non-finite rewards are counted, not used."""

    size: int
    finite: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    zero_variance: bool
    truncated: int
    truncation_rate: float
    mean_length: float | None
    mean_advantage: float | None
    excluded: int
    note: str = ""
    texts: dict[str, str] = html_only(default_factory=dict)


@dataclass
class RolloutGroup:
    group_id: str | None
    label: str
    prompt: str
    url: str | None
    stats: GroupStats
    members: list[RolloutCard]
    warnings: list[str]
    #: For a batch: the group's size in its dataset, when known (the batch may hold part of it).
    dataset_size: int | None = None
    #: Zero variance of the whole group (for a batch, as its dataset has it when known).
    zero_variance: bool = False
    prompt_view: TextView | None = html_only(None)


@dataclass
class SummaryView:
    """Statistics over the matching rollouts, and quick-filter links."""

    summary: Summary
    texts: dict[str, str] = html_only(default_factory=dict)
    links: list[Link] = html_only(default_factory=list)
    notes: list[str] = html_only(default_factory=list)


@dataclass
class Option:
    value: str
    label: str
    selected: bool


@dataclass
class Controls:
    """The sort/filter form (GET, so every choice is a URL parameter)."""

    action: str
    views: list[Option]
    sorts: list[Option]
    zero_variance: list[Option]
    finishes: list[Option]
    layouts: list[Option]
    step: int | None
    has_step: bool
    group: str | None
    problems: bool
    clear_url: str


@dataclass
class GroupsBlock:
    """One page of groups (or of single rollouts) of a query: what the htmx form swaps."""

    query: dict[str, object]
    view: str
    total: int
    start: int
    end: int
    groups: list[RolloutGroup]
    rollouts: list[RolloutCard]
    pager: Pager
    summary: SummaryView
    layout: str = html_only("grid")
    controls: Controls | None = html_only(None)


def _f(value: float | np.floating | None) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def group_stats(index: RolloutIndex, g: int) -> GroupStats:
    """Statistics of group ``g`` of ``index``."""
    finite = int(index.finite[g])
    excluded = int(index.excluded[g])
    stats = GroupStats(
        size=int(index.sizes[g]),
        finite=finite,
        mean=_f(index.mean[g]),
        std=_f(index.std[g]),
        min=_f(index.min[g]) if finite else None,
        max=_f(index.max[g]) if finite else None,
        zero_variance=bool(index.zero_variance[g]),
        truncated=int(index.truncated_count[g]),
        truncation_rate=float(index.truncated_count[g] / max(1, index.sizes[g])),
        mean_length=_f(index.mean_length[g]),
        mean_advantage=_f(index.mean_advantage[g]),
        excluded=excluded,
        note=f"{excluded} non-finite or missing reward(s) excluded from the statistics" if excluded else "",
    )
    stats.texts = {
        "mean": number_text(stats.mean),
        "std": number_text(stats.std),
        "range": f"{number_text(stats.min)}–{number_text(stats.max)}",
        "truncation": _pct(stats.truncation_rate),
        "length": "—" if stats.mean_length is None else f"{stats.mean_length:.1f}",
        "advantage": number_text(stats.mean_advantage),
    }
    return stats


def make_card(entry: Entry, *, extra: list[str], match: bool) -> RolloutCard:
    """The card of one rollout; ``extra`` warnings come from its group (advantage sign, prompt mismatch)."""
    facts = entry.facts
    plain = FieldContext(column=entry.column, kind="text", record={}, kinds={}, collapse_chars=COMPLETION_CHARS)
    warnings = facts.warnings + extra
    completion, cut = cut_value(facts.completion, DEFAULT_LIMIT)
    if cut is not None:
        cut.url = urls.media(entry.dataset, entry.version, entry.key, entry.column)
    return RolloutCard(
        key=entry.key,
        dataset=entry.dataset,
        version=entry.version,
        index=entry.index,
        url=urls.sample(entry.dataset, entry.version, entry.key),
        tokens_url=urls.rollout(entry.dataset, entry.version, entry.key, column=entry.column if entry.explicit_column else None),
        reward=facts.reward,
        advantage=facts.advantage,
        length=facts.length,
        finish_reason=facts.finish_reason,
        group_id=facts.group_id,
        completion=completion,
        warnings=warnings,
        where=entry.where,
        match=match,
        cut=cut,
        anchor_url=entry.anchor_url,
        position=entry.position,
        text=text_view(completion, plain),
        turns=turns_view(facts, plain),
        reward_text=number_text(facts.reward),
        advantage_text=number_text(facts.advantage),
        classes=" ".join(
            c for c in (card_classes(facts), "inconsistent" if extra and not facts.warnings else "", "" if match else "dim") if c
        ),
    )


def _matches(entry: Entry, query: RolloutQuery) -> bool:
    return (query.finish is None or entry.facts.finish_reason == query.finish) and (query.problems is False or bool(entry.facts.warnings))


def make_group(index: RolloutIndex, g: int, entries: list[Entry], query: RolloutQuery, *, url: str | None) -> RolloutGroup:
    """A group: its prompt once (the most common one), statistics, and a card per member."""
    stats = group_stats(index, g)
    prompts = Counter(e.facts.prompt for e in entries)
    common = prompts.most_common(1)[0][0] if prompts else ""
    prompt = cut_value(common, DEFAULT_LIMIT)[0]  # what is shown; members are compared with the whole prompt
    warnings: list[str] = []
    if len(prompts) > 1:
        warnings.append(
            f"{len(prompts)} different prompts among the {len(entries)} rollouts of this group: completions may be attached to the wrong prompt"
        )
    if stats.note:
        warnings.append(stats.note)
    group_id = index.group_id(g)
    if group_id is None:
        warnings.append("no group id: these rollouts are grouped by their prompt")
    mean, flat, size = reference(index, g)
    cards = []
    for entry in entries:
        extra = []
        if entry.facts.prompt != common:
            extra.append("prompt differs from the group's prompt")
        sign = advantage_warning(entry.facts, group_mean=mean, zero_variance=flat) if mean is not None else None
        if sign:
            extra.append(sign)
        cards.append(make_card(entry, extra=extra, match=_matches(entry, query)))
    plain = FieldContext(column="prompt", kind="text", record={}, kinds={}, collapse_chars=PROMPT_CHARS)
    label = group_id if group_id is not None else "(no group id)"
    return RolloutGroup(
        group_id, label, prompt, url, stats, cards, warnings, dataset_size=size, zero_variance=flat, prompt_view=text_view(prompt, plain)
    )


def reference(index: RolloutIndex, g: int) -> tuple[float | None, bool, int | None]:
    """``(mean reward, zero variance, size)`` of group ``g`` as a whole: its own for a dataset's index; for a batch's,
    its dataset's when known, else no mean (advantages are then not checked: the batch may hold part of the group)."""
    if index.reference_size is None:
        return _f(index.mean[g]), bool(index.zero_variance[g]), None
    size = int(index.reference_size[g])
    if size < 0:
        return None, bool(index.zero_variance[g]), None
    assert index.reference_mean is not None
    return _f(index.reference_mean[g]), bool(index.zero_variance[g]), size


def summary_view(summary: Summary, link: Callable[..., str]) -> SummaryView:
    """Texts of a summary, and quick links (``link(**changes)``) to its zero-variance, truncated and inconsistent rollouts."""
    texts = {
        "mean": number_text(summary.mean_reward),
        "std": number_text(summary.std_reward),
        "zero_variance": _pct(summary.zero_variance_share),
        "truncation": _pct(summary.truncation_rate),
    }
    links = [
        Link(f"{summary.zero_variance_groups:,} zero-variance group(s)", link(zero_variance=True)),
        Link(f"{summary.truncated:,} truncated (finish_reason length)", link(finish="length")),
    ]
    if summary.inconsistent:
        links.append(Link(f"{summary.inconsistent:,} inconsistent rollout(s)", link(problems=True)))
    notes = [f"{summary.excluded:,} non-finite or missing reward(s) excluded from the statistics"] if summary.excluded else []
    return SummaryView(summary, texts, links, notes)


def controls(query: RolloutQuery, index: RolloutIndex, *, action: Callable[..., str], has_step: bool) -> Controls:
    """The sort/filter form of a query."""
    sorts = []
    for key in GROUP_SORTS:
        for descending in (False, True):
            value = ("-" if descending else "") + key
            if key == "index" and descending:
                continue
            arrow = "" if key == "index" else (" ↓" if descending else " ↑")
            sorts.append(Option("" if value == "index" else value, SORT_LABELS[key] + arrow, value == query.sort))
    zero = [
        Option("", "any", query.zero_variance is None),
        Option("1", "zero-variance only", query.zero_variance is True),
        Option("0", "with variance only", query.zero_variance is False),
    ]
    finishes = [Option("", "any", query.finish is None)] + [
        Option(name, f"{name} ({n:,})", name == query.finish) for name, n in index.finish_counts()
    ]
    if query.finish is not None and all(o.value != query.finish for o in finishes):
        finishes.append(Option(query.finish, f"{query.finish} (0)", True))
    return Controls(
        action=action(),
        views=[Option("" if v == "groups" else v, v, v == query.view) for v in ("groups", "rollouts")],
        sorts=[o for o in sorts if query.view == "groups" or (o.value.lstrip("-") or "index") in ROW_SORTS],
        zero_variance=zero,
        finishes=finishes,
        layouts=[Option("" if v == "grid" else v, v, v == query.layout) for v in ("grid", "stacked")],
        step=query.step,
        has_step=has_step,
        group=query.group,
        problems=query.problems,
        clear_url=action(),
    )


def _start(requested: int, total: int, size: int) -> int:
    """The cursor, clamped to the start of the last page."""
    return min(requested, max(0, (total - 1) // size * size)) if total else 0


def _pager(query: RolloutQuery, start: int, total: int, size: int, action: Callable[..., str], noun: str) -> Pager:
    end = min(total, start + size)
    link = lambda at: action(**query.params(start=at))  # noqa: E731
    summary = f"{noun} {start + 1:,}–{end:,} of {total:,}" if total else f"no {noun} match"
    return Pager(
        first=link(0) if start > 0 else None,
        prev=link(max(0, start - size)) if start > 0 else None,
        next=link(end) if end < total else None,
        last=link(_start(total, total, size)) if end < total else None,
        summary=summary,
    )


def groups_block(
    index: RolloutIndex,
    query: RolloutQuery,
    load: Loader,
    *,
    action: Callable[..., str],
    page_size: int,
    group_url: Callable[[str], str] | None = None,
    has_step: bool = False,
    confirm_index: bool = False,
) -> GroupsBlock:
    """One page of the query's groups (or rollouts); ``action(**params)`` builds this view's URL.

    With ``confirm_index`` (a stored index) the index is checked against the rollouts read for the page, each row and
    each group shown (``loaders.rl.confirm``): ``IndexDisagrees`` when it differs."""
    size = max(1, page_size)
    if query.view == "groups":
        chosen = index.select_groups(query)
        start = _start(query.start, len(chosen), size)
        page = chosen[start : start + size]
        member_rows = [index.members(int(g), query) for g in page]
        flat = [int(r) for rows in member_rows for r in rows]
        loaded = dict(zip(flat, load(flat)))
        if confirm_index:
            confirm(index, flat, [loaded[p].facts for p in flat], groups=[int(g) for g in page])
        groups = [
            make_group(
                index,
                int(g),
                [loaded[int(r)] for r in rows],
                query,
                url=group_url(index.group_id(g)) if group_url and index.group_id(g) is not None else None,  # type: ignore[arg-type]
            )
            for g, rows in zip(page, member_rows)
        ]
        summary = index.summary(chosen)
        cards: list[RolloutCard] = []
        total = len(chosen)
    else:
        rows_chosen = index.select_rows(query)
        start = _start(query.start, len(rows_chosen), size)
        page_rows = [int(r) for r in rows_chosen[start : start + size]]
        entries = load(page_rows)
        if confirm_index:
            confirm(index, page_rows, [e.facts for e in entries])
        cards = []
        for r, entry in zip(page_rows, entries):
            mean, flat, _ = reference(index, int(index.group_of[r]))
            sign = advantage_warning(entry.facts, group_mean=mean, zero_variance=flat) if mean is not None else None
            card = make_card(entry, extra=[sign] if sign else [], match=True)
            card.group_url = action(group=card.group_id, layout=query.layout if query.layout != "grid" else None) if card.group_id else None
            cards.append(card)
        summary = index.summary(np.unique(index.group_of[rows_chosen]) if len(rows_chosen) else np.zeros(0, np.int64))
        groups = []
        total = len(rows_chosen)
    noun = "groups" if query.view == "groups" else "rollouts"
    return GroupsBlock(
        query=dict(query.params()),
        view=query.view,
        total=total,
        start=start,
        end=min(total, start + size),
        groups=groups,
        rollouts=cards,
        pager=_pager(query, start, total, size, action, noun),
        summary=summary_view(summary, lambda **changes: action(**query.params(start=0, **changes))),
        layout=query.layout,
        controls=controls(query, index, action=action, has_step=has_step),
    )
