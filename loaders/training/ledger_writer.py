"""Writing one rank's ledger file: buffered appends, written by a background timer, on ``flush()`` and on close;
``flush(sync=True)`` also makes them durable (fsync), which every saved reader state does.

A line is one JSON object (see ``docs/read-path.md`` for the record types):

- ``{"t": "batch", "step", "rank", "world_size", "digest", "indices", "keys", "samples", "digest_format", "time",
  "fetched": true}`` when a batch is handed to the trainer. ``"fetched": true`` means "trained only once a
  ``trained`` record follows"; lines without it (older ledgers, readers with ``mark_on_handout=True``) count as
  trained when handed out.
- ``{"t": "trained", "step", "rank", "world_size", "time"}`` when the trainer finished that step.
- ``{"t": "metrics", "step", "rank", "world_size", "metrics": {...}}`` for logged metrics.
- ``{"t": "torn", ...}`` right after a line a crash left unterminated, written by the next writer of the file.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, BinaryIO

from .. import storage
from ..sampling.batch import Batch
from ..sampling.digests import DIGEST_FORMAT


class LedgerWriter:
    """Appends one rank's records; a daemon thread flushes them every ``flush_seconds``, so a hung or killed rank
    loses at most the last ``flush_seconds`` of records.

    ``flush_seconds <= 0`` writes every record as it is appended. ``flush(sync=True)`` writes and fsyncs the file (and,
    the first time, its directory), so what it holds survives a crash of the machine, not only of the process.
    ``close()`` stops the timer and flushes; a failure of a background flush (disk full...) is raised by the next
    ``record``/``flush``/``close`` in the caller's thread.

    >>> writer = run.ledger.writer(rank=0, world_size=1)   # doctest: +SKIP
    >>> writer.record(batch, fetched=True); writer.trained(batch.step); writer.close()   # doctest: +SKIP
    """

    def __init__(self, directory: str, rank: int, world_size: int, *, flush_seconds: float = 2.0) -> None:
        self.path = storage.join(directory, ledger_file_name(rank, world_size))
        self.rank = rank
        self.world_size = world_size
        self.flush_seconds = flush_seconds
        self._lines: list[str] = []
        self._lock = threading.Lock()  # guards the buffer
        self._write_lock = threading.Lock()  # keeps concurrent flushes (timer, caller) in order
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None
        self._error: BaseException | None = None
        self._tail_checked = False
        self._unsynced = False  # lines written to the file since the last fsync
        self._directory_synced = False
        self._out: BinaryIO | None = None

    # -- records ------------------------------------------------------------------------------
    def record(self, batch: Batch, *, fetched: bool = False) -> None:
        """Append the batch a rank just handed to the trainer (``fetched``: trained only once marked)."""
        self.record_summary(batch_summary(batch), fetched=fetched)

    def record_summary(self, summary: dict[str, Any], *, fetched: bool = False) -> None:
        """Append a :func:`batch_summary` (used when batches are built in DataLoader workers)."""
        entry = {"t": "batch", **summary, "time": round(time.time(), 3)}
        if fetched:
            entry["fetched"] = True
        self._append(entry)

    def trained(self, step: int) -> None:
        """Append that the trainer finished ``step`` (its batch was handed out with ``fetched=True``)."""
        self._append({"t": "trained", "step": step, "rank": self.rank, "world_size": self.world_size, "time": round(time.time(), 3)})

    def log(self, step: int, **metrics: Any) -> None:
        """Append metrics for ``step`` (numbers, or lists of numbers such as per-sample loss)."""
        self._append({"t": "metrics", "step": step, "rank": self.rank, "world_size": self.world_size, "metrics": metrics})

    def append(self, entries: list[dict[str, Any]]) -> None:
        """Write ``entries`` (whole records) now, after anything buffered, in one append (recorders batch their lines)."""
        lines = [json.dumps(entry, separators=(",", ":"), default=_jsonable) for entry in entries]
        self._raise_background_error()
        with self._write_lock:
            with self._lock:
                lines, self._lines = self._lines + lines, []
            if lines:
                self._write(lines, sync=False)

    # -- flushing ----------------------------------------------------------------------------
    def _append(self, entry: dict[str, Any]) -> None:
        self._raise_background_error()
        line = json.dumps(entry, separators=(",", ":"), default=_jsonable)
        with self._lock:
            self._lines.append(line)
        if self.flush_seconds <= 0:
            self.flush()
        elif self._timer is None:
            self._start_timer()

    def _start_timer(self) -> None:
        self._stop.clear()  # a writer used again after close() gets a timer again
        self._timer = threading.Thread(target=self._flush_periodically, name="batchscope-ledger-flush", daemon=True)
        self._timer.start()

    def _flush_periodically(self) -> None:
        while not self._stop.wait(self.flush_seconds):
            try:
                self._write_buffered()
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                self._error = error
                return

    def _raise_background_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def flush(self, *, sync: bool = False) -> None:
        """Write buffered records to the ledger file now; ``sync``: and fsync it (durable through a machine crash)."""
        self._raise_background_error()
        self._write_buffered(sync=sync)

    def _write_buffered(self, *, sync: bool = False) -> None:
        with self._write_lock:
            with self._lock:
                lines, self._lines = self._lines, []
            if lines or (sync and self._unsynced):
                self._write(lines, sync=sync)

    def _write(self, lines: list[str], *, sync: bool) -> None:
        path = storage.normalize(self.path)
        if storage.is_remote(path):  # each append is an atomic object write: durable once it returns
            for line in lines:
                storage.append_line(path, line)
            return
        out = self._file(path)
        if lines:
            try:
                out.write(("\n".join(lines) + "\n").encode("utf-8"))
                out.flush()
            except OSError:  # a full disk: these lines are lost (the caller hears of it); the next write opens afresh
                self._discard_file()
                raise
            self._unsynced = True
        if sync:
            os.fsync(out.fileno())
            self._unsynced = False
            if not self._directory_synced:  # the file's own name is durable too (it may have just been created)
                _fsync_directory(os.path.dirname(path))
                self._directory_synced = True

    def _file(self, path: str) -> BinaryIO:
        """The ledger file, open for appending while this writer writes (opened again if it was removed meanwhile);
        the first open ends a line a crash left torn, and says so."""
        out = self._out
        if out is not None and os.path.exists(path):
            return out
        if out is not None:
            self._discard_file()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._out = out = open(path, "a+b")
        if not self._tail_checked:
            self._tail_checked = True
            if out.seek(0, os.SEEK_END) > 0:
                out.seek(-1, os.SEEK_END)
                if out.read(1) != b"\n":  # a line torn by a crash: end it and say so, rather than glue ours to it
                    out.write(b"\n" + self._torn_marker().encode("utf-8") + b"\n")
        return out

    def _discard_file(self) -> None:
        """Close the open ledger file, dropping what its buffer still holds (a write to it failed, or it was removed)."""
        out, self._out = self._out, None
        if out is not None:
            try:
                out.close()
            except OSError:
                pass

    def _torn_marker(self) -> str:
        marker = {"t": "torn", "step": 0, "rank": self.rank, "world_size": self.world_size, "time": round(time.time(), 3)}
        return json.dumps(marker, separators=(",", ":"))

    def close(self) -> None:
        """Stop the timer, write everything buffered, fsync it and close the file."""
        self._stop.set()
        if self._timer is not None:
            self._timer.join()
            self._timer = None
        try:
            self.flush(sync=True)
        finally:
            with self._write_lock:
                if self._out is not None:
                    self._out.close()
                    self._out = None


def _fsync_directory(directory: str) -> None:
    """Make a directory's entries durable (where the platform allows opening a directory)."""
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass  # some filesystems refuse to sync a directory; the file's data is synced regardless
    finally:
        os.close(handle)


def ledger_file_name(rank: int, world_size: int) -> str:
    """The file that rank ``rank`` of ``world_size`` appends to, inside the run's ``ledger/`` directory."""
    return f"w{world_size}-r{rank}.jsonl"


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
