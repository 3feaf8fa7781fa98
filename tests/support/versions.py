"""Tiny versioned datasets for tests: Parquet shards of small row groups, ``v1``/``v2`` pairs, and what changed between them.

>>> changes = Changes.between([{"id": "a", "x": 1}, {"id": "b", "x": 2}], [{"id": "b", "x": 3}, {"id": "c", "x": 4}])
>>> changes.added, changes.removed, changes.edited
(['c'], ['a'], ['b'])
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from loaders import Catalog, DatasetVersion


@dataclass(frozen=True)
class Changes:
    """The keys a test builder added, removed and edited from ``v1`` to ``v2``, and notes naming special rows."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def between(cls, v1_rows: list[dict[str, Any]], v2_rows: list[dict[str, Any]], *, key: str = "id", **notes: Any) -> "Changes":
        """Keys added, removed and edited from ``v1_rows`` to ``v2_rows`` (rows keyed by their ``key`` column)."""
        before = {row[key]: row for row in v1_rows}
        after = {row[key]: row for row in v2_rows}
        return cls(
            added=sorted(after.keys() - before.keys()),
            removed=sorted(before.keys() - after.keys()),
            edited=sorted(k for k in before.keys() & after.keys() if before[k] != after[k]),
            notes=notes,
        )


def write_shards(table: pa.Table, directory: str, *, rows_per_shard: int, row_group_size: int = 2) -> list[str]:
    """Write ``table`` as shards ``part-00000.parquet``... of ``rows_per_shard`` rows (one empty shard for an empty table)."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for number, start in enumerate(range(0, max(len(table), 1), rows_per_shard)):
        path = os.path.join(directory, f"part-{number:05d}.parquet")
        pq.write_table(table.slice(start, rows_per_shard), path, row_group_size=row_group_size)
        paths.append(path)
    return paths


def register_pair(
    catalog: Catalog,
    name: str,
    v1: pa.Table,
    v2: pa.Table,
    *,
    rows_per_shard: int,
    row_group_size: int = 2,
    key: str | None = "id",
    **options: Any,
) -> tuple[DatasetVersion, DatasetVersion]:
    """Write ``v1`` and ``v2`` under the catalog's data folder of ``name`` and register them, tagged ``v1`` and ``v2``.

    ``options`` go to ``Catalog.register`` (``tokenizer``, ``kinds``...).
    """
    versions = []
    for tag, table in (("v1", v1), ("v2", v2)):
        paths = write_shards(table, os.path.join(catalog.data_dir(name), tag), rows_per_shard=rows_per_shard, row_group_size=row_group_size)
        versions.append(catalog.register(name, paths, key=key, tag=tag, **options))
    return versions[0], versions[1]
