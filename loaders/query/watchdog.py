"""One thread that interrupts queries past their deadline (a timer thread per query would cost a thread start each).

>>> import time
>>> stopped = []
>>> token = WATCHDOG.watch(lambda: stopped.append("interrupted"), 0.01)
>>> time.sleep(0.2); stopped
['interrupted']
>>> WATCHDOG.done(WATCHDOG.watch(lambda: stopped.append("late"), 60)); stopped
['interrupted']
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import Callable


class Watchdog:
    """Calls each watched ``interrupt`` once its deadline passes, unless ``done`` was called for it first."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._deadlines: list[tuple[float, int]] = []
        self._pending: dict[int, Callable[[], None]] = {}
        self._numbers = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, interrupt: Callable[[], None], seconds: float) -> int:
        """Call ``interrupt()`` in ``seconds`` unless :meth:`done` is called with the returned token before."""
        with self._condition:
            token = next(self._numbers)
            self._pending[token] = interrupt
            heapq.heappush(self._deadlines, (time.monotonic() + seconds, token))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="batchscope-query-watchdog", daemon=True)
                self._thread.start()
            self._condition.notify()
        return token

    def done(self, token: int) -> None:
        """The watched work finished: never interrupt it."""
        with self._condition:
            self._pending.pop(token, None)

    def _loop(self) -> None:
        while True:
            with self._condition:
                while self._deadlines and self._deadlines[0][1] not in self._pending:
                    heapq.heappop(self._deadlines)
                wait = self._deadlines[0][0] - time.monotonic() if self._deadlines else None
                if wait is None or wait > 0:
                    self._condition.wait(wait)
                    continue
                _, token = heapq.heappop(self._deadlines)
                interrupt = self._pending.pop(token, None)
            if interrupt is not None:
                try:
                    interrupt()
                except Exception:  # noqa: BLE001 - a connection closed meanwhile has nothing left to interrupt
                    pass


#: The process's watchdog.
WATCHDOG = Watchdog()
