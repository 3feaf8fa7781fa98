"""The gate of a server process (``app.fair``): slots go to the clients that used the least lately, costly work takes
at most its pool (never every slot, one per client connection), and waiting for it holds no slot."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from app.fair import FairGate, costly_request


def _run(coroutine):  # noqa: ANN001, ANN202
    return asyncio.run(coroutine)


def test_a_client_over_its_share_waits_behind_the_others() -> None:
    async def scenario() -> list[str]:
        gate = FairGate(slots=1, costly=1)
        light = await gate.admit(("10.0.0.2", 7))
        await asyncio.sleep(0.05)
        gate.release(light)  # light has used a little
        heavy = await gate.admit(("10.0.0.1", 1))
        await asyncio.sleep(0.6)  # heavy has used its slot a while: over twice what the others did
        gate.release(heavy)
        first = await gate.admit(("10.0.0.1", 1))  # heavy again, holding the only slot
        order: list[str] = []

        async def wait(name: str, client: tuple[str, int]) -> None:
            ticket = await gate.admit(client)
            order.append(name)
            await asyncio.sleep(0.01)
            gate.release(ticket)

        waiting = [asyncio.create_task(wait("heavy", ("10.0.0.1", 1))), asyncio.create_task(wait("light", ("10.0.0.2", 7)))]
        await asyncio.sleep(0.01)
        gate.release(first)
        await asyncio.gather(*waiting)
        return order

    assert _run(scenario()) == ["light", "heavy"]  # the heavy client asked first, and still goes last


def test_clients_within_their_share_are_served_in_order_of_arrival() -> None:
    async def scenario() -> list[str]:
        gate = FairGate(slots=1, costly=1)
        for port in (1, 2):  # both used a little, about the same
            ticket = await gate.admit(("10.0.0.1", port))
            await asyncio.sleep(0.02 * port)
            gate.release(ticket)
        holder = await gate.admit(("10.0.0.9", 9))
        order: list[str] = []

        async def wait(port: int) -> None:
            got = await gate.admit(("10.0.0.1", port))
            order.append(str(port))
            gate.release(got)

        first = asyncio.create_task(wait(2))
        await asyncio.sleep(0.01)
        second = asyncio.create_task(wait(1))
        await asyncio.sleep(0.01)
        gate.release(holder)
        await asyncio.gather(first, second)
        return order

    assert _run(scenario()) == ["2", "1"]  # the one that used a little more, but asked first, goes first


def test_within_one_address_connections_are_told_apart() -> None:
    async def scenario() -> list[str]:
        gate = FairGate(slots=1, costly=1)
        other = await gate.admit(("127.0.0.1", 2))
        await asyncio.sleep(0.05)
        gate.release(other)
        ticket = await gate.admit(("127.0.0.1", 1))
        await asyncio.sleep(0.6)
        gate.release(ticket)
        holder = await gate.admit(("127.0.0.1", 1))
        order: list[str] = []

        async def wait(name: str, port: int) -> None:
            got = await gate.admit(("127.0.0.1", port))
            order.append(name)
            gate.release(got)

        tasks = [asyncio.create_task(wait("same connection", 1)), asyncio.create_task(wait("other connection", 2))]
        await asyncio.sleep(0.01)
        gate.release(holder)
        await asyncio.gather(*tasks)
        return order

    assert _run(scenario()) == ["other connection", "same connection"]


def test_costly_work_has_its_own_pool_one_slot_per_connection() -> None:
    async def scenario() -> None:
        gate = FairGate(slots=1, costly=2)
        a = await gate.admit(("10.0.0.1", 1), costly=True)
        same_connection = asyncio.create_task(gate.admit(("10.0.0.1", 1), costly=True))
        b = await asyncio.wait_for(gate.admit(("10.0.0.1", 2), costly=True), 1)  # another connection: a client of its own
        third_costly = asyncio.create_task(gate.admit(("10.0.0.3", 1), costly=True))
        await asyncio.sleep(0.05)
        assert not same_connection.done() and not third_costly.done()  # one per connection, and the pool is full
        plain = await asyncio.wait_for(gate.admit(("10.0.0.4", 1)), 1)  # a cheap page still gets its slot
        assert (gate.running, gate.costly_running) == (1, 2)
        gate.release(b)
        await asyncio.wait_for(third_costly, 1)
        assert not same_connection.done()  # a slot came free, but that connection still holds one
        for ticket in (plain, a):
            gate.release(ticket)
        await asyncio.wait_for(same_connection, 1)
        assert gate.costly_running == 2

    _run(scenario())


def test_a_client_over_its_share_of_costly_work_waits_while_others_are_served() -> None:
    gate = FairGate(slots=2, costly=1)
    heavy, light = gate.ticket(("10.0.0.1", 1)), gate.ticket(("10.0.0.2", 1))
    gate.acquire(heavy, pool="costly")
    time.sleep(0.8)  # heavy uses the costly slot for a while (over FREE_USE)
    gate.release(heavy)
    gate.acquire(light, pool="plain")
    time.sleep(0.05)
    gate.release(light)  # someone else is active, with little use
    waited = threading.Event()

    def again() -> None:
        gate.acquire(heavy, pool="costly")
        waited.set()

    thread = threading.Thread(target=again)
    thread.start()
    assert not waited.wait(0.5) and gate.costly_running == 0  # the slot is free, but heavy is over its share
    thread.join(5)  # once nobody else asks for a while (IDLE), it is served
    assert waited.is_set() and heavy.pool == "costly"


def test_waiting_for_a_costly_slot_in_a_thread_holds_no_request_slot() -> None:
    gate = FairGate(slots=1, costly=1)
    holder = gate.ticket(("10.0.0.1", 1))
    gate.acquire(holder, pool="costly")
    worker = gate.ticket(("10.0.0.2", 1))
    gate.acquire(worker, pool="plain")
    entered = threading.Event()

    def decode() -> None:
        with gate.costly_section(worker):
            entered.set()

    thread = threading.Thread(target=decode)
    thread.start()
    time.sleep(0.05)
    assert not entered.is_set() and gate.running == 0  # waiting, its request slot given back
    other = gate.ticket(("10.0.0.3", 1))
    gate.acquire(other, pool="plain")  # so another request gets in meanwhile
    gate.release(other)
    gate.release(holder)
    thread.join(2)
    assert entered.is_set() and worker.pool == "plain" and gate.running == 1 and gate.costly_running == 0


def test_a_client_that_goes_away_while_waiting_leaves_no_slot_taken() -> None:
    async def scenario() -> None:
        gate = FairGate(slots=1, costly=1)
        holder = await gate.admit(("10.0.0.1", 1))
        waiting = asyncio.create_task(gate.admit(("10.0.0.2", 1)))
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        gate.release(holder)
        assert gate.running == 0
        again = await asyncio.wait_for(gate.admit(("10.0.0.3", 1)), 1)
        assert again.pool == "plain"

    _run(scenario())


@pytest.mark.parametrize(
    ("path", "query", "costly"),
    [
        ("/runs/r/steps/1/ranks/0", b"against=web%40v2", True),
        ("/datasets/d/versions/v", b"q=hello&column=text", True),
        ("/api/datasets/d/diff/a..b", b"", True),
        ("/media/datasets/d/diff/a..b/heatmap", b"key=k&field=f", False),  # one pixel difference: decodes, if large
        ("/runs/r/steps/1/ranks/0", b"sort=loss", False),
        ("/datasets/d/versions/v", b"sq=x", False),
    ],
)
def test_costly_urls_are_known_before_they_run(path: str, query: bytes, costly: bool) -> None:
    assert costly_request({"path": path, "query_string": query}) is costly
