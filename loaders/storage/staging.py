"""Row groups decoded ahead of use on a small thread pool (Arrow releases the GIL while it decodes).

A reader knows which row groups its next steps will touch long before it
needs their records, so it *stages* them: reading, verifying, decoding and
converting to Python records run on the pool while the reader's own thread
assembles batches from earlier row groups. Whoever needs a row group takes its
staged future (or converts it itself if nobody staged it). Speculative stages are bounded: past the limit
the oldest finished ones are dropped, so a reader that stops early leaks
nothing.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable

#: How many speculatively staged row groups may wait to be taken.
STAGED_LIMIT = int(os.environ.get("BATCHSCOPE_STAGED_ROW_GROUPS", "64"))


class Staging:
    """Futures of row groups being (or already) decoded and converted, by cache key."""

    def __init__(self, limit: int = STAGED_LIMIT, threads: int | None = None) -> None:
        # Decoder threads: BATCHSCOPE_DECODE_THREADS, else the CPU count (2 to 8).
        self.limit = limit
        self._threads = threads or int(os.environ.get("BATCHSCOPE_DECODE_THREADS", "0")) or max(2, min(8, os.cpu_count() or 2))
        self._pool: cf.ThreadPoolExecutor | None = None
        self._futures: OrderedDict[Hashable, cf.Future[Any]] = OrderedDict()
        self._lock = threading.Lock()

    def _executor(self) -> cf.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = cf.ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="batchscope-decode")
        return self._pool

    def stage(self, key: Hashable, load: Callable[[], Any], *, needed: bool = False) -> None:
        """Start ``load()`` on the pool unless ``key`` is already staged.

        ``needed`` stages are about to be taken and ignore the limit; others
        are hints and make room by dropping the oldest finished stage (or are
        skipped when every stage is still running).
        """
        with self._lock:
            if key in self._futures:
                return
            if not needed and len(self._futures) >= self.limit:
                done = next((k for k, f in self._futures.items() if f.done()), None)
                if done is None:
                    return
                del self._futures[done]
            self._futures[key] = self._executor().submit(load)

    def take(self, key: Hashable) -> cf.Future[Any] | None:
        """Remove and return the stage of ``key``, if any (its result raises what ``load`` raised)."""
        with self._lock:
            return self._futures.pop(key, None)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._futures

    def clear(self) -> None:
        """Drop every stage: queued ones are cancelled, running ones finished (so nothing decodes after this)."""
        with self._lock:
            futures = list(self._futures.values())
            self._futures.clear()
        running = [f for f in futures if not f.cancel()]
        cf.wait(running)
