"""The rollout index of a dataset version: one row per rollout, grouped, kept in the catalog's ``indexes`` directory.

The rollout rows are computed once with pyarrow compute, reading only the
rollout's small sub-columns of each row group (the row group's bytes are
still verified against the manifest), grouped by ``RolloutIndex.compute`` and
stored as two stamped Arrow IPC files (``loaders.storage.derived``): the per-rollout
arrays and the per-group statistics. Loaded indexes stay in a small
in-process LRU; numeric columns are zero-copy views of the file's buffers.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import storage
from ..catalog.version import DatasetVersion
from ..storage import derived
from .columns import scan, step_column, struct_fields
from .facts import BAD_ADVANTAGE, BAD_REWARD, LOGPROBS_LENGTH, NO_COMPLETION_IDS, NO_GROUP, REF_LENGTH
from .query import GROUP_ARRAYS, ROW_ARRAYS, SCHEMA, RolloutIndex
from .store import MEMO, derivation, index_path, lock

log = logging.getLogger(__name__)
_SUBFIELDS = ("group_id", "prompt", "reward", "advantage", "completion_ids", "logprobs", "ref_logprobs", "finish_reason")


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


def build_rollout_rows(version: DatasetVersion, column: str) -> pa.Table:
    """One index row per rollout of ``version`` (a full scan of the rollout's small sub-columns)."""
    fields = struct_fields(version, column)
    step = step_column(version)
    paths = [f"{column}.{name}" for name in _SUBFIELDS if name in fields] + ([step] if step else [])
    return scan(version, paths, lambda t, first: _rollout_rows(t, first, column=column, fields=fields, step=step), schema=SCHEMA)


# -- the stored index ---------------------------------------------------------------
def _paths(root: str, version: DatasetVersion, column: str) -> tuple[str, str]:
    """The index's per-rollout and per-group files."""
    return index_path(root, version, "rollouts", column, "rows.arrow"), index_path(root, version, "rollouts", column, "groups.arrow")


_DTYPES = {pa.int64(): np.int64, pa.int32(): np.int32, pa.int16(): np.int16, pa.uint8(): np.uint8, pa.float64(): np.float64}


def _view(column: pa.ChunkedArray) -> np.ndarray:
    """A numeric column as a numpy view of its buffer (``to_numpy`` would import pandas on a process's first call)."""
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    dtype = _DTYPES.get(array.type)
    if dtype is None or array.null_count:
        return array.to_numpy(zero_copy_only=False)
    size = np.dtype(dtype).itemsize
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * size)


def save_index(root: str, version: DatasetVersion, column: str, index: RolloutIndex) -> None:
    """Store ``index`` as the two sealed files of ``column`` of ``version`` (groups first, then rows), each atomically;
    a catalog that cannot be written (read-only) keeps only the loaded index (it is built again by the next process)."""
    try:
        _save_index(root, version, column, index)
    except OSError as exc:
        log.warning("cannot keep the rollout index of %s column %r (%s); it is kept in memory only", version.ref, column, exc)


def _save_index(root: str, version: DatasetVersion, column: str, index: RolloutIndex) -> None:
    rows_path, groups_path = _paths(root, version, column)
    arrays = {name: getattr(index, name) for name in GROUP_ARRAYS}
    arrays["zero_variance"] = arrays["zero_variance"].astype(np.uint8)
    groups = pa.table({**arrays, "group_id": index.group_ids})
    rows = pa.table({name: getattr(index, name) for name in ROW_ARRAYS})
    rows = rows.replace_schema_metadata({"finish_names": json.dumps(index.finish_names)})
    derived.write_table(groups_path, groups, derivation(version, "rollout groups", column))
    derived.write_table(rows_path, rows, derivation(version, "rollout rows", column))


