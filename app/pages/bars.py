"""Bar charts as view models: a histogram's bars laid out in SVG coordinates, each with its label, count and link.

Pages compute the geometry; ``templates/_partials/_bars.html`` only draws it (attributes, never styles: strict CSP).

>>> chart = bar_chart([("0-9", 3, None), ("10-19", 1, "/x")], title="lengths")
>>> [(b.height, b.url) for b in chart.bars]
[(60.0, None), (20.0, '/x')]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

#: Height of the bars' area, and of the labels under it, in SVG units.
HEIGHT = 60.0
LABEL_HEIGHT = 14.0


@dataclass(frozen=True)
class Bar:
    """One bar: its box, what it counts (``label``: the range or value) and where it links (``None``: nowhere)."""

    x: float
    y: float
    width: float
    height: float
    label: str
    count: int
    url: str | None


@dataclass(frozen=True)
class BarChart:
    """Bars side by side, the tallest ``HEIGHT`` high, with the first and last labels under them."""

    title: str
    width: float
    height: float
    #: Height of the bars' area (labels go under it).
    plot_height: float = HEIGHT
    bars: list[Bar] = field(default_factory=list)
    first: str = ""
    last: str = ""
    total: int = 0
    #: Where the last label ends: under the last bar.
    last_x: float = 0.0


#: Narrowest chart, so the labels under it fit.
MIN_WIDTH = 160.0


def bar_chart(
    values: Sequence[tuple[str, int, str | None]],
    *,
    title: str,
    bar_width: float = 12.0,
    gap: float = 2.0,
    first: str | None = None,
    last: str | None = None,
) -> BarChart:
    """Bars for ``(label, count, url)`` triples, heights relative to the largest count; ``first`` and ``last`` label the
    axis's ends (default: the first and last bars' labels)."""
    top = max((count for _, count, _ in values), default=0) or 1
    bars = []
    for i, (label, count, url) in enumerate(values):
        height = round(HEIGHT * count / top, 2)
        if count and height < 1.0:
            height = 1.0  # a bin that holds anything stays visible
        bars.append(Bar(i * (bar_width + gap), HEIGHT - height, bar_width, height, label, count, url))
    span = len(values) * (bar_width + gap) - gap
    width = max(span, MIN_WIDTH)
    return BarChart(
        title=title,
        width=width,
        height=HEIGHT + LABEL_HEIGHT,
        bars=bars,
        first=first if first is not None else (values[0][0] if values else ""),
        last=last if last is not None else (values[-1][0] if values else ""),
        total=sum(count for _, count, _ in values),
        last_x=max(span, 40.0),
    )
