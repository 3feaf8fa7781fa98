"""The replayed run: another framework's read path, recomputed with that framework's code, behind the run interface.

A replayed run answers what every run answers (:class:`loaders.run.kinds.RunLike`): its steps and world size, the
batch of any ``(step, rank)`` as the usual ``Batch`` of ``Sample`` and ``Document`` objects (each document addressed
in a catalog version of the run's own pinned files), what it logged (metrics in the ledger format, and the indices
its sampler drew when it logged them), and where a record was read when the framework's order can be inverted.
Opening one checks every pinned file; each read checks the bytes it decodes.

>>> run = catalog.run("hf-job")                                 # doctest: +SKIP
>>> run.kind, run.total_steps, run.world_size_at(0)             # doctest: +SKIP
('replayed', 120, 2)
>>> [s.index for s in run.batch(7, rank=1).samples]             # doctest: +SKIP
[412, 9, 77, 1003]
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from .. import storage
from ..catalog.store import CatalogStore
from ..catalog.version import DatasetVersion
from ..errors import ChecksumMismatch, PinnedFileChanged, RankOutOfRange, ReplayError, SampleNotFound, StepOutOfRange
from ..run.manifest import run_dir
from ..sampling.batch import Address, Batch, Document, Sample
from ..sampling.where import WhereReads
from ..sampling.world_sizes import WorldSizeSpan
from ..training.ledger import Ledger
from ..training.verification import Verification
from .arrays import ArrayStore
from .context import Context
from .framework import Framework, Replay, ReplayedSample, Shape, framework
from .logged import compare_logged, parse_logged
from .pins import Pin, check_pin

#: The file of a replayed run holding what it logged about its batches (``--batches``).
LOGGED = "logged.jsonl"


@dataclass(frozen=True)
class ReplaySource:
    """One set of stored documents of a replayed run, pinned as a catalog version."""

    ref: str
    dataset: str
    version: str
    rows: int
    shard_format: str

    def to_json(self) -> dict[str, Any]:
        return {"ref": self.ref, "dataset": self.dataset, "version": self.version, "rows": self.rows, "shard_format": self.shard_format}


class ReplayedRun:
    """A run recomputed by calling another framework's own read path over its pinned files ("replayed")."""

    kind = "replayed"

    def __init__(self, catalog: CatalogStore, manifest: dict[str, Any]) -> None:
        self.catalog = catalog
        self.manifest = manifest
        self.name: str = manifest["name"]
        self.fingerprint: str = manifest["fingerprint"]
        self.framework_name: str = manifest["framework"]
        self.sources = [ReplaySource(**s) for s in manifest["sources"]]
        self.pins = [Pin.from_json(p) for p in manifest["pins"]]
        shape = manifest["shape"]
        self._total_steps = int(shape["total_steps"])
        self._global_batch_size = int(shape["global_batch_size"])
        self.world_size = int(shape["world_size"])
        self._shape = Shape(self._total_steps, self._global_batch_size, self.world_size, tuple(map(tuple, shape.get("world_sizes", ()))))
        self._replay: Replay | None = None
        self._framework: Framework | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ReplayedRun({self.name!r}, {self.framework_name}, steps={self.total_steps}, world_size={self.world_size})"

    # -- what it is ------------------------------------------------------------------------------
    @property
    def total_steps(self) -> int:
        return self._total_steps

    @property
    def known_steps(self) -> int:
        """Steps a page can show: all of them (fixed when the run was attached)."""
        return self._total_steps

    @property
    def global_batch_size(self) -> int:
        return self._global_batch_size

    @property
    def directory(self) -> str:
        return run_dir(self.catalog, self.name)

    @property
    def framework(self) -> Framework:
        """The framework module (its package checked importable)."""
        if self._framework is None:
            self._framework = framework(self.framework_name)
        return self._framework

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.manifest["settings"])

    def version(self, source: int) -> DatasetVersion:
        """The catalog version of the run's stored documents ``source``."""
        return self._versions[source]

    @functools.cached_property
    def _versions(self) -> list[DatasetVersion]:
        return [self.catalog.resolve(f"{s.dataset}@{s.version}") for s in self.sources]

    def describe(self) -> list[tuple[str, str]]:
        """The framework's own words for how this run reads (for the run page)."""
        return self.replay.describe()

    # -- opening ------------------------------------------------------------------------------------
    @property
    def replay(self) -> Replay:
        """The framework's replay, opened once: every pinned file checked, every document file where it was."""
        with self._lock:
            if self._replay is None:
                self._replay = self._open()
            return self._replay

    def _open(self) -> Replay:
        for pin in self.pins:
            check_pin(pin, run=self.name)
        for source, version in zip(self.sources, self._versions):
            for number, shard in enumerate(version.shards):
                path = shard.uri
                if not storage.stat(path).exists:
                    raise PinnedFileChanged(f"{path}: data file of replayed run {self.name} ({source.ref}) is missing or was moved")
                if storage.stat(path).size != shard.size:
                    raise PinnedFileChanged(
                        f"{path}: data file of replayed run {self.name} ({source.ref}) is {storage.stat(path).size} bytes, "
                        f"pinned at {shard.size} (changed since it was attached)"
                    )
        arrays = self.manifest["arrays"]
        store = ArrayStore(self.catalog.path("indexes", "replay", arrays["key"]), recorded=dict(arrays["digests"]))
        context = Context(self._versions, {p.path: p for p in self.pins}, store)
        fw = self.framework
        return fw.open(fw.load(self.manifest["settings"]), context)

    # -- world sizes and steps ----------------------------------------------------------------------
    def world_size_at(self, step: int) -> int:
        return self._shape.world_size_at(step)

    def world_size_history(self) -> list[WorldSizeSpan]:
        return [WorldSizeSpan(start, size) for start, size in self._shape.world_sizes]

    def check_step(self, step: int) -> None:
        if not 0 <= step < self.total_steps:
            raise StepOutOfRange(f"step {step} is outside replayed run {self.name} (steps 0 to {self.total_steps - 1})")

    def _check(self, step: int, rank: int, world_size: int | None) -> None:
        self.check_step(step)
        ranks = self.world_size_at(step)
        if world_size is not None and world_size != ranks:
            raise ReplayError(
                f"replayed run {self.name} read step {step} on {ranks} data-parallel ranks; its sampler never produced "
                f"a world size of {world_size} there"
            )
        if not 0 <= rank < ranks:
            raise RankOutOfRange(f"rank {rank} is not below the world size {ranks} of replayed run {self.name} at step {step}")

    # -- batches ---------------------------------------------------------------------------------------
    def batch(self, step: int, rank: int = 0, *, world_size: int | None = None) -> Batch:
        """Exactly what ``rank`` consumed at ``step``, as the framework's own read path orders it."""
        self._check(step, rank, world_size)
        try:
            samples = self.replay.samples(step, rank)
            return self._batch(step, rank, samples)
        except ChecksumMismatch as exc:  # a data file changed (same size) since it was pinned
            raise PinnedFileChanged(f"replayed run {self.name}: {exc.message}") from exc

    def _batch(self, step: int, rank: int, samples: list[ReplayedSample]) -> Batch:
        wanted: dict[int, list[int]] = {}
        for sample in samples:
            for piece in sample.pieces:
                if not 0 <= piece.source < len(self.sources):
                    raise ReplayError(f"replayed run {self.name}: the replay names documents {piece.source}, which it does not pin")
                wanted.setdefault(piece.source, []).append(piece.record)
        found: dict[tuple[int, int], tuple[int, int, dict[str, Any]]] = {}
        for source, records in wanted.items():
            version = self.version(source)
            indices = np.unique(np.asarray(records, dtype=np.int64))
            shards, rows = version.locate_arrays(indices)
            for record, shard, row, value in zip(indices.tolist(), shards.tolist(), rows.tolist(), version.read_indices(indices)):
                found[(source, record)] = (shard, row, value)
        out = []
        for position, sample in enumerate(samples):
            documents = []
            for piece in sample.pieces:
                version = self.version(piece.source)
                shard, row, record = found[(piece.source, piece.record)]
                documents.append(
                    Document(
                        piece.source,
                        self.sources[piece.source].ref,
                        version.key_at(shard, row, record),
                        Address(version.name, version.id, shard, row),
                        sample.epoch,
                        record,
                        dict(piece.span) if piece.span is not None else None,
                        sample.index,
                    )
                )
            inputs = dict(documents[0].record) if sample.inputs is None else dict(sample.inputs)
            out.append(Sample(sample.index, position, rank, documents, inputs))
        return Batch(self.name, step, rank, self.world_size_at(step), out).seal()

    def global_batch(self, step: int) -> Iterator[Batch]:
        """Every rank's batch at ``step``."""
        for rank in range(self.world_size_at(step)):
            yield self.batch(step, rank)

    # -- where ---------------------------------------------------------------------------------------
    def where(self, source: int, record: int, *, first_epoch: int = 0, epochs: int | None = None) -> WhereReads:
        """Where this run read ``record`` of ``source``: the framework's order inverted (``WhereUnsupported`` says
        why, in one line, where it cannot be)."""
        if not 0 <= source < len(self.sources):
            raise SampleNotFound(f"replayed run {self.name} has no documents {source} (0 to {len(self.sources) - 1})")
        if not 0 <= record < self.sources[source].rows:
            raise SampleNotFound(f"record {record} is outside {self.sources[source].ref} of replayed run {self.name}")
        found = self.replay.where(source, record, first_epoch=first_epoch, epochs=epochs if epochs is not None else 1 << 30)
        found.run = self.name
        found.reads = [dataclasses.replace(r, run=self.name) for r in found.reads if r.step < self.total_steps]
        return found

    # -- what it logged ---------------------------------------------------------------------------------
    @functools.cached_property
    def ledger(self) -> Ledger:
        """The metrics the run logged (imported with ``--metrics``), in the ledger format."""
        return Ledger(storage.join(self.directory, "ledger"))

    @functools.cached_property
    def logged(self) -> dict[tuple[int, int], list[int]]:
        """``(step, rank) → indices`` the run logged (``--batches``; empty when it logged none)."""
        path = os.path.join(self.directory, LOGGED)
        if not os.path.exists(path):
            return {}
        with open(path, encoding="utf-8") as f:
            return parse_logged(f, where=path, steps=self.total_steps, world_size_at=self.world_size_at)

    def logged_through(self) -> int | None:
        """The last step the run logged a batch for (``--batches``): ``verify`` checks steps 0 through it (None: none)."""
        return max((step for step, _rank in self.logged), default=None)

    def compare(self, batch: Batch) -> Verification:
        """A replayed batch against what the run logged for its step and rank (``replayed`` when they match)."""
        return compare_logged(self.logged.get((batch.step, batch.rank)), batch)

    def verify(self, step: int, rank: int = 0) -> Verification:
        """Replay ``(step, rank)`` and compare it with what the run logged."""
        return self.compare(self.batch(step, rank))
