"""A recorded run: what ``batchscope.record`` wrote per (step, rank), shown like any other run.

Nothing recomputes a recorded step: its batch is the rows its ledger line names (source rows by key, or the samples
kept for themselves in ``<run>.samples``), read back through the catalog and checked (each version must still be
there, and each row must still hold the key recorded for it). A step that passes says ``recorded`` — what the loader
yielded, written while training — never ``verified``.

>>> run = Catalog("batchscope-data").run("hf-stream")   # doctest: +SKIP
>>> run.kind, run.batch(3, rank=1).keys[:2]             # doctest: +SKIP
('recorded', ['doc-17', 'doc-4'])
"""

from __future__ import annotations

import functools
import json
import threading
from dataclasses import dataclass
from typing import Any, Iterator

from .. import storage
from ..catalog.store import CatalogStore
from ..catalog.version import DatasetVersion
from ..errors import BatchscopeError, RankOutOfRange, StepOutOfRange, WhereUnsupported
from ..run.manifest import run_dir
from ..sampling.batch import Address, Batch, Document, Sample
from ..sampling.digests import document_hash, sample_digest
from ..sampling.world_sizes import WorldSizeSpan
from ..training.ledger import Ledger, LedgerEntry
from ..training.verification import Verification


@dataclass(frozen=True)
class RecordedSource:
    """The registered version a recorded run's keys name (``source=``), listed as every run lists its sources."""

    ref: str
    dataset: str
    version: str