def load_index(root: str, version: DatasetVersion, column: str) -> RolloutIndex | None:
    """The stored index of ``column`` of ``version``, or ``None`` when there is none or either file's stamp does not
    match (another version, another layout, torn or edited): it is then rebuilt."""
    rows_path, groups_path = _paths(root, version, column)
    rows = derived.read_table(rows_path, derivation(version, "rollout rows", column), rows=version.rows)
    groups = derived.read_table(groups_path, derivation(version, "rollout groups", column)) if rows is not None else None
    if rows is None or groups is None:
        return None

    def decode() -> RolloutIndex:
        names = json.loads((rows.schema.metadata or {}).get(b"finish_names", b"[]"))
        arrays = lambda t, names: {n: _view(t.column(n)) for n in names}  # noqa: E731
        return RolloutIndex(arrays(rows, ROW_ARRAYS), arrays(groups, GROUP_ARRAYS), groups.column("group_id").combine_chunks(), names)

    return derived.guarded(rows_path, derivation(version, "rollout rows", column), decode)


def version_index(root: str, version: DatasetVersion, column: str) -> RolloutIndex:
    """The rollout index of ``column`` of ``version``: from memory, else the catalog's indexes, else built now (and kept)."""

    def load() -> RolloutIndex:
        with lock(_paths(root, version, column)[0]):
            found = load_index(root, version, column)
            if found is None:
                found = RolloutIndex.compute(build_rollout_rows(version, column))
                save_index(root, version, column, found)
            return found

    return MEMO.get((root, version.id, "rollouts", column), load)


def rebuild_index(root: str, version: DatasetVersion, column: str) -> RolloutIndex:
    """Build the rollout index of ``column`` of ``version`` again from its verified rows (after the stored one
    disagreed with rollouts a page read), store it and use it from now on."""
    key = (root, version.id, "rollouts", column)
    with lock(_paths(root, version, column)[0]):
        MEMO.forget(key)
        found = RolloutIndex.compute(build_rollout_rows(version, column))
        save_index(root, version, column, found)
    return MEMO.get(key, lambda: found)


def available_index(root: str, version: DatasetVersion, column: str, *, build_rows: int) -> RolloutIndex | None:
    """The version's rollout index when it is in memory or on disk, or built now if the version has at most
    ``build_rows`` rows; else ``None`` (a step page must not scan a large dataset)."""
    if MEMO.peek((root, version.id, "rollouts", column)) is not None or version.rows <= build_rows:
        return version_index(root, version, column)
    if storage.stat(_paths(root, version, column)[0]).exists:
        return version_index(root, version, column)
    return None


# -- a batch's groups judged as whole groups ---------------------------------------------
def use_dataset_groups(index: RolloutIndex, sources: Sequence[tuple[DatasetVersion, str]], root: str, *, build_rows: int) -> int:
    """Give a batch's index (``RolloutIndex.from_facts``) its groups' whole-dataset statistics; returns how many groups
    stay unknown.

    ``sources[i]`` is the version and rollout column of the batch's rollout ``i``; a group is looked up by its id in
    the index of its first rollout's version (see ``available_index`` for ``build_rows``).
    """
    groups = len(index.starts)
    sizes, means, flat = np.full(groups, -1, np.int64), np.full(groups, np.nan), np.zeros(groups, bool)
    lookups: dict[tuple[str, str], tuple[RolloutIndex | None, dict[str, int]]] = {}
    for g in range(groups):
        version, column = sources[int(index.row[index.starts[g]])]
        key = (version.id, column)
        if key not in lookups:
            found = available_index(root, version, column, build_rows=build_rows)
            ids = found.group_ids.to_pylist() if found is not None else []
            lookups[key] = (found, {gid: number for number, gid in enumerate(ids) if gid is not None})
        found, lookup = lookups[key]
        group_id = index.group_id(g)
        number = lookup.get(group_id) if group_id is not None else None
        if found is not None and number is not None:
            sizes[g], means[g], flat[g] = found.sizes[number], found.mean[number], found.zero_variance[number]
    index.use_reference(sizes, means, flat)
    return int((sizes < 0).sum())
