"""A process-wide thread pool for per-sample work that releases the GIL (image and video decoding)."""

from __future__ import annotations

import concurrent.futures as cf
import os
import threading
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_POOL: cf.ThreadPoolExecutor | None = None
_LOCK = threading.Lock()


def threads() -> int:
    """How many threads per-sample work may use (``BATCHSCOPE_SAMPLE_THREADS``, default: the CPU count, at most 8)."""
    return max(1, int(os.environ.get("BATCHSCOPE_SAMPLE_THREADS", str(min(8, os.cpu_count() or 1)))))


def map_in_order(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[fn(x) for x in items]``, spread over the pool; results in order, the first exception re-raised.

    >>> map_in_order(abs, [-1, 2, -3])
    [1, 2, 3]
    """
    if len(items) < 2 or threads() == 1:
        return [fn(x) for x in items]
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = cf.ThreadPoolExecutor(max_workers=threads(), thread_name_prefix="batchscope-sample")
        pool = _POOL
    return list(pool.map(fn, items))