class RecordedRun:
    """A run whose batches were written down while it trained (``kind == "recorded"``); see the module docstring."""

    kind = "recorded"

    def __init__(self, catalog: CatalogStore, manifest: dict[str, Any]) -> None:
        self.catalog = catalog
        self.manifest = manifest
        self.name: str = manifest["name"]
        self.fingerprint: str = manifest.get("fingerprint", "")
        recorded = manifest["recorded"]
        self.world_size: int = int(recorded["world_size"])
        self.source: dict[str, str] | None = recorded.get("source")
        self.samples_dataset: str = recorded["samples_dataset"]
        self.micro_batches: int = int(recorded.get("micro_batches", 1))
        self.limits = {"max_sample_bytes": recorded.get("max_sample_bytes"), "max_bytes": recorded.get("max_bytes")}
        self.hook: str | None = recorded.get("hook")
        #: The version its keys name (none when every sample was kept for itself); documents of that version are
        #: ``source`` 0, those of other versions (kept samples) the numbers after it, in the order first read.
        self.sources = [RecordedSource(**self.source)] if self.source else []
        self._slots: list[tuple[str, str]] = [(s.dataset, s.version) for s in self.sources]
        self._lock = threading.Lock()
        self._versions: dict[tuple[str, str], DatasetVersion | BatchscopeError] = {}
        self._rebuilds: dict[tuple[int, int, str], tuple[list[int], str | None]] = {}

    def __repr__(self) -> str:
        return f"RecordedRun({self.name!r}, world_size={self.world_size}, steps={self.known_steps})"

    # -- description ---------------------------------------------------------------------------
    @property
    def directory(self) -> str:
        return run_dir(self.catalog, self.name)

    @functools.cached_property
    def ledger(self) -> Ledger:
        """What the recorder wrote (the ledger format of every run)."""
        return Ledger(storage.join(self.directory, "ledger"))

    @property
    def total_steps(self) -> int | None:
        """Steps of the run once every rank's loader was exhausted (each rank notes it); None until then (a recorded
        run may still be training, or was stopped)."""
        ends = []
        for rank in range(self.world_size):
            path = storage.join(self.directory, "record", f"end-w{self.world_size}-r{rank}.json")
            if not storage.stat(path).exists:
                return None
            try:
                ends.append(int(json.loads(storage.read_bytes(path))["steps"]))
            except (ValueError, KeyError, TypeError):
                return None
        return max(ends)

    @property
    def known_steps(self) -> int:
        """Steps recorded so far: one past the last step any rank recorded (``total_steps`` when declared)."""
        if self.total_steps is not None:
            return self.total_steps
        steps = self.ledger.steps()
        return steps[-1] + 1 if steps else 0

    def logged_through(self) -> int | None:
        """The last step any rank recorded: ``verify`` checks steps 0 through it (None: nothing recorded yet)."""
        known = self.known_steps
        return known - 1 if known else None

    @property
    def global_batch_size(self) -> int:
        """Samples of the last recorded step over every rank (a loader may yield batches of other sizes)."""
        steps = self.ledger.steps()
        if not steps:
            return 0
        return sum(len(e.keys) for rank in range(self.world_size) if (e := self.ledger.entry(steps[-1], rank, self.world_size)))

    def world_size_at(self, step: int) -> int:
        return self.world_size

    def world_size_history(self) -> list[WorldSizeSpan]:
        return [WorldSizeSpan(0, self.world_size)]

    def check_step(self, step: int) -> None:
        known = self.known_steps
        if not 0 <= step < known:
            recorded = f"steps 0 to {known - 1} recorded so far" if known else "no step recorded yet"
            raise StepOutOfRange(f"step {step} is outside recorded run {self.name} ({recorded})")

    def source_note(self) -> str | None:
        """What changed since recording about the source it named: the tag now naming another version, or the version
        gone from the catalog (None when nothing did)."""
        if self.source is None:
            return None
        ref, dataset, version = self.source["ref"], self.source["dataset"], self.source["version"]
        try:
            now = self.catalog.resolve(ref)
        except BatchscopeError as exc:
            return f"the source {ref} no longer resolves ({exc.message}); this run read {dataset}@{version[:12]}"
        if now.id != version:
            return f"the source {ref} now names version {now.id[:12]}; this run read {dataset}@{version[:12]}, as recorded"
        return None

    # -- versions its records name ------------------------------------------------------------------
    def _slot(self, dataset: str, version: str) -> int:
        with self._lock:
            pair = (dataset, version)
            if pair not in self._slots:
                self._slots.append(pair)
            return self._slots.index(pair)

    def _open(self, dataset: str, version: str) -> DatasetVersion | BatchscopeError:
        pair = (dataset, version)
        found = self._versions.get(pair)
        if found is None:
            try:
                found = self.catalog.resolve(f"{dataset}@{version}")
            except BatchscopeError as exc:
                found = exc
            self._versions[pair] = found
        return found

    def version(self, source: int) -> DatasetVersion:
        """The version a document's ``source`` number names (raises when it is gone from the catalog)."""
        found = self._open(*self._slots[source])
        if isinstance(found, BatchscopeError):
            raise found
        return found

    # -- batches ---------------------------------------------------------------------------------
    def _entry(self, step: int, rank: int, world_size: int | None) -> LedgerEntry | None:
        self.check_step(step)
        if world_size is not None and world_size != self.world_size:
            raise RankOutOfRange(f"run {self.name} was recorded with world size {self.world_size}, not {world_size}")
        if not 0 <= rank < self.world_size:
            raise RankOutOfRange(f"rank {rank} is not below the world size {self.world_size} of recorded run {self.name}")
        return self.ledger.entry(step, rank, self.world_size)

    def batch(self, step: int, rank: int = 0, *, world_size: int | None = None) -> Batch:
        """The samples rank ``rank`` recorded at ``step``, read back from the rows its record names (an empty batch
        when the step was not recorded on that rank: :meth:`compare` says ``no-ledger``)."""
        entry = self._entry(step, rank, world_size)
        if entry is None or entry.recorded is None:
            return Batch(self.name, step, rank, self.world_size, [], "")
        recorded = entry.recorded
        versions = [tuple(v) for v in recorded.get("versions", [])]
        shards, rows = recorded.get("shards", []), recorded.get("rows", [])
        slots = recorded.get("slots") or [0] * len(shards)
        records: dict[int, list[dict[str, Any]]] = {}
        for local, (dataset, version) in enumerate(versions):
            wanted = [(shard, row) for slot, shard, row in zip(slots, shards, rows) if slot == local]
            opened = self._open(dataset, version)
            try:
                if isinstance(opened, BatchscopeError):
                    raise opened
                records[local] = opened.read_many(wanted)
            except BatchscopeError:
                records[local] = [{} for _ in wanted]  # compare() says why
        taken = {local: iter(found) for local, found in records.items()}
        samples = []
        for position, (local, shard, row, key) in enumerate(zip(slots, shards, rows, entry.keys)):
            dataset, version = versions[local]
            record = next(taken[local])
            address = Address(dataset, version, int(shard), int(row))
            document = Document(self._slot(dataset, version), dataset, key, address, 0, record, None, 0)
            samples.append(
                Sample(entry.indices[position], position, rank, [document], dict(record), _digest(entry.indices[position], address))
            )
        return Batch(self.name, step, rank, self.world_size, samples, entry.digest)

    def global_batch(self, step: int) -> Iterator[Batch]:
        """Every rank's recorded batch at ``step``."""
        for rank in range(self.world_size):
            yield self.batch(step, rank)

    def compare(self, batch: Batch) -> Verification:
        """``recorded`` when every sample of ``batch`` still reads back as the row its record names (the version is in
        the catalog, the row holds the recorded key); ``mismatch`` naming the samples that do not; ``no-ledger``."""
        where = (batch.step, batch.rank, batch.world_size)
        entry = self.ledger.entry(*where)
        if entry is None or entry.recorded is None:
            return Verification("no-ledger", *where, batch.digest, None, [], self._gap_reasons(batch.step, batch.rank))
        reasons, differing = [], []
        for sample in batch.samples:
            document = sample.documents[0]
            opened = self._open(document.address.dataset, document.address.version)
            if isinstance(opened, BatchscopeError):
                problem = f"{document.address.dataset}@{document.address.version[:12]} cannot be read ({opened.message})"
            elif not document.record:
                problem = f"{opened.where(document.address.shard, document.address.row)} cannot be read"
            elif opened.key_at(document.address.shard, document.address.row, document.record) != document.key:
                problem = f"{opened.where(document.address.shard, document.address.row)} no longer holds key {document.key!r}"
            else:
                continue
            differing.append(sample.index)
            if len(reasons) < 3:
                reasons.append(f"sample {sample.position}: {problem}")
        restored, rebuilt = self._rebuilt(entry, batch)
        for position in restored:
            differing.append(batch.samples[position].index)
        if differing:
            return Verification(
                "mismatch", *where, batch.digest, entry.digest, sorted(set(differing)), reasons + ([rebuilt] if rebuilt else [])
            )
        notes = [n for n in (self.source_note(), rebuilt) if n]
        return Verification("recorded", *where, batch.digest, entry.digest, [], notes)

    def _rebuilt(self, entry: LedgerEntry, batch: Batch) -> tuple[list[int], str | None]:
        """For a hook that can rebuild a batch (Megatron-Energon's ``restore_sample``): the positions whose rebuilt values
        differ from the recorded ones, and a line saying what the rebuild found (None for other hooks)."""
        notes = (entry.recorded or {}).get("notes")
        if self.hook != "energon" or not notes:
            return [], None
        key = (entry.step, entry.rank, entry.digest)
        if key not in self._rebuilds:
            from . import energon

            config = self.manifest["recorded"].get("hook_config") or {}
            try:
                rebuilt = [sample for note in notes for sample in energon.restore(config, entry.rank, self.world_size, note)]
            except Exception as exc:  # noqa: BLE001 - the page says why it could not rebuild
                self._rebuilds[key] = ([], f"not rebuilt with Energon's restore_sample ({type(exc).__name__}: {exc})")
            else:
                differ = [
                    position
                    for position, (sample, again) in enumerate(zip(batch.samples, rebuilt))
                    if any(sample.record.get(k) != _plain_value(v) for k, v in again.items())
                ]
                differ += list(range(min(len(rebuilt), len(batch.samples)), max(len(rebuilt), len(batch.samples))))
                said = (
                    f"rebuilt with Energon's restore_sample: {len(differ)} of {len(batch.samples)} samples differ from the record"
                    if differ
                    else f"rebuilt with Energon's restore_sample: the same {len(rebuilt)} samples"
                )
                self._rebuilds[key] = (differ, said)
        return self._rebuilds[key]

    def _gap_reasons(self, step: int, rank: int) -> list[str]:
        return [
            f"not recorded: steps {g.first}-{g.last} of rank {g.rank} are a gap ({g.reason})"
            for g in self.ledger.gaps()
            if g.rank == rank and g.first <= step <= g.last
        ]

    def where(self, source: int, record: int, *, first_epoch: int = 0, epochs: int | None = None) -> Any:
        """A recorded run's order cannot be inverted (a shuffle buffer, a stream...): its ledger is the only record, so
        this raises :class:`~loaders.errors.WhereUnsupported` saying so (the page shows the line)."""
        raise WhereUnsupported(WHERE_REASON)


def _digest(index: int, address: Address) -> str:
    """A recorded sample's digest: its index and its document's address, as every run's samples."""
    document = document_hash(address.dataset, address.version, address.shard, address.row)
    return f"{sample_digest(index, [document]):016x}"


def _plain_value(value: Any) -> Any:
    """A rebuilt value as the kept row holds it (arrays as lists)."""
    return value.tolist() if hasattr(value, "tolist") else value


WHERE_REASON = "a recorded run's order cannot be inverted: where it read a sample is only in its ledger"
