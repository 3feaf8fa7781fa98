"""Derived per-version indexes kept in the catalog (``{root}/indexes/{dataset}/``): rollout groups and episode numbers.

The rollout rows are computed once with pyarrow compute, reading only the
rollout's small sub-columns of each row group (the row group's bytes are
still verified against the manifest), and stored as Parquet under the
catalog's ``indexes`` directory: derived data, registered files are never
touched. Loaded indexes stay in a small in-process LRU.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from loaders import storage
from loaders.derived import read_derived, write_derived
from loaders.cache import ByteLRU
from loaders.version import DatasetVersion

from ..errors import BadQuery
from ..renderers.episode import episode_fields
from ..renderers.rollout import BAD_ADVANTAGE, BAD_REWARD, LOGPROBS_LENGTH, NO_COMPLETION_IDS, NO_GROUP, REF_LENGTH
from .rl_query import GROUP_ARRAYS, ROW_ARRAYS, SCHEMA, RolloutIndex

FORMAT = 3
_SUBFIELDS = ("group_id", "prompt", "reward", "advantage", "completion_ids", "logprobs", "ref_logprobs", "finish_reason")


# -- derived files -----------------------------------------------------------------------
def index_path(root: str, version: DatasetVersion, kind: str, column: str) -> str:
    """Where a derived index of ``column`` of ``version`` is kept: ``{root}/indexes/{name}/{id}.{kind}.{column}.v{FORMAT}.parquet``."""
    slug = column if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", column) else hashlib.sha256(column.encode()).hexdigest()[:16]
    return storage.join(root, "indexes", version.name, f"{version.id}.{kind}.{slug}.v{FORMAT}.parquet")


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock(path: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(path, threading.Lock())


def cached_table(path: str, build: Callable[[], pa.Table]) -> pa.Table:
    """The table stored at ``path``, built (once, under a lock) and written atomically when missing or not matching
    its checksum (derived data is rebuilt, never trusted)."""
    with _lock(path):
        stored = read_derived(path)
        if stored is not None:  # ParquetFile, not read_table: that would import pyarrow.dataset (and pandas)
            return pq.ParquetFile(pa.BufferReader(stored)).read()
        table = build()
        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="zstd")
        write_derived(path, buffer.getvalue())
        return table


class _Memo:
    """A small LRU of loaded indexes, keyed by (root, version id, kind, column)."""

    def __init__(self, size: int = 6) -> None:
        self.size = size
        self.items: OrderedDict[tuple[str, ...], Any] = OrderedDict()
        self.lock = threading.Lock()

    def peek(self, key: tuple[str, ...]) -> Any:
        with self.lock:
            return self.items.get(key)

    def get(self, key: tuple[str, ...], make: Callable[[], Any]) -> Any:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        value = make()
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        return value


MEMO = _Memo()


def struct_fields(version: DatasetVersion, column: str) -> list[str]:
    """Field names of a struct column, or an error saying the column cannot be indexed."""
    if column not in version.schema.names:
        raise BadQuery(f"{version.ref} has no column {column!r} (columns: {', '.join(version.schema.names)})")
    type_ = version.schema.field(column).type
    if not pa.types.is_struct(type_):
        raise BadQuery(f"column {column!r} of {version.ref} is {type_}, not a struct; the group view needs struct rollouts")
    return [type_.field(i).name for i in range(type_.num_fields)]


def row_groups(version: DatasetVersion) -> list[tuple[int, int, int]]:
    """``(shard, row group, first record index)`` of every row group."""
    out, first = [], 0
    for shard, info in enumerate(version.shards):
        for group, rows in enumerate(info.row_groups):
            out.append((shard, group, first))
            first += rows
    return out


def scan(version: DatasetVersion, columns: list[str], convert: Callable[[pa.Table, int], pa.Table]) -> pa.Table:
    """``convert`` every verified row group read with only ``columns`` (dotted struct paths allowed), concatenated."""

    def one(item: tuple[int, int, int]) -> pa.Table:
        shard, group, first = item
        table = version._open(shard).read_row_group(group, columns=columns)
        return convert(table, first)

    items = row_groups(version)
    workers = max(1, min(4, os.cpu_count() or 1, len(items)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        parts = list(pool.map(one, items))
    return pa.concat_tables(parts) if parts else SCHEMA.empty_table()


# -- the rows of a dataset version --------------------------------------------------
def _child(table: pa.Table, column: str, name: str, fields: list[str]) -> pa.ChunkedArray | None:
    if name not in fields:
        return None
    return pc.struct_field(table.column(column), name)


def _float(array: pa.ChunkedArray | None, n: int) -> pa.ChunkedArray | pa.Array:
    if array is None:
        return pa.nulls(n, pa.float64())
    try:
        return pc.cast(array, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.nulls(n, pa.float64())


def _bits(mask: Any, bit: int) -> np.ndarray:
    return np.where(np.asarray(pc.fill_null(mask, False)), bit, 0).astype(np.int32)


def _rollout_rows(table: pa.Table, first: int, *, column: str, fields: list[str], step: str | None) -> pa.Table:
    n = table.num_rows
    get = lambda name: _child(table, column, name, fields)  # noqa: E731
    group = get("group_id")
    group = pc.cast(group, pa.string()) if group is not None else pa.nulls(n, pa.string())
    group = pc.if_else(pc.equal(group, ""), pa.scalar(None, pa.string()), group)
    prompt = get("prompt")
    prompt = pc.cast(prompt, pa.string()) if prompt is not None else pa.nulls(n, pa.string())
    gkey = pc.coalesce(pc.binary_join_element_wise("g:", group, ""), pc.binary_join_element_wise("p:", prompt, ""))
    reward, advantage = _float(get("reward"), n), _float(get("advantage"), n)
    ids = get("completion_ids")
    length = pc.cast(pc.list_value_length(ids), pa.int32()) if ids is not None else pa.nulls(n, pa.int32())
    problems = np.zeros(n, np.int32)
    counts = {}
    for name, bit in (("logprobs", LOGPROBS_LENGTH), ("ref_logprobs", REF_LENGTH)):
        values = get(name)
        counts[name] = pc.cast(pc.list_value_length(values), pa.int32()) if values is not None else pa.nulls(n, pa.int32())
        if values is not None:
            count = pc.list_value_length(values)
            problems |= _bits(pc.and_(pc.is_valid(count), pc.or_kleene(pc.is_null(length), pc.not_equal(count, length))), bit)
            if ids is not None:
                problems |= _bits(pc.and_(pc.is_valid(count), pc.is_null(ids)), NO_COMPLETION_IDS)
    problems |= _bits(pc.invert(pc.fill_null(pc.is_finite(reward), False)), BAD_REWARD)
    if "advantage" in fields:
        problems |= _bits(pc.invert(pc.fill_null(pc.is_finite(advantage), False)), BAD_ADVANTAGE)
    problems |= _bits(pc.is_null(group), NO_GROUP)
    finish = get("finish_reason")
    return pa.table(
        {
            "row": pa.array(np.arange(first, first + n, dtype=np.int64)),
            "group": group,
            "gkey": gkey,
            "reward": reward,
            "advantage": advantage,
            "length": length,
            "logprobs_length": counts["logprobs"],
            "ref_length": counts["ref_logprobs"],
            "finish": pc.cast(finish, pa.string()) if finish is not None else pa.nulls(n, pa.string()),
            "step": pc.cast(table.column(step), pa.int64()) if step else pa.nulls(n, pa.int64()),
            "problems": pa.array(problems),
        },
        schema=SCHEMA,
    )


_LIGHT: ByteLRU[pa.Table] = ByteLRU(budget=128 << 20, size_of=lambda t: t.nbytes)


def read_columns(version: DatasetVersion, shard: int, group: int, columns: list[str]) -> pa.Table:
    """One verified row group with only ``columns`` decoded (dotted struct paths allowed), cached by checksum and columns."""
    key = (version.shards[shard].checksum, group, tuple(columns))
    return _LIGHT.get_or_make(key, lambda: version._open(shard).read_row_group(group, columns=list(columns)))


def step_column(version: DatasetVersion) -> str | None:
    """The top-level integer ``step`` column, when the version has one."""
    if "step" in version.schema.names and pa.types.is_integer(version.schema.field("step").type):
        return "step"
    return None


def build_rollout_rows(version: DatasetVersion, column: str) -> pa.Table:
    """One index row per rollout of ``version`` (a full scan of the rollout's small sub-columns)."""
    fields = struct_fields(version, column)
    step = step_column(version)
    paths = [f"{column}.{name}" for name in _SUBFIELDS if name in fields] + ([step] if step else [])
    return scan(version, paths, lambda t, first: _rollout_rows(t, first, column=column, fields=fields, step=step))


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _ipc_table(path: str) -> pa.Table | None:
    """An Arrow IPC file written by ``save_index``, or None when it is absent or does not match its checksum."""
    stored = read_derived(path)
    return None if stored is None else pa.ipc.open_file(pa.py_buffer(stored)).read_all()


_DTYPES = {pa.int64(): np.int64, pa.int32(): np.int32, pa.int16(): np.int16, pa.uint8(): np.uint8, pa.float64(): np.float64}


def _view(column: pa.ChunkedArray) -> np.ndarray:
    """A numeric column as a numpy view of its buffer (``to_numpy`` would import pandas on a process's first call)."""
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    dtype = _DTYPES.get(array.type)
    if dtype is None or array.null_count:
        return array.to_numpy(zero_copy_only=False)
    size = np.dtype(dtype).itemsize
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * size)


