"""The realized mixture as the run and step pages show it: shares per source, per window of steps, as charts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loaders import Run
from loaders.forensics.realized_mixture import (
    RealizedMixture,
    StepMix,
    measure,
    measured_steps,
    needs_reading,
    realized_mixture,
    source_rows,
)

from .. import urls
from ..jsonable import html_only
from ..run_cache import RunCache

#: One colour per source, in source order (repeats past eight sources); planned shares are the same colour, dashed.
PALETTE = ("#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2", "#65a30d", "#dc2626")
CHART_WIDTH, CHART_HEIGHT, MIN_HIT = 960, 220, 8


@dataclass
class SourceShare:
    """One source: planned share, realized count and share (and deviation, share − planned) in samples and tokens."""

    source: str
    planned: float
    samples: int
    samples_share: float | None
    samples_deviation: float | None
    tokens: int | None
    tokens_share: float | None
    tokens_deviation: float | None


@dataclass
class MixSource(SourceShare):
    """A source of the run's mixture, with its colour on the charts."""

    color: str = html_only("")


@dataclass
class MixWindowView:
    """Steps ``[start, end)``: each source's share of the window's samples and tokens; ``url`` opens its first step."""

    start: int
    end: int
    url: str
    samples: list[int] | None
    tokens: list[int] | None
    samples_shares: list[float] | None
    tokens_shares: list[float] | None
    measured_steps: int


@dataclass
class MixtureView:
    """The run page's realized mixture (the ``mixture`` field of its JSON twin)."""

    unit: str
    window: int
    samples_exact: bool
    tokens_exact: bool
    padding_tokens: int | None
    note: str
    measured_steps: list[int]
    sources: list[MixSource]
    windows: list[MixWindowView]
    samples_svg: str = html_only("")
    tokens_svg: str = html_only("")


def _shares(counts: Any) -> list[float] | None:
    return RealizedMixture.shares(counts)


def run_mixture(runs: RunCache, run: Run, *, window: int | None) -> MixtureView:
    """The realized mixture of ``run`` per ``window`` steps; what must be read is read once per run and kept."""
    measurement = None
    if needs_reading(run):
        steps = measured_steps(run.total_steps)
        measurement = runs.value(("mixture", run.name, run.fingerprint, steps), lambda: measure(run, steps))
    mix = realized_mixture(run, window=window, measurement=measurement)
    sources = [
        MixSource(**row, color=PALETTE[i % len(PALETTE)])
        for i, row in enumerate(source_rows(mix.sources, mix.planned, mix.samples, mix.tokens))
    ]
    windows = [
        MixWindowView(
            w.start,
            w.end,
            urls.step(run.name, w.start),
            list(w.samples) if w.samples is not None else None,
            list(w.tokens) if w.tokens is not None else None,
            _shares(w.samples),
            _shares(w.tokens),
            w.measured_steps,
        )
        for w in mix.windows
    ]
    view = MixtureView(
        unit=mix.unit,
        window=mix.window,
        samples_exact=mix.samples_exact,
        tokens_exact=mix.tokens_exact,
        padding_tokens=mix.padding,
        note=mix.note,
        measured_steps=list(mix.measured_steps),
        sources=sources,
        windows=windows,
    )
    view.samples_svg = share_chart(run.name, view, "samples_shares", f"share of {mix.unit} (%)")
    view.tokens_svg = share_chart(run.name, view, "tokens_shares", "share of tokens (%)") if mix.tokens is not None else ""
    return view


def share_chart(run: str, view: MixtureView, field_name: str, y_label: str) -> str:
    """Realized share per source per window (solid) against the planned share (dashed); each window links to its
    first step."""
    from ..svg import Layer, line_chart

    shown = [w for w in view.windows if getattr(w, field_name) is not None]
    by_start = {w.start: w for w in shown}

    def series(i: int) -> list[tuple[int, float]]:
        return [(w.start, 100 * getattr(w, field_name)[i]) for w in shown]

    layers = [Layer(series(i), "chart-source", s.color, f"{s.source}: realized") for i, s in enumerate(view.sources) if i > 0]
    layers += [
        Layer(
            [(w.start, 100 * s.planned) for w in shown],
            "chart-planned",
            s.color,
            f"{s.source}: planned {100 * s.planned:.1f}%",
            dashed=True,
            width=1.0,
        )
        for s in view.sources
    ]

    def describe(x: Any, _y: Any) -> str:
        w = by_start[int(x)]
        parts = [f"{s.source} {100 * getattr(w, field_name)[i]:.1f}% (plan {100 * s.planned:.1f}%)" for i, s in enumerate(view.sources)]
        steps = f"step {w.start}" if w.end - w.start == 1 else f"steps {w.start}–{w.end - 1}"
        return f"{steps}: " + ", ".join(parts)

    first = view.sources[0] if view.sources else None
    return line_chart(
        series(0) if first else [],
        width=CHART_WIDTH,
        height=CHART_HEIGHT,
        x_label="step (window start)",
        y_label=y_label,
        point_url=lambda x: urls.step(run, int(x)),
        layers=layers,
        min_hit=MIN_HIT,
        series_color=first.color if first else PALETTE[0],
        describe=describe,
        css_class="mixture-chart",
    )


@dataclass
class StepMixRow(SourceShare):
    """One source's share of one step; ``expected`` is the planned share of the step's count."""

    expected: float = 0.0


@dataclass
class StepMixView:
    """The step page's own mix (the ``mix`` field of its JSON twin)."""

    unit: str
    rows: list[StepMixRow] = field(default_factory=list)
    padding_tokens: int = 0


def step_mixture(mix: StepMix) -> StepMixView:
    """Shape a step's counted mix for the step page (``expected``: the planned share of the step's count)."""
    total = sum(mix.counts.samples)
    rows = [StepMixRow(expected=row["planned"] * total, **row) for row in mix.rows()]
    return StepMixView(mix.unit, rows, mix.counts.padding)
