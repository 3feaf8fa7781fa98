"""Runs: a resolved read plan and the pure function (step, rank) → Batch; also world sizes, ledger and verification."""

from __future__ import annotations

import functools
import operator
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator


import numpy as np

from . import storage
from .batch import Batch, Document, Sample, SampleColumns, SourceRef, made_inputs
from .digests import document_hashes, made_hash, sample_digests, version_hash
from .catalog import Catalog
from .concat_packing import ConcatPacking, PackingWaste
from .errors import CorruptData, InvalidPlan, RankOutOfRange, StepOutOfRange
from .lane_order import LaneOrder
from .mixture import Mixture
from .order import SourceOrder
from .step_mixture import StepMixture
from . import token_index
from .plan import ReadPlan, ResolvedSource
from .pool import map_in_order
from .records import Record
from .run_manifest import read_format, resolve_against, run_dir, stored_plan_json
from .sampler import Drawn, Sampler
from .transforms import Context, PackedSequence, Transform, pack_block
from .verification import Verification, compare_with_ledger
from .version import DatasetVersion
from .world_sizes import WorldSizeLog, WorldSizeSpan, check_world_size

if TYPE_CHECKING:
    from .ledger import Ledger
    from .reader import Reader
    from .where import WhereReads

_ESTIMATE_BLOCKS = 4
#: Fixed-block packing waste is measured over every block up to this many documents, else over the first blocks.
WASTE_EXACT_DOCUMENTS = 20_000


@dataclass(frozen=True)
class _Documents:
    """Documents read for a range of draws, as parallel columns."""

    sources: np.ndarray
    epochs: np.ndarray
    draws: np.ndarray
    shards: np.ndarray
    rows: np.ndarray
    records: list[Record]

    @staticmethod
    def concat(parts: list["_Documents"]) -> "_Documents":
        if len(parts) == 1:
            return parts[0]
        return _Documents(
            *(np.concatenate([getattr(p, name) for p in parts]) for name in ("sources", "epochs", "draws", "shards", "rows")),
            [r for p in parts for r in p.records],
        )


def _key_column(column: str, record: Record) -> str:
    return str(record[column])


