"""Environment episodes: the ``episode`` field renderer and the helpers of the episode timeline's charts.

The facts of an episode (its per-step lists and what is inconsistent in it)
come from ``loaders.rl.episodes``; this module lays them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from markupsafe import Markup

from loaders.rl.episodes import episode_facts
from loaders.rl.facts import as_float, number_text

from .. import urls
from ..svg import line_chart
from .views import CellView, FieldContext, View


def action_ticks(names: Any) -> list[tuple[float, str]] | None:
    """Y ticks naming discrete actions, from a list of names (the dataset's ``actions`` note)."""
    if isinstance(names, list) and names and all(isinstance(n, str) for n in names):
        return [(float(i), f"{i} {n}") for i, n in enumerate(names)]
    return None


def action_value(action: Any) -> float | None:
    """A scalar action as a number (a vector's first component); ``None`` otherwise."""
    if isinstance(action, (list, tuple)):
        return as_float(action[0]) if action else None
    return as_float(action)


# -- the field renderer ----------------------------------------------------------------
@dataclass
class EpisodeView(View):
    """An episode on a sample page: summary, warnings, first frame, reward and return chart, a link to its timeline."""

    partial: ClassVar[str] = "_partials/_episode.html"
    length: int = 0
    total_return: str = ""
    termination: str = ""
    frames: int = 0
    warnings: list[str] = field(default_factory=list)
    where: str = ""
    timeline_url: str | None = None
    first_frame_url: str | None = None
    chart: Markup = Markup("")


def episode_field(value: Any, ctx: FieldContext) -> View:
    facts = episode_facts(value, record=ctx.record)
    parts = urls.sample_parts(ctx.fragment_url) if ctx.fragment_url else None
    timeline = frame = None
    if parts is not None:
        name, version, key = parts
        first = next((c for c, k in ctx.kinds.items() if k == "episode"), None)
        column = None if ctx.column == first else ctx.column
        timeline = urls.episode(name, version, key, column=column)
        if facts.frames and facts.frames[0] is not None:
            frame = urls.episode_frame(name, version, key, column=column, t=0)
    chart = line_chart(
        list(enumerate(facts.returns)),
        width=420,
        height=120,
        x_label="step",
        y_label="return",
        point_url=(lambda t: urls.add_query(timeline, t=t)) if timeline else None,
        title="cumulative return",
    )
    return EpisodeView(
        length=facts.length,
        total_return=number_text(facts.total_return),
        termination=facts.termination,
        frames=sum(1 for f in facts.frames if f is not None),
        warnings=facts.warnings,
        where=ctx.where,
        timeline_url=timeline,
        first_frame_url=frame,
        chart=chart,
    )


def episode_cell(value: Any, ctx: FieldContext) -> View:
    facts = episode_facts(value, record=ctx.record)
    text = f"{facts.length:,} steps · return {number_text(facts.total_return)}" + (f" · {facts.termination}" if facts.termination else "")
    return CellView(text=("⚠ " if facts.warnings else "") + text, title="; ".join(facts.warnings))
