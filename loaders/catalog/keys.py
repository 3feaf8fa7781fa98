"""Sample keys: uniqueness at registration, stable suffixes for allowed duplicates, and the checked key index.

Registration with a key column reads it once. Duplicate values are refused
(naming the first ones and their rows) unless duplicates are allowed: then the
second and later rows of a value get the key ``value~1``, ``value~2``... (in
record order, skipping suffixes that are themselves keys), recorded in the
manifest so every link names exactly one record.

The key index (``indexes/{name}/{version}.keys.parquet``) is derived data
(``loaders.storage.derived``): each row group's digest and key range are sealed
in its footer for this version, a lookup checks the row group it reads, an
index that fails any check or cannot be decoded is rebuilt, and every hit is
confirmed against the record it points at.

>>> suffixed_keys(["a", "b", "a", "a~1", "a"])
{2: 'a~2', 4: 'a~3'}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import RegistrationError
from ..storage import derived

DUPLICATES_SHOWN = 5


@dataclass(frozen=True)
class KeyColumn:
    """Every row's key in record order, with its shard and row."""

    keys: pa.Array
    shards: pa.Array
    rows: pa.Array

    def duplicates(self) -> dict[str, list[int]]:
        """Key → record positions, for keys held by more than one row (first occurrence order)."""
        table = pa.table({"key": self.keys, "at": pa.array(np.arange(len(self.keys), dtype=np.int64))})
        counts = table.group_by("key").aggregate([("at", "count")])
        repeated = counts.filter(pc.greater(counts.column("at_count"), 1)).column("key")
        if len(repeated) == 0:
            return {}
        hits = table.filter(pc.is_in(table.column("key"), value_set=repeated))
        found: dict[str, list[int]] = {}
        for key, at in zip(hits.column("key").to_pylist(), hits.column("at").to_pylist()):
            found.setdefault(key, []).append(at)
        return dict(sorted(found.items(), key=lambda item: item[1][0]))

    def where(self, position: int) -> str:
        return f"shard {self.shards[position].as_py()} row {self.rows[position].as_py()}"


def refuse_duplicates(column: KeyColumn, *, key: str, name: str) -> None:
    """RegistrationError naming the first duplicate keys and their rows, when any key is held twice."""
    found = column.duplicates()
    if not found:
        return
    shown = "; ".join(
        f"{value!r} at {', '.join(column.where(p) for p in positions[:DUPLICATES_SHOWN])}"
        + (f" (+{len(positions) - DUPLICATES_SHOWN} more)" if len(positions) > DUPLICATES_SHOWN else "")
        for value, positions in list(found.items())[:DUPLICATES_SHOWN]
    )
    more = f" and {len(found) - DUPLICATES_SHOWN} more duplicated keys" if len(found) > DUPLICATES_SHOWN else ""
    raise RegistrationError(
        f"dataset {name}: key column {key!r} is not unique: {shown}{more}. Make the keys unique, "
        "or register with allow_duplicate_keys=True (--allow-duplicate-keys) to give later duplicates a '~N' suffix"
    )


def suffixed_keys(keys: Sequence[str]) -> dict[int, str]:
    """Position → new key for every repeated key after its first row: ``value~N``, never an existing key."""
    taken = set(keys)
    seen: set[str] = set()
    counters: dict[str, int] = {}
    out: dict[int, str] = {}
    for position, value in enumerate(keys):
        if value not in seen:
            seen.add(value)
            continue
        n = counters.get(value, 0)
        while True:
            n += 1
            candidate = f"{value}~{n}"
            if candidate not in taken:
                break
        counters[value] = n
        taken.add(candidate)
        out[position] = candidate
    return out


def suffix_column(column: KeyColumn) -> tuple[KeyColumn, list[tuple[int, int, str]]]:
    """``column`` with duplicates suffixed, and the ``(shard, row, key)`` renames to record in the manifest."""
    found = column.duplicates()
    if not found:
        return column, []
    keys = column.keys.to_pylist()
    renames = suffixed_keys(keys)
    for position, new in renames.items():
        keys[position] = new
    moved = [(int(column.shards[p].as_py()), int(column.rows[p].as_py()), new) for p, new in sorted(renames.items())]
    return KeyColumn(pa.array(keys, pa.string()), column.shards, column.rows), moved


def index_table(column: KeyColumn) -> pa.Table:
    """The key index's table: ``key, shard, row`` sorted by key."""
    return pa.table({"key": column.keys, "shard": column.shards, "row": column.rows}).sort_by("key")


#: Layout of the key index: 2 seals each row group's digest and key range (1 stamped one digest of the whole table).
INDEX_LAYOUT = 2
#: Keys per row group of the key index (a lookup reads and checks one).
INDEX_GROUP_ROWS = 4096


def index_derivation(version_id: str) -> derived.Derivation:
    """What the key index of version ``version_id`` is, for its seal."""
    return derived.Derivation("key index", version_id, layout=INDEX_LAYOUT)


def write_index(path: str, column: KeyColumn, version_id: str) -> None:
    """Store the sealed key index of ``column`` at ``path``."""
    derived.write_row_groups(path, index_table(column), index_derivation(version_id), row_group_size=INDEX_GROUP_ROWS, bounds="key")
