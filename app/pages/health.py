"""Page data of a run's health: what the lint checks found over the run, where in the run it clusters, each finding
linked to its sample on its step/rank page.

The lint is kept in the catalog by the run's fingerprint (:mod:`loaders.checks.cache`) and advanced by at most
:data:`BUDGET_SECONDS` of linting per request, so a long run's page (or its summary on the run page) fills in over a
few requests, which the page's fragment makes by itself while ``complete`` is false.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from loaders import Catalog
from loaders.checks import CHECK, CHECKS, SEVERITIES, Finding, LintResult
from loaders.checks.cache import LintCache
from loaders.checks.lint import finish, run_steps

from .. import urls
from ..errors import BadQuery
from ..jsonable import html_only
from ..run_cache import RunCache
from .common import Link

#: Seconds of linting one request may spend before it answers with what is done.
BUDGET_SECONDS = 2.0
#: Findings listed per page.
ROWS_PER_PAGE = 100
#: Bars of the strip over steps (at most; one per step for shorter runs).
STRIP_BARS = 120
STRIP_WIDTH, STRIP_HEIGHT = 960, 60
_COLOURS = {"info": "#60a5fa", "warning": "#f59e0b", "error": "#dc2626"}
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


@dataclass
class CheckCount:
    """One check over the run: its rule and how many findings it made (``url`` lists them)."""

    name: str
    family: str
    severity: str
    rule: str
    count: int
    steps: int
    url: str
    not_run: str | None = None


@dataclass
class FindingRow:
    check: str
    severity: str
    step: int
    rank: int | None
    position: int | None
    key: str | None
    detail: str
    url: str
    step_url: str


@dataclass
class StripBar:
    """Steps ``[start, end)`` and their findings per severity; ``url`` lists them."""

    start: int
    end: int
    info: int
    warning: int
    error: int
    url: str


@dataclass
class HealthPage:
    run: str
    #: The run's kind (native, replayed, recorded): the lint reads its batches as that kind serves them; it does not
    #: compare them with the ledger (``batchscope verify`` does).
    kind: str
    url: str
    run_url: str
    steps: list[int]
    last_linted: int | None
    total_steps: int | None
    complete: bool
    samples: int
    documents: int
    failed_batches: int
    findings: int
    by_severity: dict[str, int]
    checks: list[CheckCount]
    strip: list[StripBar]
    rows: list[FindingRow]
    shown: int
    start: int
    check: str | None
    step_filter: list[int] | None
    next_url: str | None
    prev_url: str | None
    thresholds: dict[str, Any]
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)
    strip_svg: str = html_only("")
    summary_url: str = html_only("")
    self_url: str = html_only("")
    families: list[tuple[str, list[CheckCount]]] = html_only(default_factory=list)


def _lock(key: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


def run_lint(catalog: Catalog, runs: RunCache, name: str, *, budget_seconds: float | None = None) -> LintResult:
    """The run's lint as far as it is stored, advanced by up to ``budget_seconds`` (default :data:`BUDGET_SECONDS`; one
    request in a process at a time)."""
    run = runs.run(catalog, name)
    cache = LintCache(catalog, run)
    with _lock(cache.identity):
        part = cache.advance(budget_seconds=BUDGET_SECONDS if budget_seconds is None else budget_seconds)
    return finish(run, part, cache.options, complete=part.steps.stop >= run_steps(run))


def parse_steps(text: str | None, last: int) -> range | None:
    """``?steps=A:B`` (B exclusive) as a range; a malformed one is a ``BadQuery`` naming it.

    >>> parse_steps("3:7", 100), parse_steps(None, 100)
    (range(3, 7), None)
    """
    if not text:
        return None
    start, sep, stop = text.partition(":")
    try:
        window = range(int(start or 0), int(stop) if stop else last) if sep else range(int(start), int(start) + 1)
    except ValueError:
        raise BadQuery(f"steps={text!r} is not A:B (B exclusive)") from None
    if window.start < 0 or window.stop <= window.start:
        raise BadQuery(f"steps={text!r} is empty or negative")
    return window


def finding_url(run: str, finding: Finding) -> str:
    return urls.finding(run, finding.step, finding.rank, finding.position)


def _strip(run: str, result: LintResult, bars: int) -> list[StripBar]:
    steps = result.steps
    if not len(steps):
        return []
    count = min(bars, len(steps))
    bounds = [steps.start + (len(steps) * i) // count for i in range(count + 1)]
    out = [StripBar(a, b, 0, 0, 0, urls.run_health(run, steps=f"{a}:{b}")) for a, b in zip(bounds, bounds[1:])]
    width = len(steps) / count
    for finding in result.findings:
        bar = out[min(count - 1, int((finding.step - steps.start) / width))]
        setattr(bar, finding.severity, getattr(bar, finding.severity) + 1)
    return out


def strip_svg(strip: list[StripBar]) -> Markup:
    """Bars over the run's steps: height by findings, stacked by severity, each a link to its steps' findings."""
    if not strip:
        return Markup("")
    top = max(1, max(b.info + b.warning + b.error for b in strip))
    width = STRIP_WIDTH / len(strip)
    parts = [
        f'<svg class="chart health-strip" viewBox="0 0 {STRIP_WIDTH} {STRIP_HEIGHT + 14}" role="img" aria-label="findings over steps">'
    ]
    for i, bar in enumerate(strip):
        x, y = i * width, float(STRIP_HEIGHT)
        total = bar.info + bar.warning + bar.error
        label = escape(f"steps {bar.start}-{bar.end - 1}: {total} finding(s) ({bar.error} error, {bar.warning} warning, {bar.info} info)")
        parts.append(f'<a href="{escape(bar.url)}"><title>{label}</title>')
        parts.append(f'<rect class="chart-hit" x="{x:.2f}" y="0" width="{width:.2f}" height="{STRIP_HEIGHT}" fill="transparent"/>')
        for severity in SEVERITIES:
            n = getattr(bar, severity)
            if n:
                h = STRIP_HEIGHT * n / top
                y -= h
                parts.append(
                    f'<rect x="{x + 0.5:.2f}" y="{y:.2f}" width="{max(0.5, width - 1):.2f}" height="{h:.2f}" fill="{_COLOURS[severity]}"/>'
                )
        parts.append("</a>")
    last = strip[-1].end - 1
    parts.append(f'<text class="chart-label" x="0" y="{STRIP_HEIGHT + 12}">step {strip[0].start}</text>')
    parts.append(f'<text class="chart-label" x="{STRIP_WIDTH}" y="{STRIP_HEIGHT + 12}" text-anchor="end">step {last}</text></svg>')
    return Markup("".join(parts))


def health_page(
    catalog: Catalog, runs: RunCache, name: str, *, check: str | None = None, steps: str | None = None, start: int = 0
) -> HealthPage:
    """The run's health: counts per check, the strip over steps, and the findings (of ``check``, in ``steps``) from
    ``start``, :data:`ROWS_PER_PAGE` at a time."""
    if check is not None and check not in CHECK:
        raise BadQuery(f"check={check!r} is not a check; checks: {', '.join(c.name for c in CHECKS)}")
    if start < 0:
        raise BadQuery(f"start={start} is negative")
    result = run_lint(catalog, runs, name)
    run = runs.run(catalog, name)
    window = parse_steps(steps, result.steps.stop)
    counts = result.counts()
    stepped: dict[str, set[int]] = {}
    for f in result.findings:
        stepped.setdefault(f.check, set()).add(f.step)
    not_run = result.not_run()
    checks = [
        CheckCount(
            c.name,
            c.family,
            c.severity,
            c.rule,
            counts.get(c.name, 0),
            len(stepped.get(c.name, ())),
            urls.run_health(name, check=c.name),
            not_run.get(c.name),
        )
        for c in CHECKS
    ]
    chosen = [f for f in result.findings if (check is None or f.check == check) and (window is None or f.step in window)]
    page_rows = chosen[start : start + ROWS_PER_PAGE]
    rows = [
        FindingRow(f.check, f.severity, f.step, f.rank, f.position, f.key, f.detail, finding_url(name, f), urls.step(name, f.step))
        for f in page_rows
    ]
    query = {"check": check, "steps": steps}
    strip = _strip(name, result, STRIP_BARS)
    families: dict[str, list[CheckCount]] = {}
    for entry in checks:
        families.setdefault(entry.family, []).append(entry)
    return HealthPage(
        run=name,
        kind=run.kind,
        url=urls.run_health(name),
        run_url=urls.run(name),
        steps=[result.steps.start, result.steps.stop],
        last_linted=result.steps.stop - 1 if len(result.steps) else None,
        total_steps=run.total_steps,
        complete=result.complete,
        samples=result.samples,
        documents=result.documents,
        failed_batches=result.failed_batches,
        findings=len(result.findings),
        by_severity=result.by_severity(),
        checks=checks,
        strip=strip,
        rows=rows,
        shown=len(chosen),
        start=start,
        check=check,
        step_filter=None if window is None else [window.start, window.stop],
        next_url=urls.run_health(name, **query, start=start + ROWS_PER_PAGE) if start + ROWS_PER_PAGE < len(chosen) else None,
        prev_url=urls.run_health(name, **query, start=max(0, start - ROWS_PER_PAGE) or None) if start else None,
        thresholds=result.options.to_json()["thresholds"],
        title=f"{name} · health",
        crumbs=[Link("runs", urls.home()), Link(name, urls.run(name)), Link("health", urls.run_health(name))],
        strip_svg=strip_svg(strip),
        summary_url=urls.run_health(name, summary=1),
        self_url=urls.run_health(name, **query, start=start or None),
        families=list(families.items()),
    )
