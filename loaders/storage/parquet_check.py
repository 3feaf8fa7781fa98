"""Checks of what a Parquet footer and its page headers claim, before anything is allocated from those claims.

A footer is data like any other: it can claim 10^12 rows in a 2.6 KB file, or
one row in a row group whose pages hold 25 (Arrow then reads one and the other
24 vanish). :func:`footer_problem` bounds the footer's numbers by the file's
real size; :class:`PageCheck` walks the page headers of a row group's
(already verified) bytes and compares the values they hold with the footer's
row count. Both return a sentence saying what is wrong, or None.

>>> MAX_ROWS_PER_BYTE >= 600  # what pyarrow itself writes for constant columns
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from .thrift_compact import CompactReader

#: Rows a row group may claim per byte it really occupies (pyarrow writes at most ~600 for all-null or constant
#: columns); beyond it a footer is a decompression bomb, refused before anything is allocated.
MAX_ROWS_PER_BYTE = int(os.environ.get("BATCHSCOPE_MAX_ROWS_PER_BYTE", "4096"))
#: A row group may always claim this many rows, whatever its size.
MIN_ROW_ALLOWANCE = 65_536
#: Bytes a row group's pages may inflate to per byte they occupy (zstd rarely passes ~100 on real data)...
MAX_INFLATION = int(os.environ.get("BATCHSCOPE_MAX_INFLATION", "1024"))
#: ...and what they may always inflate to, whatever their size.
MIN_INFLATION_ALLOWANCE = 256 << 20

_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3


def _chunk_start(column: Any) -> int:
    start = column.data_page_offset
    if column.has_dictionary_page and column.dictionary_page_offset is not None:
        start = min(start, column.dictionary_page_offset)
    return int(start)


def footer_problem(metadata: pq.FileMetaData, *, body_end: int) -> str | None:
    """What is impossible in a footer for a file whose row groups must lie in bytes ``[4, body_end)``."""
    total = 0
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        rows = group.num_rows
        if rows < 0:
            return f"row group {g} claims {rows} rows"
        occupied = 0
        for j in range(group.num_columns):
            column = group.column(j)
            start, size = _chunk_start(column), column.total_compressed_size
            if rows and (start < 4 or size < 0 or start + size > body_end):  # an empty group is never read
                return (
                    f"row group {g} column {column.path_in_schema!r} claims bytes {start}-{start + size}, "
                    f"outside the data of the file (bytes 4-{body_end})"
                )
            if column.num_values < 0:
                return f"row group {g} column {column.path_in_schema!r} claims {column.num_values} values"
            if metadata.schema.column(j).max_repetition_level == 0 and column.num_values != rows:
                return f"row group {g} claims {rows} rows but its column {column.path_in_schema!r} holds {column.num_values} values"
            occupied += size
        limit = max(MIN_ROW_ALLOWANCE, MAX_ROWS_PER_BYTE * occupied)
        if rows > limit:
            return (
                f"row group {g} claims {rows:,} rows in {occupied:,} bytes (at most {limit:,} are plausible); "
                "refused as a decompression bomb"
            )
        total += rows
    if total != metadata.num_rows:
        return f"footer says {metadata.num_rows} rows but its row groups hold {total}"
    return None


@dataclass
class _Chunk:
    """What the page headers of one column chunk hold."""

    values: int = 0
    rows: int | None = None
    inflated: int = 0


def _header(data: memoryview, pos: int, end: int) -> tuple[dict[int, Any], int]:
    """The page header at ``pos`` and where it ends; parsed from a small copy (faster than indexing ``data``)."""
    window = 512
    while True:
        stop = min(end, pos + window)
        reader = CompactReader(bytes(data[pos:stop]), 0, stop - pos)
        try:
            return reader.struct(), pos + reader.pos
        except ValueError:
            if stop == end:
                raise
            window *= 16  # large statistics: read further


def _walk_chunk(data: memoryview, base: int, start: int, size: int) -> _Chunk:
    """Sum the page headers of one column chunk whose bytes are in ``data`` (which starts at file offset ``base``)."""
    pos, end = start - base, start - base + size
    chunk = _Chunk()
    while pos < end:
        header, body = _header(data, pos, end)
        compressed, inflated = header.get(3), header.get(2)
        if not isinstance(compressed, int) or compressed < 0 or body + compressed > end:
            raise ValueError(f"a page at byte {base + pos} claims {compressed} bytes, past the end of its column chunk")
        if not isinstance(inflated, int) or inflated < 0:
            raise ValueError(f"a page at byte {base + pos} claims to inflate to {inflated} bytes")
        chunk.inflated += inflated
        kind = header.get(1)
        if kind == _DATA_PAGE:
            chunk.values += int((header.get(5) or {}).get(1, 0))
        elif kind == _DATA_PAGE_V2:
            v2 = header.get(8) or {}
            chunk.values += int(v2.get(1, 0))
            chunk.rows = (chunk.rows or 0) + int(v2.get(3, 0))
        pos = body + compressed
    return chunk


class PageCheck:
    """Checks the page headers of a file's row groups against its footer (``problem(group, data, base)``).

    The row counts a row group's pages hold must be the rows its footer
    claims, and what they inflate to is bounded by the bytes they occupy.
    """

    def __init__(self, metadata: pq.FileMetaData) -> None:
        self.metadata = metadata
        self._flat = [metadata.schema.column(j).max_repetition_level == 0 for j in range(metadata.num_columns)]

    def problem(self, group: int, data: memoryview, base: int) -> str | None:
        """What is wrong with row group ``group`` (``data`` holds its bytes from file offset ``base``), or None."""
        meta = self.metadata.row_group(group)
        claimed = meta.num_rows
        if claimed == 0:  # nothing of it is decoded (writers leave placeholder offsets in empty groups)
            return None
        inflated = occupied = 0
        for j, flat in enumerate(self._flat):
            column = meta.column(j)
            try:
                chunk = _walk_chunk(data, base, _chunk_start(column), column.total_compressed_size)
            except (ValueError, IndexError) as exc:
                return f"row group {group} column {column.path_in_schema!r}: unreadable page headers ({exc})"
            held = chunk.values if flat else chunk.rows
            if held is not None and held != claimed:
                return f"row group {group} holds {held} rows (pages of column {column.path_in_schema!r}) but its footer says {claimed}"
            if not flat and chunk.values < claimed:
                return f"row group {group} claims {claimed} rows but column {column.path_in_schema!r} holds only {chunk.values} values"
            inflated += chunk.inflated
            occupied += column.total_compressed_size
        limit = max(MIN_INFLATION_ALLOWANCE, MAX_INFLATION * occupied)
        if inflated > limit:
            return (
                f"row group {group}'s pages inflate to {inflated:,} bytes from {occupied:,} (at most {limit:,} are plausible); "
                "refused as a decompression bomb"
            )
        return None
