"""The recorder's writer: turns what the training loop handed over into ledger records, off the training thread.

Every ``flush_seconds`` a turn takes the steps recorded since the last one, keeps the samples that no registered
version holds (one Parquet file and version of ``<run>.samples`` per turn, see :mod:`loaders.record.kept`), computes
digests, and appends one ledger line per step (and the metrics logged) to the rank's ledger file in one write.

The training thread takes the turn itself when it hands over a step and the last turn is ``flush_seconds`` old: a
turn then never runs beside the loader's own Python on another thread (two threads trading the interpreter lock cost
the loader several times the turn's own work). A watchdog thread takes the turns the training thread does not (a
step that takes long, a loop that stopped): it writes whatever has waited ``flush_seconds`` plus
:data:`WATCH_SECONDS`, so a SIGKILL loses at most ``flush_seconds + WATCH_SECONDS`` plus one turn's work.

Writing never stops training: a failure (a full disk...) is one warning; the steps it could not write are a gap, and
the first write that works again starts with a ``gap`` record naming them and the reason.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .. import storage
from ..catalog.store import CatalogStore
from ..sampling.digests import DIGEST_FORMAT, batch_digest, document_hashes, sample_digests, version_hash
from ..training.ledger import LedgerWriter
from .kept import Limits, kept_row, write_kept

#: How often the watchdog looks for steps the training thread left waiting (see the module docstring).
WATCH_SECONDS = 0.2


class RecordWarning(UserWarning):
    """Something the recorder could not do as asked; training goes on (see the message)."""


@dataclass
class Taken:
    """One trainer step as the training thread handed it over: keys resolved in the source, or fields to keep."""

    step: int
    at: list[tuple[int, int] | None]  # (shard, row) in the source, None for a sample kept for itself
    keys: list[str | None]  # the key ``keys(batch)`` gave (None without a keys function)
    fields: list[dict[str, Any] | None]  # the values of each sample to keep (None where the source holds it)
    micro: list[int]
    time: float
    notes: list[Any] | None = None  # what a hook noted of each micro-batch (an Energon restore key...)


@dataclass
class _Gap:
    first: int
    last: int
    reason: str


@dataclass
class Writer:
    """Writes one rank's records (see the module docstring). ``flush_seconds <= 0`` writes in the caller's thread."""

    catalog: CatalogStore
    run: str
    rank: int
    world_size: int
    ledger_dir: str
    samples_dir: str
    samples_dataset: str
    source: tuple[str, str] | None  # (dataset, version) the keys resolve in
    limits: Limits
    tokenizer: str | None = None
    flush_seconds: float = 0.5
    on_problem: Callable[[str], None] | None = None
    _pending: list[Any] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _turn: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _gap: _Gap | None = None
    _warned: set[str] = field(default_factory=set)
    kept_bytes: int = 0
    kept_samples: int = 0
    omitted: int = 0
    files: int = 0

    def __post_init__(self) -> None:
        self._ledger = LedgerWriter(self.ledger_dir, self.rank, self.world_size, flush_seconds=0)
        self._last_turn = time.monotonic()
        self._oldest: float | None = None  # when the oldest item waiting was put
        self._known: dict[str, tuple[int, int, int]] = {}  # content key → (version slot, shard, row) kept earlier
        self._versions: list[tuple[str, str]] = []

    # -- from the training thread -----------------------------------------------------------------
    def put(self, item: Taken | dict[str, Any]) -> None:
        """Queue a step or a ready ledger record (metrics); written on the next turn, which this thread takes when the
        last one is ``flush_seconds`` old."""
        now = time.monotonic()
        with self._lock:
            self._pending.append(item)
            if self._oldest is None:
                self._oldest = now
        if self.flush_seconds <= 0 or now - self._last_turn >= self.flush_seconds:
            self.flush()
        elif self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="batchscope-record", daemon=True)
            self._thread.start()

    def flush(self) -> None:
        """Write everything queued, now, in this thread."""
        with self._turn:
            with self._lock:
                items, self._pending, self._oldest = self._pending, [], None
            self._last_turn = time.monotonic()
            if items:
                self._write(items)

    def close(self) -> None:
        """Stop the thread and write everything queued."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.flush()

    # -- the writer's turn ------------------------------------------------------------------------
    def _watch(self) -> None:
        """Write what the training thread left waiting ``flush_seconds + WATCH_SECONDS``, waking only when something
        could be due (a thread waking often costs the training thread too)."""
        patience = self.flush_seconds + WATCH_SECONDS
        while True:
            oldest, now = self._oldest, time.monotonic()
            if oldest is not None and now >= oldest + patience:
                self.flush()
                continue
            if self._stop.wait(patience if oldest is None else oldest + patience - now):
                return

    def warn_once(self, kind: str, message: str) -> None:
        """One warning per kind of problem (the recorder never raises into the training loop)."""
        if kind in self._warned:
            return
        self._warned.add(kind)
        warnings.warn(message, RecordWarning, stacklevel=2)
        if self.on_problem is not None:
            self.on_problem(message)

    def _write(self, items: list[Any]) -> None:
        steps = [i.step for i in items if isinstance(i, Taken)]
        try:
            records = self._records(items)
            if self._gap is not None:
                gap = self._gap
                records.insert(0, self._base("gap", gap.first) | {"last": gap.last, "reason": gap.reason})
            self._ledger.append(records)
            self._gap = None
        except Exception as exc:  # noqa: BLE001 - a recorder must never stop training
            reason = f"{type(exc).__name__}: {exc}"
            if steps:
                first, last = min(steps), max(steps)
                self._gap = _Gap(min(first, self._gap.first), max(last, self._gap.last), reason) if self._gap else _Gap(first, last, reason)
            self.warn_once(
                "write",
                f"batchscope.record: cannot write run {self.run!r} rank {self.rank} ({reason}); training goes on, and the steps "
                "that cannot be written are recorded as a gap once writing works again",
            )

    def _base(self, kind: str, step: int) -> dict[str, Any]:
        return {"t": kind, "step": step, "rank": self.rank, "world_size": self.world_size, "time": round(time.time(), 3)}

    def _records(self, items: list[Any]) -> list[dict[str, Any]]:
        """Ledger records for ``items`` in order, after keeping the samples they hold for themselves; the digests of
        every sample of the turn are computed at once."""
        taken = [i for i in items if isinstance(i, Taken)]
        placed = self._keep(taken)
        digests: dict[int, np.ndarray] = {}
        if taken:
            hashes = np.asarray([version_hash(*pair) for pair in self._versions], dtype=np.uint64)
            every = [placed[id(item)] for item in taken]
            sizes = np.fromiter((len(p.keys) for p in every), dtype=np.int64, count=len(every))
            offsets = np.concatenate([[0], np.cumsum(sizes)])
            total = int(offsets[-1])
            firsts = np.fromiter((item.step * self.world_size + self.rank for item in taken), dtype=np.int64, count=len(taken)) * sizes
            indices = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1] - firsts, sizes)  # each step's own indices

            def flat(field: str) -> np.ndarray:
                return np.fromiter(itertools.chain.from_iterable(getattr(p, field) for p in every), dtype=np.int64, count=total)

            found = sample_digests(indices, document_hashes(hashes[flat("slots")], flat("shards"), flat("rows")))
            digests = {id(item): found[offsets[i] : offsets[i + 1]] for i, item in enumerate(taken)}
        return [self._batch_record(item, placed[id(item)], digests[id(item)]) if isinstance(item, Taken) else item for item in items]

    def _keep(self, taken: list[Taken]) -> dict[int, _Placed]:
        """Where every sample lives (version slot, shard, row, key); samples to keep are written as one new version."""
        rows: dict[str, dict[str, Any]] = {}
        pending: dict[int, list[tuple[int, int, int, str] | str]] = {}
        placed: dict[int, _Placed] = {}
        source = self._slot(*self.source) if self.source is not None else -1
        for item in taken:
            if item.at and None not in item.at:  # every key resolved in the source: the common case, no loop per sample
                shards, rows_of = zip(*item.at)  # type: ignore[misc]
                placed[id(item)] = _Placed([source] * len(item.at), list(shards), list(rows_of), item.keys)  # type: ignore[arg-type]
                continue
            here: list[tuple[int, int, int, str] | str] = []
            for at, key, fields in zip(item.at, item.keys, item.fields):
                if at is not None and key is not None:
                    here.append((source, at[0], at[1], key))
                    continue
                row, size, over = kept_row(fields or {}, limits=self.limits, used=self.kept_bytes, given=key)
                content = row["_key"]
                if over is not None:
                    self.omitted += 1
                    self.warn_once("limit", f"batchscope.record: run {self.run!r} rank {self.rank}: a sample was not kept ({over})")
                if content in self._known:
                    here.append((*self._known[content], content))
                    continue
                if content not in rows:
                    rows[content] = row
                    self.kept_bytes += size
                    self.kept_samples += over is None
                here.append(content)
            pending[id(item)] = here
        if rows:
            path = os.path.join(self.samples_dir, f"w{self.world_size}-r{self.rank}-{taken[0].step:09d}-{self.files:06d}.parquet")
            notes = {"recorded_by": self.run, "rank": self.rank, "world_size": self.world_size, "steps": [taken[0].step, taken[-1].step]}
            version, found = write_kept(
                self.catalog, self.samples_dataset, path, list(rows.values()), tokenizer=self.tokenizer, notes=notes
            )
            self.files += 1
            slot = self._slot(self.samples_dataset, version.id)
            for content, (shard, row) in found.items():
                self._known[content] = (slot, shard, row)
        for key, here in pending.items():
            full = [p if isinstance(p, tuple) else (*self._known[p], p) for p in here]
            placed[key] = _Placed([p[0] for p in full], [p[1] for p in full], [p[2] for p in full], [p[3] for p in full])  # type: ignore[misc]
        return placed

    def _slot(self, dataset: str, version: str) -> int:
        """A stable index of ``(dataset, version)`` among those this writer's records name."""
        pair = (dataset, version)
        if pair not in self._versions:
            self._versions.append(pair)
        return self._versions.index(pair)

    def _batch_record(self, item: Taken, placed: _Placed, digests: np.ndarray) -> dict[str, Any]:
        n = len(placed.keys)
        first = (item.step * self.world_size + self.rank) * n
        used = sorted(set(placed.slots))
        recorded: dict[str, Any] = {"versions": [list(self._versions[slot]) for slot in used], "shards": placed.shards, "rows": placed.rows}
        if len(used) > 1:
            local = {slot: i for i, slot in enumerate(used)}
            recorded["slots"] = [local[slot] for slot in placed.slots]
        recorded["micro"] = item.micro
        if item.notes is not None:
            recorded["notes"] = item.notes
        if placed.keys is not item.keys and any(k is not None and k != key for k, key in zip(item.keys, placed.keys)):
            recorded["given"] = [k if k is not None and k != key else None for k, key in zip(item.keys, placed.keys)]
        return self._base("batch", item.step) | {
            "digest": batch_digest(self.run, item.step, self.rank, self.world_size, digests),
            "indices": list(range(first, first + n)),
            "keys": placed.keys,  # (per-sample digests are left out: each follows from its index and address, both here)
            "digest_format": DIGEST_FORMAT,
            "time": round(item.time, 3),
            "recorded": recorded,
        }


@dataclass
class _Placed:
    """Where each sample of one step lives: version slot, shard and row, and its key there (parallel lists)."""

    slots: list[int]
    shards: list[int]
    rows: list[int]
    keys: list[str]


def samples_dir(catalog: CatalogStore, run: str) -> str:
    """Where a recorded run's kept samples are written (a local catalog)."""
    return storage.normalize(catalog.path("runs", run, "samples"))
