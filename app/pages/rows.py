"""Rows of a version by cursor, and text search, both reading only the row groups they need.

A cursor is a record index of the (immutable) version: ``start=N`` lists
from record ``N`` on, ``end=N`` lists the page that ends just before ``N``.
Either maps through ``version.locate`` to one row group, so the last page of
a ten-million-row dataset costs what the first does. Search scans row groups
from the cursor with ``pyarrow.compute.match_substring`` until the page is
full or the time budget is spent, and then links to where it stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from loaders.catalog.records import Record
from loaders.catalog.version import DatasetVersion
from loaders.query.listing import label_ids

from ..decode_budget import DecodeBudget
from ..errors import BadQuery
from .row_sizes import reading_row_groups


@dataclass
class RowSlice:
    """Record indices (ascending) with their records, and where the scan that found them began and ended."""

    indices: list[int] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    #: The half-open range of record indices that was looked at.
    scanned_from: int = 0
    scanned_to: int = 0
    #: True when the scan stopped because of the time budget, not a full page or the end of the data.
    stopped_early: bool = False


def read_indices(version: DatasetVersion, indices: list[int], *, budget: DecodeBudget | None = None) -> list[Record]:
    """Records at ascending record indices, reading each row group once (refused first when over ``budget``)."""
    by_shard: dict[int, list[int]] = {}
    order: list[tuple[int, int]] = []
    for index in indices:
        shard, row = version.locate(index)
        by_shard.setdefault(shard, []).append(row)
        order.append((shard, row))
    groups = [(shard, version.row_group_of(shard, row)[0]) for shard, row in order]
    decoded: dict[tuple[int, int], Record] = {}
    with reading_row_groups(version, groups, budget, f"rows {indices[0]}-{indices[-1]}" if indices else "no rows"):
        for shard, rows in by_shard.items():
            for row, record in zip(rows, version.read(shard, rows)):
                decoded[(shard, row)] = record
    return [decoded[item] for item in order]


def page_at(version: DatasetVersion, *, start: int | None, end: int | None, size: int, budget: DecodeBudget | None = None) -> RowSlice:
    """The page starting at ``start`` (or ending before ``end``): O(page) work wherever it is."""
    total = version.rows
    if end is not None:
        stop = min(end, total)
        begin = max(0, stop - size)
    else:
        begin = min(start or 0, total)
        stop = min(total, begin + size)
    indices = list(range(begin, stop))
    return RowSlice(indices, read_indices(version, indices, budget=budget), begin, stop)


def _group_starts(version: DatasetVersion, shard: int) -> list[int]:
    first = version.index_of(shard, 0)
    starts = []
    for rows in version.shards[shard].row_groups:
        starts.append(first)
        first += rows
    return starts


def _groups(version: DatasetVersion, index: int, *, backward: bool) -> Iterator[tuple[int, int, int]]:
    """``(shard, row group, first record index)`` from the group holding ``index``, forward or backward."""
    if not 0 <= index < version.rows:
        return
    shard, row = version.locate(index)
    group, _ = version.row_group_of(shard, row)
    shards = range(shard, -1, -1) if backward else range(shard, len(version.shards))
    for number in shards:
        starts = _group_starts(version, number)
        begin = group if number == shard else (len(starts) - 1 if backward else 0)
        groups = range(begin, -1, -1) if backward else range(begin, len(starts))
        for g in groups:
            yield number, g, starts[g]


def _is_text(type_: pa.DataType) -> bool:
    if pa.types.is_dictionary(type_):  # pandas Categorical, Arrow dictionary encoding
        type_ = type_.value_type
    return pa.types.is_string(type_) or pa.types.is_large_string(type_)


def searchable(version: DatasetVersion) -> list[str]:
    """Columns search can scan: text columns (dictionary-encoded ones too), then class labels (the default is the first)."""
    labels = [f.name for f in version.schema if version.kinds.get(f.name) == "class_label" and pa.types.is_integer(f.type)]
    return [f.name for f in version.schema if _is_text(f.type)] + labels


def check_searchable(version: DatasetVersion, column: str) -> None:
    """BadQuery unless search can scan ``column`` of ``version``."""
    if column not in searchable(version):
        raise BadQuery(
            f"cannot search column {column!r} of {version.ref}: searchable columns are {', '.join(searchable(version)) or 'none'}"
        )


def matches(version: DatasetVersion, column: str, values: pa.ChunkedArray | pa.Array, query: str) -> pa.ChunkedArray | pa.Array:
    """Which ``values`` of ``column`` match ``query``: a substring of the text (any case); for a class label,
    the class id itself or any class whose name contains the query."""
    if version.kinds.get(column) == "class_label" and pa.types.is_integer(values.type):
        wanted = label_ids(version.class_names.get(column, []), query)
        return pc.is_in(values, value_set=pa.array(wanted, pa.int64()).cast(values.type, safe=False))
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    return pc.match_substring(values, query, ignore_case=True)


def search(
    version: DatasetVersion,
    *,
    column: str,
    query: str,
    start: int | None,
    end: int | None,
    size: int,
    seconds: float,
    budget: DecodeBudget | None = None,
) -> RowSlice:
    """Up to ``size`` records whose ``column`` contains ``query`` (case-insensitive), from a cursor.

    Always scans at least one row group; stops at a full page, the end (or
    start) of the data, or when ``seconds`` have passed.
    """
    check_searchable(version, column)
    backward = end is not None and start is None
    total = version.rows
    cursor = min(end, total) - 1 if backward and end is not None else min(start or 0, total)
    deadline = time.monotonic() + seconds
    found: list[int] = []
    scanned_from = scanned_to = cursor + 1 if backward else cursor
    stopped = False
    for shard, group, first in _groups(version, cursor, backward=backward):
        with reading_row_groups(version, [(shard, group)], budget, f"row group {group} of shard {shard}"):
            table = version.row_group(shard, group).select([column])
        found_here = pc.fill_null(matches(version, column, table.column(column), query), False)
        hits = [first + int(i) for i in pc.indices_nonzero(found_here).to_pylist()]
        if backward:
            hits = [h for h in reversed(hits) if h <= cursor]
            scanned_from = first
        else:
            hits = [h for h in hits if h >= cursor]
            scanned_to = first + table.num_rows
        found.extend(hits)
        if len(found) >= size:
            found = found[:size]
            if backward:
                scanned_from = found[-1]
            else:
                scanned_to = found[-1] + 1
            break
        if time.monotonic() >= deadline:
            stopped = (scanned_from > 0) if backward else (scanned_to < total)
            break
    indices = sorted(found)
    return RowSlice(indices, read_indices(version, indices, budget=budget), scanned_from, scanned_to, stopped)
