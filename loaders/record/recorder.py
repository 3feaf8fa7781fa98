"""``batchscope.record``: wrap any iterable of batches, yield them unchanged, and write per (step, rank) what was read.

The records are a ledger (``runs/<run>/ledger/w<W>-r<R>.jsonl``, the format native runs write), so ``verify``, the
run chart, the outlier list and the loss ranking read a recorded run unchanged; each batch line also says where every
sample lives (``recorded``): a row of the source version its key names, or a row of the run's ``<run>.samples``
dataset holding the sample itself (samples without a source, or whose key the source lacks).

>>> rec = record(loader, run="hf-stream", root="batchscope-data", rank=0, world_size=2,
...              source="web@v1", keys=column("id"))                               # doctest: +SKIP
>>> for batch in rec:                                                              # doctest: +SKIP
...     loss = train_step(batch)
...     rec.log(rec.step - 1, loss=loss)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from .. import storage
from ..catalog.store import CatalogStore
from ..errors import StateMismatch
from ..run.catalog import Catalog
from ..run.manifest import run_dir
from .extract import samples as extract_samples
from .kept import Limits
from .manifest import RecordRefused, check_rank, open_or_create
from .resolver import KeyResolver
from .writer import Taken, Writer, samples_dir

STATE_FORMAT = "batchscope.record/1"
#: Default bytes of sample values one rank keeps for themselves: per sample, and in all.
MAX_SAMPLE_BYTES = 1 << 20
MAX_BYTES = 1 << 30


@dataclass(frozen=True)
class RecordOptions:
    """How a recorder numbers steps and what it keeps (every value is checked, naming the bad one).

    ``micro_batches`` loader batches make one trainer step (gradient accumulation); ``start_step`` is the step of the
    first batch; samples are kept up to ``max_sample_bytes`` each and ``max_bytes`` per rank; records reach the disk
    every ``flush_seconds`` (0: as each step completes).
    """

    micro_batches: int = 1
    start_step: int = 0
    max_sample_bytes: int = MAX_SAMPLE_BYTES
    max_bytes: int = MAX_BYTES
    flush_seconds: float = 0.5
    tokenizer: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.micro_batches, int) or self.micro_batches < 1:
            raise ValueError(f"micro_batches must be a positive integer, got {self.micro_batches!r}")
        if not isinstance(self.start_step, int) or self.start_step < 0:
            raise ValueError(f"start_step must be a non-negative integer, got {self.start_step!r}")
        if not 0 <= self.flush_seconds <= 1.5:
            raise ValueError(f"flush_seconds must be between 0 and 1.5 (a SIGKILL loses at most 2 s), got {self.flush_seconds!r}")
        Limits(self.max_sample_bytes, self.max_bytes)


class Recorder:
    """The iterable :func:`record` returns (see there). ``step`` is the trainer step of the next batch it yields."""

    def __init__(
        self,
        loader: Iterable[Any],
        *,
        run: str,
        root: str | os.PathLike[str] | CatalogStore | None = None,
        rank: int = 0,
        world_size: int = 1,
        source: str | None = None,
        keys: Callable[[Any], Iterable[Any]] | None = None,
        samples: Callable[[Any], list[dict[str, Any]]] | None = None,
        options: RecordOptions = RecordOptions(),
        hook: str | None = None,
        hook_config: dict[str, Any] | None = None,
        note: Callable[[Any], Any] | None = None,
    ) -> None:
        check_rank(run, rank, world_size)
        if keys is not None and source is None:
            raise RecordRefused(f"keys= names rows of a registered version: give source='DATASET@VERSION' too (run {run!r})")
        self.loader = loader
        self.catalog = root if isinstance(root, Catalog) else Catalog(root if not isinstance(root, CatalogStore) else root.root)
        self.rank, self.world_size = rank, world_size
        self.keys_of, self.samples_of, self.options = keys, samples or extract_samples, options
        version = self.catalog.resolve(source) if source is not None else None
        described = {"ref": source, "dataset": version.name, "version": version.id} if version is not None else None
        stored = {"micro_batches": options.micro_batches, "max_sample_bytes": options.max_sample_bytes, "max_bytes": options.max_bytes}
        stored |= {"tokenizer": options.tokenizer, "hook": hook, "hook_config": hook_config}
        self.note_of = note
        self.manifest = open_or_create(self.catalog, run, world_size=world_size, source=described, options=stored)
        self.name = run
        self._lock_file = _claim(self.catalog, run, rank, world_size)
        with contextlib.suppress(FileNotFoundError):  # this rank is recording again: the run is not over
            os.unlink(storage.join(run_dir(self.catalog, run), "record", f"end-w{world_size}-r{rank}.json"))
        self.resolver = KeyResolver(version) if version is not None else None
        recorded = self.manifest["recorded"]
        self.writer = Writer(
            self.catalog,
            run,
            rank,
            world_size,
            ledger_dir=storage.join(run_dir(self.catalog, run), "ledger"),
            samples_dir=samples_dir(self.catalog, run),
            samples_dataset=recorded["samples_dataset"],
            source=(version.name, version.id) if version is not None else None,
            limits=Limits(options.max_sample_bytes, options.max_bytes),
            tokenizer=options.tokenizer,
            flush_seconds=options.flush_seconds,
        )
        self.step = options.start_step
        self._micro: list[tuple[list[Any], list[Any], list[Any]]] = []  # (keys, where in the source, fields) per micro-batch
        self._notes: list[Any] = []
        self._closed = False
        self._finalizer = weakref.finalize(self, _close_quietly, self.writer, self._lock_file)

    # -- iteration ----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        for batch in self.loader:
            self.take(batch)
            yield batch
        self.close(ended=True)

    def take(self, batch: Any) -> None:
        """Record ``batch`` as the next micro-batch (what iterating does; for loops that fetch batches themselves)."""
        try:
            self._take(batch)
        except Exception as exc:  # noqa: BLE001 - the recorder never stops training
            self.writer.warn_once("take", f"batchscope.record: cannot read batch of step {self.step} ({type(exc).__name__}: {exc})")
            self._micro.append(([], [], []))
        if len(self._micro) == self.options.micro_batches:
            self._finish_step()

    def _take(self, batch: Any) -> None:
        if self.note_of is not None:
            try:
                self._notes.append(self.note_of(batch))
            except Exception as exc:  # noqa: BLE001
                self.writer.warn_once(
                    "note", f"batchscope.record: the hook's note failed on step {self.step} ({type(exc).__name__}: {exc})"
                )
                self._notes.append(None)
        keys: list[Any] = []
        if self.keys_of is not None:
            try:
                given = self.keys_of(batch)
                keys = (
                    given
                    if isinstance(given, list) and all(type(k) is str for k in given)
                    else [None if k is None else str(k) for k in given]
                )
            except Exception as exc:  # noqa: BLE001
                self.writer.warn_once("keys", f"batchscope.record: keys() failed on step {self.step} ({type(exc).__name__}: {exc})")
                keys = []
        at = self.resolver.find_all(keys) if self.resolver is not None else [None] * len(keys)
        fields: list[Any] = [None] * len(at)
        if not keys or None in at:
            every = self.samples_of(batch)
            if not keys:
                keys, at, fields = [None] * len(every), [None] * len(every), every
            else:
                if len(every) != len(keys):
                    every = every + [{}] * (len(keys) - len(every)) if len(every) < len(keys) else every[: len(keys)]
                fields = [every[i] if found is None else None for i, found in enumerate(at)]
                bad = next(k for k, found in zip(keys, at) if found is None)
                assert self.resolver is not None
                self.writer.warn_once(
                    "bad-key",
                    f"batchscope.record: key {bad!r} (step {self.step}, rank {self.rank}) is not in {self.resolver.ref}; "
                    "samples whose key is not there are kept for themselves (this warning is given once)",
                )
        self._micro.append((keys, at, fields))

    def _finish_step(self) -> None:
        if len(self._micro) == 1:
            (keys, at, fields), micro = self._micro[0], [len(self._micro[0][0])]
        else:
            keys = [k for part in self._micro for k in part[0]]
            at = [a for part in self._micro for a in part[1]]
            fields = [f for part in self._micro for f in part[2]]
            micro = [len(part[0]) for part in self._micro]
        notes, self._micro, self._notes = (self._notes or None), [], []
        self.writer.put(Taken(self.step, at, keys, fields, micro, time.time(), notes))
        self.step += 1

    # -- what the trainer tells -------------------------------------------------------------------------------
    def log(self, step: int, **metrics: Any) -> None:
        """Record metrics of trainer step ``step`` (``loss``, ``sample_loss`` one per sample, ``token_loss``...), like
        :meth:`loaders.Reader.log`. Never raises into the training loop."""
        record = {"t": "metrics", "step": int(step), "rank": self.rank, "world_size": self.world_size, "metrics": metrics}
        self.writer.put(record)

    def state_dict(self) -> dict[str, Any]:
        """Where a resumed job continues (the step of the next batch); writes everything recorded so far first."""
        self.writer.flush()
        return {"format": STATE_FORMAT, "run": self.name, "rank": self.rank, "world_size": self.world_size, "step": self.step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the recorded run at ``state["step"]`` (a resumed job re-records the steps after its checkpoint)."""
        if state.get("format") != STATE_FORMAT or state.get("run") != self.name:
            raise StateMismatch(f"not a recorder state of run {self.name!r}: {dict(list(state.items())[:4])}")
        if state.get("world_size") != self.world_size:
            raise RecordRefused(
                f"the state was saved with world size {state.get('world_size')}; this job gives world_size={self.world_size}"
            )
        self.step = int(state["step"])
        self._micro, self._notes = [], []

    def close(self, *, ended: bool = False) -> None:
        """Write everything recorded and release the rank (also at exit, and when the loader is exhausted).

        ``ended``: the loader is exhausted, so this rank's run is over — once every rank's is, the run's length is
        known (:attr:`loaders.record.run.RecordedRun.total_steps`)."""
        if self._closed:
            return
        self._closed = True
        if self._micro:
            self._finish_step()  # the last, incomplete accumulation: what the loader yielded
        self._finalizer()
        if ended:
            with contextlib.suppress(OSError):
                end = storage.join(run_dir(self.catalog, self.name), "record", f"end-w{self.world_size}-r{self.rank}.json")
                storage.write_bytes_atomic(end, json.dumps({"steps": self.step}).encode())

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def report(self) -> dict[str, Any]:
        """What was kept for itself so far on this rank, and against which limits."""
        w = self.writer
        return {
            "kept_samples": w.kept_samples,
            "kept_bytes": w.kept_bytes,
            "omitted": w.omitted,
            "files": w.files,
            "max_sample_bytes": self.options.max_sample_bytes,
            "max_bytes": self.options.max_bytes,
        }


