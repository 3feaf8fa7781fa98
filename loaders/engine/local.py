"""The ``local`` engine: every core of this machine, no server to start.

Tasks that release the GIL (reading files, hashing, Arrow and numpy kernels)
run on threads, one per core; tasks that mostly wait on the network run on
many threads, so many requests are in flight; tasks that hold the GIL (pure
Python per row) run in worker processes, one per core. Results come back as
tasks finish; :func:`loaders.engine.ordered` puts them in task order.

Threads: ``BATCHSCOPE_ENGINE_THREADS`` (default: the usable cores); requests in
flight: ``BATCHSCOPE_ENGINE_REQUESTS`` (default 32); processes:
``BATCHSCOPE_ENGINE_PROCESSES`` (default: the usable cores; ``1`` keeps every
task in this process). A worker process that dies is replaced and its task
tried again, ``BATCHSCOPE_ENGINE_RETRIES`` times (default 3).

>>> engine = LocalEngine()
>>> sorted(engine.run(len, ["ab", "c"], labels=["x", "y"]))
[(0, 2), (1, 1)]
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import threading
from collections import deque
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Iterator, Sequence, TypeVar

from ..errors import EngineError
from .base import Work

T = TypeVar("T")
R = TypeVar("R")


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _setting(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise EngineError(f"${name} must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise EngineError(f"${name} must be a positive integer, got {raw!r}")
    return value


def retries() -> int:
    """How many times a task whose worker died is tried again (``BATCHSCOPE_ENGINE_RETRIES``, default 3)."""
    raw = os.environ.get("BATCHSCOPE_ENGINE_RETRIES", "3")
    try:
        return max(0, int(raw))
    except ValueError:
        raise EngineError(f"$BATCHSCOPE_ENGINE_RETRIES must be a non-negative integer, got {raw!r}") from None


class LocalEngine:
    """Threads and processes of this machine (see the module's docstring)."""

    name = "local"

    def __init__(self, *, threads: int | None = None) -> None:
        """An engine of this machine; ``threads`` pins how many threads run ``cpu`` tasks (default: the setting)."""
        if threads is not None and threads < 1:
            raise EngineError(f"threads must be a positive integer, got {threads!r}")
        self._pinned = threads
        self._lock = threading.Lock()
        self._threads: dict[str, cf.ThreadPoolExecutor] = {}
        self._processes: cf.ProcessPoolExecutor | None = None

    def __repr__(self) -> str:
        return f"LocalEngine(threads={self.workers('cpu')}, requests={self.workers('io')}, processes={self.workers('python')})"

    def workers(self, work: Work = "cpu") -> int:
        """Tasks of kind ``work`` that run at once."""
        if work == "io":
            return _setting("BATCHSCOPE_ENGINE_REQUESTS", 32)
        if work == "python":
            return _setting("BATCHSCOPE_ENGINE_PROCESSES", usable_cores())
        return self._pinned or _setting("BATCHSCOPE_ENGINE_THREADS", usable_cores())

    # -- pools ---------------------------------------------------------------
    def _thread_pool(self, work: Work) -> cf.ThreadPoolExecutor:
        size = self.workers(work)
        key = f"{work}-{size}"
        with self._lock:
            pool = self._threads.get(key)
            if pool is None:
                pool = cf.ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"batchscope-engine-{work}")
                self._threads[key] = pool
            return pool

    def _process_pool(self, *, fresh: bool = False) -> cf.ProcessPoolExecutor:
        with self._lock:
            if fresh and self._processes is not None:
                self._processes.shutdown(wait=False, cancel_futures=True)
                self._processes = None
            if self._processes is None:
                # forkserver: workers start from a clean process, never from a fork of this one's threads and locks.
                context = multiprocessing.get_context("forkserver")
                self._processes = cf.ProcessPoolExecutor(max_workers=self.workers("python"), mp_context=context)
            return self._processes

    # -- running -------------------------------------------------------------
    def run(self, fn: Callable[[T], R], items: Sequence[T], *, labels: Sequence[str], work: Work = "cpu") -> Iterator[tuple[int, R]]:
        """Run ``fn`` over ``items`` on threads (``cpu``, ``io``) or processes (``python``); yield ``(position, result)`` as they finish."""
        if len(labels) != len(items):
            raise ValueError(f"{len(items)} items but {len(labels)} labels")
        if not items:
            return iter(())
        use_processes = work == "python" and self.workers("python") > 1 and len(items) > 1
        if use_processes:
            return self._run_processes(fn, items, labels)
        if len(items) == 1 or self.workers(work) == 1:
            return ((i, fn(item)) for i, item in enumerate(items))
        return self._run_threads(fn, items, work)

    def _run_threads(self, fn: Callable[[T], R], items: Sequence[T], work: Work) -> Iterator[tuple[int, R]]:
        pool = self._thread_pool(work)
        window = 2 * self.workers(work)
        pending: dict[cf.Future[R], int] = {}
        upcoming = deque(range(len(items)))
        try:
            while upcoming or pending:
                while upcoming and len(pending) < window:
                    position = upcoming.popleft()
                    pending[pool.submit(fn, items[position])] = position
                finished, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
                for future in finished:
                    position = pending.pop(future)
                    yield position, future.result()
        finally:
            for future in pending:
                future.cancel()

    def _run_processes(self, fn: Callable[[T], R], items: Sequence[T], labels: Sequence[str]) -> Iterator[tuple[int, R]]:
        """Run on worker processes. A worker that dies takes the pool's other tasks with it: those run again one at a
        time, so only the task that kills its worker when it runs alone is counted (and refused after the retries)."""
        pool = self._process_pool()
        window = 2 * self.workers("python")
        deaths = [0] * len(items)
        pending: dict[cf.Future[R], int] = {}
        upcoming = deque(range(len(items)))
        suspects: deque[int] = deque()  # lost with a broken pool: each runs alone next
        try:
            while upcoming or pending or suspects:
                if suspects:
                    if not pending:
                        position = suspects.popleft()
                        pending[pool.submit(fn, items[position])] = position
                else:
                    while upcoming and len(pending) < window:
                        position = upcoming.popleft()
                        pending[pool.submit(fn, items[position])] = position
                alone = len(pending) == 1
                finished, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
                broken = False
                for future in finished:
                    position = pending.pop(future)
                    try:
                        result = future.result()
                    except BrokenProcessPool as exc:
                        broken = True
                        if alone:
                            deaths[position] += 1
                            if deaths[position] > retries():
                                raise EngineError(
                                    f"{labels[position]}: the worker process running it died {deaths[position]} times ({exc})"
                                ) from exc
                        suspects.append(position)
                        continue
                    yield position, result
                if broken:  # every task of a broken pool is lost: each runs again, alone, on a new pool
                    for future, position in pending.items():
                        future.cancel()
                        suspects.append(position)
                    pending.clear()
                    pool = self._process_pool(fresh=True)
        finally:
            for future in pending:
                future.cancel()

    def close(self) -> None:
        """Stop the pools (they are made again when needed)."""
        with self._lock:
            for pool in self._threads.values():
                pool.shutdown(wait=False, cancel_futures=True)
            self._threads.clear()
            if self._processes is not None:
                self._processes.shutdown(wait=False, cancel_futures=True)
                self._processes = None
