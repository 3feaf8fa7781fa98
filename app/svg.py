"""Server-rendered SVG charts (line and step) for metric curves and episode timelines: escaped, NaN-safe, clickable.

>>> svg = line_chart([(0, 1.0), (1, float("nan")), (2, 0.5)], x_label="step", y_label="loss",
...                  point_url=lambda x: f"/runs/r/steps/{x}")
>>> svg.count('<a href="/runs/r/steps/'), "NaN" in svg
(3, True)

The result is ``markupsafe.Markup``: every text and URL in it is escaped, so
templates insert it as is. Styling uses presentation attributes (no inline
``style``, which the CSP forbids) and classes a stylesheet can override:
``chart``, ``chart-line``, ``chart-point``, ``chart-hit``, ``chart-missing``,
``chart-cursor``, ``chart-axis``, ``chart-tick``, ``chart-label``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from markupsafe import Markup, escape

#: Above this many x values, links are made per bin of neighbouring x values (each to the bin's first x).
MAX_LINKS = 2000
#: Above this many points, no dot is drawn per point (the line and the click bands remain).
MAX_DOTS = 240
#: Values beyond this magnitude are treated like non-finite ones (a chart cannot place them).
MAX_ABS = 1e300
_LEFT, _RIGHT, _TOP, _BOTTOM = 54, 12, 10, 36


def _number(value: Any) -> float | None:
    """``value`` as a finite float, else ``None`` (NaN, inf, None, non-numbers)."""
    if isinstance(value, bool):
        return float(value)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) and abs(number) <= MAX_ABS else None


def fmt(value: float) -> str:
    """A short label for an axis value.

    >>> fmt(0.25), fmt(1500.0), fmt(2e-05), fmt(3.0)
    ('0.25', '1500', '2e-05', '3')
    """
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1e6 or magnitude < 1e-3:
        return f"{value:.3g}"
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return text if text not in ("-0", "") else "0"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering ``[low, high]`` (about ``count`` of them).

    >>> nice_ticks(0, 1)
    [0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
    >>> nice_ticks(3, 3)
    [3.0]
    """
    if not (math.isfinite(low) and math.isfinite(high)):
        return []
    if high < low:
        low, high = high, low
    if high == low:
        return [float(low)]
    raw = (high - low) / max(1, count)
    if not math.isfinite(raw) or raw <= 0:
        return [float(low), float(high)]
    base = 10 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw)
    first = math.ceil(low / step - 1e-9)
    ticks = []
    k = first
    while k * step <= high + step * 1e-9:
        ticks.append(k * step)
        k += 1
    return [float(t) for t in ticks]


@dataclass(frozen=True)
class Layer:
    """Another line on the same axes (a smoothed curve, another run's): its points, class, colour and legend label."""

    points: Sequence[tuple[Any, Any]]
    css_class: str
    color: str
    label: str
    dashed: bool = False
    width: float = 1.5


@dataclass(frozen=True)
class Mark:
    """A highlighted point (an outlier step): a ring that links to ``url``, with ``label`` as hover text."""

    x: Any
    y: Any
    label: str
    url: str | None = None
    css_class: str = "chart-mark"


@dataclass(frozen=True)
class Scale:
    """A linear map from a data interval onto a pixel interval."""

    d0: float
    d1: float
    r0: float
    r1: float

    def __call__(self, value: float) -> float:
        if self.d1 == self.d0:
            return (self.r0 + self.r1) / 2
        return self.r0 + (value - self.d0) * (self.r1 - self.r0) / (self.d1 - self.d0)


def _domain(values: list[float], *, pad: float = 0.0) -> tuple[float, float]:
    low, high = min(values), max(values)
    if low == high:
        spread = abs(low) * 0.1 or 1.0
        return low - spread, high + spread
    margin = (high - low) * pad
    return low - margin, high + margin


def _p(value: float) -> str:
    if not math.isfinite(value):
        return "0"
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _line_path(points: list[tuple[float, float | None]], sx: Scale, sy: Scale, *, step: bool) -> str:
    """Path data; a ``None`` y breaks the line."""
    parts: list[str] = []
    pen_down = False
    for x, y in points:
        if y is None:
            pen_down = False
            continue
        px, py = sx(x), sy(y)
        if not pen_down:
            parts.append(f"M{_p(px)} {_p(py)}")
            pen_down = True
        elif step:
            parts.append(f"H{_p(px)}V{_p(py)}")
        else:
            parts.append(f"L{_p(px)} {_p(py)}")
    return "".join(parts)


