"""Page data of a run: its plan, pinned sources, world-size history and the metric curves in its ledger."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loaders import Catalog, Run

from .. import urls
from ..jsonable import html_only
from ..run_cache import RunCache
from .common import Link

#: Charts are drawn from at most this many points (evenly thinned), so huge runs stay light.
MAX_POINTS = 600


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
    """One scalar metric of the ledger over steps (the mean over ranks); points link to their step."""

    name: str
    points: int
    first: float | None
    last: float | None
    min_step: int | None
    max_step: int | None
    svg: str = html_only("")


@dataclass
class RunPage:
    name: str
    url: str
    fingerprint: str
    created: str | None
    total_steps: int
    global_batch_size: int
    streams: int
    allowed_world_sizes: list[int]
    seed: int
    read_format: int
    sequences_per_block: int | None
    packing: dict[str, Any] | None
    sources: list[SourceEntry]
    transforms: list[dict[str, Any]]
    world_sizes: list[dict[str, int]]
    ledger_steps: int
    last_logged_step: int | None
    metrics: list[MetricChart]
    first_step_url: str
    last_step_url: str
    plan: dict[str, Any]
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)
    step_box_url: str = html_only("")


def _thin(series: list[tuple[int, float]]) -> list[tuple[int, float]]:
    if len(series) <= MAX_POINTS:
        return series
    stride = len(series) / MAX_POINTS
    return [series[int(i * stride)] for i in range(MAX_POINTS)] + [series[-1]]


def metric_charts(run: Run) -> list[MetricChart]:
    """A chart per scalar metric, counting only the world size in force at each step."""
    from ..svg import line_chart

    charts = []
    for name in run.ledger.metric_names():
        series = run.ledger.series(name, world_size_at=run.world_size_at)
        if not series:
            continue
        drawn = _thin(series)
        svg = line_chart(
            drawn,
            width=720,
            height=180,
            x_label="step",
            y_label=name,
            point_url=lambda x, run_name=run.name: urls.step(run_name, int(x)),
        )
        charts.append(
            MetricChart(name, len(series), series[0][1], series[-1][1], series[0][0], series[-1][0], svg)
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


def run_page(catalog: Catalog, runs: RunCache, name: str) -> RunPage:
    """Everything the run page shows."""
    run = runs.run(catalog, name)
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
    steps = run.ledger.steps()
    return RunPage(
        name=run.name,
        url=urls.run(run.name),
        fingerprint=run.fingerprint,
        created=run.manifest.get("created"),
        total_steps=run.total_steps,
        global_batch_size=run.global_batch_size,
        streams=run.streams,
        allowed_world_sizes=run.plan.allowed_world_sizes(),
        seed=run.plan.seed,
        read_format=run.read_format,
        sequences_per_block=run.sequences_per_block,
        packing=_packing(run),
        sources=sources,
        transforms=[t.to_json() for t in run.plan.transforms],
        world_sizes=[{"start_step": s.start_step, "world_size": s.world_size} for s in run.world_size_history()],
        ledger_steps=len(steps),
        last_logged_step=steps[-1] if steps else None,
        metrics=metric_charts(run),
        first_step_url=urls.step(run.name, 0),
        last_step_url=urls.step(run.name, run.total_steps - 1),
        plan=run.manifest["plan"],
        title=f"run {run.name}",
        crumbs=[Link("runs", urls.home()), Link(run.name, urls.run(run.name))],
        step_box_url=urls.run(run.name),
    )
