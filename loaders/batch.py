"""What a step delivers: Batch → Samples → Documents, each with its address and a digest."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .records import Record, digest


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


@dataclass
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

    def compute_digest(self) -> str:
        """Digest of the index, every document's key and address, and the inputs transforms made.

        Inputs that are the record's own values are covered by the address: a
        version is immutable and every row group is checked against its
        registered checksum when read, so (version, shard, row) pins those bytes.
        """
        record = self.documents[0].record if not self.packed else {}
        made = {k: v for k, v in self.inputs.items() if k not in record or v is not record[k]}
        self.digest = digest(
            [self.index, [[d.key, d.address.dataset, d.address.version, d.address.shard, d.address.row] for d in self.documents], made],
            16,
        )
        return self.digest


@dataclass
class Batch:
    """The samples rank ``rank`` of ``world_size`` consumed at ``step``, with a digest of all of it."""

    run: str
    step: int
    rank: int
    world_size: int
    samples: list[Sample] = field(default_factory=list)
    digest: str = ""

    @property
    def indices(self) -> list[int]:
        return [s.index for s in self.samples]

    @property
    def keys(self) -> list[str]:
        return [s.key for s in self.samples]

    def seal(self) -> "Batch":
        """Compute every sample digest and the batch digest."""
        sample_digests = [s.compute_digest() for s in self.samples]
        self.digest = digest([self.run, self.step, self.rank, self.world_size, sample_digests], 32)
        return self

    def __len__(self) -> int:
        return len(self.samples)
