"""Page data of a run: its plan, pinned sources, world-size history and the metric curves in its ledger."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from loaders import Catalog, Run
from loaders.errors import BatchscopeError
from loaders.run.kinds import claims

from .. import urls
from ..jsonable import html_only
from ..run_cache import RunCache
from .common import Link, kind_badge
from .home import run_summary
from .mixture import MixtureView, run_mixture
from .progress import RunProgress, progress
from .recorded import RecordedInfo, recorded_info
from .replayed import ReplayPanel, replay_panel
from .spikes import (
    DEFAULT_SMOOTHING,
    OUTLIER_K,
    OUTLIER_WINDOW,
    SMOOTHING,
    WARMUP_K,
    Outlier,
    ema,
    first_judged_step,
    outliers,
    thin,
    window,
)

#: Charts are drawn from at most this many points (thinned keeping each bucket's extremes), so huge runs stay light.
MAX_POINTS = 600
#: Chart size in SVG pixels (the SVG scales to the page width); click bands are at least ``MIN_HIT`` pixels wide.
CHART_WIDTH, CHART_HEIGHT, MIN_HIT = 960, 240, 8
#: Outliers listed per metric (the largest deviations first).
MAX_OUTLIERS = 25


@dataclass
class SourceEntry:
    """One source of the plan pinned to its version."""

    ref: str
    dataset: str
    version: str
    version_url: str
    rows: int
    weight: float
    share: float
    chunk: int
    transforms: list[dict[str, Any]]


@dataclass
class MetricChart:
    """One scalar metric of the ledger over steps (the mean over ranks); points link to their step.

    ``outliers`` are the spikes and dips of the whole curve after its warm-up (``judged_from`` is the first step judged;
    :mod:`loaders.checks.trend` gives the rule), the largest first; ``overlay_points`` counts the other run's logged steps when an overlay is drawn.
    """

    name: str
    points: int
    first: float | None
    last: float | None
    min_step: int | None
    max_step: int | None
    outliers: list[Outlier] = field(default_factory=list)
    outlier_count: int = 0
    #: The first step the outlier rule judges: the steps before it are the curve's warm-up.
    judged_from: int | None = None
    overlay_points: int | None = None
    svg: str = html_only("")


@dataclass
class ChartView:
    """How the charts are drawn: the step range (zoom), the smoothing weight and the overlaid run, all in the URL."""

    start: int | None
    end: int | None
    smooth: float
    overlay: str | None
    overlay_error: str | None
    outlier_window: int = OUTLIER_WINDOW
    outlier_k: float = OUTLIER_K
    outlier_warmup_k: float = WARMUP_K
    smoothing_options: list[float] = html_only(default_factory=lambda: list(SMOOTHING))
    zoom: list[Link] = html_only(default_factory=list)
    fragment_url: str = html_only("")


@dataclass
class RunPage:
    """A run's page. ``kind`` says how its batches are known (``label``: what its pages may call them); the plan,
    sources, packing and mixture are a native run's (``None`` or empty for other kinds), in their place each other
    kind has a panel of its own (:data:`KIND_PARTS`): ``replay`` a replayed run's, ``recorded`` a recorded run's.
    ``total_steps`` is the steps a page can show (for a recorded run still training, those recorded so far)."""

    name: str
    url: str
    kind: str
    label: str
    fingerprint: str
    created: str | None
    total_steps: int
    global_batch_size: int
    world_sizes: list[dict[str, int]]
    ledger_steps: int | None  # None for a kind whose ledger holds no batches (a replayed run: metrics only)
    last_logged_step: int | None
    metrics: list[MetricChart]
    chart: ChartView
    first_step_url: str
    last_step_url: str
    streams: int | None = None
    allowed_world_sizes: list[int] = field(default_factory=list)
    seed: int | None = None
    read_format: int | None = None
    sequences_per_block: int | None = None
    packing: dict[str, Any] | None = None
    sources: list[SourceEntry] = field(default_factory=list)
    transforms: list[dict[str, Any]] = field(default_factory=list)
    plan: dict[str, Any] | None = None
    mixture: MixtureView | None = None
    mixture_error: str | None = None
    replay: ReplayPanel | None = None
    recorded: RecordedInfo | None = None
    progress: RunProgress | None = None
    kind_badge: str | None = html_only(None)
    #: The run's health page: what the lint checks found (the page shows its summary block, loaded when revealed).
    health_url: str = ""
    #: As the home page says it (:class:`app.pages.home.RunSummary`): progress, or ``mismatch``; and the last verify.
    status: str = ""
    verification: str = ""
    verification_label: str = ""
    verification_url: str | None = None
    badge: str = html_only("")
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)
    step_box_url: str = html_only("")


def metric_charts(run: Run, view: ChartView, other: Run | None = None) -> list[MetricChart]:
    """A chart per scalar metric over ``view``'s step range, counting only the world size in force at each step."""
    from ..svg import Layer, Mark, fmt, line_chart

    charts = []
    for name in run.ledger.metric_names():
        series = run.ledger.series(name, world_size_at=run.world_size_at)
        if not series:
            continue
        found = outliers(series)
        for outlier in found:
            outlier.url = urls.step(run.name, outlier.step)
        shown = window(series, view.start, view.end)
        smoothed = window(ema(series, view.smooth), view.start, view.end) if view.smooth else []
        theirs = other.ledger.series(name, world_size_at=other.world_size_at) if other is not None else []
        layers = (
            [Layer(thin(window(theirs, view.start, view.end), MAX_POINTS), "chart-overlay", "#9ca3af", f"run {other.name}", dashed=True)]
            if other is not None
            else []
        )
        if smoothed:
            layers.append(
                Layer(thin(smoothed, MAX_POINTS), "chart-smooth", "#1e3a8a", f"{name}, smoothed (EMA {view.smooth:g})", width=2.0)
            )
        by_step = dict(smoothed)

        def describe(x: Any, y: Any, name: str = name, by_step: dict[int, float] = by_step) -> str:
            text = f"step {x}: {name} {fmt(float(y))}" if isinstance(y, (int, float)) else f"step {x}: {name} {y!r}"
            return text + (f" (smoothed {fmt(by_step[x])})" if x in by_step else "")

        svg = line_chart(
            thin(shown, MAX_POINTS),
            width=CHART_WIDTH,
            height=CHART_HEIGHT,
            x_label="step",
            y_label=name,
            point_url=lambda x, run_name=run.name: urls.step(run_name, int(x)),
            layers=layers,
            marks=[Mark(o.step, o.value, f"{o.kind} at step {o.step}: {name} {fmt(o.value)}", o.url) for o in found],
            min_hit=MIN_HIT,
            bin_pick="extreme",
            series_color="#93c5fd" if smoothed else "#2563eb",
            describe=describe,
        )
        ranked = sorted(found, key=lambda o: -abs(o.score))
        charts.append(
            MetricChart(
                name,
                len(series),
                series[0][1],
                series[-1][1],
                series[0][0],
                series[-1][0],
                outliers=ranked[:MAX_OUTLIERS],
                outlier_count=len(found),
                judged_from=first_judged_step(series),
                overlay_points=len(theirs) if other is not None else None,
                svg=svg,
            )
        )
    return charts


