"""What linting a range of steps gives: its findings, the document reads the run-wide checks need, and counts; parts of
consecutive ranges merge into the part of their union, and a part is stored as one flat table.

>>> a = LintPart(range(0, 2), samples=8)
>>> b = LintPart(range(2, 5), samples=12)
>>> merged = LintPart.merge([a, b])
>>> merged.steps, merged.samples
(range(0, 5), 20)
>>> LintPart.from_table(merged.to_table()).steps
range(0, 5)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import pyarrow as pa

from .spec import Finding


class _Log:
    """Parallel lists, one per name in ``COLUMNS``."""

    COLUMNS: tuple[str, ...] = ()

    def extend(self, other: "_Log") -> None:
        for name in self.COLUMNS:
            getattr(self, name).extend(getattr(other, name))

    def __len__(self) -> int:
        return len(getattr(self, self.COLUMNS[0]))


@dataclass
class ReadLog(_Log):
    """One row per document read (its first piece): where, which key and source, a hash of its content and of the read's
    identity, and its length (tokens, else characters; -1 unknown)."""

    step: list[int] = field(default_factory=list)
    rank: list[int] = field(default_factory=list)
    position: list[int] = field(default_factory=list)
    key: list[str] = field(default_factory=list)
    source: list[int] = field(default_factory=list)
    content: list[int] = field(default_factory=list)
    read: list[int] = field(default_factory=list)
    length: list[int] = field(default_factory=list)

    COLUMNS = ("step", "rank", "position", "key", "source", "content", "read", "length")

    def add(self, step: int, rank: int, position: int, key: str, source: int, content: int, read: int, length: int) -> None:
        self.step.append(step)
        self.rank.append(rank)
        self.position.append(position)
        self.key.append(key)
        self.source.append(source)
        self.content.append(content)
        self.read.append(read)
        self.length.append(length)


@dataclass
class GroupLog(_Log):
    """One row per rollout read with a group id and a finite reward: where, its key, its group and its reward."""

    step: list[int] = field(default_factory=list)
    rank: list[int] = field(default_factory=list)
    position: list[int] = field(default_factory=list)
    key: list[str] = field(default_factory=list)
    group: list[str] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)

    COLUMNS = ("step", "rank", "position", "key", "group", "reward")

    def add(self, step: int, rank: int, position: int, key: str, group: str, reward: float) -> None:
        self.step.append(step)
        self.rank.append(rank)
        self.position.append(position)
        self.key.append(key)
        self.group.append(group)
        self.reward.append(reward)


_SCHEMA = pa.schema(
    [
        ("row", pa.string()),
        ("check", pa.string()),
        ("severity", pa.string()),
        ("step", pa.int64()),
        ("rank", pa.int64()),
        ("position", pa.int64()),
        ("key", pa.string()),
        ("detail", pa.string()),
        ("source", pa.int64()),
        ("content", pa.int64()),
        ("read", pa.int64()),
        ("length", pa.int64()),
        ("value", pa.float64()),
    ]
)


@dataclass
class LintPart:
    """Linting steps ``steps``: findings of read and step checks, the reads, and how much was read."""

    steps: range
    findings: list[Finding] = field(default_factory=list)
    reads: ReadLog = field(default_factory=ReadLog)
    groups: GroupLog = field(default_factory=GroupLog)
    samples: int = 0
    documents: int = 0
    failed_batches: int = 0

    @classmethod
    def merge(cls, parts: Sequence["LintPart"]) -> "LintPart":
        """The part of consecutive ranges (in order; a gap or overlap is a ``ValueError``)."""
        if not parts:
            raise ValueError("nothing to merge")
        for before, after in zip(parts, parts[1:]):
            if before.steps.stop != after.steps.start:
                raise ValueError(
                    f"steps {before.steps.start}-{before.steps.stop} and {after.steps.start}-{after.steps.stop} are not consecutive"
                )
        merged = cls(range(parts[0].steps.start, parts[-1].steps.stop))
        for part in parts:
            merged.findings += part.findings
            merged.reads.extend(part.reads)
            merged.groups.extend(part.groups)
            merged.samples += part.samples
            merged.documents += part.documents
            merged.failed_batches += part.failed_batches
        return merged

    def to_table(self) -> pa.Table:
        """One table: a ``meta`` row (the range and counts as JSON), then a ``finding`` row each, a ``read`` row each and a
        ``group`` row each (its group id in ``detail``, its reward in ``value``)."""
        meta = json.dumps(
            {
                "start": self.steps.start,
                "stop": self.steps.stop,
                "samples": self.samples,
                "documents": self.documents,
                "failed_batches": self.failed_batches,
            }
        )
        f, n, g = self.findings, self.reads, self.groups

        def blank(count: int) -> list[Any]:
            return [None] * count

        columns: dict[str, list[Any]] = {
            "row": ["meta"] + ["finding"] * len(f) + ["read"] * len(n) + ["group"] * len(g),
            "check": [None] + [x.check for x in f] + blank(len(n) + len(g)),
            "severity": [None] + [x.severity for x in f] + blank(len(n) + len(g)),
            "step": [self.steps.start] + [x.step for x in f] + n.step + g.step,
            "rank": [None] + [x.rank for x in f] + n.rank + g.rank,
            "position": [None] + [x.position for x in f] + n.position + g.position,
            "key": [None] + [x.key for x in f] + n.key + g.key,
            "detail": [meta] + [x.detail for x in f] + blank(len(n)) + g.group,
            "source": blank(1 + len(f)) + n.source + blank(len(g)),
            "content": blank(1 + len(f)) + n.content + blank(len(g)),
            "read": blank(1 + len(f)) + n.read + blank(len(g)),
            "length": blank(1 + len(f)) + n.length + blank(len(g)),
            "value": blank(1 + len(f) + len(n)) + g.reward,
        }
        return pa.table(columns, schema=_SCHEMA)

    @classmethod
    def from_table(cls, table: pa.Table) -> "LintPart":
        """The part :meth:`to_table` stored (a ``ValueError`` when the table is not one)."""
        if table.schema.remove_metadata() != _SCHEMA:
            raise ValueError("not a lint table: its columns differ")
        data = table.to_pydict()
        rows = data["row"]
        if not rows or rows[0] != "meta":
            raise ValueError("not a lint table: it has no meta row first")
        meta = json.loads(data["detail"][0])
        part = cls(
            range(int(meta["start"]), int(meta["stop"])),
            samples=int(meta["samples"]),
            documents=int(meta["documents"]),
            failed_batches=int(meta["failed_batches"]),
        )
        for i, row in enumerate(rows[1:], start=1):
            if row == "finding":
                part.findings.append(
                    Finding(
                        data["check"][i],
                        data["severity"][i],
                        data["step"][i],
                        data["rank"][i],
                        data["position"][i],
                        data["key"][i],
                        data["detail"][i],
                    )
                )
            elif row == "read":
                part.reads.add(*(data[name][i] for name in ReadLog.COLUMNS))
            elif row == "group":
                part.groups.add(data["step"][i], data["rank"][i], data["position"][i], data["key"][i], data["detail"][i], data["value"][i])
            else:
                raise ValueError(f"not a lint table: row {i} is {row!r}")
        return part
