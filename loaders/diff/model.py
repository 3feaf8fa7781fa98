"""The diff's result types: frozen dataclasses with ``to_json()``, shared by the engine, the CLI and the inspector."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

#: Row-level change types, in the order they are reported.
ROW_CHANGES: tuple[str, ...] = ("added", "removed", "changed", "edited")

FieldChange = Literal["added", "removed", "changed"]
RowChangeType = Literal["added", "removed", "changed", "edited"]
Address = tuple[int, int]


@dataclass(frozen=True)
class TextOp:
    """One segment of a word-level text diff: ``equal`` (``a == b``), ``insert`` (only ``b``), ``delete`` (only ``a``), ``replace``."""

    op: str
    a: str = ""
    b: str = ""

    def to_json(self) -> dict[str, Any]:
        if self.op == "equal":
            return {"op": "equal", "text": self.a}
        if self.op == "insert":
            return {"op": "insert", "b": self.b}
        if self.op == "delete":
            return {"op": "delete", "a": self.a}
        return {"op": "replace", "a": self.a, "b": self.b}


@dataclass(frozen=True)
class SeqOp:
    """One aligned block of two id sequences: positions ``[a_start, a_end)`` of A against ``[b_start, b_end)`` of B.

    ``a`` and ``b`` hold the ids of a non-equal block (empty for ``equal``, whose ids are the same on both sides).
    """

    op: str
    a_start: int
    a_end: int
    b_start: int
    b_end: int
    a: tuple[Any, ...] = ()
    b: tuple[Any, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"op": self.op, "a": [self.a_start, self.a_end], "b": [self.b_start, self.b_end]}
        if self.op != "equal":
            data["a_ids"] = list(self.a)
            data["b_ids"] = list(self.b)
        return data


@dataclass(frozen=True)
class PathChange:
    """A changed leaf of a structured value, e.g. ``messages[2].content`` or ``rollout.reward``.

    ``before``/``after`` are JSON-ready (bytes summarized as ``{"bytes": n, "sha256": prefix}``);
    ``words`` holds a word-level diff when both sides are strings.
    """

    path: str
    change: FieldChange
    before: Any = None
    after: Any = None
    words: tuple[TextOp, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "change": self.change, "before": self.before, "after": self.after}
        if self.words:
            data["words"] = [op.to_json() for op in self.words]
        return data


@dataclass(frozen=True)
class FieldDiff:
    """How one column of a row differs between the versions.

    ``change`` is ``added`` (null in A), ``removed`` (null in B) or ``changed``.
    Which detail is filled depends on ``kind``: ``words`` for text, ``ops``
    for tokens/mask/labels, ``paths`` for chat/json/rollout/episode and other
    nested values; ``before``/``after`` hold JSON-ready values (media as
    ``{"size", "sha256"}`` summaries; ``None`` for structured values, whose
    leaves are in ``paths``).
    """

    column: str
    kind: str
    change: FieldChange
    before: Any = None
    after: Any = None
    words: tuple[TextOp, ...] = ()
    ops: tuple[SeqOp, ...] = ()
    paths: tuple[PathChange, ...] = ()
    truncated: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "column": self.column,
            "kind": self.kind,
            "change": self.change,
            "before": self.before,
            "after": self.after,
        }
        if self.words:
            data["words"] = [op.to_json() for op in self.words]
        if self.ops:
            data["ops"] = [op.to_json() for op in self.ops]
        if self.paths:
            data["paths"] = [p.to_json() for p in self.paths]
        if self.truncated:
            data["truncated"] = True
        return data


@dataclass(frozen=True)
class RowChange:
    """One added, removed, changed or edited row.

    ``key`` orders the change list and is the paging cursor. For keyed
    datasets it is the key in both versions; for keyless ones it is a hash of
    the compared columns of the A row (the B row for ``added``), and
    ``a_key``/``b_key`` hold each side's sample key (its content hash), which
    sample links use. Addresses are ``(shard, row)`` within each version.
    """

    key: str
    change: RowChangeType
    a_address: Address | None
    b_address: Address | None
    fields: tuple[FieldDiff, ...] = ()
    a_key: str | None = None
    b_key: str | None = None
    similarity: float | None = None
    preview: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "change": self.change,
            "a": None if self.a_address is None else {"shard": self.a_address[0], "row": self.a_address[1], "key": self.a_key},
            "b": None if self.b_address is None else {"shard": self.b_address[0], "row": self.b_address[1], "key": self.b_key},
            "similarity": self.similarity,
            "preview": self.preview,
            "fields": [f.to_json() for f in self.fields],
        }


@dataclass(frozen=True)
class ColumnChange:
    """A column added, removed, retyped or re-kinded between the versions (``None`` where it does not exist)."""

    column: str
    a_type: str | None
    b_type: str | None
    a_kind: str | None
    b_kind: str | None

    def to_json(self) -> dict[str, Any]:
        return {"column": self.column, "a_type": self.a_type, "b_type": self.b_type, "a_kind": self.a_kind, "b_kind": self.b_kind}


@dataclass(frozen=True)
class SchemaDiff:
    """Schema-level differences and the columns whose values are compared row by row.

    ``key`` is the column rows are matched by (``None``: content hash).
    """

    added: tuple[ColumnChange, ...]
    removed: tuple[ColumnChange, ...]
    retyped: tuple[ColumnChange, ...]
    kinds: tuple[ColumnChange, ...]
    compared: tuple[str, ...]
    key: str | None
    a_key: str | None
    b_key: str | None
    a_tokenizer: str | None
    b_tokenizer: str | None

    @property
    def changed(self) -> bool:
        """True when columns, types, kinds, the declared key or the tokenizer differ."""
        return bool(
            self.added or self.removed or self.retyped or self.kinds or self.a_key != self.b_key or self.a_tokenizer != self.b_tokenizer
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "added": [c.to_json() for c in self.added],
            "removed": [c.to_json() for c in self.removed],
            "retyped": [c.to_json() for c in self.retyped],
            "kinds": [c.to_json() for c in self.kinds],
            "compared": list(self.compared),
            "key": {"a": self.a_key, "b": self.b_key, "matched_by": self.key},
            "tokenizer": {"a": self.a_tokenizer, "b": self.b_tokenizer},
            "changed": self.changed,
        }


@dataclass(frozen=True)
class ShardRef:
    """One shard of one version, as the shard diff lists it."""

    shard: int
    file: str
    rows: int
    checksum: str

    def to_json(self) -> dict[str, Any]:
        return {"shard": self.shard, "file": self.file, "rows": self.rows, "checksum": self.checksum}


@dataclass(frozen=True)
class ShardDiff:
    """Shards matched by checksum: ``unchanged`` pairs ``(a shard, b shard)`` are never opened."""

    added: tuple[ShardRef, ...]
    removed: tuple[ShardRef, ...]
    unchanged: tuple[tuple[int, int], ...]
    unchanged_rows: int

    def to_json(self) -> dict[str, Any]:
        return {
            "added": [s.to_json() for s in self.added],
            "removed": [s.to_json() for s in self.removed],
            "unchanged": [{"a": a, "b": b} for a, b in self.unchanged],
            "unchanged_rows": self.unchanged_rows,
        }


@dataclass(frozen=True)
class Counts:
    """How many rows fall in each class; ``unchanged`` includes the rows of unchanged shards."""

    added: int = 0
    removed: int = 0
    changed: int = 0
    edited: int = 0
    unchanged: int = 0

    @property
    def different(self) -> int:
        return self.added + self.removed + self.changed + self.edited

    def to_json(self) -> dict[str, int]:
        return {
            "added": self.added,
            "removed": self.removed,
            "changed": self.changed,
            "edited": self.edited,
            "unchanged": self.unchanged,
        }


@dataclass(frozen=True)
class Duplicates:
    """Rows whose key another row of the same version already has (only changed shards are checked)."""

    a_count: int = 0
    b_count: int = 0
    a_examples: tuple[str, ...] = ()
    b_examples: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "a": {"count": self.a_count, "examples": list(self.a_examples)},
            "b": {"count": self.b_count, "examples": list(self.b_examples)},
        }


@dataclass(frozen=True)
class VersionRef:
    """Which version a side of the diff is."""

    name: str
    id: str
    ref: str
    rows: int
    shards: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "id": self.id, "ref": self.ref, "rows": self.rows, "shards": self.shards}


@dataclass(frozen=True)
class MatchSummary:
    """The eager, cacheable part of a row-level match: counts, per-column counts, duplicates, notes."""

    counts: Counts
    columns: dict[str, int] = field(default_factory=dict)
    duplicates: Duplicates = field(default_factory=Duplicates)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "counts": self.counts.to_json(),
            "columns": dict(self.columns),
            "duplicates": self.duplicates.to_json(),
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "MatchSummary":
        dup = data["duplicates"]
        return cls(
            counts=Counts(**data["counts"]),
            columns={str(k): int(v) for k, v in data["columns"].items()},
            duplicates=Duplicates(
                a_count=dup["a"]["count"],
                b_count=dup["b"]["count"],
                a_examples=tuple(dup["a"]["examples"]),
                b_examples=tuple(dup["b"]["examples"]),
            ),
            notes=tuple(data["notes"]),
        )