def _bins(xs: list[float], limit: int) -> list[tuple[int, int]]:
    """``(first, last)`` positions of at most ``limit`` runs of neighbouring x values."""
    if len(xs) <= limit:
        return [(i, i) for i in range(len(xs))]
    size = math.ceil(len(xs) / limit)
    return [(i, min(len(xs), i + size) - 1) for i in range(0, len(xs), size)]


def line_chart(
    series: Sequence[tuple[Any, Any]],
    *,
    width: int = 640,
    height: int = 180,
    x_label: str = "",
    y_label: str = "",
    point_url: Callable[[Any], str] | None = None,
    title: str = "",
    step: bool = False,
    cursor: Any = None,
    y_ticks: Sequence[tuple[float, str]] | None = None,
    css_class: str = "",
    max_links: int = MAX_LINKS,
    layers: Sequence[Layer] = (),
    marks: Sequence[Mark] = (),
    min_hit: float = 0.0,
    bin_pick: str = "first",
    series_color: str = "#2563eb",
    describe: Callable[[Any, Any], str] | None = None,
) -> Markup:
    """An SVG line (or, with ``step``, step) chart of ``(x, y)`` points, as escaped markup.

    - Points whose ``x`` is not a finite number are dropped; a non-finite or
      missing ``y`` breaks the line and is marked with a red tick on the x axis
      (its hover text says which x and what value).
    - ``point_url(x)`` makes every x a link: a dot plus a full-height band
      that is easy to hit; beyond ``max_links`` x values, one link per bin.
    - ``cursor`` draws a vertical line at that x; the ``<svg>`` carries
      ``data-x0/x1`` (x domain) and ``data-px0/px1`` (its pixels) so a script
      can move it.
    - ``y_ticks`` replaces the numeric y ticks with labelled values (categories).
    - ``layers`` are more lines on the same axes (they widen the y domain);
      ``marks`` are rings (with links) drawn over everything.
    - ``min_hit`` is the narrowest click band in pixels: neighbouring x values
      share a band (bins) rather than go below it. ``bin_pick="extreme"``
      links a bin to its point farthest from the bin's mean (a spike stays
      one click away), ``"first"`` to its first point.
    - ``describe(raw_x, raw_y)`` is the hover text of a point (default
      ``"{x_label} x: {y_label} y"``); each band also carries ``data-x`` and
      ``data-label`` for scripts.

    >>> "chart-cursor" in line_chart([(0, 0), (5, 1)], cursor=2, step=True)
    True
    """
    width, height = max(120, int(width)), max(60, int(height))
    left, right, top, bottom = _LEFT, width - _RIGHT, _TOP, height - _BOTTOM
    points: list[tuple[float, float | None, Any, Any]] = []
    for raw_x, raw_y in series:
        x = _number(raw_x)
        if x is None or isinstance(raw_x, bool):
            continue
        points.append((x, _number(raw_y), raw_x, raw_y))
    points.sort(key=lambda p: p[0])
    classes = " ".join(c for c in ("chart", "chart-step" if step else "chart-line", css_class) if c)
    label = title or " / ".join(t for t in (y_label, x_label) if t) or "chart"
    out: list[str] = []
    finite_y = [p[1] for p in points if p[1] is not None]
    finite_y += [y for layer in layers for y in (_number(v) for _, v in layer.points) if y is not None]
    xs = [p[0] for p in points]
    if not points:
        out.append(
            f'<svg xmlns="http://www.w3.org/2000/svg" class="{escape(classes)}" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" aria-label="{escape(label)}"><title>{escape(label)}</title>'
            f'<text class="chart-empty" x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" fill="#6b7280" '
            f'font-size="12">no data</text></svg>'
        )
        return Markup("".join(out))
    x0, x1 = (xs[0], xs[-1]) if xs[0] != xs[-1] else (xs[0] - 0.5, xs[0] + 0.5)
    tick_values = [v for v, _ in y_ticks] if y_ticks else []
    y_values = finite_y + [float(v) for v in tick_values if _number(v) is not None]
    y0, y1 = _domain(y_values, pad=0.05) if y_values else (0.0, 1.0)
    sx, sy = Scale(x0, x1, left, right), Scale(y0, y1, bottom, top)
    out.append(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="{escape(classes)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(label)}" '
        f'data-x0="{x0!r}" data-x1="{x1!r}" data-px0="{left}" data-px1="{right}">'
        f"<title>{escape(label)}</title>"
    )
    # axes, ticks and labels
    out.append(
        f'<g class="chart-axis" stroke="#9aa4b2" stroke-width="1"><line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}"/></g>'
    )
    out.append('<g class="chart-tick" fill="#4b5563" font-size="10">')
    labelled = [(float(v), str(t)) for v, t in (y_ticks or []) if _number(v) is not None]
    for value, text in labelled or [(t, fmt(t)) for t in nice_ticks(y0, y1, 4) if y0 <= t <= y1]:
        out.append(f'<text x="{left - 4}" y="{_p(sy(value) + 3)}" text-anchor="end">{escape(text)}</text>')
        out.append(f'<line x1="{left}" x2="{right}" y1="{_p(sy(value))}" y2="{_p(sy(value))}" stroke="#e5e7eb"/>')
    for value in nice_ticks(x0, x1, max(2, (right - left) // 80)):
        if x0 <= value <= x1:
            out.append(f'<text x="{_p(sx(value))}" y="{bottom + 13}" text-anchor="middle">{escape(fmt(value))}</text>')
    out.append("</g>")
    if x_label:
        out.append(
            f'<text class="chart-label" x="{(left + right) / 2:.0f}" y="{height - 6}" text-anchor="middle" '
            f'font-size="11" fill="#374151">{escape(x_label)}</text>'
        )
    if y_label:
        cy = (top + bottom) / 2
        out.append(
            f'<text class="chart-label" x="12" y="{cy:.0f}" transform="rotate(-90 12 {cy:.0f})" text-anchor="middle" '
            f'font-size="11" fill="#374151">{escape(y_label)}</text>'
        )
    # the series
    for layer in layers:
        layer_points = sorted(
            ((x, _number(v)) for x, v in ((_number(raw), v) for raw, v in layer.points) if x is not None and x0 <= x <= x1),
            key=lambda p: p[0],
        )
        layer_path = _line_path(layer_points, sx, sy, step=step)
        if layer_path:
            dash = ' stroke-dasharray="5 3"' if layer.dashed else ""
            out.append(
                f'<path class="chart-layer {escape(layer.css_class)}" d="{layer_path}" fill="none" stroke="{escape(layer.color)}" '
                f'stroke-width="{layer.width}"{dash}><title>{escape(layer.label)}</title></path>'
            )
    path = _line_path([(x, y) for x, y, _, _ in points], sx, sy, step=step)
    if path:
        out.append(f'<path class="chart-series" d="{path}" fill="none" stroke="{escape(series_color)}" stroke-width="1.5"/>')
    missing = [(x, raw_x, raw_y) for x, y, raw_x, raw_y in points if y is None]
    if missing:
        out.append('<g class="chart-missing" stroke="#b42318" stroke-width="2">')
        for x, raw_x, raw_y in missing:
            px = _p(sx(x))
            out.append(
                f'<line x1="{px}" x2="{px}" y1="{bottom - 6}" y2="{bottom}"><title>{escape(_describe(raw_x, raw_y, x_label, y_label))}'
                f"</title></line>"
            )
        out.append("</g>")
    dots = len(points) <= MAX_DOTS
    say = describe or (lambda raw_x, raw_y: _describe(raw_x, raw_y, x_label, y_label))
    if point_url is not None:
        out.append('<g class="chart-links">')
        pixels = [sx(x) for x in xs]
        bands = _column_bands(pixels, left, right, min_hit) if min_hit > 0 else _point_bands(pixels, left, right, max_links)
        for first, last, band_left, band_right in bands:
            x, y, raw_x, raw_y = points[_pick(points, first, last) if bin_pick == "extreme" else first]
            text = say(raw_x, raw_y)
            out.append(
                f'<a href="{escape(point_url(raw_x))}" data-x="{escape(str(raw_x))}" data-label="{escape(text)}"><title>{escape(text)}</title>'
                f'<rect class="chart-hit" x="{_p(band_left)}" y="{top}" width="{_p(max(0.5, band_right - band_left))}" '
                f'height="{bottom - top}" fill="transparent"/>'
            )
            if dots and y is not None:
                out.append(f'<circle class="chart-point" cx="{_p(sx(x))}" cy="{_p(sy(y))}" r="2.5" fill="#2563eb"/>')
            out.append("</a>")
        out.append("</g>")
    elif dots:
        out.append('<g class="chart-points" fill="#2563eb">')
        for x, y, raw_x, raw_y in points:
            if y is not None:
                out.append(
                    f'<circle class="chart-point" cx="{_p(sx(x))}" cy="{_p(sy(y))}" r="2"><title>'
                    f"{escape(_describe(raw_x, raw_y, x_label, y_label))}</title></circle>"
                )
        out.append("</g>")
    if marks:
        out.append('<g class="chart-marks">')
        for mark in marks:
            mx, my = _number(mark.x), _number(mark.y)
            if mx is None or my is None or not x0 <= mx <= x1:
                continue
            ring = (
                f'<circle class="{escape(mark.css_class)}" cx="{_p(sx(mx))}" cy="{_p(sy(my))}" r="5" fill="transparent" '
                f'stroke="#b42318" stroke-width="2"><title>{escape(mark.label)}</title></circle>'
            )
            out.append(f'<a href="{escape(mark.url)}" data-x="{escape(str(mark.x))}">{ring}</a>' if mark.url else ring)
        out.append("</g>")
    cursor_x = _number(cursor)
    if cursor is not None and cursor_x is not None:
        px = _p(sx(min(max(cursor_x, x0), x1)))
        out.append(f'<line class="chart-cursor" x1="{px}" x2="{px}" y1="{top}" y2="{bottom}" stroke="#b42318" stroke-width="1.5"/>')
    out.append("</svg>")
    return Markup("".join(out))


def _point_bands(pixels: list[float], left: float, right: float, limit: int) -> list[tuple[int, int, float, float]]:
    """``(first, last, band_left, band_right)`` per bin of at most ``limit`` bins: bands meet halfway between bins."""
    half = (pixels[1] - pixels[0]) / 2 if len(pixels) > 1 else (right - left) / 2
    bands = []
    for first, last in _bins(pixels, max(1, limit)):
        band_left = pixels[first] - half if first == 0 else (pixels[first - 1] + pixels[first]) / 2
        band_right = pixels[last] + half if last == len(pixels) - 1 else (pixels[last] + pixels[last + 1]) / 2
        bands.append((first, last, max(left, band_left), min(right, band_right)))
    return bands


def _column_bands(pixels: list[float], left: float, right: float, width: float) -> list[tuple[int, int, float, float]]:
    """Bins by pixel column ``width`` wide, so no band is narrower: each non-empty column is a band, widened halfway
    into the empty columns beside it (the first and last to the plot's edges)."""
    columns: dict[int, list[int]] = {}
    for i, px in enumerate(pixels):
        columns.setdefault(int((px - left) // width), []).append(i)
    ordered = sorted(columns.items())
    bands = []
    for n, (column, members) in enumerate(ordered):
        start, end = left + column * width, left + (column + 1) * width
        if n == 0:
            start = left
        else:
            start = (left + (ordered[n - 1][0] + 1) * width + start) / 2
        if n == len(ordered) - 1:
            end = max(end, right)
        else:
            end = (end + left + ordered[n + 1][0] * width) / 2
        bands.append((members[0], members[-1], start, end))
    return bands


def _pick(points: list[tuple[float, float | None, Any, Any]], first: int, last: int) -> int:
    """The position in ``[first, last]`` of the point farthest from the mean of the bin's finite values."""
    ys = [(i, points[i][1]) for i in range(first, last + 1) if points[i][1] is not None]
    if not ys:
        return first
    mean = sum(y for _, y in ys) / len(ys)
    return max(ys, key=lambda item: abs(item[1] - mean))[0]


def _describe(raw_x: Any, raw_y: Any, x_label: str, y_label: str) -> str:
    y = _number(raw_y)
    y_text = fmt(y) if y is not None else _raw(raw_y)
    return f"{x_label or 'x'} {raw_x}: {y_label or 'y'} {y_text}"


def _raw(value: Any) -> str:
    if value is None:
        return "missing"
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return repr(value)[:40]
    if math.isfinite(number):
        return f"{number:.3g} (too large to plot)"
    return "NaN" if math.isnan(number) else ("inf" if number > 0 else "-inf")
