"""What a step delivers: Batch → Samples → Documents, each with its address and a digest.

A batch of unpacked samples is built as parallel columns (indices, addresses,
records) and its digests are computed with numpy; ``Sample`` and ``Document``
objects are made only when something asks for ``batch.samples``. Training
loops that only need the records (``batch.records``) or collated arrays never
pay for them; the inspector, which shows every sample, does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..catalog.records import Record
from .digests import batch_digest, document_hash, hex_digests, made_hash, sample_digest


@dataclass(frozen=True, slots=True)
class Address:
    """Where a record lives: ``(dataset, version, shard, row)``; the key is what links use."""

    dataset: str
    version: str
    shard: int
    row: int

    def to_json(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "version": self.version, "shard": self.shard, "row": self.row}


@dataclass(slots=True)
class Document:
    """One source record that went into a sample (a packed sequence holds several)."""

    source: int
    source_name: str
    key: str
    address: Address
    epoch: int
    record: Record
    span: dict[str, int] | None = None
    draw: int = 0

    def to_json(self, *, with_record: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "source": self.source_name,
            "key": self.key,
            **self.address.to_json(),
            "epoch": self.epoch,
        }
        if self.span is not None:
            data["span"] = self.span
        if with_record:
            data["fields"] = self.record
        return data


def made_inputs(record: Record, inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs transforms made or replaced (everything that is not the record's own value)."""
    return {k: v for k, v in inputs.items() if k not in record or v is not record[k]}


@dataclass(slots=True)
class Sample:
    """One element of a batch: its global index, the documents it came from and the model inputs."""

    index: int
    position: int
    stream: int
    documents: list[Document]
    inputs: dict[str, Any]
    digest: str = ""

    @property
    def key(self) -> str:
        return self.documents[0].key

    @property
    def address(self) -> Address:
        return self.documents[0].address

    @property
    def record(self) -> Record:
        return self.documents[0].record

    @property
    def source(self) -> str:
        return self.documents[0].source_name

    @property
    def packed(self) -> bool:
        return self.documents[0].span is not None

    def digest_value(self) -> int:
        """The 64-bit digest of the index, every document's address and the inputs transforms made.

        Inputs that are the record's own values are covered by the address: a
        version is immutable and every row group is checked against its
        registered checksum when read, so (version, shard, row) pins those bytes.
        """
        record = self.documents[0].record if not self.packed else {}
        documents = (document_hash(d.address.dataset, d.address.version, d.address.shard, d.address.row) for d in self.documents)
        return sample_digest(self.index, documents, made_hash(made_inputs(record, self.inputs)))


@dataclass(frozen=True, slots=True)
class SourceRef:
    """What a batch needs to name the documents of one run source."""

    name: str
    dataset: str
    version: str
    key_of: Callable[[Record], str]
    #: Keys of rows registered as allowed duplicates (``KEY~N``), by ``(shard, row)``; empty for unique keys.
    suffixed: dict[tuple[int, int], str] = field(default_factory=dict)

    def key_at(self, shard: int, row: int, record: Record) -> str:
        """The permalink key of ``record`` at ``(shard, row)``."""
        return self.suffixed.get((shard, row)) or self.key_of(record) if self.suffixed else self.key_of(record)

    def document(self, source: int, shard: int, row: int, epoch: int, record: Record, draw: int, key: str | None = None) -> Document:
        """The ``Document`` for ``record`` at ``(shard, row)`` of this source (``key`` when already known)."""
        key = self.key_at(shard, row, record) if key is None else key
        return Document(source, self.name, key, Address(self.dataset, self.version, shard, row), epoch, record, None, draw)


