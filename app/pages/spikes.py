"""Metric curves for finding spikes: smoothing, outlier steps by a robust rule, and thinning that keeps the extremes.

**The outlier rule.** For each logged step ``s`` with value ``x[s]``, let
``m[s]`` be the median of the values in the window of :data:`OUTLIER_WINDOW`
steps centred on ``s`` (cut short at the ends of the run), and ``r[s] = x[s]
- m[s]`` its residual. The scale is ``σ = 1.4826 · MAD``, the median of
``|r|`` over the whole curve (``1.4826 · MAD`` estimates the standard
deviation of normal noise). Step ``s`` is an outlier when ``|r[s]| > k · σ``
with ``k =`` :data:`OUTLIER_K`: a **spike** when ``r[s] > 0``, a **dip**
otherwise. A median is barely moved by a few bad steps in its window, so
one spike does not hide its neighbour; a perfectly smooth curve (``σ = 0``)
has no outliers.

>>> series = [(s, 1.0 + 0.01 * (s % 3)) for s in range(40)]
>>> series[20] = (20, 5.0)
>>> [(o.step, o.kind) for o in outliers(series)]
[(20, 'spike')]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median
from typing import Sequence

#: Width (in logged steps) of the centred rolling-median window.
OUTLIER_WINDOW = 21
#: How many robust standard deviations from the rolling median make an outlier.
OUTLIER_K = 6.0
#: Normal-consistency constant: ``1.4826 · MAD`` estimates σ for normal noise.
MAD_TO_SIGMA = 1.4826
#: The smoothing weights offered (``?smooth=``): exponential moving average, 0 is off.
SMOOTHING = (0.0, 0.6, 0.9, 0.99)
DEFAULT_SMOOTHING = 0.6

Series = Sequence[tuple[int, float]]


@dataclass
class Outlier:
    """One step whose value is far from its neighbours' median."""

    step: int
    value: float
    median: float
    #: ``(value - median) / σ``: how many robust standard deviations away.
    score: float
    kind: str  # "spike" or "dip"
    url: str = ""


def ema(series: Series, weight: float) -> list[tuple[int, float]]:
    """Exponential moving average with debiasing (as TensorBoard draws it); ``weight`` 0 returns the series.

    >>> ema([(0, 1.0), (1, 3.0)], 0.5)
    [(0, 1.0), (1, 2.3333333333333335)]
    """
    if not 0 < weight < 1:
        return [(s, float(v)) for s, v in series]
    out = []
    last = 0.0
    for n, (step, value) in enumerate(series, start=1):
        last = weight * last + (1 - weight) * value
        out.append((step, last / (1 - weight**n)))
    return out


def rolling_median(values: Sequence[float], window: int = OUTLIER_WINDOW) -> list[float]:
    """The median of the ``window`` values centred on each one (fewer at the ends).

    >>> rolling_median([1, 9, 2, 3, 4], 3)
    [5.0, 2, 3, 3, 3.5]
    """
    half = max(1, window) // 2
    return [median(values[max(0, i - half) : i + half + 1]) for i in range(len(values))]


def outliers(series: Series, *, window: int = OUTLIER_WINDOW, k: float = OUTLIER_K) -> list[Outlier]:
    """The spikes and dips of a curve by the module's rule, in step order."""
    finite = [(s, float(v)) for s, v in series if isinstance(v, (int, float)) and math.isfinite(v)]
    if len(finite) < 3:
        return []
    values = [v for _, v in finite]
    medians = rolling_median(values, window)
    residuals = [v - m for v, m in zip(values, medians)]
    sigma = MAD_TO_SIGMA * median(abs(r) for r in residuals)
    if sigma <= 0:
        return []
    found = []
    for (step, value), middle, residual in zip(finite, medians, residuals):
        score = residual / sigma
        if abs(score) > k:
            found.append(Outlier(step, value, middle, score, "spike" if residual > 0 else "dip"))
    return found


def thin(series: Series, limit: int) -> list[tuple[int, float]]:
    """At most about ``limit`` points, keeping each bucket's lowest and highest value (a thinned spike stays visible).

    >>> thin([(s, 9.0 if s == 5 else 1.0) for s in range(100)], 10)[:4]
    [(0, 1.0), (5, 9.0), (20, 1.0), (40, 1.0)]
    """
    points = list(series)
    if len(points) <= limit:
        return points
    buckets = max(1, limit // 2)
    size = math.ceil(len(points) / buckets)
    out: list[tuple[int, float]] = []
    for start in range(0, len(points), size):
        bucket = points[start : start + size]
        low = min(bucket, key=lambda p: p[1])
        high = max(bucket, key=lambda p: p[1])
        out.extend(sorted({low, high}, key=lambda p: p[0]))
    if out[-1] != points[-1]:
        out.append(points[-1])
    return out


def window(series: Series, start: int | None, end: int | None) -> list[tuple[int, float]]:
    """The points with ``start <= step <= end`` (either bound optional)."""
    return [(s, v) for s, v in series if (start is None or s >= start) and (end is None or s <= end)]
