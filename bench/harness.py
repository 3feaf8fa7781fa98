"""Timing and memory helpers for the benchmarks: repeated runs, robust statistics, isolated subprocesses, result documents.

The machines these run on are shared and noisy, so every figure a benchmark
reports is a ratio against a baseline measured in the same run; absolute
times are kept beside the ratios for context only.

>>> t = time_calls(lambda x: x * 2, range(5))
>>> t.runs
5
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
REPO = Path(__file__).resolve().parent.parent
MEMORY_BUDGET = 4 << 30
"""Largest estimated allocation a measurement may make; bigger ones are reported as not run."""

_VERSIONED = ("numpy", "pyarrow", "torch", "datasets", "mosaicml-streaming", "grain", "torchdata")


# -- timing -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Timing:
    """Wall-clock samples in seconds, summarized robustly (median and p95, not the mean)."""

    samples: tuple[float, ...]

    @property
    def runs(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]

    @property
    def min(self) -> float:
        return min(self.samples)

    def to_json(self) -> dict[str, Any]:
        """``{"median_ms", "p95_ms", "min_ms", "runs"}``."""
        return {
            "median_ms": round(self.median * 1e3, 4),
            "p95_ms": round(self.p95 * 1e3, 4),
            "min_ms": round(self.min * 1e3, 4),
            "runs": self.runs,
        }


def time_calls(fn: Callable[[Any], Any], inputs: Iterable[Any], *, warmup: int = 0) -> Timing:
    """Time ``fn(x)`` once per input (``warmup`` extra untimed calls on the first input first)."""
    items = list(inputs)
    if not items:
        raise ValueError("time_calls needs at least one input")
    for _ in range(warmup):
        fn(items[0])
    samples = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        samples.append(time.perf_counter() - start)
    return Timing(tuple(samples))


def time_repeated(fn: Callable[[], Any], *, repeat: int, warmup: int = 0) -> Timing:
    """Time ``repeat`` calls of ``fn()`` after ``warmup`` untimed ones."""
    return time_calls(lambda _: fn(), range(max(1, repeat)), warmup=warmup)


def python_peak(fn: Callable[[], T]) -> tuple[T, int]:
    """``(fn(), peak bytes of Python-level allocations during the call)`` via ``tracemalloc``.

    numpy reports its buffers to ``tracemalloc``; Arrow's C++ allocations are
    not seen here (use :class:`RssProbe` in a fresh process for those).
    """
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    try:
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, max(0, peak - base)


# -- resident memory ------------------------------------------------------------------------------
def _status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class RssProbe:
    """Peak resident-memory growth of this process inside a ``with`` block (Linux ``/proc``).

    Resets the kernel's high-water mark on entry when allowed, so the delta is
    the block's own peak; use it in a fresh process (:func:`isolated`) so freed
    memory of earlier work cannot hide new allocations.

    >>> with RssProbe() as probe:
    ...     data = bytearray(1 << 20)
    >>> probe.delta is None or probe.delta >= 0
    True
    """

    def __init__(self) -> None:
        self.before: int | None = None
        self.peak: int | None = None
        self.method = "unavailable"

    def __enter__(self) -> RssProbe:
        try:
            with open("/proc/self/clear_refs", "w") as handle:
                handle.write("5")
            self.method = "VmHWM after reset"
        except OSError:
            self.method = "VmHWM since start (upper bound)"
        self.before = _status_bytes("VmRSS")
        return self

    def __exit__(self, *exc: object) -> None:
        self.peak = _status_bytes("VmHWM")

    @property
    def delta(self) -> int | None:
        if self.before is None or self.peak is None:
            return None
        return max(0, self.peak - self.before)

    def to_json(self) -> dict[str, Any]:
        return {"rss_peak_delta_bytes": self.delta, "rss_method": self.method}


# -- isolated subprocesses ------------------------------------------------------------------------
def isolated(target: str, *, timeout: float, **kwargs: Any) -> dict[str, Any]:
    """Run ``module:function(**kwargs)`` in a fresh Python process and return its JSON-ready dict.

    The function should measure its own timed part (with :class:`RssProbe` for
    memory). A run longer than ``timeout`` seconds is stopped and reported as
    ``{"status": "capped", "cap_s": timeout}``; a crash as ``{"status":
    "failed", "reason": ...}`` with the tail of its stderr.
    """
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        out = Path(tmp) / "result.json"
        spec = json.dumps({"target": target, "kwargs": kwargs, "out": str(out)})
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        }
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "bench.harness", spec],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return {"status": "capped", "cap_s": timeout, "reason": f"did not finish within the {timeout:g} s cap"}
        wall = time.perf_counter() - start
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-6:]
            return {"status": "failed", "reason": f"exit code {proc.returncode}: " + " | ".join(tail)}
        result = json.loads(out.read_text())
    result.setdefault("status", "ok")
    result["process_wall_s"] = round(wall, 3)
    return result


def _child(spec_text: str) -> None:
    spec = json.loads(spec_text)
    module_name, _, function_name = spec["target"].partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    result = function(**spec["kwargs"])
    Path(spec["out"]).write_text(json.dumps(result))


# -- result documents -------------------------------------------------------------------------------
def package_version(name: str) -> str | None:
    """The installed version of a distribution, or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    """What the figures were measured on: CPUs, load, Python and library versions."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu_count": os.cpu_count(),
        "load_average": load,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {name: package_version(name) for name in ("batchscope", *_VERSIONED)},
    }


def count_label(n: int) -> str:
    """A short label for a count: ``0``, ``1e6``, ``2.5e+07``.

    >>> count_label(10**9), count_label(0), count_label(1500)
    ('1e9', '0', '1.5e+03')
    """
    if n == 0:
        return "0"
    exponent = len(str(abs(n))) - 1
    return f"1e{exponent}" if n == 10**exponent else f"{n:.2g}"


def ratio(numerator: float | None, denominator: float | None, digits: int = 3) -> float | None:
    """``numerator / denominator`` to ``digits`` significant digits, or None when either is missing or the denominator is 0.

    >>> ratio(2, 3), ratio(22000, 3), ratio(1, 0)
    (0.667, 7330.0, None)
    """
    if numerator is None or denominator is None or denominator == 0:
        return None
    return float(f"{numerator / denominator:.{digits}g}")


def goal(target: str, measured: float | None, met: bool | None) -> dict[str, Any]:
    """One goal entry: ``{"target": "<= 1 ms", "measured": 0.2, "met": True}`` (met is None when not measured)."""
    return {"target": target, "measured": measured, "met": None if measured is None else bool(met)}


def document(
    name: str,
    *,
    quick: bool,
    baseline: dict[str, Any],
    results: list[dict[str, Any]],
    ratios: dict[str, float | None],
    goals: dict[str, dict[str, Any]],
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """The JSON every benchmark writes to ``bench/results/<module>.json``."""
    return {
        "benchmark": name,
        "quick": quick,
        "machine": machine(),
        "baseline": baseline,
        "results": results,
        "ratios": ratios,
        "goals": goals,
        "notes": notes or [],
    }


if __name__ == "__main__":
    _child(sys.argv[1])