class Run:
    """A run: its manifest and the pure function ``batch(step, rank)``.

    >>> run = catalog.create_run("demo", plan)      # doctest: +SKIP
    >>> batch = run.batch(120, rank=1)               # doctest: +SKIP
    >>> [s.key for s in batch.samples][:2]           # doctest: +SKIP
    ['json.loads', 'os.path.join']
    """

    def __init__(self, catalog: Catalog, manifest: dict[str, Any]) -> None:
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
        self._concat: ConcatPacking | None = None
        self._versions: dict[int, DatasetVersion] = {}
        self._blocks: OrderedDict[tuple[int, int], tuple[list[PackedSequence], list[Document]]] = OrderedDict()
        self._block_dropped: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()
        self._ledger: "Ledger | None" = None
        self._refs: list[SourceRef] | None = None

    # -- description ------------------------------------------------------------
    @property
    def streams(self) -> int:
        return self.sampler.streams

    @property
    def total_steps(self) -> int:
        return int(self.manifest["resolved"]["total_steps"])

    @property
    def global_batch_size(self) -> int:
        return self.plan.global_batch_size

    @property
    def directory(self) -> str:
        return run_dir(self.catalog, self.name)

    def version(self, source: int) -> DatasetVersion:
        """The pinned dataset version of source ``source``."""
        if source not in self._versions:
            s = self.sources[source]
            self._versions[source] = self.catalog.resolve(f"{s.dataset}@{s.version}")
        return self._versions[source]

    @property
    def step_mixture(self) -> StepMixture | None:
        """Read format 3's per-step mixture (``None`` in formats 1 and 2)."""
        return self.sampler.step_mixture

    @property
    def lane_orders(self) -> list[LaneOrder]:
        """Read format 3's order of each source's records."""
        return self.sampler.lane_orders

    @property
    def mixture(self) -> Mixture | None:
        """Read formats 1 and 2's block pattern (``None`` in format 3)."""
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

    def _context(self, version: DatasetVersion | None, rng_key: tuple[int, ...], where: str, shard: int | None) -> Context:
        shard_uri = version.shards[shard].uri if version is not None and shard is not None else None
        return Context(
            catalog=self.catalog,
            seed_key=(self.plan.seed, *rng_key),
            where=where,
            version=version,
            tokenizers=self.tokenizers,
            shard_uri=shard_uri,
        )

    def draws(self, stream: int, counters: range) -> Drawn:
        """``(sources, record indices, epochs)`` of documents ``counters`` of ``stream`` (vectorized :meth:`draw`)."""
        return self.sampler.draws(stream, counters)

    def _read(self, stream: int, counters: range) -> _Documents:
        """Read documents ``counters`` of ``stream`` as columns (each row group read and converted once)."""
        sources, indices, epochs = self.draws(stream, counters)
        present = np.unique(sources).tolist()
        if len(present) == 1:
            version = self.version(present[0])
            shards, rows = version.locate_arrays(indices)
            records = version.read_indices(indices)
        else:
            shards, rows = np.empty_like(indices), np.empty_like(indices)
            slots: list[Record | None] = [None] * len(indices)
            for source in present:
                picked = np.flatnonzero(sources == source)
                version = self.version(source)
                shards[picked], rows[picked] = version.locate_arrays(indices[picked])
                for p, record in zip(picked.tolist(), version.read_indices(indices[picked])):
                    slots[p] = record
            records = slots  # type: ignore[assignment]
        draws = np.arange(counters.start, counters.stop, dtype=np.int64)
        return _Documents(sources, epochs, draws, shards, rows, records)

    def _documents(self, stream: int, counters: range) -> list[Document]:
        """Documents ``counters`` of ``stream`` as objects (the packing path needs them one by one)."""
        read = self._read(stream, counters)
        refs = self.source_refs
        return [
            refs[source].document(source, shard, row, epoch, record, draw)
            for source, epoch, draw, shard, row, record in zip(
                read.sources.tolist(), read.epochs.tolist(), read.draws.tolist(), read.shards.tolist(), read.rows.tolist(), read.records
            )
        ]

    @property
    def source_refs(self) -> list[SourceRef]:
        """How batches name each source's documents (opens every pinned version)."""
        if self._refs is None:
            refs = []
            for i, source in enumerate(self.sources):
                version = self.version(i)
                key_of = version.key_of if version.key is None else functools.partial(_key_column, version.key)
                suffixed = {(shard, row): key for shard, row, key in version.manifest.key_suffixes}
                refs.append(SourceRef(source.ref, version.name, version.id, key_of, suffixed))
            self._refs = refs
        return self._refs

    def _transform(
        self, source: int, shard: int, row: int, record: Record, transforms: list[Transform], rng_key: tuple[int, ...], where: str
    ) -> dict[str, Any]:
        inputs = dict(record)
        if not transforms:
            return inputs
        version = self.version(source)
        ctx = self._context(version, rng_key, f"{where} ({version.where(shard, row)})", shard)
        for transform in transforms:
            transform.apply(inputs, ctx)
        return inputs

    def _doc_transforms(self, source: int) -> list[Transform]:
        return [*self.plan.sources[source].transforms, *self.plan.document_transforms]

    # -- packing ------------------------------------------------------------------------
    def read_documents(
        self, source: int, records: np.ndarray, epochs: np.ndarray, positions: np.ndarray
    ) -> tuple[list[Document], list[dict[str, Any]]]:
        """Documents ``records`` of ``source`` and their document-transformed inputs (read format 3 keying)."""
        version = self.version(source)
        shards, rows = version.locate_arrays(records)
        raw = version.read_indices(records)
        ref = self.source_refs[source]
        documents = [
            ref.document(source, shard, row, epoch, record, position)
            for shard, row, epoch, record, position in zip(shards.tolist(), rows.tolist(), epochs.tolist(), raw, positions.tolist())
        ]
        return documents, self._document_inputs(source, records, shards, rows, raw)

    def _document_inputs(
        self, source: int, records: np.ndarray, shards: np.ndarray, rows: np.ndarray, raw: list[Record]
    ) -> list[dict[str, Any]]:
        """Document transforms applied to records of ``source``, batched, each keyed by its record (so every epoch
        tokenizes a record the same way)."""
        version = self.version(source)
        inputs = [dict(r) for r in raw]
        contexts = [
            self._context(version, (2, source, record), f"run {self.name} ({version.where(shard, row)})", shard)
            for record, shard, row in zip(records.tolist(), shards.tolist(), rows.tolist())
        ]
        for transform in self._doc_transforms(source):
            transform.apply_many(list(zip(inputs, contexts)))
        if inputs:
            self._require_tokens(inputs[0], self.sources[source].ref)
        return inputs

    def _require_tokens(self, inputs: dict[str, Any], source: str) -> None:
        """Packing needs token ids: refuse, naming the source, documents its transforms did not tokenize."""
        if "input_ids" not in inputs:
            raise InvalidPlan(
                f"run {self.name}: documents of source {source} have no input_ids before pack; "
                "add tokenize, chat_template or use_tokens to that source"
            )

    def token_counts(self, source: int) -> np.ndarray:
        """Tokens per chunk of ``source`` (read format 3 packing): stored with the run, verified, rebuilt if stale."""
        entry = self.manifest["resolved"]["token_counts"][source]
        counts, _ = token_index.load_or_build(
            self.catalog.path("token-counts", f"{entry['key']}.npy"),
            entry.get("sha256"),
            lambda: token_index.chunk_sums(self.count_record_tokens(source), self.sources[source].chunk),
        )
        return counts

    def record_token_counts(self, source: int) -> np.ndarray | None:
        """Tokens of every record of ``source``, when the run pinned them (runs created before did not: None).

        Checked against the file's pinned digest (rebuilt when stale) and against the chunk counts they sum to.
        """
        pinned = self.manifest["resolved"].get("record_token_counts")
        entry = pinned[source] if pinned else None
        if entry is None:
            return None
        path = self.catalog.path("token-counts", token_index.records_path(entry["key"]))
        counts, _ = token_index.load_or_build(path, entry["sha256"], lambda: self.count_record_tokens(source))
        if not np.array_equal(token_index.chunk_sums(counts, self.sources[source].chunk), self.token_counts(source)):
            raise CorruptData(f"token counts {path}: the per-record counts do not sum to the run's counts per chunk")
        return counts

    def count_record_tokens(self, source: int) -> np.ndarray:
        """Tokenize every record of ``source`` with its document transforms: tokens per record (what the indexes hold)."""
        version = self.version(source)

        def lengths(indices: np.ndarray) -> list[int]:
            shards, rows = version.locate_arrays(indices)
            inputs = self._document_inputs(source, indices, shards, rows, version.read_indices(indices))
            return [len(i["input_ids"]) for i in inputs]

        return token_index.build_record_counts(self.sources[source].rows, lengths)

    @property
    def concat(self) -> ConcatPacking:
        """Lossless packing's sequence lookup (runs packed with ``Pack(strategy="concat")``)."""
        if self._concat is None:
            counts = [self.token_counts(s) for s in range(len(self.sources))]
            records = [self.record_token_counts(s) for s in range(len(self.sources))]
            self._concat = ConcatPacking(self, self.lane_orders, counts, records)
        return self._concat

    @property
    def lossless_packing(self) -> bool:
        """Whether this run packs with lossless concat-and-chunk (read format 3, the default strategy)."""
        pack = self.plan.pack
        return pack is not None and self.read_format >= 3 and pack.strategy == "concat"

    def _packed_block(self, stream: int, block: int) -> tuple[list[PackedSequence], list[Document]]:
        key = (stream, block)
        with self._lock:
            cached = self._blocks.get(key)
            if cached is not None:
                self._blocks.move_to_end(key)
                return cached
        pack = self.plan.pack
        assert pack is not None and self.sequences_per_block is not None
        d = pack.docs_per_block
        documents = self._documents(stream, range(block * d, (block + 1) * d))
        tokenized = []
        for doc in documents:
            inputs = self._transform(
                doc.source, doc.address.shard, doc.address.row, doc.record, self._doc_transforms(doc.source),
                (1, stream, doc.draw), f"run {self.name} stream {stream} document {doc.draw}",
            )
            self._require_tokens(inputs, doc.source_name)
            tokenized.append((inputs["input_ids"], inputs.get("loss_mask") or [1] * len(inputs["input_ids"])))
        positions = pack.position_ids if self.read_format >= 3 else "offset"
        sequences, dropped = pack_block(
            tokenized, seq_len=pack.seq_len, sequences=self.sequences_per_block, pad_id=pack.pad_id, positions=positions
        )
        with self._lock:
            self._blocks[key] = (sequences, documents)
            self._block_dropped[key] = dropped
            while len(self._blocks) > 4 * self.streams + 8:
                old, _ = self._blocks.popitem(last=False)
                self._block_dropped.pop(old, None)
        return sequences, documents

    def packing_waste(self) -> PackingWaste | None:
        """Document tokens packed, and tokens padded and dropped, over the run's steps (None when not packed).

        Lossless packing: exact, from the token counts. Fixed-block packing:
        exact when the run's blocks hold at most :data:`WASTE_EXACT_DOCUMENTS`
        documents, else measured on the first blocks of every stream and
        marked ``exact=False``.
        """
        pack = self.plan.pack
        if pack is None:
            return None
        per_stream = self.global_batch_size // self.streams
        if self.lossless_packing:
            assert self.step_mixture is not None
            read = {
                (k, s): int(n)
                for k in range(self.streams)
                for s, n in enumerate(self.step_mixture.draws_before(k, self.total_steps).tolist())
                if n
            }
            return self.concat.waste(read)
        assert self.sequences_per_block is not None
        blocks = -(-self.total_steps * per_stream // self.sequences_per_block)
        measured = min(blocks, max(1, WASTE_EXACT_DOCUMENTS // (pack.docs_per_block * self.streams)))
        tokens = padding = dropped = 0
        for stream in range(self.streams):
            for block in range(measured):
                sequences, _ = self._packed_block(stream, block)
                padding += sum(seq.padding for seq in sequences)
                tokens += sum(len(seq.input_ids) - seq.padding for seq in sequences)
                dropped += self._block_dropped.get((stream, block), 0)
        sequences = measured * self.sequences_per_block * self.streams
        note = "" if measured == blocks else f"measured on the first {measured} of {blocks} blocks of every stream"
        return PackingWaste(tokens, padding, dropped, sequences, pack.seq_len, measured == blocks, note)

    def _estimate_sequences_per_block(self) -> int:
        pack = self.plan.pack
        assert pack is not None
        self.sequences_per_block = 1
        tokens = 0
        for block in range(_ESTIMATE_BLOCKS):
            _, documents = self._packed_block(0, block)
            for doc in documents:
                inputs = self._transform(
                    doc.source, doc.address.shard, doc.address.row, doc.record, self._doc_transforms(doc.source),
                    (1, 0, doc.draw), f"run {self.name} estimate",
                )
                tokens += len(inputs["input_ids"])
        with self._lock:
            self._blocks.clear()
        return max(1, round(tokens / _ESTIMATE_BLOCKS / pack.seq_len))

    def _packed_sample(self, step: int, position: int) -> Sample:
        per_stream = self.global_batch_size // self.streams
        stream, i = divmod(position, per_stream)
        if self.lossless_packing:
            assert self.step_mixture is not None
            sources, n = self.step_mixture.draws(stream, np.asarray([step * per_stream + i]))
            seq, documents = self.concat.sequence(stream, int(sources[0]), int(n[0]))
            return self._sequence_sample(step, position, stream, seq, documents, dropped=0)
        assert self.sequences_per_block is not None
        block, q = divmod(step * per_stream + i, self.sequences_per_block)
        sequences, documents = self._packed_block(stream, block)
        dropped = self._block_dropped.get((stream, block), 0) if q == self.sequences_per_block - 1 else 0
        return self._sequence_sample(step, position, stream, sequences[q], documents, dropped=dropped)

    def _sequence_sample(
        self, step: int, position: int, stream: int, seq: PackedSequence, documents: list[Document], *, dropped: int
    ) -> Sample:
        """A packed sequence as a sample: its documents (with their spans) and model inputs."""
        docs = []
        spans = []
        for span in seq.spans:
            source_doc = documents[span.document]
            docs.append(
                Document(
                    source_doc.source, source_doc.source_name, source_doc.key, source_doc.address, source_doc.epoch,
                    source_doc.record, span.to_json(), source_doc.draw,
                )
            )
            spans.append({**span.to_json(), "key": source_doc.key})
        index = step * self.global_batch_size + position
        inputs: dict[str, Any] = {
            "input_ids": list(seq.input_ids),
            "loss_mask": list(seq.loss_mask),
            "position_ids": list(seq.position_ids),
            "doc_spans": spans,
            "padding": seq.padding,
        }
        if self.read_format >= 3:  # older formats keep their inputs (and so their digests) exactly
            inputs["cu_seqlens"] = list(seq.cu_seqlens)
            inputs["dropped"] = dropped
        if not docs:  # an all-padding sequence (the block's documents ran out)
            docs = [documents[-1]]
        ctx = self._context(None, (0, index), f"run {self.name} step {step} sample {index}", None)
        for transform in self.plan.sequence_transforms:
            transform.apply(inputs, ctx)
        return Sample(index, position, stream, docs, inputs)

    def _check(self, step: int, rank: int, world_size: int | None) -> int:
        self.check_step(step)
        if world_size is None:
            world_size = self.world_size_at(step)
        else:
            self.check_world_size(world_size)
        if not 0 <= rank < world_size:
            raise RankOutOfRange(
                f"rank {rank} is not below the world size {world_size} in force at step {step} of run {self.name}"
            )
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
        positions = self.positions(rank, world_size)
        if self.plan.pack is not None:
            return [
                Batch(self.name, step, rank, world_size, [self._packed_sample(step, p) for p in positions]).seal()
                for step in steps
            ]
        return self._unpacked_batches(steps, rank, world_size, positions)

    def _unpacked_batches(self, steps: range, rank: int, world_size: int, positions: range) -> list[Batch]:
        """Columnar batches: every stream's documents for all ``steps`` read at once, then sliced per step."""
        per_stream = self.global_batch_size // self.streams
        streams = self.sampler.streams_of(positions)
        first = positions.start % per_stream
        width = len(positions) // len(streams)
        [counters] = self._counters(steps)  # unpacked: one range per stream
        reads = [self._read(stream, counters) for stream in streams]
        read = _Documents.concat(reads)
        # gather[t, j]: which read document is sample j of the batch of step steps[t]
        within = first + np.arange(width, dtype=np.int64)
        lane = np.concatenate([k * len(steps) * per_stream + within for k in range(len(streams))])
        gather = lane[None, :] + (np.arange(len(steps), dtype=np.int64) * per_stream)[:, None]
        position = np.concatenate([stream * per_stream + within for stream in streams])
        stream_of = np.repeat(np.asarray(streams, dtype=np.int64), width)
        index = np.asarray(steps, dtype=np.int64)[:, None] * self.global_batch_size + position[None, :]
        flat = gather.ravel()
        records = list(operator.itemgetter(*flat.tolist())(read.records)) if len(flat) > 1 else [read.records[int(flat[0])]]
        sources = read.sources[flat]
        shards = read.shards[flat]
        rows = read.rows[flat]
        inputs, made = self._unpacked_inputs(steps, index.ravel(), sources, shards, rows, records)
        refs = self.source_refs
        versions = np.asarray([version_hash(r.dataset, r.version) for r in refs], dtype=np.uint64)[sources]
        digests = sample_digests(index.ravel(), document_hashes(versions, shards, rows), made).reshape(gather.shape)
        n = gather.shape[1]
        out = []
        for t, step in enumerate(steps):
            part = slice(t * n, (t + 1) * n)
            columns = SampleColumns(
                refs, index[t], position, stream_of, sources[part], read.epochs[gather[t]], read.draws[gather[t]],
                shards[part], rows[part], records[part], None if inputs is None else inputs[part], digests[t],
            )
            out.append(Batch(self.name, step, rank, world_size, columns=columns).seal())
        return out

    def _unpacked_inputs(
        self, steps: range, index: np.ndarray, sources: np.ndarray, shards: np.ndarray, rows: np.ndarray, records: list[Record]
    ) -> tuple[list[dict[str, Any]] | None, np.ndarray | None]:
        """Model inputs and made-input hashes of unpacked samples (``None, None`` when no source has transforms)."""
        transforms = [self._doc_transforms(s) for s in range(len(self.sources))]
        if not any(transforms):
            return None, None
        per_step = len(index) // len(steps)
        work = list(enumerate(zip(index.tolist(), sources.tolist(), shards.tolist(), rows.tolist(), records)))

        def one(item: tuple[int, tuple[int, int, int, int, Record]]) -> tuple[dict[str, Any], int]:
            i, (idx, source, shard, row, record) = item
            step = steps[i // per_step]
            inputs = self._transform(
                source, shard, row, record, transforms[source], (0, idx), f"run {self.name} step {step} sample {idx}"
            )
            return inputs, made_hash(made_inputs(record, inputs))

        # Image and video decoding release the GIL: spread them over threads (each sample has its own RNG).
        parallel = all(t.thread_safe for ts in transforms for t in ts) and any(t.releases_gil for ts in transforms for t in ts)
        results = map_in_order(one, work) if parallel else [one(item) for item in work]
        return [r[0] for r in results], np.fromiter((r[1] for r in results), dtype=np.uint64, count=len(results))

    def prefetch(self, steps: range, rank: int = 0, *, world_size: int) -> None:
        """Start decoding, in the background, the row groups that :meth:`batches` for ``steps`` will read.

        Pure arithmetic plus a hint to the decoder: nothing is read on this
        thread and nothing is returned. Readers call it one task ahead.
        """
        if not steps or steps.start >= self.total_steps or self.lossless_packing:
            return  # lossless packing reads whole shuffle windows, cached across steps
        steps = range(steps.start, min(steps.stop, self.total_steps))
        for stream in self.sampler.streams_of(self.positions(rank, world_size)):
            for counters in self._counters(steps):
                sources, indices, _ = self.sampler.prefetch_draws(stream, counters)
                for source in np.unique(sources).tolist():
                    self.version(source).prefetch_indices(indices[sources == source])

    def _counters(self, steps: range) -> list[range]:
        """The ranges of one stream's documents that :meth:`batches` reads for ``steps`` (one per packing block)."""
        per_stream = self.global_batch_size // self.streams
        if self.plan.pack is None:
            return [range(steps.start * per_stream, steps.stop * per_stream)]
        assert self.sequences_per_block is not None
        d = self.plan.pack.docs_per_block
        first = (steps.start * per_stream) // self.sequences_per_block
        last = (steps.stop * per_stream - 1) // self.sequences_per_block
        return [range(block * d, (block + 1) * d) for block in range(first, last + 1)]

    def addresses(self, step: int, rank: int = 0, *, world_size: int = 1) -> list[tuple[int, int, int]]:
        """``(source, record index, epoch)`` of each document of an unpacked step — pure arithmetic, no reads."""
        self.check_step(step)
        self.check_world_size(world_size)
        return self.sampler.addresses(step, self.positions(rank, world_size))

    def where(self, source: int, record: int, **options: Any) -> "WhereReads":
        """Where this run read ``record`` of ``source``, per epoch (``first_epoch``, ``epochs``): see
        :func:`loaders.where.where_read`."""
        from .where import where_read

        return where_read(self, source, record, **options)

    def global_batch(self, step: int) -> Iterator[Batch]:
        """Every rank's batch at ``step`` under the world size in force then."""
        world_size = self.world_size_at(step)
        for rank in range(world_size):
            yield self.batch(step, rank, world_size=world_size)

    # -- ledger and reading ---------------------------------------------------------------
    @property
    def ledger(self) -> "Ledger":
        from .ledger import Ledger

        if self._ledger is None:
            self._ledger = Ledger(storage.join(self.directory, "ledger"))
        return self._ledger

    def verify(self, step: int, rank: int = 0) -> Verification:
        """Recompute ``(step, rank)`` and compare with what the ledger recorded."""
        return self.compare(self.batch(step, rank, world_size=self.world_size_at(step)))

    def compare(self, batch: Batch) -> Verification:
        """Compare an already computed batch with the ledger record for its step, rank and world size."""
        return compare_with_ledger(self, batch)

    def against(self, other: str) -> "Run":
        """This run's plan re-resolved with one source swapped: ``name@version-or-tag``, or another run's versions.

        The result is an unsaved run with the same steps, so ``batch(step, rank)``
        shows what this run would have read at that step had the source been
        that version (useful before swapping a version into a running job).
        """
        return Run(self.catalog, resolve_against(self, other))

    def reader(self, rank: int = 0, world_size: int = 1, **options: Any) -> "Reader":
        """The production iterator for one rank (see :class:`loaders.reader.Reader`)."""
        from .reader import Reader

        return Reader(self, rank, world_size, **options)
