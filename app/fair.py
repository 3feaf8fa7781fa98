"""Fair sharing of a server process: cheap requests and costly work run in separate, bounded pools of slots, a client
that used more than its share lately waits behind the others, and no client's costly work takes more than its share.

A process works on ``request_threads`` requests at once (pages are CPU-bound
Python: a few at a time finish in turn). When more wait, they are served in
order of arrival, except that a client which used more than ``SHARE_FACTOR`` times the mean
slot time of the other active clients lately (decayed with a half-life of
``HALF_LIFE`` seconds) waits behind everyone else: clients are told apart by
address, and by connection within one address.

Costly work (a decode larger than an eighth of the memory budget: huge images,
frames, fields; a comparison ``?against=`` another version; a search; a
version diff) runs in a pool of its own, ``decode_concurrency`` slots, so it
can never take the slots cheap pages need: a request known to be costly from
its URL waits for a costly slot before it starts; one that finds out while it
runs gives its request slot back while it waits (``costly_section``), so
waiting never holds a slot. A client (a connection) holds at most one costly
slot, and gets one only while its recent use is within its share (at most
``SHARE_FACTOR`` times the mean of the other clients active lately) or the
server has nothing else to do: a client looping on the most expensive page gets
a bounded multiple of what every other client gets, and the others keep their
speed. The factor is wide enough that ordinary clients, whose pages differ in
cost by chance, are never held back (the load benchmark's uniform set).

>>> import asyncio, concurrent.futures
>>> gate = FairGate(slots=1, costly=1)
>>> with concurrent.futures.ThreadPoolExecutor(1) as pool:  # a loop of its own, whatever runs in this thread
...     ticket = pool.submit(asyncio.run, gate.admit(("127.0.0.1", 5000))).result()
>>> gate.running, ticket.pool
(1, 'plain')
>>> gate.release(ticket); gate.running
0
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Iterator

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Seconds over which a client's slot time counts half as much.
HALF_LIFE = 10.0
#: Slot seconds of recent use below which a client's costly work is never held back.
FREE_USE = 0.5
#: A client whose recent use is over this many times the mean of the other active clients waits behind them.
SHARE_FACTOR = 4
#: How often waiters for a costly slot look again (use decays with time, not only when slots are given back).
RECHECK = 0.2
#: Seconds without any other request after which the server counts as idle (costly work then waits for nobody).
IDLE = 1.0
#: The request's ticket, for code that runs it (in a worker thread too: contextvars are copied there).
CURRENT: contextvars.ContextVar["Ticket | None"] = contextvars.ContextVar("batchscope_ticket", default=None)


@dataclass(eq=False)
class Ticket:
    """One request's place at the gate: its client, the pool whose slot it holds (``plain``, ``costly`` or None), since
    when, and whether the request has ended (work still running for it then takes no more slots)."""

    address: str
    connection: str
    pool: str | None = None
    since: float = 0.0
    closed: bool = False
    gate: "FairGate | None" = field(default=None, repr=False)


@dataclass(eq=False)
class _Waiter:
    ticket: Ticket
    pool: str
    order: int
    loop: asyncio.AbstractEventLoop | None = None
    future: asyncio.Future[None] | None = None
    event: threading.Event | None = None
    granted: bool = False


class _Usage:
    """Slot seconds per key, decaying by half every ``HALF_LIFE`` seconds."""

    def __init__(self) -> None:
        self._values: dict[str, tuple[float, float]] = {}

    def get(self, key: str, now: float) -> float:
        value, at = self._values.get(key, (0.0, now))
        return value * math.exp2(-(now - at) / HALF_LIFE)

    def add(self, key: str, seconds: float, now: float) -> None:
        self._values[key] = (self.get(key, now) + seconds, now)
        if len(self._values) > 4096:  # forget clients whose use has faded
            self._values = {k: v for k, v in self._values.items() if self.get(k, now) > 1e-3}

    def totals(self, now: float) -> tuple[float, int]:
        """Sum and number of the keys still active (above a hundredth of a second)."""
        active = [v for v in (self.get(k, now) for k in self._values) if v > 0.01]
        return sum(active), len(active)

    def over(self, key: str, totals: tuple[float, int], now: float) -> bool:
        """Whether ``key`` used more than ``FREE_USE`` and more than ``SHARE_FACTOR`` times the mean of the other active keys."""
        use = self.get(key, now)
        if use <= FREE_USE:
            return False
        total, count = totals
        others = count - (1 if use > 0.01 else 0)
        return others > 0 and use > SHARE_FACTOR * (total - use) / others


class FairGate:
    """The slots of one server process: ``slots`` for requests, ``costly`` more for costly work."""

    def __init__(self, *, slots: int, costly: int) -> None:
        if slots < 1 or costly < 1:
            raise ValueError(f"a gate needs at least one slot and one costly slot, got {slots} and {costly}")
        self.slots = slots
        self.costly = costly
        self.running = 0
        self.costly_running = 0
        self._costly_by_connection: dict[str, int] = {}
        self._waiting: list[_Waiter] = []
        self._lock = threading.Lock()
        self._order = itertools.count()
        self._by_address = _Usage()
        self._by_connection = _Usage()
        self._address_totals = self._connection_totals = (0.0, 0)
        self._last_release: dict[str, float] = {}

    # -- granting ---------------------------------------------------------------------------------------
    def _within_share(self, ticket: Ticket, now: float) -> bool:
        if not any(self._over_share(ticket, now)):
            return True
        others = [at for connection, at in self._last_release.items() if connection != ticket.connection]
        return not others or now - max(others) > IDLE  # nobody else is asking: the server would only sit idle

    def _over_share(self, ticket: Ticket, now: float) -> tuple[bool, bool]:
        """Whether the client's address, and its connection, used more than ``SHARE_FACTOR`` times what the other active ones did
        lately: such clients wait behind everyone else; among the others, first come, first served (so ordinary
        requests keep an even latency, and only a client taking more than its share is held back)."""
        return (
            self._by_address.over(ticket.address, self._address_totals, now),
            self._by_connection.over(ticket.connection, self._connection_totals, now),
        )

    def _eligible(self, waiter: _Waiter, now: float) -> bool:
        if waiter.pool == "plain":
            return self.running < self.slots
        ticket = waiter.ticket
        return (
            self.costly_running < self.costly and not self._costly_by_connection.get(ticket.connection) and self._within_share(ticket, now)
        )

    def _take(self, ticket: Ticket, pool: str, now: float) -> None:
        ticket.pool, ticket.since = pool, now
        if pool == "plain":
            self.running += 1
            return
        self.costly_running += 1
        self._costly_by_connection[ticket.connection] = self._costly_by_connection.get(ticket.connection, 0) + 1

    def _grant(self, now: float) -> None:
        """Give free slots to eligible waiters: first those whose clients are within their share, in order of arrival
        (call holding the lock)."""
        if self._waiting:
            self._address_totals, self._connection_totals = self._by_address.totals(now), self._by_connection.totals(now)
        while self._waiting:
            eligible = [w for w in self._waiting if self._eligible(w, now)]
            if not eligible:
                return
            best = min(eligible, key=lambda w: (*self._over_share(w.ticket, now), w.order))
            self._waiting.remove(best)
            self._take(best.ticket, best.pool, now)
            best.granted = True
            if best.event is not None:
                best.event.set()
            elif best.loop is not None and best.future is not None:
                best.loop.call_soon_threadsafe(_resolve, best.future)

    def _enqueue(self, waiter: _Waiter) -> bool:
        """Take a slot now if one is free and nobody waits ahead for that pool; else queue ``waiter`` (holding the lock)."""
        now = time.monotonic()
        if waiter.pool == "costly":  # its share is judged against what the others used up to now
            self._address_totals, self._connection_totals = self._by_address.totals(now), self._by_connection.totals(now)
        if not any(w.pool == waiter.pool for w in self._waiting) and self._eligible(waiter, now):
            self._take(waiter.ticket, waiter.pool, now)
            return True
        self._waiting.append(waiter)
        self._grant(now)
        return waiter.granted

    def _release(self, ticket: Ticket) -> None:
        if ticket.pool is None:
            return
        now = time.monotonic()
        used = now - ticket.since
        self._by_address.add(ticket.address, used, now)
        self._by_connection.add(ticket.connection, used, now)
        self._last_release[ticket.connection] = now
        if len(self._last_release) > 4096:
            self._last_release = {k: at for k, at in self._last_release.items() if now - at < 60}
        if ticket.pool == "plain":
            self.running -= 1
        else:
            self.costly_running -= 1
            self._costly_by_connection[ticket.connection] -= 1
            if not self._costly_by_connection[ticket.connection]:
                del self._costly_by_connection[ticket.connection]
        ticket.pool = None
        self._grant(now)

    # -- entering and leaving ---------------------------------------------------------------------------------
    def ticket(self, client: tuple[str, int] | None) -> Ticket:
        """A ticket for a request from ``client`` (``(host, port)``, as ASGI gives it)."""
        host, port = client if client else ("unknown", 0)
        return Ticket(address=str(host), connection=f"{host}:{port}", gate=self)

    async def admit(self, client: tuple[str, int] | None, *, costly: bool = False) -> Ticket:
        """Wait (without a thread) for a slot of the pool a request from ``client`` needs; its ticket."""
        ticket = self.ticket(client)
        loop = asyncio.get_running_loop()
        waiter = _Waiter(ticket, "costly" if costly else "plain", next(self._order), loop=loop, future=loop.create_future())
        with self._lock:
            if self._enqueue(waiter):
                return ticket
        assert waiter.future is not None
        try:
            while not waiter.future.done():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(waiter.future), RECHECK)
                with self._lock:
                    self._grant(time.monotonic())
        except BaseException:
            with self._lock:
                if waiter.granted:
                    self._release(ticket)
                elif waiter in self._waiting:
                    self._waiting.remove(waiter)
            raise
        return ticket

    def acquire(self, ticket: Ticket, *, pool: str) -> None:
        """Wait, in a worker thread, for a slot of ``pool`` for ``ticket`` (none for a closed one)."""
        waiter = _Waiter(ticket, pool, next(self._order), event=threading.Event())
        with self._lock:
            if ticket.closed or self._enqueue(waiter):
                return
        assert waiter.event is not None
        while not waiter.event.wait(RECHECK):
            with self._lock:
                self._grant(time.monotonic())

    def release(self, ticket: Ticket, *, close: bool = False) -> None:
        """Give ``ticket``'s slot back (its time is charged to its client), letting the next waiter in; ``close``: the
        request has ended."""
        with self._lock:
            ticket.closed = ticket.closed or close
            self._release(ticket)

    @contextlib.contextmanager
    def costly_section(self, ticket: Ticket) -> Iterator[None]:
        """Run the block in a costly slot: ``ticket``'s request slot is given back while it waits for one and while
        the block runs, and taken back at once after it, even if that is one more than ``slots`` for a moment (waiting
        then could deadlock against requests waiting, in their slots, for what this one makes)."""
        if ticket.pool == "costly" or ticket.closed:
            yield
            return
        self.release(ticket)
        self.acquire(ticket, pool="costly")
        try:
            yield
        finally:
            with self._lock:
                self._release(ticket)
                if not ticket.closed:
                    self._take(ticket, "plain", time.monotonic())


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@contextlib.contextmanager
def costly_work() -> Iterator[None]:
    """Hold a costly slot for the block when the current request came through a gate (else run it as is)."""
    ticket = CURRENT.get()
    if ticket is None or ticket.gate is None:
        yield
        return
    with ticket.gate.costly_section(ticket):
        yield


#: Query parameters that make a page costly before it runs: a comparison with another version or run, a search.
COSTLY_PARAMETERS = (b"against=", b"q=")
#: Paths that are costly: version diffs (computing one reads both versions' changed shards).
COSTLY_PATHS = ("/datasets/", "/api/datasets/")


def costly_request(scope: Scope) -> bool:
    """Whether a request is costly from its URL alone (``?against=``, a search, a version diff)."""
    query: bytes = scope.get("query_string", b"")
    if any(query.startswith(p) or b"&" + p in query for p in COSTLY_PARAMETERS):
        return True
    path: str = scope.get("path", "")
    return path.startswith(COSTLY_PATHS) and "/diff/" in path


class FairMiddleware:
    """Admits each HTTP request (static files aside) through the process's ``FairGate``; its slot is given back when
    the answer starts (or the request ends)."""

    def __init__(self, app: ASGIApp, *, gate: FairGate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/static/"):
            await self.app(scope, receive, send)
            return
        ticket = await self.gate.admit(scope.get("client"), costly=costly_request(scope))
        token = CURRENT.set(ticket)

        async def send_and_release(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.gate.release(ticket, close=True)
            await send(message)

        try:
            await self.app(scope, receive, send_and_release)
        finally:
            self.gate.release(ticket, close=True)
            CURRENT.reset(token)
