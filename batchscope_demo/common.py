"""Helpers shared by the demo dataset builders: deterministic shard writing and change records."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from loaders import Catalog, DatasetVersion, storage

#: Rows per row group in demo shards: small enough that random access is exercised.
DEMO_ROW_GROUP = 64


@dataclass
class DemoChanges:
    """What a demo builder changed between ``v1`` and ``v2``, by key; tests compare diffs with it."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)
    notes: dict[str, object] = field(default_factory=dict)

    @classmethod
    def between(cls, v1_rows: list[dict[str, Any]], v2_rows: list[dict[str, Any]], *, notes: dict[str, object]) -> "DemoChanges":
        """Keys added, removed and edited from ``v1_rows`` to ``v2_rows`` (rows keyed by their ``id``)."""
        before = {row["id"]: row for row in v1_rows}
        after = {row["id"]: row for row in v2_rows}
        return cls(
            added=sorted(after.keys() - before.keys()),
            removed=sorted(before.keys() - after.keys()),
            edited=sorted(k for k in before.keys() & after.keys() if before[k] != after[k]),
            notes=notes,
        )


def write_shards(
    table: pa.Table,
    directory: str,
    *,
    rows_per_shard: int,
    row_group_size: int = DEMO_ROW_GROUP,
) -> list[str]:
    """Write ``table`` as zstd Parquet shards ``part-00000.parquet``... and return their paths."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for number, start in enumerate(range(0, max(len(table), 1), rows_per_shard)):
        path = os.path.join(directory, f"part-{number:05d}.parquet")
        pq.write_table(
            table.slice(start, rows_per_shard),
            path,
            row_group_size=row_group_size,
            compression="zstd",
            use_dictionary=False,
            write_statistics=True,
        )
        paths.append(path)
    return paths


def register_pair(
    catalog: Catalog,
    name: str,
    v1: pa.Table,
    v2: pa.Table,
    changes: DemoChanges,
    *,
    key: str | None = "id",
    rows_per_shard: int,
    row_group_size: int = DEMO_ROW_GROUP,
    tokenizer: str | None = None,
    kinds: dict[str, str] | None = None,
) -> tuple[DatasetVersion, DatasetVersion]:
    """Write and register ``v1`` and ``v2`` of a demo dataset and record what changed."""
    versions = []
    for tag, table in (("v1", v1), ("v2", v2)):
        paths = write_shards(table, storage.join(catalog.data_dir(name), tag), rows_per_shard=rows_per_shard, row_group_size=row_group_size)
        versions.append(catalog.register(name, paths, key=key, tag=tag, tokenizer=tokenizer, kinds=kinds))
    record_changes(catalog, name, changes)
    return versions[0], versions[1]


def changes_path(catalog: Catalog, name: str) -> str:
    return catalog.path("demo", "changes", f"{name}.json")


def record_changes(catalog: Catalog, name: str, changes: DemoChanges) -> None:
    storage.write_bytes_atomic(changes_path(catalog, name), json.dumps(asdict(changes), indent=1, sort_keys=True).encode())


def load_changes(catalog: Catalog, name: str) -> DemoChanges:
    """The changes the demo builder recorded for ``name`` (v1 → v2)."""
    return DemoChanges(**json.loads(storage.read_bytes(changes_path(catalog, name))))
