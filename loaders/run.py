"""Runs: a read plan with every tag resolved, and the pure function (step, rank) → Batch."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import statistics
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator


import numpy as np

from . import storage
from .batch import Address, Batch, Document, Sample
from .catalog import Catalog, check_name
from .errors import InvalidPlan, RankOutOfRange, RunNotFound, StepOutOfRange
from .mixture import Mixture, apportion
from .order import SourceOrder
from .plan import ReadPlan
from .transforms import Context, PackedSequence, Transform, pack_block
from .version import DatasetVersion

if TYPE_CHECKING:
    from .ledger import Ledger
    from .reader import Reader

_ESTIMATE_BLOCKS = 4


@dataclass(frozen=True)
class ResolvedSource:
    """A plan source pinned to one version, with the numbers the order needs."""

    ref: str
    dataset: str
    version: str
    rows: int
    weight: float
    chunk: int

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


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


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _median_row_group(version: DatasetVersion) -> int:
    sizes = [n for shard in version.shards for n in shard.row_groups if n > 0]
    return int(statistics.median(sizes)) if sizes else 1


def _run_dir(catalog: Catalog, name: str) -> str:
    return catalog.path("runs", check_name("run", name))


def create_run(catalog: Catalog, name: str, plan: ReadPlan, *, exist_ok: bool = False) -> "Run":
    """Resolve ``plan`` against ``catalog`` and write the run manifest (see :meth:`Catalog.create_run`)."""
    path = storage.join(_run_dir(catalog, name), "run.json")
    versions = [catalog.resolve(s.ref) for s in plan.sources]
    weights = [float(s.weight) if s.weight is not None else float(v.rows) for s, v in zip(plan.sources, versions)]
    for source, version in zip(plan.sources, versions):
        if version.rows == 0:
            raise InvalidPlan(f"source {source.ref} resolves to {version.ref}, which has no rows")
    sources = []
    for source, version, weight in zip(plan.sources, versions, weights):
        chunk = plan.shuffle.chunk_size or _median_row_group(version) * plan.shuffle.chunk_row_groups
        sources.append(ResolvedSource(source.ref, version.name, version.id, version.rows, weight, max(1, min(chunk, version.rows))))
    counts = apportion(weights, plan.mixture_block)
    tokenizers: dict[str, str] = {}
    all_transforms = list(plan.transforms) + [t for s in plan.sources for t in s.transforms]
    for t in all_transforms:
        for tok in t.tokenizer_names():
            tokenizers[tok] = catalog.tokenizer_id(tok)
    for version in versions:
        if version.tokenizer:
            tokenizers.setdefault(version.tokenizer, catalog.tokenizer_id(version.tokenizer))
    resolved: dict[str, Any] = {
        "sources": [s.to_json() for s in sources],
        "counts": counts,
        "tokenizers": tokenizers,
        "sequences_per_block": None,
        "total_steps": plan.steps,
    }
    manifest = {"format": "batchscope.run/1", "name": name, "created": _now(), "plan": plan.to_json(), "resolved": resolved}
    run = Run(catalog, manifest)
    if plan.pack is not None:
        resolved["sequences_per_block"] = plan.pack.sequences_per_block or run._estimate_sequences_per_block()
        run = Run(catalog, manifest)
    if plan.epochs is not None:
        docs_per_sample = 1.0
        if plan.pack is not None:
            docs_per_sample = plan.pack.docs_per_block / resolved["sequences_per_block"]
        need = max(
            s.rows * plan.mixture_block / (c * docs_per_sample) for s, c in zip(sources, counts)
        )
        resolved["total_steps"] = max(1, math.ceil(plan.epochs * need / plan.global_batch_size))
    manifest["fingerprint"] = hashlib.sha256(
        json.dumps({"plan": manifest["plan"], "resolved": resolved}, sort_keys=True).encode()
    ).hexdigest()[:32]
    existing = storage.stat(path)
    if existing.exists:
        old = json.loads(storage.read_bytes(path))
        if old.get("fingerprint") == manifest["fingerprint"] and exist_ok:
            return Run(catalog, old)
        raise InvalidPlan(
            f"run {name!r} already exists in {catalog.root}"
            + (" with a different plan or different resolved versions" if old.get("fingerprint") != manifest["fingerprint"] else "")
            + "; pick another name"
            + ("" if exist_ok else " or pass exist_ok=True to reopen an identical run")
        )
    storage.write_bytes_atomic(path, json.dumps(manifest, indent=1).encode())
    return Run(catalog, manifest)


def open_run(catalog: Catalog, name: str) -> "Run":
    path = storage.join(_run_dir(catalog, name), "run.json")
    if not storage.stat(path).exists:
        runs = ", ".join(catalog.runs()) or "none"
        raise RunNotFound(f"no run named {name!r} in catalog {catalog.root} (runs: {runs})")
    return Run(catalog, json.loads(storage.read_bytes(path)))


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
        return _run_dir(self.catalog, self.name)

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
        if storage.stat(self._world_sizes_path()).exists and any(
            s.start_step == start_step and s.world_size == world_size for s in history
        ) and history[-1].start_step <= start_step:
            return
        if not storage.stat(self._world_sizes_path()).exists and start_step == 0 and world_size == 1:
            pass
        storage.append_line(self._world_sizes_path(), json.dumps({"start_step": start_step, "world_size": world_size, "time": _now()}))

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
        swaps: dict[str, str] = {}
        if "@" in other:
            version = self.catalog.resolve(other)
            swaps[version.name] = version.id
        else:
            other_run = self.catalog.run(other)
            swaps = {s.dataset: s.version for s in other_run.sources}
        if not any(s.dataset in swaps for s in self.sources):
            datasets = ", ".join(s.dataset for s in self.sources)
            raise InvalidPlan(f"{other!r} names no dataset of run {self.name} (its sources read: {datasets})")
        sources = []
        for source, plan_source in zip(self.sources, self.plan.sources):
            if source.dataset not in swaps or swaps[source.dataset] == source.version:
                sources.append(source.to_json())
                continue
            version = self.catalog.resolve(f"{source.dataset}@{swaps[source.dataset]}")
            weight = source.weight if plan_source.weight is not None else float(version.rows)
            chunk = self.plan.shuffle.chunk_size or _median_row_group(version) * self.plan.shuffle.chunk_row_groups
            sources.append(
                ResolvedSource(source.ref, version.name, version.id, version.rows, weight, max(1, min(chunk, version.rows))).to_json()
            )
        resolved = {
            **self.manifest["resolved"],
            "sources": sources,
            "counts": apportion([s["weight"] for s in sources], self.plan.mixture_block),
        }
        manifest = {**self.manifest, "name": f"{self.name}~{other}", "resolved": resolved}
        manifest["fingerprint"] = hashlib.sha256(
            json.dumps({"plan": manifest["plan"], "resolved": resolved}, sort_keys=True).encode()
        ).hexdigest()[:32]
        return Run(self.catalog, manifest)

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
