"""The world-size log: which world size a run ran on from each start step (``runs/<run>/world_sizes.jsonl``).

Readers append a line when they start (rank 0); a line for an earlier start step supersedes the lines after it (a
resume from an earlier step). The log is append-only, so its size changes with every record: the parsed history
is kept and the file is read again only when a stat shows another size (a span written by this process or by
another one).

>>> log = WorldSizeLog("/tmp/bs-doc/runs/r/world_sizes.jsonl", run="r", plan=plan)   # doctest: +SKIP
>>> log.record(0, 4); log.at(120)                                                     # doctest: +SKIP
4
"""

from __future__ import annotations

import bisect
import datetime as _dt
import json
from dataclasses import dataclass

from .. import storage
from ..errors import CatalogCorrupt, InvalidPlan
from .plan import ReadPlan


@dataclass(frozen=True)
class WorldSizeSpan:
    """From ``start_step`` on (until the next span), the run ran on ``world_size`` ranks."""

    start_step: int
    world_size: int


#: The line a writer appends after a line torn by an interrupted write, so the torn line is known for what it is.
TORN = '{"torn": true}'
#: The history of a run that never recorded a world size.
_UNRECORDED = (WorldSizeSpan(0, 1),)
#: A read of the log: the file's (exists, size) when read (None: not read yet), its spans, and their start steps.
_Read = tuple[tuple[bool, int] | None, tuple[WorldSizeSpan, ...], list[int]]


def check_world_size(plan: ReadPlan, world_size: int, *, run: str) -> None:
    """Refuse a world size that does not divide the plan's streams (``InvalidPlan`` naming run ``run`` and the allowed
    world sizes)."""
    streams = plan.streams
    assert streams is not None
    if world_size < 1 or streams % world_size:
        raise InvalidPlan(
            f"world size {world_size} is not allowed for run {run}: it must divide streams={streams} "
            f"(allowed: {', '.join(map(str, plan.allowed_world_sizes()))})"
        )


def parse_history(text: str, *, where: str = "world-size log") -> list[WorldSizeSpan]:
    """Spans of a log's lines, in step order (the last line for a start step wins; an earlier start drops later ones).

    A line torn by an interrupted write is skipped: the file's unterminated last line, or a line the next writer
    marked (:data:`TORN` right after it). Any other line that is not a record is ``CatalogCorrupt`` naming ``where``
    and the line.

    >>> parse_history('{"start_step": 0, "world_size": 2}\\n{"start_step": 5, "world_size": 4}\\n{"start_st')
    [WorldSizeSpan(start_step=0, world_size=2), WorldSizeSpan(start_step=5, world_size=4)]
    """
    lines = text.split("\n")  # the last item is "" when the file ends with its last line's line feed
    spans: dict[int, int] = {}
    for number, line in enumerate(lines[:-1], start=1):
        if not line.strip() or line == TORN or lines[number] == TORN:
            continue
        try:
            entry = json.loads(line)
            start, size = int(entry["start_step"]), int(entry["world_size"])
        except (ValueError, TypeError, KeyError):
            raise CatalogCorrupt(f"{where}: line {number} is not a world-size record: {line[:60]!r}") from None
        for later in [s for s in spans if s > start]:
            del spans[later]  # a restart from an earlier step supersedes later records
        spans[start] = size
    history = [WorldSizeSpan(s, spans[s]) for s in sorted(spans)]
    return history if history and history[0].start_step == 0 else [*_UNRECORDED, *history]


class WorldSizeLog:
    """One run's world-size log at ``path``: read when it changed, appended to by :meth:`record`."""

    def __init__(self, path: str, *, run: str, plan: ReadPlan) -> None:
        self.path = path
        self.run = run
        self.plan = plan
        #: replaced as one tuple, so threads sharing the run always see the three together
        self._read: _Read = (None, _UNRECORDED, [0])

    def history(self) -> list[WorldSizeSpan]:
        """Spans of steps and the world size in force, in step order."""
        return list(self._current()[1])

    def at(self, step: int) -> int:
        """The world size in force at ``step``."""
        return _size_at(self._current(), step)

    def record(self, start_step: int, world_size: int) -> None:
        """Note that from ``start_step`` on the run reads on ``world_size`` ranks (readers call this)."""
        self.check(world_size)
        read = self._current()
        seen, history, _ = read
        recorded = seen is not None and seen[0]
        if recorded and _size_at(read, start_step) == world_size and history[-1].start_step <= start_step:
            return  # already in force, and no later span for this start to supersede
        entry = {"start_step": start_step, "world_size": world_size, "time": _now()}
        if seen is not None and seen[1] and storage.read_range(self.path, seen[1] - 1, 1, cache=False) != b"\n":
            storage.append_line(self.path, "\n" + TORN)  # end the line an interrupted write left, and mark it torn
        storage.append_line(self.path, json.dumps(entry))

    def check(self, world_size: int) -> None:
        """Refuse a world size the run's plan does not allow (see :func:`check_world_size`)."""
        check_world_size(self.plan, world_size, run=self.run)

    def _current(self) -> _Read:
        """The log as the file holds it now: one stat, and a read only when the file's size changed."""
        found = storage.stat(self.path)
        seen = (found.exists, found.size)
        read = self._read
        if read[0] == seen:
            return read
        history = tuple(parse_history(storage.read_bytes(self.path).decode(), where=self.path)) if found.exists else _UNRECORDED
        self._read = read = (seen, history, [span.start_step for span in history])
        return read


def _size_at(read: _Read, step: int) -> int:
    """The world size in force at ``step`` in a read of the log (1 before its first span)."""
    _, history, starts = read
    span = bisect.bisect_right(starts, step) - 1
    return history[span].world_size if span >= 0 else 1


def _now() -> str:
    """UTC time for the log's lines."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
