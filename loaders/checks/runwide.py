"""Checks judged over everything a lint read: duplicates, length outliers (from the logged reads) and loss spikes (from
the ledger), each reported per read or per step.

>>> log = ReadLog()
>>> for step, key in [(0, "a"), (1, "b"), (2, "c")]:
...     log.add(step, 0, 0, key, 0, 7 if key != "c" else 9, hash(key), 10)
>>> [(f.step, f.key) for f in duplicates(log, max_keys=1, max_per_step=1)]
[(0, 'a'), (1, 'b')]
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from .part import GroupLog, ReadLog
from .registry import CHECK
from .rl import zero_variance
from .spec import Finding
from .trend import MAD_TO_SIGMA, trend_outliers

if TYPE_CHECKING:
    from ..training.ledger import Ledger


def _where(log: ReadLog, i: int) -> str:
    return f"step {log.step[i]} rank {log.rank[i]} sample {log.position[i]}"


def _distinct_reads(log: ReadLog) -> np.ndarray:
    """Indices of the first row of each read (a read logged by two overlapping parts counts once)."""
    _, first = np.unique(np.asarray(log.read, dtype=np.int64), return_index=True)
    return np.sort(first)


def duplicates(log: ReadLog, *, max_keys: float, max_per_step: float) -> list[Finding]:
    """Reads whose content was read under more than ``max_keys`` keys, or more than ``max_per_step`` times in one step."""
    if not len(log):
        return []
    rows = _distinct_reads(log)
    content = np.asarray(log.content, dtype=np.int64)[rows]
    order = rows[np.argsort(content, kind="stable")]
    sorted_content = np.asarray(log.content, dtype=np.int64)[order]
    starts = np.flatnonzero(np.r_[True, sorted_content[1:] != sorted_content[:-1]])
    sizes = np.diff(np.r_[starts, len(order)])
    severity = CHECK["duplicate"].severity
    details: dict[int, list[str]] = {}
    for start, size in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist()):
        group = order[start : start + size].tolist()
        keys = list(dict.fromkeys(log.key[i] for i in group))
        if len(keys) > max_keys:
            for i in group:
                other = next(j for j in group if log.key[j] != log.key[i])
                more = f" and {len(keys) - 2} more key(s)" if len(keys) > 2 else ""
                details.setdefault(i, []).append(f"same content as {log.key[other]} ({_where(log, other)}){more}")
        by_step: dict[int, list[int]] = {}
        for i in group:
            by_step.setdefault(log.step[i], []).append(i)
        for step, reads in by_step.items():
            if len(reads) > max_per_step:
                for i in reads:
                    others = ", ".join(f"rank {log.rank[j]} sample {log.position[j]}" for j in reads if j != i)
                    details.setdefault(i, []).append(f"read {len(reads)} times in step {step} (also {others})")
    return [
        Finding("duplicate", severity, log.step[i], log.rank[i], log.position[i], log.key[i], "; ".join(found))
        for i, found in details.items()
    ]


def length_outliers(log: ReadLog, source_names: Callable[[int], str], *, k: float, min_reads: float) -> list[Finding]:
    """Reads whose log length is more than ``k`` robust standard deviations from their source's median (sources with at
    least ``min_reads`` reads of known length)."""
    if not len(log):
        return []
    rows = _distinct_reads(log)
    lengths = np.asarray(log.length, dtype=np.int64)[rows]
    sources = np.asarray(log.source, dtype=np.int64)[rows]
    severity = CHECK["length-outlier"].severity
    found = []
    for source in np.unique(sources).tolist():
        mine = rows[(sources == source) & (lengths >= 0)]
        if len(mine) < min_reads:
            continue
        values = np.asarray(log.length, dtype=np.int64)[mine]
        logs = np.log(np.maximum(values, 1))
        middle = float(np.median(logs))
        sigma = MAD_TO_SIGMA * float(np.median(np.abs(logs - middle)))
        if sigma <= 0:
            continue
        typical = math.exp(middle)
        for i, value, z in zip(mine.tolist(), values.tolist(), ((logs - middle) / sigma).tolist()):
            if abs(z) > k:
                found.append(
                    Finding(
                        "length-outlier",
                        severity,
                        log.step[i],
                        log.rank[i],
                        log.position[i],
                        log.key[i],
                        f"{value:,} long against a median of {typical:,.0f} for {source_names(source)} (z = {z:+.1f} on log length)",
                    )
                )
    return found


def loss_spikes(
    ledger: "Ledger", world_size_at: Callable[[int], int], steps: range, *, k: float, window: float, warmup_k: float
) -> list[Finding]:
    """Steps in ``steps`` whose logged ``loss`` (mean over the ranks of the world size in force) is an outlier of the whole
    curve by the trend rule (:mod:`loaders.checks.trend`)."""
    series = ledger.series("loss", world_size_at=world_size_at)
    severity = CHECK["loss-spike"].severity
    return [
        Finding(
            "loss-spike",
            severity,
            o.step,
            None,
            None,
            None,
            f"{o.kind}: loss {o.value:.4g} against a trend of {o.median:.4g} ({o.score:+.1f} σ)",
        )
        for o in trend_outliers(series, window=int(window), k=k, warmup_k=warmup_k)
        if o.step in steps
    ]


def run_wide(
    log: ReadLog, groups: GroupLog, options: Any, steps: range, *, source_names: Callable[[int], str], ledger: Any, world_size_at: Any
) -> list[Finding]:
    """The findings of every selected run-wide check."""
    found: list[Finding] = []
    if options.selected("duplicate"):
        found += duplicates(log, max_keys=options.param("duplicate", "max_keys"), max_per_step=options.param("duplicate", "max_per_step"))
    if options.selected("length-outlier"):
        found += length_outliers(
            log, source_names, k=options.param("length-outlier", "k"), min_reads=options.param("length-outlier", "min_reads")
        )
    if options.selected("rl-zero-variance"):
        found += zero_variance(
            groups, min_group=options.param("rl-zero-variance", "min_group"), severity=CHECK["rl-zero-variance"].severity
        )
    if options.selected("loss-spike") and ledger is not None:
        found += loss_spikes(
            ledger,
            world_size_at,
            steps,
            k=options.param("loss-spike", "k"),
            window=options.param("loss-spike", "window"),
            warmup_k=options.param("loss-spike", "warmup_k"),
        )
    return found


def names_of(sources: Sequence[Any]) -> Callable[[int], str]:
    """``source index → name`` over a manifest's resolved sources (the index itself when unnamed)."""

    def name(source: int) -> str:
        entry = sources[source] if 0 <= source < len(sources) else None
        return str(entry.get("ref") or entry.get("dataset")) if isinstance(entry, dict) else f"source {source}"

    return name