def save_index(path: str, index: RolloutIndex) -> None:
    """Write an index as two Arrow IPC files (``.groups.arrow`` first, then ``.rows.arrow``), each atomically."""
    arrays = {name: getattr(index, name) for name in GROUP_ARRAYS}
    arrays["zero_variance"] = arrays["zero_variance"].astype(np.uint8)
    groups = pa.table({**arrays, "group_id": index.group_ids})
    rows = pa.table({name: getattr(index, name) for name in ROW_ARRAYS})
    rows = rows.replace_schema_metadata({"finish_names": json.dumps(index.finish_names)})
    write_derived(path + ".groups.arrow", _ipc_bytes(groups))
    write_derived(path + ".rows.arrow", _ipc_bytes(rows))


def load_index(path: str) -> RolloutIndex | None:
    """An index written by ``save_index`` (numeric columns are zero-copy views), or ``None`` when there is none
    (or either file does not match its checksum: it is then rebuilt)."""
    rows, groups = _ipc_table(path + ".rows.arrow"), _ipc_table(path + ".groups.arrow")
    if rows is None or groups is None:
        return None
    names = json.loads((rows.schema.metadata or {}).get(b"finish_names", b"[]"))
    arrays = lambda t, names: {n: _view(t.column(n)) for n in names}  # noqa: E731
    return RolloutIndex(arrays(rows, ROW_ARRAYS), arrays(groups, GROUP_ARRAYS), groups.column("group_id").combine_chunks(), names)


