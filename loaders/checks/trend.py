"""Outlier steps of a metric curve against a trend that ignores warm-up: the run chart's outlier list and the lint's
``loss-spike`` check use this one rule.

**Warm-up.** Let ``σ_d = 1.4826 · median |x[i] − x[i−1]| / √2``, the step-to-step noise (a slow trend barely moves
it). The warm-up is the logged steps before the first one whose value is within :data:`WARMUP_K` ``· σ_d`` of the
median of the :data:`OUTLIER_WINDOW` logged values after it, at most half the curve: the first steps of a run, while
the curve is still far from where it goes next, are neither judged nor used to judge the others. A curve with no
step-to-step noise (``σ_d = 0``) has no warm-up.

**Outliers.** After the warm-up, for each logged step ``s`` let ``m[s]`` be the median of the :data:`OUTLIER_WINDOW`
logged values centred on it (cut short at the warm-up's end and at the run's end) and ``r[s] = x[s] − m[s]``. The scale
is ``σ = 1.4826 · median |r|``. Step ``s`` is an outlier when ``|r[s]| > k · σ`` (``k =`` :data:`OUTLIER_K`): a
**spike** above the trend, a **dip** below. A median is barely moved by a few bad steps, so one spike does not hide
its neighbour; a perfectly smooth curve (``σ = 0``) has none.

>>> series = [(s, 1.0 + 0.01 * (s % 3)) for s in range(40)]
>>> series[20] = (20, 5.0)
>>> [(o.step, o.kind) for o in trend_outliers(series)]
[(20, 'spike')]
>>> decaying = [(s, 5.0 * 0.7**s + 1.0 + 0.01 * (s % 3)) for s in range(60)]
>>> warmup_steps([v for _, v in decaying]), trend_outliers(decaying)
(15, [])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median
from typing import Sequence

#: Width (in logged steps) of the centred rolling-median window, and of the window a warm-up step is compared with.
OUTLIER_WINDOW = 21
#: How many robust standard deviations from the rolling median make an outlier.
OUTLIER_K = 6.0
#: How many step-to-step noise deviations from what follows still count as warm-up.
WARMUP_K = 3.0
#: Normal-consistency constant: ``1.4826 · MAD`` estimates σ for normal noise.
MAD_TO_SIGMA = 1.4826

Series = Sequence[tuple[int, float]]


@dataclass(frozen=True)
class TrendOutlier:
    """One step whose value is far from its neighbours' median."""

    step: int
    value: float
    median: float
    #: ``(value - median) / σ``: how many robust standard deviations away.
    score: float
    kind: str  # "spike" or "dip"


def rolling_median(values: Sequence[float], window: int = OUTLIER_WINDOW) -> list[float]:
    """The median of the ``window`` values centred on each one (fewer at the ends).

    >>> rolling_median([1, 9, 2, 3, 4], 3)
    [5.0, 2, 3, 3, 3.5]
    """
    half = max(1, window) // 2
    return [median(values[max(0, i - half) : i + half + 1]) for i in range(len(values))]


def warmup_steps(values: Sequence[float], *, window: int = OUTLIER_WINDOW, k: float = WARMUP_K) -> int:
    """How many of the first logged ``values`` are warm-up (see the module's rule).

    >>> warmup_steps([9.0, 6.0, 4.0, 3.0] + [2.0 + 0.01 * (i % 2) for i in range(30)])
    4
    """
    n = len(values)
    if n < 3:
        return 0
    noise = MAD_TO_SIGMA * median(abs(values[i] - values[i - 1]) for i in range(1, n)) / math.sqrt(2)
    if noise <= 0:
        return 0
    for i in range(n // 2):
        if abs(values[i] - median(values[i + 1 : i + 1 + window])) <= k * noise:
            return i
    return n // 2


def trend_outliers(series: Series, *, window: int = OUTLIER_WINDOW, k: float = OUTLIER_K, warmup_k: float = WARMUP_K) -> list[TrendOutlier]:
    """The spikes and dips of a curve after its warm-up, by the module's rule, in step order."""
    finite = [(s, float(v)) for s, v in series if isinstance(v, (int, float)) and math.isfinite(v)]
    finite = finite[warmup_steps([v for _, v in finite], window=window, k=warmup_k) :]
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
            found.append(TrendOutlier(step, value, middle, score, "spike" if residual > 0 else "dip"))
    return found


def first_judged_step(series: Series, *, window: int = OUTLIER_WINDOW, warmup_k: float = WARMUP_K) -> int | None:
    """The first step the rule judges (the end of the warm-up), ``None`` for a curve without finite values."""
    finite = [(s, float(v)) for s, v in series if isinstance(v, (int, float)) and math.isfinite(v)]
    if not finite:
        return None
    return finite[min(len(finite) - 1, warmup_steps([v for _, v in finite], window=window, k=warmup_k))][0]
