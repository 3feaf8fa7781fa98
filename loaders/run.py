"""Runs: a resolved read plan and the pure function (step, rank) → Batch; also world sizes, ledger and verification."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator


import numpy as np

from . import storage
from .batch import Address, Batch, Document, Sample
from .catalog import Catalog
from .errors import InvalidPlan, RankOutOfRange, StepOutOfRange
from .mixture import Mixture
from .order import SourceOrder
from .plan import ReadPlan
from .run_manifest import ResolvedSource, now, resolve_against, run_dir
from .transforms import Context, PackedSequence, Transform, pack_block
from .version import DatasetVersion

if TYPE_CHECKING:
    from .ledger import Ledger
    from .reader import Reader

_ESTIMATE_BLOCKS = 4


@dataclass(frozen=True)
class WorldSizeSpan:
    """From ``start_step`` on (until the next span), the run ran on ``world_size`` ranks."""

    start_step: int
    world_size: int


@dataclass
class Verification:
    """The ledger compared with a recomputation of one (step, rank)."""

    status: str  # "verified", "mismatch" or "no-ledger"
    step: int
    rank: int
    world_size: int
    computed_digest: str
    ledger_digest: str | None
    differing: list[int]

    @property
    def verified(self) -> bool | None:
        return None if self.status == "no-ledger" else self.status == "verified"

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "verified": self.verified}


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
        self.plan = ReadPlan.from_json(manifest["plan"])
        resolved = manifest["resolved"]
        self.sources = [ResolvedSource(**s) for s in resolved["sources"]]
        self.tokenizers: dict[str, str] = resolved["tokenizers"]
        self.sequences_per_block: int | None = resolved.get("sequences_per_block")
        self.fingerprint: str = manifest.get("fingerprint", "")
        self.mixture = Mixture.build(resolved["counts"])
        streams = self.streams
        self.orders = [
            SourceOrder(s.rows, s.chunk, streams, self.plan.shuffle.window_chunks, self.plan.seed, i, self.plan.shuffle.enabled)
            for i, s in enumerate(self.sources)
        ]
        block = self.mixture.block
        self._phase = [k * block // streams for k in range(streams)]
        self._base = [[self.mixture.count_before(s, self._phase[k]) for s in range(len(self.sources))] for k in range(streams)]
        self._versions: dict[int, DatasetVersion] = {}
        self._blocks: OrderedDict[tuple[int, int], tuple[list[PackedSequence], list[Document]]] = OrderedDict()
        self._lock = threading.Lock()
        self._ledger: "Ledger | None" = None

    # -- description ------------------------------------------------------------
    @property
    def streams(self) -> int:
        assert self.plan.streams is not None
        return self.plan.streams

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

    def __repr__(self) -> str:
        return f"Run({self.name!r}, steps={self.total_steps}, batch={self.global_batch_size}, streams={self.streams})"

    # -- world sizes -----------------------------------------------------------------
    def _world_sizes_path(self) -> str:
        return storage.join(self.directory, "world_sizes.jsonl")

    def world_size_history(self) -> list[WorldSizeSpan]:
        """Spans of steps and the world size in force, in step order (last record for a start step wins)."""
        path = self._world_sizes_path()
        if not storage.stat(path).exists:
            return [WorldSizeSpan(0, 1)]
        spans: dict[int, int] = {}
        for line in storage.read_bytes(path).decode().splitlines():
            if line.strip():
                entry = json.loads(line)
                for start in [s for s in spans if s > entry["start_step"]]:
                    del spans[start]  # a restart from an earlier step supersedes later records
                spans[int(entry["start_step"])] = int(entry["world_size"])
        history = [WorldSizeSpan(s, spans[s]) for s in sorted(spans)]
        return history if history and history[0].start_step == 0 else [WorldSizeSpan(0, 1), *history]

    def world_size_at(self, step: int) -> int:
        """The world size in force at ``step``."""
        size = 1
        for span in self.world_size_history():
            if span.start_step <= step:
                size = span.world_size
        return size

    def record_world_size(self, start_step: int, world_size: int) -> None:
        """Note that from ``start_step`` on the run reads on ``world_size`` ranks (readers call this)."""
        self.check_world_size(world_size)
        history = self.world_size_history()
        recorded = storage.stat(self._world_sizes_path()).exists
        if recorded and self.world_size_at(start_step) == world_size and history[-1].start_step <= start_step:
            return  # already in force, and no later span for this start to supersede
        entry = {"start_step": start_step, "world_size": world_size, "time": now()}
        storage.append_line(self._world_sizes_path(), json.dumps(entry))

    def check_world_size(self, world_size: int) -> None:
        if world_size < 1 or self.streams % world_size:
            raise InvalidPlan(
                f"world size {world_size} is not allowed for run {self.name}: it must divide streams={self.streams} "
                f"(allowed: {', '.join(map(str, self.plan.allowed_world_sizes()))})"
            )

    # -- the pure function ---------------------------------------------------------------
    def check_step(self, step: int) -> None:
        if not 0 <= step < self.total_steps:
            raise StepOutOfRange(f"step {step} is outside run {self.name} (steps 0 to {self.total_steps - 1})")

    def positions(self, rank: int, world_size: int) -> range:
        """Positions of the global batch that ``rank`` of ``world_size`` reads (a contiguous range)."""
        per_rank = self.global_batch_size // world_size
        return range(rank * per_rank, (rank + 1) * per_rank)

    def draw(self, stream: int, counter: int) -> tuple[int, int, int]:
        """``(source, record index, epoch)`` of the ``counter``-th document of ``stream``."""
        source, n = self.mixture.draw(counter + self._phase[stream])
        n -= self._base[stream][source]
        record, epoch = self.orders[source].record(stream, n)
        return source, record, epoch

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

    def draws(self, stream: int, counters: range) -> list[tuple[int, int, int, int]]:
        """``(counter, source, record index, epoch)`` for documents ``counters`` of ``stream`` (vectorized :meth:`draw`)."""
        positions = np.arange(counters.start, counters.stop, dtype=np.int64) + self._phase[stream]
        sources, n = self.mixture.draw_many(positions)
        out: list[tuple[int, int, int, int]] = [(0, 0, 0, 0)] * len(positions)
        for source in set(sources.tolist()):
            picked = np.flatnonzero(sources == source)
            draws = n[picked] - self._base[stream][source]
            records, epochs = self.orders[source].records(stream, draws)
            for i, record, epoch in zip(picked.tolist(), records.tolist(), epochs.tolist()):
                out[i] = (counters.start + i, source, record, epoch)
        return out

    def _documents(self, stream: int, counters: range, *, index: int | None = None) -> list[Document]:
        """Read documents ``counters`` of ``stream`` (reads grouped per row group)."""
        draws = self.draws(stream, counters)
        by_source: dict[int, list[int]] = {}
        for position, (_, source, _, _) in enumerate(draws):
            by_source.setdefault(source, []).append(position)
        documents: list[Document | None] = [None] * len(draws)
        for source, positions in by_source.items():
            version = self.version(source)
            located = version.locate_many([draws[p][2] for p in positions])
            fetched = version.read_many(located)
            name, version_id, ref, key = version.name, version.id, self.sources[source].ref, version.key
            for p, (shard, row), record in zip(positions, located, fetched):
                counter, _, _, epoch = draws[p]
                documents[p] = Document(
                    source, ref, str(record[key]) if key is not None else version.key_of(record),
                    Address(name, version_id, shard, row), epoch, record, None, counter,
                )
        return documents  # type: ignore[return-value]

    def _transform(self, doc: Document, transforms: list[Transform], rng_key: tuple[int, ...], where: str) -> dict[str, Any]:
        inputs = dict(doc.record)
        if not transforms:
            return inputs
        version = self.version(doc.source)
        ctx = self._context(version, rng_key, f"{where} ({version.where(doc.address.shard, doc.address.row)})", doc.address.shard)
        for transform in transforms:
            transform.apply(inputs, ctx)
        return inputs

    def _doc_transforms(self, source: int) -> list[Transform]:
        return [*self.plan.sources[source].transforms, *self.plan.document_transforms]

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
                doc, self._doc_transforms(doc.source), (1, stream, doc.draw), f"run {self.name} stream {stream} document {doc.draw}"
            )
            if "input_ids" not in inputs:
                raise InvalidPlan(
                    f"run {self.name}: documents of source {doc.source_name} have no input_ids before pack; "
                    "add tokenize, chat_template or use_tokens to that source"
                )
            tokenized.append((inputs["input_ids"], inputs.get("loss_mask") or [1] * len(inputs["input_ids"])))
        sequences, _dropped = pack_block(
            tokenized, seq_len=pack.seq_len, sequences=self.sequences_per_block, pad_id=pack.pad_id
        )
        with self._lock:
            self._blocks[key] = (sequences, documents)
            while len(self._blocks) > 4 * self.streams + 8:
                self._blocks.popitem(last=False)
        return sequences, documents

    def _estimate_sequences_per_block(self) -> int:
        pack = self.plan.pack
        assert pack is not None
        self.sequences_per_block = 1
        tokens = 0
        for block in range(_ESTIMATE_BLOCKS):
            _, documents = self._packed_block(0, block)
            for doc in documents:
                inputs = self._transform(doc, self._doc_transforms(doc.source), (1, 0, doc.draw), f"run {self.name} estimate")
                tokens += len(inputs["input_ids"])
        with self._lock:
            self._blocks.clear()
        return max(1, round(tokens / _ESTIMATE_BLOCKS / pack.seq_len))

    def _packed_sample(self, step: int, position: int) -> Sample:
        per_stream = self.global_batch_size // self.streams
        stream, i = divmod(position, per_stream)
        assert self.sequences_per_block is not None
        block, q = divmod(step * per_stream + i, self.sequences_per_block)
        sequences, documents = self._packed_block(stream, block)
        seq = sequences[q]
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
        out = [Batch(self.name, step, rank, world_size) for step in steps]
        positions = self.positions(rank, world_size)
        if self.plan.pack is not None:
            for batch in out:
                batch.samples = [self._packed_sample(batch.step, p) for p in positions]
                batch.seal()
            return out
        per_stream = self.global_batch_size // self.streams
        first = positions.start % per_stream
        last = (positions.stop - 1) % per_stream if len(positions) < per_stream else per_stream - 1
        for stream in sorted({p // per_stream for p in positions}):
            documents = self._documents(stream, range(steps.start * per_stream, steps.stop * per_stream))
            for batch in out:
                base = (batch.step - steps.start) * per_stream
                for i in range(first, last + 1):
                    doc = documents[base + i]
                    p = stream * per_stream + i
                    index = batch.step * self.global_batch_size + p
                    inputs = self._transform(
                        doc, self._doc_transforms(doc.source), (0, index), f"run {self.name} step {batch.step} sample {index}"
                    )
                    batch.samples.append(Sample(index, p, stream, [doc], inputs))
        for batch in out:
            batch.seal()
        return out

    def addresses(self, step: int, rank: int = 0, *, world_size: int = 1) -> list[tuple[int, int, int]]:
        """``(source, record index, epoch)`` of each document of an unpacked step — pure arithmetic, no reads."""
        self.check_step(step)
        self.check_world_size(world_size)
        per_stream = self.global_batch_size // self.streams
        return [
            self.draw(p // per_stream, step * per_stream + p % per_stream) for p in self.positions(rank, world_size)
        ]

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
        """Compare an already computed batch with the ledger entry for its step, rank and world size."""
        entry = self.ledger.entry(batch.step, batch.rank, batch.world_size)
        if entry is None:
            return Verification("no-ledger", batch.step, batch.rank, batch.world_size, batch.digest, None, [])
        if entry.digest == batch.digest:
            return Verification("verified", batch.step, batch.rank, batch.world_size, batch.digest, entry.digest, [])
        differing = [
            s.index
            for i, s in enumerate(batch.samples)
            if i >= len(entry.samples) or entry.samples[i] != s.digest or entry.indices[i] != s.index
        ]
        return Verification(
            "mismatch", batch.step, batch.rank, batch.world_size, batch.digest, entry.digest, differing or batch.indices
        )

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

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary of the run."""
        return {
            "name": self.name,
            "created": self.manifest.get("created"),
            "fingerprint": self.fingerprint,
            "plan": self.manifest["plan"],
            "sources": [s.to_json() for s in self.sources],
            "total_steps": self.total_steps,
            "streams": self.streams,
            "sequences_per_block": self.sequences_per_block,
            "world_sizes": [span.__dict__ for span in self.world_size_history()],
        }
