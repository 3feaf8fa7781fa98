"""The ledger: an append-only record of what each rank consumed at each step, whether it trained it, and the metrics it
logged. This module reads it; :mod:`loaders.training.ledger_writer` writes it."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from .. import storage
from .ledger_writer import LedgerWriter, batch_summary, ledger_file_name

__all__ = ["Ledger", "LedgerEntry", "LedgerGap", "LedgerProblem", "LedgerWriter", "StepMetrics", "batch_summary", "ledger_file_name"]

_FILE_NAME = re.compile(r"^w(\d+)-r(\d+)\.jsonl$")


@dataclass
class LedgerEntry:
    """What one rank recorded for one step (the last batch record for it, and whether it was trained since)."""

    step: int
    rank: int
    world_size: int
    digest: str
    indices: list[int]
    keys: list[str]
    samples: list[str]
    time: float = 0.0
    digest_format: int = 1  # lines written before the format was recorded used format 1
    trained: bool = True  # False: handed out ("fetched") and never marked trained after that
    #: What ``batchscope.record`` kept beside the keys (where each sample lives); None in a reader's ledger.
    recorded: dict[str, Any] | None = None


@dataclass(frozen=True)
class LedgerGap:
    """Steps ``first..last`` (inclusive) of one rank that a recorder could not write, and why (a full disk...)."""

    first: int
    last: int
    rank: int
    world_size: int
    reason: str


@dataclass
class StepMetrics:
    """Metrics one rank logged for one step (loss, per-sample loss, RL statistics...)."""

    step: int
    rank: int
    world_size: int
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LedgerProblem:
    """A ledger line that cannot be read as a record: ``file:line`` and why."""

    file: str
    line: int
    reason: str
    fatal: bool = True  # False only for a line torn by an interrupted write (its records were lost, nothing else)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


class _BadLine(ValueError):
    """Why a ledger line is not a record."""


def _integer(data: dict[str, Any], name: str) -> int:
    value = data.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _BadLine(f"{name!r} is {value!r}, not a non-negative integer")
    return value


def _strings(data: dict[str, Any], name: str) -> list[str]:
    value = data.get(name)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _BadLine(f"{name!r} is not a list of strings")
    return value


def _parse(text: str, rank: int, world_size: int) -> dict[str, Any]:
    """One line of ``w{world_size}-r{rank}.jsonl`` as a checked record (raises :class:`_BadLine`)."""
    try:
        data = json.loads(text)
    except ValueError:
        raise _BadLine(f"not JSON (a torn write or an edit): {text[:60]!r}") from None
    if not isinstance(data, dict):
        raise _BadLine("not a JSON object")
    kind = data.get("t")
    if kind not in ("batch", "trained", "metrics", "torn", "gap"):
        raise _BadLine(f"unknown record type {kind!r}")
    _integer(data, "step")
    if (data.get("rank"), data.get("world_size")) != (rank, world_size):
        raise _BadLine(f"rank {data.get('rank')!r} of world size {data.get('world_size')!r} in the ledger of rank {rank} of {world_size}")
    if kind == "batch":
        if not isinstance(data.get("digest"), str):
            raise _BadLine("'digest' is not a string")
        indices = data.get("indices")
        if not isinstance(indices, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
            raise _BadLine("'indices' is not a list of integers")
        samples = _strings(data, "samples") if "samples" in data else []  # the first ledgers kept no sample digests
        if len(_strings(data, "keys")) != len(indices) or len(samples) not in (0, len(indices)):
            raise _BadLine("'indices', 'keys' and 'samples' have different lengths")
    elif kind == "metrics" and not isinstance(data.get("metrics", {}), dict):
        raise _BadLine("'metrics' is not an object")
    elif kind == "gap":
        _integer(data, "last")
    return data


@dataclass
class _FileState:
    """How far one ledger file has been read: whole lines applied, and what waits for more bytes — an unterminated
    last line (a write in progress, or torn by a crash), and an unreadable line held back until the next line says
    whether the writer after a crash marked it torn."""

    rank: int
    world_size: int
    lines: int = 0
    read: int = 0  # bytes read, the tail included
    tail: bytes = b""
    seen: bytes = b""  # the last bytes read, compared when reading on: a file edited before them is read again whole
    held: tuple[int, str, str] | None = None  # (line number, text, why it is not a record)
    problems: list[LedgerProblem] = field(default_factory=list)  # found in the lines applied

    def pending(self, name: str) -> list[LedgerProblem]:
        """What is still held back: an unreadable last line (fatal) and an unterminated tail (torn, not a failure)."""
        found = []
        if self.held is not None:
            found.append(LedgerProblem(name, self.held[0], self.held[2]))
        if self.tail.strip():
            text = self.tail.decode("utf-8", "replace")
            found.append(LedgerProblem(name, self.lines + 1, f"torn by an interrupted write: {text[:60]!r}", fatal=False))
        return found


@dataclass
class _Contents:
    entries: dict[tuple[int, int, int], LedgerEntry] = field(default_factory=dict)
    metrics: dict[tuple[int, int, int], StepMetrics] = field(default_factory=dict)
    gaps: list[LedgerGap] = field(default_factory=list)

    def feed(self, name: str, state: _FileState, data: bytes) -> None:
        """Apply the next bytes of one rank's file, line by line in the order written (a later batch record replaces an
        earlier one). Only whole lines are applied; an unterminated last line waits in ``state.tail``.

        A line torn by an interrupted write is no failure when it is the file's unterminated last line, or when the
        writer that appended next marked it (a ``torn`` record right after it); any other unreadable line is.
        """
        state.read += len(data)
        state.seen = (state.seen + data)[-64:]
        data = state.tail + data
        end = data.rfind(b"\n")
        state.tail = data[end + 1 :]
        if end < 0:
            return
        for line in data[:end].decode("utf-8", "replace").split("\n"):
            state.lines += 1
            if state.held is not None:
                number, held, reason = state.held
                state.held = None
                marked = _is_torn_marker(line)
                why = f"torn by an interrupted write: {held[:60]!r}" if marked else reason
                state.problems.append(LedgerProblem(name, number, why, fatal=not marked))
            if not line.strip():
                continue
            try:
                record = _parse(line, state.rank, state.world_size)
            except _BadLine as bad:
                state.held = (state.lines, line, str(bad))  # judged when the next line shows whether it was marked torn
                continue
            self._apply(name, state, record, (int(record["step"]), state.rank, state.world_size))

    def _apply(self, name: str, state: _FileState, data: dict[str, Any], key: tuple[int, int, int]) -> None:
        if data["t"] == "batch":
            self.entries[key] = LedgerEntry(
                key[0],
                key[1],
                key[2],
                data["digest"],
                data["indices"],
                data["keys"],
                data.get("samples", []),
                float(data.get("time", 0.0)),
                int(data.get("digest_format", 1)),
                trained=not data.get("fetched", False),
                recorded=data.get("recorded") if isinstance(data.get("recorded"), dict) else None,
            )
        elif data["t"] == "trained":
            entry = self.entries.get(key)
            if entry is None:
                state.problems.append(LedgerProblem(name, state.lines, f"step {key[0]} marked trained but never handed out"))
            else:
                entry.trained = True
        elif data["t"] == "metrics":
            self.metrics.setdefault(key, StepMetrics(*key)).values.update(data.get("metrics", {}))
        elif data["t"] == "gap":
            self.gaps.append(LedgerGap(key[0], int(data["last"]), key[1], key[2], str(data.get("reason", ""))))


def _is_torn_marker(line: str) -> bool:
    try:
        return json.loads(line).get("t") == "torn"
    except (ValueError, AttributeError):
        return False


class Ledger:
    """Reads every rank's ledger file of a run (re-read when the files grow)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._signature: tuple[tuple[str, int], ...] = ()
        self._contents = _Contents()
        self._states: dict[str, _FileState] = {}  # how far each file has been read
        self._problems: list[LedgerProblem] = []
        self._lock = threading.Lock()

    def writer(self, rank: int, world_size: int, *, flush_seconds: float = 2.0) -> LedgerWriter:
        """A writer appending to rank ``rank`` of ``world_size``'s file (see :class:`LedgerWriter`)."""
        return LedgerWriter(self.directory, rank, world_size, flush_seconds=flush_seconds)

    def _files(self) -> list[str]:
        return [n for n in storage.list_names(self.directory) if n.endswith(".jsonl")]

    def _refresh(self) -> None:
        """Read what was appended since the last look: ledger files only grow, so a live run costs what it added. A file
        that shrank, vanished, or whose bytes before the end of the last look changed (an edit) is read again whole."""
        files = self._files()
        signature = tuple((n, storage.stat(storage.join(self.directory, n)).size) for n in files)
        with self._lock:
            if signature == self._signature:
                return
            sizes = dict(signature)
            if any(sizes.get(name, -1) < state.read for name, state in self._states.items()):
                self._contents, self._states = _Contents(), {}
            fresh = {}
            for name in files:
                match = _FILE_NAME.match(name)
                state = self._states.get(name)
                if match is None or (state is not None and sizes[name] == state.read):
                    continue
                start = state.read - len(state.seen) if state is not None else 0
                fresh[name] = storage.read_range(storage.join(self.directory, name), start, sizes[name] - start, cache=False)
                if state is not None and not fresh[name].startswith(state.seen):  # rewritten, not appended to
                    self._contents, self._states = _Contents(), {}
                    return self._refresh_all(files, sizes, signature)
            problems = []
            for name in files:
                match = _FILE_NAME.match(name)
                if match is None:
                    problems.append(LedgerProblem(name, 0, "not a ledger file name (expected w<W>-r<R>.jsonl)"))
                    continue
                state = self._states.setdefault(name, _FileState(rank=int(match.group(2)), world_size=int(match.group(1))))
                if name in fresh:
                    self._contents.feed(name, state, fresh[name][len(state.seen) :])
                problems += state.problems + state.pending(name)
            self._problems, self._signature = problems, signature

    def _refresh_all(self, files: list[str], sizes: dict[str, int], signature: tuple[tuple[str, int], ...]) -> None:
        """Read every file whole (holding the lock)."""
        problems = []
        for name in files:
            match = _FILE_NAME.match(name)
            if match is None:
                problems.append(LedgerProblem(name, 0, "not a ledger file name (expected w<W>-r<R>.jsonl)"))
                continue
            state = self._states.setdefault(name, _FileState(rank=int(match.group(2)), world_size=int(match.group(1))))
            self._contents.feed(name, state, storage.read_range(storage.join(self.directory, name), 0, sizes[name], cache=False))
            problems += state.problems + state.pending(name)
        self._problems, self._signature = problems, signature

    @property
    def _entries(self) -> dict[tuple[int, int, int], LedgerEntry]:
        return self._contents.entries

    @property
    def _metrics(self) -> dict[tuple[int, int, int], StepMetrics]:
        return self._contents.metrics

    def problems(self) -> list[LedgerProblem]:
        """Lines that are not records (``file:line`` and why): torn writes, garbage, edits that break a record."""
        self._refresh()
        return list(self._problems)

    def gaps(self) -> list[LedgerGap]:
        """Steps a recorder could not write (a full disk...), as it recorded them once it could write again."""
        self._refresh()
        return list(self._contents.gaps)

    def has_file(self, rank: int, world_size: int) -> bool:
        """Whether rank ``rank`` of ``world_size`` wrote a ledger file at all."""
        return ledger_file_name(rank, world_size) in self._files()

    def signature(self) -> tuple[tuple[str, int], ...]:
        """Names and sizes of the ledger files: changes whenever anything is appended (for caches)."""
        self._refresh()
        return self._signature

    def entry(self, step: int, rank: int, world_size: int) -> LedgerEntry | None:
        """The last entry a rank recorded for ``step`` under ``world_size``."""
        self._refresh()
        return self._entries.get((step, rank, world_size))

    def entries(self) -> list[LedgerEntry]:
        self._refresh()
        return sorted(self._entries.values(), key=lambda e: (e.step, e.world_size, e.rank))

    def metrics(self, step: int, rank: int, world_size: int) -> dict[str, Any]:
        self._refresh()
        found = self._metrics.get((step, rank, world_size))
        return dict(found.values) if found else {}

    def metric_names(self) -> list[str]:
        """Names of scalar metrics logged anywhere in the run."""
        self._refresh()
        names = {k for m in self._metrics.values() for k, v in m.values.items() if isinstance(v, (int, float))}
        return sorted(names)

    def series(self, name: str, world_size_at: Any = None) -> list[tuple[int, float]]:
        """``(step, mean over ranks)`` of a scalar metric; with ``world_size_at`` only the world size in force counts."""
        self._refresh()
        sums: dict[int, list[float]] = {}
        for (step, _rank, world_size), m in self._metrics.items():
            value = m.values.get(name)
            if not isinstance(value, (int, float)):
                continue
            if world_size_at is not None and world_size_at(step) != world_size:
                continue
            sums.setdefault(step, []).append(float(value))
        return [(step, sum(v) / len(v)) for step, v in sorted(sums.items())]

    def steps(self) -> list[int]:
        self._refresh()
        return sorted({k[0] for k in self._entries})
