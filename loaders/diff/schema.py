"""Manifest-level differences of two versions (columns, types, kinds, key, tokenizer, shards by checksum) and the match plan.

Nothing here opens a data file; it all comes from the two manifests.
"""

from __future__ import annotations

import os
from collections import defaultdict, deque
from dataclasses import dataclass

from ..catalog.version import DatasetVersion
from .model import ColumnChange, SchemaDiff, ShardDiff, ShardRef


@dataclass(frozen=True)
class MatchPlan:
    """What to match: the key column (``None``: content hash), compared columns, and the changed shards per side."""

    key: str | None
    key_as_text: bool
    compared: tuple[str, ...]
    a_shards: tuple[int, ...]
    b_shards: tuple[int, ...]


def choose_key(a: DatasetVersion, b: DatasetVersion) -> tuple[str | None, list[str]]:
    """The column rows are matched by (``None``: content hash) and warnings about the choice.

    The declared key is used when both versions declare the same one; when
    only one declares a key (or they differ), a declared key that both
    schemas hold is used, B's first.
    """
    if a.key == b.key:
        return a.key, []
    both = set(a.schema.names) & set(b.schema.names)
    for candidate in (b.key, a.key):
        if candidate is not None and candidate in both:
            return candidate, [
                f"the versions declare different keys ({a.key or 'none'} in {a.ref}, {b.key or 'none'} in {b.ref}); "
                f"rows are matched by column {candidate}"
            ]
    return None, [
        f"the versions declare different keys ({a.key or 'none'} in {a.ref}, {b.key or 'none'} in {b.ref}) "
        "and no declared key is in both schemas; rows are matched by content hash"
    ]


def diff_schema(a: DatasetVersion, b: DatasetVersion) -> tuple[SchemaDiff, list[str]]:
    """Added, removed, retyped and re-kinded columns, the compared columns, and warnings.

    A retyped column is reported and left out of the row comparison; every
    other common column is compared.
    """
    a_fields = {f.name: f for f in a.schema}
    b_fields = {f.name: f for f in b.schema}
    key, warnings = choose_key(a, b)

    def change(name: str) -> ColumnChange:
        fa, fb = a_fields.get(name), b_fields.get(name)
        return ColumnChange(
            column=name,
            a_type=None if fa is None else str(fa.type),
            b_type=None if fb is None else str(fb.type),
            a_kind=a.kinds.get(name) if fa is not None else None,
            b_kind=b.kinds.get(name) if fb is not None else None,
        )

    added = tuple(change(n) for n in b_fields if n not in a_fields)
    removed = tuple(change(n) for n in a_fields if n not in b_fields)
    common = [n for n in b_fields if n in a_fields]
    retyped = tuple(change(n) for n in common if not a_fields[n].type.equals(b_fields[n].type))
    kinds = tuple(change(n) for n in common if a.kinds.get(n) != b.kinds.get(n))
    retyped_names = {c.column for c in retyped}
    compared = tuple(n for n in common if n not in retyped_names and n != key)
    for column in retyped:
        note = " (rows are still matched by it, compared as text)" if column.column == key else ""
        warnings.append(f"column {column.column} changed type from {column.a_type} to {column.b_type}; its values are not compared{note}")
    if not compared and key is None:
        warnings.append("the versions share no column of the same type; every row differs")
    schema = SchemaDiff(
        added=added,
        removed=removed,
        retyped=retyped,
        kinds=kinds,
        compared=compared,
        key=key,
        a_key=a.key,
        b_key=b.key,
        a_tokenizer=a.tokenizer,
        b_tokenizer=b.tokenizer,
    )
    return schema, warnings


def diff_shards(a: DatasetVersion, b: DatasetVersion) -> ShardDiff:
    """Pair shards with equal checksums (each shard at most once); the rest are added or removed."""
    waiting: dict[str, deque[int]] = defaultdict(deque)
    for index, shard in enumerate(b.shards):
        waiting[shard.checksum].append(index)
    unchanged: list[tuple[int, int]] = []
    removed: list[ShardRef] = []
    for index, shard in enumerate(a.shards):
        if waiting[shard.checksum]:
            unchanged.append((index, waiting[shard.checksum].popleft()))
        else:
            removed.append(ShardRef(index, os.path.basename(shard.uri), shard.rows, shard.checksum))
    paired = {j for _, j in unchanged}
    added = tuple(
        ShardRef(index, os.path.basename(shard.uri), shard.rows, shard.checksum)
        for index, shard in enumerate(b.shards)
        if index not in paired
    )
    return ShardDiff(
        added=added,
        removed=tuple(removed),
        unchanged=tuple(unchanged),
        unchanged_rows=sum(a.shards[i].rows for i, _ in unchanged),
    )