def _claim(catalog: CatalogStore, run: str, rank: int, world_size: int) -> Any:
    """Hold rank ``rank``'s lock while recording: a second live recorder of the same rank is refused."""
    directory = storage.join(run_dir(catalog, run), "record")
    os.makedirs(directory, exist_ok=True)
    handle = open(os.path.join(directory, f"w{world_size}-r{rank}.lock"), "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise RecordRefused(f"rank {rank} of run {run!r} is already being recorded by {holder}") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"process {os.getpid()}")
    handle.flush()
    return handle


def _close_quietly(writer: Writer, lock: Any) -> None:
    with contextlib.suppress(Exception):
        writer.close()
    with contextlib.suppress(Exception):
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def record(
    loader: Iterable[Any],
    *,
    run: str,
    root: str | os.PathLike[str] | CatalogStore | None = None,
    rank: int = 0,
    world_size: int = 1,
    source: str | None = None,
    keys: Callable[[Any], Iterable[Any]] | None = None,
    samples: Callable[[Any], list[dict[str, Any]]] | None = None,
    micro_batches: int = 1,
    start_step: int = 0,
    max_sample_bytes: int = MAX_SAMPLE_BYTES,
    max_bytes: int = MAX_BYTES,
    flush_seconds: float = 0.5,
    tokenizer: str | None = None,
    hook: str | None = None,
) -> Recorder:
    """Yield ``loader``'s batches unchanged while writing, per (step, rank), what was read.

    ``keys(batch)`` gives the keys of the batch's samples in the registered version ``source`` (``DATASET@VERSION``
    or a tag, resolved once); without them, or for a key the source lacks, the sample's own values are kept
    (``samples(batch)`` says what they are; by default they are read out of the batch, see
    :func:`loaders.record.extract.samples`), content-addressed, at most ``max_sample_bytes`` each and ``max_bytes``
    per rank. ``micro_batches`` loader batches make one trainer step; ``start_step`` (or ``load_state_dict``) is
    where a resumed job continues. A world size, rank or source contradicting the run's earlier records is refused
    here; after that nothing the recorder meets stops training (one warning per kind of problem).

    >>> rec = record(loader, run="r", root="data", rank=0, world_size=1, source="web@v1", keys=column("id"))  # doctest: +SKIP
    >>> [batch for batch in rec] == list(loader)                                                              # doctest: +SKIP
    True
    """
    options = RecordOptions(micro_batches, start_step, max_sample_bytes, max_bytes, flush_seconds, tokenizer)
    return Recorder(
        loader, run=run, root=root, rank=rank, world_size=world_size, source=source, keys=keys, samples=samples, options=options, hook=hook
    )