def _packing(run: Run) -> dict[str, Any] | None:
    """How the run packs, and the tokens it pads and drops over all its steps (None when it does not pack)."""
    pack = run.plan.pack
    waste = run.packing_waste()
    if pack is None or waste is None:
        return None
    strategy = pack.strategy if run.read_format >= 3 else "block"
    return {"strategy": strategy, "seq_len": pack.seq_len, "position_ids": pack.position_ids, **waste.to_json()}


def chart_view(
    run: Run, other: Run | None, *, start: int | None, end: int | None, smooth: float | None, overlay: str | None, overlay_error: str | None
) -> ChartView:
    """The chart settings of a run page URL, with links that zoom and pan (for browsers without JavaScript)."""
    last = max(0, run.known_steps - 1)
    lo = min(max(0, start), last) if start is not None else None
    hi = min(max(0, end), last) if end is not None else None
    if lo is not None and hi is not None and hi < lo:
        lo, hi = hi, lo
    weight = DEFAULT_SMOOTHING if smooth is None else min(max(0.0, smooth), 0.999)
    view = ChartView(lo, hi, weight, other.name if other else overlay, overlay_error)

    def link(label: str, a: int | None, b: int | None) -> Link:
        return Link(label, urls.with_query(urls.run(run.name), **{"from": a, "to": b}, smooth=weight, overlay=view.overlay))

    a, b = lo or 0, last if hi is None else hi
    span = max(1, b - a)
    middle = (a + b) // 2
    view.zoom = [
        link("zoom in", max(0, middle - span // 4), min(last, middle + span // 4)),
        link("zoom out", max(0, middle - span), min(last, middle + span)),
        link("◀ pan", max(0, a - span // 2), max(0, a - span // 2) + span),
        link("pan ▶", min(last, b + span // 2) - span, min(last, b + span // 2)),
        link("whole run", None, None),
    ]
    view.fragment_url = urls.with_query(urls.run(run.name), smooth=weight, overlay=view.overlay)
    return view


def _native_parts(catalog: Catalog, runs: RunCache, run: Run, *, window: int | None) -> dict[str, Any]:
    """What only a native run's page shows: its plan, pinned sources, packing and realized mixture."""
    total_weight = sum(s.weight for s in run.sources)
    sources = [
        SourceEntry(
            ref=s.ref,
            dataset=s.dataset,
            version=s.version,
            version_url=urls.version(s.dataset, s.version),
            rows=s.rows,
            weight=s.weight,
            share=s.weight / total_weight,
            chunk=s.chunk,
            transforms=[t.to_json() for t in run.plan.sources[i].transforms],
        )
        for i, s in enumerate(run.sources)
    ]
    mixture, mixture_error = None, None
    try:  # measuring reads data: a broken shard shows as a message in the panel, not as a broken run page
        mixture = run_mixture(runs, run, window=window)
    except BatchscopeError as exc:
        mixture_error = exc.message
    return {
        "streams": run.streams,
        "allowed_world_sizes": run.plan.allowed_world_sizes(),
        "seed": run.plan.seed,
        "read_format": run.read_format,
        "sequences_per_block": run.sequences_per_block,
        "packing": _packing(run),
        "sources": sources,
        "transforms": [t.to_json() for t in run.plan.transforms],
        "plan": run.manifest["plan"],
        "mixture": mixture,
        "mixture_error": mixture_error,
    }


def _replayed_parts(catalog: Catalog, runs: RunCache, run: Any, *, window: int | None) -> dict[str, Any]:
    """What a replayed run's page shows in their place: the framework that read it, its settings, its pinned files."""
    panel = replay_panel(run)
    return {"replay": panel, "kind_badge": kind_badge(run, panel.title)}


def _recorded_parts(catalog: Catalog, runs: RunCache, run: Any, *, window: int | None) -> dict[str, Any]:
    """What a recorded run's page shows in their place: how it was recorded and what changed since."""
    return {"recorded": recorded_info(catalog, run)}


#: The parts of the run page that depend on its kind (``loaders.run.kinds``): a native run's plan, sources, packing
#: and mixture, or in their place the kind's own panel; ``templates/_partials/_run_<kind>.html`` lays each out.
KIND_PARTS: dict[str, Callable[..., dict[str, Any]]] = {"native": _native_parts, "replayed": _replayed_parts, "recorded": _recorded_parts}


def run_page(
    catalog: Catalog,
    runs: RunCache,
    name: str,
    *,
    start: int | None = None,
    end: int | None = None,
    smooth: float | None = None,
    overlay: str | None = None,
    window: int | None = None,
) -> RunPage:
    """Everything the run page shows; the charts cover steps ``start..end`` smoothed by ``smooth``, with ``overlay``'s curves;
    the realized mixture is cut into windows of ``window`` steps."""
    run = runs.run(catalog, name)
    other, overlay_error = None, None
    if overlay:
        try:
            other = runs.run(catalog, overlay)
        except BatchscopeError as exc:
            overlay_error = exc.message
    view = chart_view(run, other, start=start, end=end, smooth=smooth, overlay=overlay, overlay_error=overlay_error)
    kind = claims(run.kind)
    steps = run.ledger.steps() if kind.ledger_of_batches else None
    count = run.known_steps
    own = {"kind_badge": kind_badge(run), **KIND_PARTS[run.kind](catalog, runs, run, window=window)}
    measured = progress(run)  # the ledger read once, for the live marker and the status
    summary = run_summary(run, root=catalog.root, measured=measured)
    return RunPage(
        name=run.name,
        url=urls.run(run.name),
        kind=run.kind,
        label=kind.label,
        fingerprint=run.fingerprint,
        created=run.manifest.get("created"),
        total_steps=count,
        global_batch_size=run.global_batch_size,
        world_sizes=[{"start_step": s.start_step, "world_size": s.world_size} for s in run.world_size_history()],
        ledger_steps=len(steps) if steps is not None else None,
        last_logged_step=steps[-1] if steps else None,
        metrics=metric_charts(run, view, other),
        chart=view,
        first_step_url=urls.step(run.name, 0),
        last_step_url=urls.step(run.name, max(0, count - 1)),
        **own,
        progress=measured,
        health_url=urls.run_health(run.name),
        status=summary.status,
        verification=summary.verification,
        verification_label=summary.verification_label,
        verification_url=summary.verification_url,
        badge=summary.badge,
        title=f"run {run.name}",
        crumbs=[Link("runs", urls.home()), Link(run.name, urls.run(run.name))],
        step_box_url=urls.run(run.name),
    )