def version_index(root: str, version: DatasetVersion, column: str) -> RolloutIndex:
    """The rollout index of ``column`` of ``version``: from memory, else the catalog's indexes, else built now (and kept)."""
    path = index_path(root, version, "rollouts", column).removesuffix(".parquet")

    def load() -> RolloutIndex:
        with _lock(path):
            found = load_index(path)
            if found is None:
                found = RolloutIndex.compute(build_rollout_rows(version, column))
                save_index(path, found)
            return found

    return MEMO.get((root, version.id, "rollouts", column), load)


def available_index(root: str, version: DatasetVersion, column: str, *, build_rows: int) -> RolloutIndex | None:
    """The version's rollout index when it is in memory or on disk, or built now if the version has at most
    ``build_rows`` rows; else ``None`` (a step page must not scan a large dataset)."""
    if MEMO.peek((root, version.id, "rollouts", column)) is not None or version.rows <= build_rows:
        return version_index(root, version, column)
    path = index_path(root, version, "rollouts", column).removesuffix(".parquet")
    if storage.stat(path + ".rows.arrow").exists:
        return version_index(root, version, column)
    return None


# -- episodes ----------------------------------------------------------------------------------
def _top(table: pa.Table, name: str, type_: pa.DataType, n: int) -> pa.Array | pa.ChunkedArray:
    if name in table.column_names:
        try:
            return pc.cast(table.column(name), type_)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    return pa.nulls(n, type_)


EPISODE_SCHEMA = pa.schema(
    [("row", pa.int64()), ("length", pa.int64()), ("frames", pa.int64()), ("ret", pa.float64()), ("excluded", pa.int64()),
     ("stored_return", pa.float64()), ("termination", pa.string()), ("env", pa.string()), ("key", pa.string())]
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


def episode_index(root: str, version: DatasetVersion, column: str) -> pa.Table:
    """Per-episode numbers of ``column`` of ``version`` (built once, kept in the catalog's indexes)."""
    type_ = version.schema.field(column).type
    inner = type_ if pa.types.is_struct(type_) else getattr(type_, "value_type", None)
    if inner is None or not pa.types.is_struct(inner):
        raise BadQuery(f"column {column!r} of {version.ref} is {type_}; the episode table needs a struct of lists or a list of structs")
    names = episode_fields([inner.field(i).name for i in range(inner.num_fields)])
    if pa.types.is_struct(type_):
        paths = [f"{column}.{name}" for name in names.values() if name]
    else:
        paths = [column]
    extra = [c for c in ("return", "termination", "env") if c in version.schema.names]
    key = version.key if version.key and version.key not in extra else None
    columns = paths + extra + ([key] if key else [])

    def build() -> pa.Table:
        return scan(version, columns, lambda t, first: _episode_rows(t, first, column=column, key=key))

    return MEMO.get(
        (root, version.id, "episodes", column), lambda: cached_table(index_path(root, version, "episodes", column), build)
    )


