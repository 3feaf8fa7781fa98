"""The document source: a run's records read for its draws, and its document transforms applied keyed by document.

Reads go through the pinned dataset versions (each row group read, checked and converted once). Every transform
gets a :class:`~loaders.transforms.Context` whose generator is keyed by the run's seed and the document — by
``(0, global index)`` for unpacked samples, ``(1, stream, draw)`` inside fixed packing blocks and
``(2, source, record)`` for lossless packing — never by rank or worker.

>>> documents = DocumentSource(catalog, "r", plan, sources, tokenizers={})     # doctest: +SKIP
>>> read = documents.read(sampler.draws(0, range(8)), range(8))                 # doctest: +SKIP
>>> read.records[0]["id"]                                                       # doctest: +SKIP
'doc-41'
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..catalog.records import Record
from ..catalog.store import CatalogStore
from ..catalog.version import DatasetVersion
from ..errors import CorruptData, InvalidPlan
from ..transforms import Context, Transform
from . import token_index
from .batch import Document, SourceRef
from .plan import ReadPlan, ResolvedSource
from .sampler import Drawn


@dataclass(frozen=True)
class Documents:
    """Documents read for a range of draws, as parallel columns."""

    sources: np.ndarray
    epochs: np.ndarray
    draws: np.ndarray
    shards: np.ndarray
    rows: np.ndarray
    records: list[Record]

    @staticmethod
    def concat(parts: list["Documents"]) -> "Documents":
        if len(parts) == 1:
            return parts[0]
        return Documents(
            *(np.concatenate([getattr(p, name) for p in parts]) for name in ("sources", "epochs", "draws", "shards", "rows")),
            [r for p in parts for r in p.records],
        )


def _key_column(column: str, record: Record) -> str:
    return str(record[column])


class DocumentSource:
    """The records of run ``name``'s resolved ``sources``, and the plan's document transforms applied to them.

    ``token_counts`` and ``record_token_counts`` are the manifest's entries (lossless packing): each source's
    counts file key and digest, per chunk and per record (runs created before per-record counts have none).
    """

    def __init__(
        self,
        catalog: CatalogStore,
        name: str,
        plan: ReadPlan,
        sources: Sequence[ResolvedSource],
        tokenizers: dict[str, str],
        *,
        token_counts: Sequence[dict[str, Any]] | None = None,
        record_token_counts: Sequence[dict[str, Any] | None] | None = None,
    ) -> None:
        self.catalog = catalog
        self.name = name
        self.plan = plan
        self.sources = list(sources)
        self.tokenizers = tokenizers
        self.token_count_entries = token_counts
        self.record_count_entries = record_token_counts
        self._versions: dict[int, DatasetVersion] = {}
        self._refs: list[SourceRef] | None = None
        self._chunk_counts: dict[int, np.ndarray] = {}

    def version(self, source: int) -> DatasetVersion:
        """The pinned dataset version of source ``source``."""
        if source not in self._versions:
            s = self.sources[source]
            self._versions[source] = self.catalog.resolve(f"{s.dataset}@{s.version}")
        return self._versions[source]

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

    # -- reading ---------------------------------------------------------------------------------
    def read(self, drawn: Drawn, counters: range) -> Documents:
        """Read the documents ``drawn`` for a stream's ``counters`` as columns (each row group read and converted once)."""
        sources, indices, epochs = drawn
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
        return Documents(sources, epochs, draws, shards, rows, records)

    def documents(self, drawn: Drawn, counters: range) -> list[Document]:
        """:meth:`read` as objects (the packing path needs the documents one by one)."""
        read = self.read(drawn, counters)
        refs = self.source_refs
        return [
            refs[source].document(source, shard, row, epoch, record, draw)
            for source, epoch, draw, shard, row, record in zip(
                read.sources.tolist(), read.epochs.tolist(), read.draws.tolist(), read.shards.tolist(), read.rows.tolist(), read.records
            )
        ]

    def read_documents(
        self, source: int, records: np.ndarray, epochs: np.ndarray, positions: np.ndarray
    ) -> tuple[list[Document], list[dict[str, Any]]]:
        """Documents ``records`` of ``source`` and their document-transformed inputs (read formats 3–4 keying)."""
        version = self.version(source)
        shards, rows = version.locate_arrays(records)
        raw = version.read_indices(records)
        ref = self.source_refs[source]
        documents = [
            ref.document(source, shard, row, epoch, record, position)
            for shard, row, epoch, record, position in zip(shards.tolist(), rows.tolist(), epochs.tolist(), raw, positions.tolist())
        ]
        return documents, self._keyed_by_record(source, records, shards, rows, raw)

    # -- transforms --------------------------------------------------------------------------------
    def transforms(self, source: int) -> list[Transform]:
        """The document transforms of ``source``: its own, then the plan's before packing."""
        return [*self.plan.sources[source].transforms, *self.plan.document_transforms]

    def context(self, version: DatasetVersion | None, rng_key: tuple[int, ...], where: str, shard: int | None) -> Context:
        """What a transform may use besides the record, its generator keyed by ``(seed, *rng_key)``."""
        shard_uri = version.shards[shard].uri if version is not None and shard is not None else None
        return Context(
            catalog=self.catalog,
            seed_key=(self.plan.seed, *rng_key),
            where=where,
            version=version,
            tokenizers=self.tokenizers,
            shard_uri=shard_uri,
        )

    def transform(
        self, source: int, shard: int, row: int, record: Record, transforms: list[Transform], rng_key: tuple[int, ...], where: str
    ) -> dict[str, Any]:
        """``transforms`` applied to a copy of ``record`` (row ``row`` of shard ``shard`` of ``source``)."""
        inputs = dict(record)
        if not transforms:
            return inputs
        version = self.version(source)
        ctx = self.context(version, rng_key, f"{where} ({version.where(shard, row)})", shard)
        for transform in transforms:
            transform.apply(inputs, ctx)
        return inputs

    def tokens(self, document: Document, rng_key: tuple[int, ...], where: str) -> dict[str, Any]:
        """``document``'s inputs after its document transforms, which must have made ``input_ids`` (for packing)."""
        inputs = self.transform(
            document.source,
            document.address.shard,
            document.address.row,
            document.record,
            self.transforms(document.source),
            rng_key,
            where,
        )
        self.require_tokens(inputs, document.source_name)
        return inputs

    def require_tokens(self, inputs: dict[str, Any], source: str) -> None:
        """Packing needs token ids: refuse, naming the source, documents its transforms did not tokenize."""
        if "input_ids" not in inputs:
            raise InvalidPlan(
                f"run {self.name}: documents of source {source} have no input_ids before pack; "
                "add tokenize, chat_template or use_tokens to that source"
            )

    def _keyed_by_record(
        self, source: int, records: np.ndarray, shards: np.ndarray, rows: np.ndarray, raw: list[Record]
    ) -> list[dict[str, Any]]:
        """Document transforms applied to records of ``source``, batched, each keyed by its record (so every epoch
        tokenizes a record the same way)."""
        version = self.version(source)
        inputs = [dict(r) for r in raw]
        contexts = [
            self.context(version, (2, source, record), f"run {self.name} ({version.where(shard, row)})", shard)
            for record, shard, row in zip(records.tolist(), shards.tolist(), rows.tolist())
        ]
        for transform in self.transforms(source):
            transform.apply_many(list(zip(inputs, contexts)))
        if inputs:
            self.require_tokens(inputs[0], self.sources[source].ref)
        return inputs

    # -- token counts (lossless packing) ---------------------------------------------------------------
    def token_counts(self, source: int) -> np.ndarray:
        """Tokens per chunk of ``source`` (read formats 3–4 packing): stored with the run, verified (once per source), rebuilt
        if stale."""
        found = self._chunk_counts.get(source)
        if found is None:
            assert self.token_count_entries is not None
            entry = self.token_count_entries[source]
            found, _ = token_index.load_or_build(
                self.catalog.path("token-counts", f"{entry['key']}.npy"),
                entry.get("sha256"),
                lambda: token_index.chunk_sums(self.count_record_tokens(source), self.sources[source].chunk),
            )
            self._chunk_counts[source] = found
        return found

    def record_token_counts(self, source: int) -> np.ndarray | None:
        """Tokens of every record of ``source``, when the run pinned them (runs created before did not: None).

        Checked against the file's pinned digest (rebuilt when stale) and against the chunk counts they sum to.
        """
        entry = self.record_count_entries[source] if self.record_count_entries else None
        if entry is None:
            return None
        path = self.catalog.path("token-counts", token_index.records_path(entry["key"]))
        counts, _ = token_index.load_or_build(path, entry["sha256"], lambda: self.count_record_tokens(source))
        if not np.array_equal(token_index.chunk_sums(counts, self.sources[source].chunk), self.token_counts(source)):
            raise CorruptData(f"token counts {path}: the per-record counts do not sum to the run's counts per chunk")
        return counts

    def count_record_tokens(self, source: int) -> np.ndarray:
        """Tokenize every record of ``source`` (keyed by record) with its document transforms: tokens per record."""
        version = self.version(source)

        def lengths(indices: np.ndarray) -> list[int]:
            shards, rows = version.locate_arrays(indices)
            inputs = self._keyed_by_record(source, indices, shards, rows, version.read_indices(indices))
            return [len(i["input_ids"]) for i in inputs]

        return token_index.build_record_counts(self.sources[source].rows, lengths)
