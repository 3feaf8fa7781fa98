"""The RL columns of a version (rollouts, episodes, a ``step``), and reading only some of their sub-columns from verified row groups.

A group page never decodes a rollout's per-token lists: ``rollout_records``
reads the key and the small fields of the rows it shows, one row group at a
time (each row group's bytes are still checked against the manifest).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pyarrow as pa

from ..catalog.records import table_records
from ..catalog.version import DatasetVersion
from ..errors import InvalidQuery
from ..storage.cache import ByteLRU

#: Rollout fields a group page shows; the per-token lists stay unread (their lengths come from the index).
LIGHT_FIELDS = ("prompt", "completion", "reward", "advantage", "group_id", "finish_reason", "turns")


def _columns(version: DatasetVersion, kind: str) -> list[str]:
    return [c for c in version.schema.names if version.kinds.get(c) == kind]


def _of_kind(version: DatasetVersion, kind: str, column: str | None) -> str:
    """``column`` checked to be of ``kind``, or the version's first column of that kind."""
    found = _columns(version, kind)
    if column is None:
        if not found:
            raise InvalidQuery(f"{version.ref} has no {kind} column (kinds: {', '.join(f'{c}={k}' for c, k in version.kinds.items())})")
        return found[0]
    if column not in found:
        article = "an" if kind[0] in "aeiou" else "a"
        raise InvalidQuery(
            f"column {column!r} of {version.ref} is not {article} {kind} column ({kind} columns: {', '.join(found) or 'none'})"
        )
    return column


def rollout_columns(version: DatasetVersion) -> list[str]:
    """Columns of kind ``rollout``."""
    return _columns(version, "rollout")


def rollout_column(version: DatasetVersion, column: str | None) -> str:
    """``column`` checked, or the version's first rollout column."""
    return _of_kind(version, "rollout", column)


def episode_column(version: DatasetVersion, column: str | None) -> str:
    """``column`` checked, or the version's first ``episode`` column."""
    return _of_kind(version, "episode", column)


def struct_fields(version: DatasetVersion, column: str) -> list[str]:
    """Field names of a struct column, or an error saying the column cannot be indexed."""
    if column not in version.schema.names:
        raise InvalidQuery(f"{version.ref} has no column {column!r} (columns: {', '.join(version.schema.names)})")
    type_ = version.schema.field(column).type
    if not pa.types.is_struct(type_):
        raise InvalidQuery(f"column {column!r} of {version.ref} is {type_}, not a struct; the group view needs struct rollouts")
    return [type_.field(i).name for i in range(type_.num_fields)]


def step_column(version: DatasetVersion) -> str | None:
    """The top-level integer ``step`` column, when the version has one."""
    if "step" in version.schema.names and pa.types.is_integer(version.schema.field("step").type):
        return "step"
    return None


def row_groups(version: DatasetVersion) -> list[tuple[int, int, int]]:
    """``(shard, row group, first record index)`` of every row group."""
    out, first = [], 0
    for shard, info in enumerate(version.shards):
        for group, rows in enumerate(info.row_groups):
            out.append((shard, group, first))
            first += rows
    return out


def scan(version: DatasetVersion, columns: list[str], convert: Callable[[pa.Table, int], pa.Table], *, schema: pa.Schema) -> pa.Table:
    """``convert`` every verified row group read with only ``columns`` (dotted struct paths allowed), concatenated
    (an empty table of ``schema`` for a version without rows)."""

    def one(item: tuple[int, int, int]) -> pa.Table:
        shard, group, first = item
        table = version._open(shard).read_row_group(group, columns=columns)
        return convert(table, first)

    items = row_groups(version)
    workers = max(1, min(4, os.cpu_count() or 1, len(items)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        parts = list(pool.map(one, items))
    return pa.concat_tables(parts) if parts else schema.empty_table()


_LIGHT: ByteLRU[pa.Table] = ByteLRU(budget=128 << 20, size_of=lambda t: t.nbytes)


def read_columns(version: DatasetVersion, shard: int, group: int, columns: list[str]) -> pa.Table:
    """One verified row group with only ``columns`` decoded (dotted struct paths allowed), cached by checksum and columns."""
    key = (version.shards[shard].checksum, group, tuple(columns))
    return _LIGHT.get_or_make(key, lambda: version._open(shard).read_row_group(group, columns=list(columns)))


def light_columns(version: DatasetVersion, column: str) -> list[str] | None:
    """What a group page reads of the rollouts of ``column``: the key column and the rollout's small fields; ``None``
    when the version's keys are content hashes of whole records, which then have to be read whole."""
    key = version.key
    if key is None or key == column:
        return None
    fields = struct_fields(version, column)
    return [key] + [f"{column}.{name}" for name in LIGHT_FIELDS if name in fields]


def rollout_records(version: DatasetVersion, locations: list[tuple[int, int]], columns: list[str] | None) -> list[dict[str, Any]]:
    """The records at ``(shard, row)`` ``locations`` with only ``columns`` decoded (whole records when ``None``),
    reading each row group once."""
    if columns is None:
        return version.read_many(locations)
    groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for position, (shard, row) in enumerate(locations):
        group, offset = version.row_group_of(shard, row)
        groups.setdefault((shard, group), []).append((position, offset))
    out: list[dict[str, Any]] = [{} for _ in locations]
    for (shard, group), items in groups.items():
        table = read_columns(version, shard, group, columns)
        for position, offset in items:  # slices, not take(): no index array to build
            out[position] = table_records(table.slice(offset, 1))[0]
    return out
