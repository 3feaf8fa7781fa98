"""The ledger: an append-only record of what each rank consumed at each step, and the metrics it logged."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from . import storage
from .batch import Batch
from .digests import DIGEST_FORMAT


@dataclass
class LedgerEntry:
    """What one rank recorded for one step."""

    step: int
    rank: int
    world_size: int
    digest: str
    indices: list[int]
    keys: list[str]
    samples: list[str]
    time: float = 0.0
    digest_format: int = 1  # lines written before the format was recorded used format 1


@dataclass
class StepMetrics:
    """Metrics one rank logged for one step (loss, per-sample loss, RL statistics...)."""

    step: int
    rank: int
    world_size: int
    values: dict[str, Any] = field(default_factory=dict)


class LedgerWriter:
    """Appends one rank's entries; flushes at least every ``flush_seconds`` and on close.

    A crash loses at most the unflushed tail; every line is a whole JSON
    object, and a torn last line is ignored when reading.
    """

    def __init__(self, directory: str, rank: int, world_size: int, *, flush_seconds: float = 2.0) -> None:
        self.path = storage.join(directory, f"w{world_size}-r{rank}.jsonl")
        self.rank = rank
        self.world_size = world_size
        self.flush_seconds = flush_seconds
        self._lines: list[str] = []
        self._last_flush = time.monotonic()
        self._lock = threading.Lock()

    def record(self, batch: Batch) -> None:
        """Append the batch a rank just handed to the trainer."""
        self.record_summary(batch_summary(batch))

    def record_summary(self, summary: dict[str, Any]) -> None:
        """Append a :func:`batch_summary` (used when batches are built in DataLoader workers)."""
        self._append({"t": "batch", **summary, "time": round(time.time(), 3)})

    def log(self, step: int, **metrics: Any) -> None:
        """Append metrics for ``step`` (numbers, or lists of numbers such as per-sample loss)."""
        self._append({"t": "metrics", "step": step, "rank": self.rank, "world_size": self.world_size, "metrics": metrics})

    def _append(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, separators=(",", ":"), default=_jsonable)
        with self._lock:
            self._lines.append(line)
            due = time.monotonic() - self._last_flush >= self.flush_seconds
        if due:
            self.flush()

    def flush(self) -> None:
        """Write buffered lines to the ledger file."""
        with self._lock:
            lines, self._lines = self._lines, []
            self._last_flush = time.monotonic()
        if not lines:
            return
        path = storage.normalize(self.path)
        if storage.is_remote(path):
            for line in lines:
                storage.append_line(path, line)
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
            out.flush()

    def close(self) -> None:
        self.flush()


def batch_summary(batch: Batch) -> dict[str, Any]:
    """What the ledger keeps of a batch: step, rank, world size, digests, indices and keys."""
    return {
        "step": batch.step,
        "rank": batch.rank,
        "world_size": batch.world_size,
        "digest": batch.digest,
        "indices": batch.indices,
        "keys": batch.keys,
        "samples": batch.sample_digests,
        "digest_format": DIGEST_FORMAT,
    }


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot log {type(value).__name__} to the ledger")


class Ledger:
    """Reads every rank's ledger file of a run (re-read when the files grow)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._signature: tuple[tuple[str, int], ...] = ()
        self._entries: dict[tuple[int, int, int], LedgerEntry] = {}
        self._metrics: dict[tuple[int, int, int], StepMetrics] = {}
        self._lock = threading.Lock()

    def writer(self, rank: int, world_size: int, *, flush_seconds: float = 2.0) -> LedgerWriter:
        return LedgerWriter(self.directory, rank, world_size, flush_seconds=flush_seconds)

    def _files(self) -> list[str]:
        return [n for n in storage.list_names(self.directory) if n.endswith(".jsonl")]

    def _refresh(self) -> None:
        files = self._files()
        signature = tuple((n, storage.stat(storage.join(self.directory, n)).size) for n in files)
        with self._lock:
            if signature == self._signature:
                return
            entries: dict[tuple[int, int, int], LedgerEntry] = {}
            metrics: dict[tuple[int, int, int], StepMetrics] = {}
            for name in files:
                for line in storage.read_bytes(storage.join(self.directory, name)).decode("utf-8", "replace").splitlines():
                    try:
                        data = json.loads(line)
                    except ValueError:
                        continue  # a torn last line from a crash
                    key = (int(data["step"]), int(data["rank"]), int(data["world_size"]))
                    if data.get("t") == "batch":
                        entries[key] = LedgerEntry(
                            key[0], key[1], key[2], data["digest"], data["indices"], data["keys"], data.get("samples", []),
                            data.get("time", 0.0), int(data.get("digest_format", 1)),
                        )
                    elif data.get("t") == "metrics":
                        current = metrics.setdefault(key, StepMetrics(*key))
                        current.values.update(data.get("metrics", {}))
            self._entries, self._metrics, self._signature = entries, metrics, signature

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
