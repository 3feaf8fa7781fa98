"""Page data of a run's find page: every read of a row matching a SQL predicate, with a histogram over steps and a link
to each sample on its step/rank page (``#sample-{position}``) and to its permalink.

The reads come from :func:`loaders.query.find.find_reads`: the predicate evaluated over the run's sources, each
matching row's reads found by inverting the run's order; no step is scanned.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from loaders import Catalog
from loaders.query.find import FindableRun, Match, SourceMatches, StepRange, find_reads

from .. import urls
from ..jsonable import html_only
from ..queries import Queries
from ..templating import count
from .bars import BarChart, bar_chart
from .common import Link, Pager


@dataclass(frozen=True)
class FindRow(Match):
    """One read (:class:`loaders.query.find.Match`) with its links: the sample on its rank page, its permalink, its step."""

    url: str
    sample_url: str
    step_url: str


@dataclass
class StepBin:
    """Matches in steps ``[start, end)``; ``url`` narrows the page to them."""

    start: int
    end: int
    count: int
    url: str


@dataclass
class FindPage:
    """A run, a predicate, and every read of a matching row within ``steps`` (``matches``; ``truncated`` when cut)."""

    run: str
    kind: str
    run_url: str
    where: str
    steps: str
    total_steps: int | None
    packed: bool
    count: int
    truncated: bool
    matches: list[FindRow]
    sources: list[SourceMatches]
    histogram: list[StepBin]
    notes: list[str]
    limits: str
    error: str | None
    action: str
    start: int = 0
    pager: Pager = field(default_factory=Pager)
    shown: list[FindRow] = html_only(default_factory=list)
    chart: BarChart | None = html_only(None)
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)


def find_page(
    queries: Queries,
    catalog: Catalog,
    run: FindableRun,
    where: str | None,
    *,
    steps: str | None = None,
    start: int = 0,
    page_size: int = 50,
    error: str | None = None,
) -> FindPage:
    """The find page of ``run``: with ``where``, every read of a matching row (``page_size`` of them shown from
    ``start``); without, the form. With ``error`` the form keeps ``where`` and says what failed."""
    base = dict(
        run=run.name,
        kind=run.kind,
        run_url=urls.run(run.name),
        where=where or "",
        steps=steps or "",
        total_steps=run.total_steps,
        limits=queries.limits.describe(),
        action=urls.find(run.name),
        start=start,
        title=f"find · {run.name}",
        crumbs=[Link("home", urls.home()), Link(run.name, urls.run(run.name)), Link("find", urls.find(run.name))],
    )
    if error is not None or not where:
        return FindPage(packed=False, count=0, truncated=False, matches=[], sources=[], histogram=[], notes=[], error=error, **base)
    found = find_reads(run, where, session=queries.session, steps=StepRange.parse(steps))
    rows = [
        FindRow(
            **{f.name: getattr(m, f.name) for f in fields(Match)},
            url=urls.rank(run.name, m.step, m.rank) + urls.sample_anchor(m.position),
            sample_url=urls.sample(found.sources[m.source_index].dataset, found.sources[m.source_index].version, m.key),
            step_url=urls.step(run.name, m.step),
        )
        for m in found.matches
    ]
    histogram = [StepBin(a, b, n, urls.find(run.name, where=where, steps=f"{a}:{b}")) for a, b, n in found.histogram()]
    chart = (
        bar_chart([(f"steps {h.start}–{h.end - 1}", h.count, h.url) for h in histogram], title="matches over steps") if histogram else None
    )
    start = min(start, max(0, len(rows) - 1))
    base["start"] = start
    params = {"where": where, "steps": steps or None}
    pager = Pager(
        first=urls.find(run.name, **params) if start else None,
        prev=urls.find(run.name, **params, start=max(0, start - page_size) or None) if start else None,
        next=urls.find(run.name, **params, start=start + page_size) if start + page_size < len(rows) else None,
        summary=(f"reads {start + 1:,}–{min(start + page_size, len(rows)):,} of {count(len(rows), 'read')}" if rows else "no reads")
        + (" (at least: cut at the row cap)" if found.truncated else ""),
    )
    return FindPage(
        packed=found.packed,
        count=len(rows),
        truncated=found.truncated,
        matches=rows,
        sources=found.sources,
        histogram=histogram,
        notes=found.notes,
        error=None,
        pager=pager,
        shown=rows[start : start + page_size],
        chart=chart,
        **base,
    )
