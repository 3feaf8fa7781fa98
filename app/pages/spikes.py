"""Metric curves for finding spikes: smoothing, outlier steps, and thinning that keeps the extremes.

**The outlier rule** is :mod:`loaders.checks.trend`'s, the one ``batchscope lint``'s ``loss-spike`` check uses: after
the curve's warm-up (its first steps, while it is still far from where it goes next), a step is a **spike** (a
**dip**) when its value is more than ``k`` robust standard deviations above (below) the median of the
:data:`OUTLIER_WINDOW` logged steps around it.

>>> series = [(s, 1.0 + 0.01 * (s % 3)) for s in range(40)]
>>> series[20] = (20, 5.0)
>>> [(o.step, o.kind) for o in outliers(series)]
[(20, 'spike')]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from loaders.checks.trend import OUTLIER_K, OUTLIER_WINDOW, WARMUP_K, first_judged_step, rolling_median, trend_outliers

__all__ = ["OUTLIER_K", "OUTLIER_WINDOW", "WARMUP_K", "Outlier", "ema", "first_judged_step", "outliers", "rolling_median", "thin", "window"]

#: The smoothing weights offered (``?smooth=``): exponential moving average, 0 is off.
SMOOTHING = (0.0, 0.6, 0.9, 0.99)
DEFAULT_SMOOTHING = 0.6

Series = Sequence[tuple[int, float]]


@dataclass
class Outlier:
    """One step whose value is far from its neighbours' median, with the URL of its step page."""

    step: int
    value: float
    median: float
    #: ``(value - median) / σ``: how many robust standard deviations away.
    score: float
    kind: str  # "spike" or "dip"
    url: str = ""


def outliers(series: Series, *, window: int = OUTLIER_WINDOW, k: float = OUTLIER_K) -> list[Outlier]:
    """The spikes and dips of a curve after its warm-up (:func:`loaders.checks.trend.trend_outliers`), in step order."""
    return [Outlier(o.step, o.value, o.median, o.score, o.kind) for o in trend_outliers(series, window=window, k=k)]


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
