"""The assembler: one rank's batches for consecutive steps, and the read-ahead that lets the decoder start early.

Unpacked runs are assembled as columns: every stream's documents for all the steps are drawn and read at once,
then sliced per step; transforms run per sample (on threads when they decode images or video). Packed runs take
each position's sequence from the :class:`~loaders.sampling.packer.Packer`. Callers check steps, ranks and world sizes, and
keep steps within the run (:class:`loaders.run.Run` does).

>>> assembler.batches(range(10, 12), rank=1, world_size=2)[0].step     # doctest: +SKIP
10
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..catalog.records import Record
from ..storage.pool import map_in_order
from .batch import Batch, SampleColumns, made_inputs
from .digests import document_hashes, made_hash, sample_digests, version_hash
from .documents import Documents, DocumentSource
from .packer import Packer
from .sampler import Sampler


class Assembler:
    """Batches of run ``name`` from its sampler, document source and packer."""

    def __init__(self, name: str, sampler: Sampler, documents: DocumentSource, packer: Packer) -> None:
        self.name = name
        self.sampler = sampler
        self.documents = documents
        self.packer = packer
        self.plan = documents.plan

    def batches(self, steps: range, rank: int, world_size: int) -> list[Batch]:
        """The batches ``rank`` of ``world_size`` reads at ``steps``, sharing the order arithmetic and the reads."""
        positions = self.sampler.positions(rank, world_size)
        if self.plan.pack is not None:
            return [Batch(self.name, step, rank, world_size, [self.packer.sample(step, p) for p in positions]).seal() for step in steps]
        return self._unpacked_batches(steps, rank, world_size, positions)

    def counters(self, steps: range) -> list[range]:
        """The ranges of one stream's documents that :meth:`batches` reads for ``steps`` (one per packing block)."""
        if self.plan.pack is None:
            width = self.sampler.width
            return [range(steps.start * width, steps.stop * width)]
        return self.packer.block_counters(steps)

    def prefetch(self, steps: range, rank: int, world_size: int) -> None:
        """Start decoding, in the background, the row groups that :meth:`batches` for ``steps`` will read.

        Pure arithmetic plus a hint to the decoder: nothing is read on this
        thread and nothing is returned. Readers call it one task ahead.
        """
        if self.packer.lossless:
            return  # lossless packing reads whole shuffle windows, cached across steps
        for stream in self.sampler.streams_of(self.sampler.positions(rank, world_size)):
            for counters in self.counters(steps):
                sources, indices, _ = self.sampler.prefetch_draws(stream, counters)
                for source in np.unique(sources).tolist():
                    self.documents.version(source).prefetch_indices(indices[sources == source])

    def _unpacked_batches(self, steps: range, rank: int, world_size: int, positions: range) -> list[Batch]:
        """Columnar batches: every stream's documents for all ``steps`` read at once, then sliced per step."""
        per_stream = self.sampler.width
        streams = self.sampler.streams_of(positions)
        first = positions.start % per_stream
        width = len(positions) // len(streams)
        [counters] = self.counters(steps)  # unpacked: one range per stream
        read = Documents.concat([self.documents.read(self.sampler.draws(stream, counters), counters) for stream in streams])
        # gather[t, j]: which read document is sample j of the batch of step steps[t]
        within = first + np.arange(width, dtype=np.int64)
        lane = np.concatenate([k * len(steps) * per_stream + within for k in range(len(streams))])
        gather = lane[None, :] + (np.arange(len(steps), dtype=np.int64) * per_stream)[:, None]
        position = np.concatenate([stream * per_stream + within for stream in streams])
        stream_of = np.repeat(np.asarray(streams, dtype=np.int64), width)
        index = np.asarray(steps, dtype=np.int64)[:, None] * self.sampler.global_batch_size + position[None, :]
        flat = gather.ravel()
        records = list(operator.itemgetter(*flat.tolist())(read.records)) if len(flat) > 1 else [read.records[int(flat[0])]]
        sources = read.sources[flat]
        shards = read.shards[flat]
        rows = read.rows[flat]
        inputs, made = self._unpacked_inputs(steps, index.ravel(), sources, shards, rows, records)
        refs = self.documents.source_refs
        versions = np.asarray([version_hash(r.dataset, r.version) for r in refs], dtype=np.uint64)[sources]
        digests = sample_digests(index.ravel(), document_hashes(versions, shards, rows), made).reshape(gather.shape)
        n = gather.shape[1]
        out = []
        for t, step in enumerate(steps):
            part = slice(t * n, (t + 1) * n)
            columns = SampleColumns(
                refs,
                index[t],
                position,
                stream_of,
                sources[part],
                read.epochs[gather[t]],
                read.draws[gather[t]],
                shards[part],
                rows[part],
                records[part],
                None if inputs is None else inputs[part],
                digests[t],
            )
            out.append(Batch(self.name, step, rank, world_size, columns=columns).seal())
        return out

    def _unpacked_inputs(
        self, steps: range, index: np.ndarray, sources: np.ndarray, shards: np.ndarray, rows: np.ndarray, records: list[Record]
    ) -> tuple[list[dict[str, Any]] | None, np.ndarray | None]:
        """Model inputs and made-input hashes of unpacked samples (``None, None`` when no source has transforms)."""
        transforms = [self.documents.transforms(s) for s in range(len(self.documents.sources))]
        if not any(transforms):
            return None, None
        per_step = len(index) // len(steps)
        work = list(enumerate(zip(index.tolist(), sources.tolist(), shards.tolist(), rows.tolist(), records)))

        def one(item: tuple[int, tuple[int, int, int, int, Record]]) -> tuple[dict[str, Any], int]:
            i, (idx, source, shard, row, record) = item
            step = steps[i // per_step]
            inputs = self.documents.transform(
                source, shard, row, record, transforms[source], (0, idx), f"run {self.name} step {step} sample {idx}"
            )
            return inputs, made_hash(made_inputs(record, inputs))

        # Image and video decoding release the GIL: spread them over threads (each sample has its own RNG).
        parallel = all(t.thread_safe for ts in transforms for t in ts) and any(t.releases_gil for ts in transforms for t in ts)
        results = map_in_order(one, work) if parallel else [one(item) for item in work]
        return [r[0] for r in results], np.fromiter((r[1] for r in results), dtype=np.uint64, count=len(results))