@dataclass(slots=True)
class SampleColumns:
    """The single-document samples of one batch as parallel columns (one entry per sample).

    ``inputs`` is ``None`` when the plan has no transforms for these samples:
    the model inputs are then the records' own values.
    """

    sources: Sequence[SourceRef]
    index: np.ndarray
    position: np.ndarray
    stream: np.ndarray
    source: np.ndarray
    epoch: np.ndarray
    draw: np.ndarray
    shard: np.ndarray
    row: np.ndarray
    records: list[Record]
    inputs: list[dict[str, Any]] | None
    digests: np.ndarray

    def keys(self) -> list[str]:
        refs = self.sources
        return [
            refs[s].key_at(shard, row, r)
            for s, shard, row, r in zip(self.source.tolist(), self.shard.tolist(), self.row.tolist(), self.records)
        ]

    def samples(self) -> list[Sample]:
        """Make the ``Sample`` and ``Document`` objects."""
        out: list[Sample] = []
        inputs = self.inputs
        for i, (index, position, stream, source, epoch, draw, shard, row, key, digest) in enumerate(
            zip(
                self.index.tolist(),
                self.position.tolist(),
                self.stream.tolist(),
                self.source.tolist(),
                self.epoch.tolist(),
                self.draw.tolist(),
                self.shard.tolist(),
                self.row.tolist(),
                self.keys(),
                hex_digests(self.digests),
            )
        ):
            record = self.records[i]
            document = self.sources[source].document(source, shard, row, epoch, record, draw, key)
            out.append(Sample(index, position, stream, [document], dict(record) if inputs is None else inputs[i], digest))
        return out


class Batch:
    """The samples rank ``rank`` of ``world_size`` consumed at ``step``, with a digest of all of it.

    Build it from ``samples`` (then :meth:`seal` computes the digests) or from
    ``columns`` (digests already computed; samples made on first access).
    """

    __slots__ = ("run", "step", "rank", "world_size", "digest", "_samples", "_columns", "_digests")

    def __init__(
        self,
        run: str,
        step: int,
        rank: int,
        world_size: int,
        samples: list[Sample] | None = None,
        digest: str = "",
        *,
        columns: SampleColumns | None = None,
    ) -> None:
        self.run = run
        self.step = step
        self.rank = rank
        self.world_size = world_size
        self.digest = digest
        self._samples = samples if samples is not None or columns is not None else []
        self._columns = columns
        self._digests: np.ndarray | None = None if columns is None else columns.digests

    @property
    def samples(self) -> list[Sample]:
        """Every sample, in batch order (made from the columns on first access)."""
        if self._samples is None:
            assert self._columns is not None
            self._samples = self._columns.samples()
        return self._samples

    @samples.setter
    def samples(self, samples: list[Sample]) -> None:
        self._samples = samples
        self._columns = None
        self._digests = None

    @property
    def records(self) -> list[Record]:
        """Each sample's (first) source record, without making ``Sample`` objects."""
        if self._columns is not None:
            return self._columns.records
        return [s.record for s in self.samples]

    @property
    def inputs(self) -> list[dict[str, Any]]:
        """Each sample's model inputs (records' own values where the plan has no transforms; treat as read-only)."""
        if self._columns is not None:
            return self._columns.inputs if self._columns.inputs is not None else self._columns.records
        return [s.inputs for s in self.samples]

    @property
    def indices(self) -> list[int]:
        if self._columns is not None:
            return self._columns.index.tolist()
        return [s.index for s in self.samples]

    @property
    def keys(self) -> list[str]:
        if self._columns is not None:
            return self._columns.keys()
        return [s.key for s in self.samples]

    @property
    def sample_digests(self) -> list[str]:
        """Every sample's digest (16 hex characters each), in batch order."""
        if self._digests is not None and self._samples is None:
            return hex_digests(self._digests)
        return [s.digest for s in self.samples]

    def seal(self) -> "Batch":
        """Compute every sample digest and the batch digest."""
        if self._digests is None:
            self._digests = np.fromiter((s.digest_value() for s in self.samples), dtype=np.uint64, count=len(self.samples))
            for sample, value in zip(self.samples, hex_digests(self._digests)):
                sample.digest = value
        self.digest = batch_digest(self.run, self.step, self.rank, self.world_size, self._digests)
        return self

    def __len__(self) -> int:
        return len(self._columns.records) if self._columns is not None and self._samples is None else len(self.samples)

    def __repr__(self) -> str:
        return f"Batch(run={self.run!r}, step={self.step}, rank={self.rank}, world_size={self.world_size}, samples={len(self)})"
