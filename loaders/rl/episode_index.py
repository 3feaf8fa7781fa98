"""The episode index of a dataset version: per-episode numbers (length, frames, return, termination), sortable.

Built once per version from the episode's small sub-columns (and the
``return``, ``termination`` and ``env`` columns beside it) and kept in the
catalog's ``indexes`` directory as a stamped Parquet file (``loaders.storage.derived``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..catalog.version import DatasetVersion
from ..errors import InvalidQuery
from ..storage import derived
from .columns import scan
from .episodes import episode_fields
from .facts import number_text
from .store import MEMO, derivation, index_path, lock

SORTS = ("index", "return", "length")


def _top(table: pa.Table, name: str, type_: pa.DataType, n: int) -> pa.Array | pa.ChunkedArray:
    if name in table.column_names:
        try:
            return pc.cast(table.column(name), type_)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    return pa.nulls(n, type_)


EPISODE_SCHEMA = pa.schema(
    [
        ("row", pa.int64()),
        ("length", pa.int64()),
        ("frames", pa.int64()),
        ("ret", pa.float64()),
        ("excluded", pa.int64()),
        ("stored_return", pa.float64()),
        ("termination", pa.string()),
        ("env", pa.string()),
        ("key", pa.string()),
    ]
)


def _episode_rows(table: pa.Table, first: int, *, column: str, key: str | None) -> pa.Table:
    n = table.num_rows
    episode = table.column(column).combine_chunks()
    if pa.types.is_struct(episode.type):
        names = episode_fields([episode.type.field(i).name for i in range(episode.type.num_fields)])
        lists = {role: pc.struct_field(episode, name) for role, name in names.items() if name}
        lengths = {role: pc.fill_null(pc.list_value_length(a), 0).to_numpy(zero_copy_only=False) for role, a in lists.items()}
        rewards = lists.get("rewards")
        values = pc.list_flatten(rewards) if rewards is not None else pa.array([], pa.float64())
        parents = pc.list_parent_indices(rewards).to_numpy() if rewards is not None else np.zeros(0, np.int64)
    else:  # a list of per-step structs
        names = episode_fields([episode.type.value_type.field(i).name for i in range(episode.type.value_type.num_fields)])
        steps = pc.fill_null(pc.list_value_length(episode), 0).to_numpy(zero_copy_only=False)
        lengths = {role: steps for role, name in names.items() if name}
        flat = pc.list_flatten(episode)
        values = pc.struct_field(flat, names["rewards"]) if names["rewards"] else pa.array([], pa.float64())
        parents = pc.list_parent_indices(episode).to_numpy()
    rewards_np = pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64)
    ok = np.isfinite(rewards_np)
    ret = np.bincount(parents, weights=np.where(ok, rewards_np, 0.0), minlength=n)[:n] if len(parents) else np.zeros(n)
    excluded = np.bincount(parents, weights=~ok, minlength=n)[:n].astype(np.int64) if len(parents) else np.zeros(n, np.int64)
    longest = np.max(np.vstack(list(lengths.values())), axis=0) if lengths else np.zeros(n, np.int64)
    return pa.table(
        {
            "row": pa.array(np.arange(first, first + n, dtype=np.int64)),
            "length": pa.array(longest.astype(np.int64)),
            "frames": pa.array(lengths.get("frames", np.zeros(n, np.int64)).astype(np.int64)),
            "ret": pa.array(ret.astype(np.float64)),
            "excluded": pa.array(excluded),
            "stored_return": _top(table, "return", pa.float64(), n),
            "termination": _top(table, "termination", pa.string(), n),
            "env": _top(table, "env", pa.string(), n),
            "key": pc.cast(table.column(key), pa.string()) if key else pa.nulls(n, pa.string()),
        },
        schema=EPISODE_SCHEMA,
    )


def _plan(version: DatasetVersion, column: str) -> tuple[list[str], str | None]:
    """The columns an episode index reads of ``column`` (dotted paths), and the key column it records."""
    type_ = version.schema.field(column).type
    inner = type_ if pa.types.is_struct(type_) else getattr(type_, "value_type", None)
    if inner is None or not pa.types.is_struct(inner):
        raise InvalidQuery(f"column {column!r} of {version.ref} is {type_}; the episode table needs a struct of lists or a list of structs")
    names = episode_fields([inner.field(i).name for i in range(inner.num_fields)])
    if pa.types.is_struct(type_):
        paths = [f"{column}.{name}" for name in names.values() if name]
    else:
        paths = [column]
    extra = [c for c in ("return", "termination", "env") if c in version.schema.names]
    key = version.key if version.key and version.key not in extra else None
    return paths + extra + ([key] if key else []), key


def episode_table(root: str, version: DatasetVersion, column: str) -> pa.Table:
    """The episode index of ``column`` of ``version``: one row of numbers per episode (built once, kept in the catalog's indexes)."""
    columns, key = _plan(version, column)
    path = index_path(root, version, "episodes", column, "parquet")

    def load() -> pa.Table:
        with lock(path):
            what = derivation(version, "episode index", column)
            stored = derived.read_table(path, what, rows=version.rows)
            if stored is not None:
                return stored
            table = scan(version, columns, lambda t, first: _episode_rows(t, first, column=column, key=key), schema=EPISODE_SCHEMA)
            return derived.write_table(path, table, what)

    return MEMO.get((root, version.id, "episodes", column), load)


def confirm_episodes(version: DatasetVersion, column: str, index: pa.Table, positions: list[int]) -> str | None:
    """Why the episode index disagrees with the verified rows of the episodes at ``positions`` (None when it agrees):
    their row groups are read (only the episode's columns) and their index rows computed again."""
    columns, key = _plan(version, column)
    shown = index.take(pa.array(positions, pa.int64())) if positions else index.slice(0, 0)
    wanted: dict[tuple[int, int], list[int]] = {}
    for record in shown.column("row").to_pylist():
        shard, row = version.locate(int(record))
        wanted.setdefault((shard, version.row_group_of(shard, row)[0]), []).append(int(record))
    fresh = {}
    for (shard, group), records in wanted.items():
        first = version.index_of(shard, version._rg_starts[shard][group])
        rows = _episode_rows(version._open(shard).read_row_group(group, columns=columns), first, column=column, key=key)
        for record in records:
            fresh[record] = {name: rows.column(name)[record - first].as_py() for name in rows.column_names}
    for stored in shown.to_pylist():
        again = fresh[stored["row"]]
        for name, value in stored.items():
            other = again[name]
            same = value == other or (isinstance(value, float) and isinstance(other, float) and value != value and other != other)
            if not same:
                return f"episode at row {stored['row']} has {name} {value!r} in the index, {other!r} in its row"
    return None


def rebuild_episode_table(root: str, version: DatasetVersion, column: str) -> pa.Table:
    """Build the episode index of ``column`` of ``version`` again from its verified rows, store it and use it."""
    columns, key = _plan(version, column)
    path = index_path(root, version, "episodes", column, "parquet")
    memo = (root, version.id, "episodes", column)
    with lock(path):
        MEMO.forget(memo)
        table = scan(version, columns, lambda t, first: _episode_rows(t, first, column=column, key=key), schema=EPISODE_SCHEMA)
        table = derived.write_table(path, table, derivation(version, "episode index", column))
    return MEMO.get(memo, lambda: table)


def episode_order(index: pa.Table, sort: str) -> np.ndarray:
    """Positions of the episode index in ``sort`` order: ``index`` (dataset order), ``return`` or ``length``, ``-`` in
    front for descending; NaN, and returns with excluded rewards, last; ties in dataset order."""
    key = sort.lstrip("-")
    if key not in SORTS:
        raise InvalidQuery(f"sort {sort!r} is not one of {', '.join(SORTS)} (prefix - for descending)")
    rows = index.column("row").to_numpy()
    if key == "index":
        order = np.argsort(rows, kind="stable")
        return order[::-1] if sort.startswith("-") else order
    values = (index.column("ret") if key == "return" else index.column("length")).to_numpy(zero_copy_only=False).astype(np.float64)
    missing = ~np.isfinite(values) | ((index.column("excluded").to_numpy() > 0) if key == "return" else False)
    values = np.where(missing, 0.0, values)
    if sort.startswith("-"):
        values = -values
    return np.lexsort((rows, values, missing))


def episode_warnings(index: pa.Table, i: int) -> list[str]:
    """What is inconsistent in episode ``i`` of the index: missing frames, excluded rewards, a stored return that differs."""
    out = []
    length, frames = index.column("length")[i].as_py(), index.column("frames")[i].as_py()
    if frames != length:
        out.append(f"{frames} frames for {length} steps")
    excluded = index.column("excluded")[i].as_py()
    if excluded:
        out.append(f"{excluded} non-finite reward(s) excluded from the return")
    stored = index.column("stored_return")[i].as_py()
    ret = index.column("ret")[i].as_py()
    if stored is not None and not excluded and not (np.isfinite(stored) and abs(stored - ret) <= 1e-4 * (1 + abs(ret))):
        out.append(f"return column {number_text(stored)} ≠ sum of rewards {number_text(ret)}")
    return out
