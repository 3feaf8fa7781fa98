"""Runs: a resolved read plan and the pure function (step, rank) → Batch, as a thin façade over one-job parts.

- :class:`~loaders.sampling.sampler.Sampler` — the order as pure arithmetic (which record each stream draws, and back);
- :class:`~loaders.sampling.documents.DocumentSource` — reading records, document transforms, token counts;
- :class:`~loaders.sampling.packer.Packer` — packed sequences (fixed blocks, lossless concat-and-chunk), packing waste;
- :class:`~loaders.sampling.assembler.Assembler` — one rank's batches for consecutive steps, and reading ahead;
- :class:`~loaders.sampling.world_sizes.WorldSizeLog` — the world size in force at each step;
- :class:`~loaders.training.verifier.Verifier` — the ledger, and recomputed batches compared with it.

>>> run = catalog.create_run("demo", plan)      # doctest: +SKIP
>>> batch = run.batch(120, rank=1)               # doctest: +SKIP
>>> [s.key for s in batch.samples][:2]           # doctest: +SKIP
['json.loads', 'os.path.join']
"""

from __future__ import annotations

import functools
from typing import Any, Iterator

import numpy as np

from .. import storage
from ..catalog.store import CatalogStore
from ..catalog.version import DatasetVersion
from ..errors import RankOutOfRange, StepOutOfRange
from ..order.lane_order import LaneOrder
from ..order.mixture import Mixture
from ..order.source_order import SourceOrder
from ..order.step_mixture import StepMixture
from ..sampling.assembler import Assembler
from ..sampling.batch import Batch, Document, SourceRef
from ..sampling.concat_packing import ConcatPacking, PackingWaste
from ..sampling.documents import DocumentSource
from ..sampling.packer import Packer
from ..sampling.plan import ReadPlan, ResolvedSource
from ..sampling.sampler import Drawn, Sampler
from ..sampling.where import WhereReads, where_read
from ..sampling.world_sizes import WorldSizeLog, WorldSizeSpan, check_world_size
from ..training.ledger import Ledger
from ..training.reader import Reader
from ..training.verification import Verification
from ..training.verifier import Verifier
from .manifest import read_format, resolve_against, run_dir, stored_plan_json

__all__ = ["Run", "Verification", "WorldSizeSpan"]


class Run:
    """A run: its manifest and the pure function ``batch(step, rank)``.

    >>> run = catalog.create_run("demo", plan)      # doctest: +SKIP
    >>> batch = run.batch(120, rank=1)               # doctest: +SKIP
    >>> [s.key for s in batch.samples][:2]           # doctest: +SKIP
    ['json.loads', 'os.path.join']
    """

    #: A native run: read through :meth:`reader`, recomputed and verified against its ledger (:mod:`loaders.run.kinds`).
    kind = "native"

    def __init__(self, catalog: CatalogStore, manifest: dict[str, Any]) -> None:
        self.catalog = catalog
        self.manifest = manifest
        self.name: str = manifest["name"]
        self.read_format = read_format(manifest)
        self.plan = ReadPlan.from_json(stored_plan_json(manifest))
        resolved = manifest["resolved"]
        self.sources = [ResolvedSource(**s) for s in resolved["sources"]]
        self.tokenizers: dict[str, str] = resolved["tokenizers"]
        self.sequences_per_block: int | None = resolved.get("sequences_per_block")
        self.fingerprint: str = manifest.get("fingerprint", "")
        self.sampler = Sampler(
            self.plan, self.sources, resolved["counts"], read_format=self.read_format, cycle_steps=resolved.get("cycle_steps")
        )
        self.documents = DocumentSource(
            catalog,
            self.name,
            self.plan,
            self.sources,
            self.tokenizers,
            token_counts=resolved.get("token_counts"),
            record_token_counts=resolved.get("record_token_counts"),
        )
        self.packer = Packer(self.sampler, self.documents, read_format=self.read_format, sequences_per_block=self.sequences_per_block)
        self.assembler = Assembler(self.name, self.sampler, self.documents, self.packer)

    # -- description ------------------------------------------------------------
    @property
    def streams(self) -> int:
        return self.sampler.streams

    @property
    def total_steps(self) -> int:
        return int(self.manifest["resolved"]["total_steps"])

    @property
    def known_steps(self) -> int:
        """Steps a page can show: all of them (a native run's length is its plan's)."""
        return self.total_steps

    @property
    def global_batch_size(self) -> int:
        return self.plan.global_batch_size

    @property
    def directory(self) -> str:
        return run_dir(self.catalog, self.name)

    def version(self, source: int) -> DatasetVersion:
        """The pinned dataset version of source ``source``."""
        return self.documents.version(source)

    @property
    def source_refs(self) -> list[SourceRef]:
        """How batches name each source's documents (opens every pinned version)."""
        return self.documents.source_refs

    @property
    def step_mixture(self) -> StepMixture | None:
        """Read formats 3–4's per-step mixture (``None`` in formats 1 and 2)."""
        return self.sampler.step_mixture

    @property
    def lane_orders(self) -> list[LaneOrder]:
        """Read formats 3–4's order of each source's records."""
        return self.sampler.lane_orders

    @property
    def mixture(self) -> Mixture | None:
        """Read formats 1 and 2's block pattern (``None`` in formats 3–4)."""
        return self.sampler.mixture

    @property
    def orders(self) -> list[SourceOrder]:
        """Read formats 1 and 2's order of each source's records."""
        return self.sampler.orders

    def __repr__(self) -> str:
        return f"Run({self.name!r}, steps={self.total_steps}, batch={self.global_batch_size}, streams={self.streams})"

    # -- world sizes -----------------------------------------------------------------
    @functools.cached_property
    def world_sizes(self) -> WorldSizeLog:
        """The log of world sizes in force (``runs/<run>/world_sizes.jsonl``)."""
        return WorldSizeLog(storage.join(self.directory, "world_sizes.jsonl"), run=self.name, plan=self.plan)

    def world_size_history(self) -> list[WorldSizeSpan]:
        """Spans of steps and the world size in force, in step order (last record for a start step wins)."""
        return self.world_sizes.history()

    def world_size_at(self, step: int) -> int:
        """The world size in force at ``step``."""
        return self.world_sizes.at(step)

    def record_world_size(self, start_step: int, world_size: int) -> None:
        """Note that from ``start_step`` on the run reads on ``world_size`` ranks (readers call this)."""
        self.world_sizes.record(start_step, world_size)

    def check_world_size(self, world_size: int) -> None:
        check_world_size(self.plan, world_size, run=self.name)

    # -- the pure function ---------------------------------------------------------------
    def check_step(self, step: int) -> None:
        if not 0 <= step < self.total_steps:
            raise StepOutOfRange(f"step {step} is outside run {self.name} (steps 0 to {self.total_steps - 1})")

    def positions(self, rank: int, world_size: int) -> range:
        """Positions of the global batch that ``rank`` of ``world_size`` reads (a contiguous range)."""
        return self.sampler.positions(rank, world_size)

    def draw(self, stream: int, counter: int) -> tuple[int, int, int]:
        """``(source, record index, epoch)`` of the ``counter``-th document of ``stream``."""
        return self.sampler.draw(stream, counter)

    def draws(self, stream: int, counters: range) -> Drawn:
        """``(sources, record indices, epochs)`` of documents ``counters`` of ``stream`` (vectorized :meth:`draw`)."""
        return self.sampler.draws(stream, counters)

    def read_documents(
        self, source: int, records: np.ndarray, epochs: np.ndarray, positions: np.ndarray
    ) -> tuple[list[Document], list[dict[str, Any]]]:
        """Documents ``records`` of ``source`` and their document-transformed inputs (read formats 3–4 keying)."""
        return self.documents.read_documents(source, records, epochs, positions)

    def token_counts(self, source: int) -> np.ndarray:
        """Tokens per chunk of ``source`` (read formats 3–4 packing): stored with the run, verified, rebuilt if stale."""
        return self.documents.token_counts(source)

    def record_token_counts(self, source: int) -> np.ndarray | None:
        """Tokens of every record of ``source``, when the run pinned them (runs created before did not: None)."""
        return self.documents.record_token_counts(source)

    def count_record_tokens(self, source: int) -> np.ndarray:
        """Tokenize every record of ``source`` with its document transforms: tokens per record (what the indexes hold)."""
        return self.documents.count_record_tokens(source)

    @property
    def concat(self) -> ConcatPacking:
        """Lossless packing's sequence lookup (runs packed with ``Pack(strategy="concat")``)."""
        return self.packer.concat

    @property
    def lossless_packing(self) -> bool:
        """Whether this run packs with lossless concat-and-chunk (read formats 3–4, the default strategy)."""
        return self.packer.lossless

    def packing_waste(self) -> PackingWaste | None:
        """Document tokens packed, and tokens padded and dropped, over the run's steps (None when not packed); see
        :meth:`loaders.sampling.packer.Packer.waste`."""
        return None if self.plan.pack is None else self.packer.waste(self.total_steps)

    def _check(self, step: int, rank: int, world_size: int | None) -> int:
        self.check_step(step)
        if world_size is None:
            world_size = self.world_size_at(step)
        else:
            self.check_world_size(world_size)
        if not 0 <= rank < world_size:
            raise RankOutOfRange(f"rank {rank} is not below the world size {world_size} in force at step {step} of run {self.name}")
        return world_size

    def batch(self, step: int, rank: int = 0, *, world_size: int | None = None) -> Batch:
        """Exactly what ``rank`` consumed at ``step``: O(batch) work, O(1) memory in dataset size and step."""
        world_size = self._check(step, rank, world_size)
        return self.batches(range(step, step + 1), rank, world_size=world_size)[0]

    def batches(self, steps: range, rank: int = 0, *, world_size: int) -> list[Batch]:
        """:meth:`batch` for consecutive ``steps`` at one world size, sharing the order arithmetic and reads."""
        if not steps:
            return []
        self._check(steps.start, rank, world_size)
        self._check(steps.stop - 1, rank, world_size)
        return self.assembler.batches(steps, rank, world_size)

    def prefetch(self, steps: range, rank: int = 0, *, world_size: int) -> None:
        """Start decoding, in the background, the row groups that :meth:`batches` for ``steps`` will read.

        Pure arithmetic plus a hint to the decoder: nothing is read on this
        thread and nothing is returned. Readers call it one task ahead.
        """
        if steps and steps.start < self.total_steps:
            self.assembler.prefetch(range(steps.start, min(steps.stop, self.total_steps)), rank, world_size)

    def addresses(self, step: int, rank: int = 0, *, world_size: int = 1) -> list[tuple[int, int, int]]:
        """``(source, record index, epoch)`` of each document of an unpacked step — pure arithmetic, no reads."""
        self.check_step(step)
        self.check_world_size(world_size)
        return self.sampler.addresses(step, self.sampler.positions(rank, world_size))

    def where(self, source: int, record: int, **options: Any) -> WhereReads:
        """Where this run read ``record`` of ``source``, per epoch (``first_epoch``, ``epochs``): see
        :func:`loaders.sampling.where.where_read`."""
        return where_read(self, source, record, **options)

    def global_batch(self, step: int) -> Iterator[Batch]:
        """Every rank's batch at ``step`` under the world size in force then."""
        world_size = self.world_size_at(step)
        for rank in range(world_size):
            yield self.batch(step, rank, world_size=world_size)

    # -- ledger and reading ---------------------------------------------------------------
    @functools.cached_property
    def verifier(self) -> Verifier:
        """The run's ledger, compared with recomputed batches."""

        def recompute(step: int, rank: int) -> Batch:
            return self.batch(step, rank, world_size=self.world_size_at(step))

        return Verifier(storage.join(self.directory, "ledger"), recompute)

    @property
    def ledger(self) -> Ledger:
        return self.verifier.ledger

    def verify(self, step: int, rank: int = 0) -> Verification:
        """Recompute ``(step, rank)`` and compare with what the ledger recorded."""
        return self.verifier.verify(step, rank)

    def compare(self, batch: Batch) -> Verification:
        """Compare an already computed batch with the ledger record for its step, rank and world size."""
        return self.verifier.compare(batch)

    def against(self, other: str) -> "Run":
        """This run's plan re-resolved with one source swapped: ``name@version-or-tag``, or another run's versions.

        The result is an unsaved run with the same steps, so ``batch(step, rank)``
        shows what this run would have read at that step had the source been
        that version (useful before swapping a version into a running job).
        """
        return Run(self.catalog, resolve_against(self.catalog, self.manifest, other))

    def reader(self, rank: int = 0, world_size: int = 1, **options: Any) -> Reader:
        """The production iterator for one rank (see :class:`loaders.training.reader.Reader`)."""
        return Reader(self, rank, world_size, **options)
