"""Registering a Parquet file: its footer once, then its segments — each read once, checked, hashed and keyed.

:func:`read_layout` reads a file's footer and bounds it (``footer_problem``),
and cuts the body into segments (one per row group when they lie in file
order). :func:`scan_segments` reads a range of those segments — each byte
once — walks their page headers (segments up to 64 MB), hashes them, and,
when asked, decodes a key column from the very bytes it hashed. Ranges of
one file can be scanned in parallel, on any machine; :func:`shard_info`
assembles their digests into the manifest's :class:`ShardInfo`.
:func:`scan_shard` does all three for one file.

>>> layout_ranges(segment_sizes=[10, 10, 10, 10], target=25)
[(0, 3), (3, 4)]
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import RegistrationError
from . import files as storage
from .parquet_check import PageCheck, footer_problem
from .shards import OpenShard, ShardInfo, decode_row_group, digest, file_buffer, parse_footer

_MAGIC = b"PAR1"
_HASH_CHUNK = 8 << 20
#: Segments up to this size are read whole at registration, so their page headers are checked there too.
CHECKED_SEGMENT = 64 << 20
#: Files up to this size are read whole, in one request, by :func:`scan_shard`.
WHOLE_FILE = 8 << 20
#: Segments up to this size are held whole while scanned (larger ones are streamed; their key column is read apart).
_HELD_SEGMENT = 256 << 20


@dataclass(frozen=True)
class ShardLayout:
    """What a file's footer says: its size, footer bytes and the segments its body is cut into."""

    uri: str
    size: int
    footer: bytes
    boundaries: tuple[int, ...]
    #: One segment per row group (else one segment holds the whole body).
    per_group: bool
    row_groups: tuple[int, ...]

    @property
    def segments(self) -> int:
        return len(self.boundaries) - 1

    @property
    def footer_start(self) -> int:
        return self.boundaries[-1]

    def metadata(self) -> pq.FileMetaData:
        return parse_footer(self.uri, self.footer)

    def schema(self) -> pa.Schema:
        """The file's Arrow schema, or RegistrationError naming the file."""
        try:
            return self.metadata().schema.to_arrow_schema()
        except Exception as exc:
            raise RegistrationError(f"{self.uri}: schema cannot be read as Arrow ({exc})") from exc

    def segment_sizes(self) -> list[int]:
        return [b - a for a, b in zip(self.boundaries, self.boundaries[1:])]


@dataclass(frozen=True)
class SegmentScan:
    """What scanning segments ``[first, last)`` of a file found."""

    first: int
    last: int
    digests: tuple[str, ...]
    #: Every segment's page headers were walked (all held whole).
    pages_checked: bool
    #: The key column of the rows in those segments as text (None when no key was asked for).
    keys: pa.Array | None = None


#: The end of a file read in one request to find its footer (most footers fit; a larger one takes a second request).
_TAIL = 64 << 10


def _footer_bounds(uri: str, size: int, whole: bytes | memoryview | None = None) -> tuple[int, bytes]:
    """Return (footer start, footer bytes); raise RegistrationError when the tail is not Parquet."""
    if size < 12:
        raise RegistrationError(f"{uri}: not a Parquet file ({size} bytes is too small for header and footer)")
    tail = whole if whole is not None else storage.read_range(uri, size - min(size, _TAIL), min(size, _TAIL), cache=False)
    if tail[-4:] != _MAGIC:
        raise RegistrationError(f"{uri}: not a Parquet file (no PAR1 magic at the end; truncated or another format)")
    (meta_len,) = struct.unpack("<I", tail[-8:-4])
    start = size - 8 - meta_len
    if start < 4:
        raise RegistrationError(f"{uri}: Parquet footer length {meta_len} exceeds the file size {size}")
    if size - start <= len(tail):
        return start, bytes(tail[len(tail) - (size - start) :])
    return start, storage.read_range(uri, start, size - start, cache=False)


def _row_group_starts(metadata: pq.FileMetaData) -> list[int]:
    starts = []
    for i in range(metadata.num_row_groups):
        group = metadata.row_group(i)
        offsets = []
        for j in range(group.num_columns):
            column = group.column(j)
            offset = column.data_page_offset
            if column.has_dictionary_page and column.dictionary_page_offset is not None:
                offset = min(offset, column.dictionary_page_offset)
            offsets.append(offset)
        starts.append(min(offsets) if offsets else 4)
    return starts


def read_layout(uri: str, size: int, *, whole: bytes | memoryview | None = None) -> ShardLayout:
    """Read and bound the footer of the ``size``-byte file at ``uri`` (one request, most of the time; none when ``whole``
    holds the file's bytes); RegistrationError names what is wrong. The magic at the start is checked when the first
    segment is read (:func:`scan_segments`)."""
    footer_start, footer = _footer_bounds(uri, size, whole)
    metadata = parse_footer(uri, footer)
    problem = footer_problem(metadata, body_end=footer_start)
    if problem is not None:
        raise RegistrationError(f"{uri}: {problem}")
    starts = _row_group_starts(metadata)
    boundaries = [0] + starts[1:] + [footer_start]
    if any(later <= earlier for earlier, later in zip(boundaries, boundaries[1:])):
        # Legal but rare layouts (row groups out of file order, no row groups): check the whole body as one segment.
        boundaries = [0, footer_start]
    rows = tuple(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups))
    return ShardLayout(uri, size, footer, tuple(boundaries), len(boundaries) - 1 == metadata.num_row_groups, rows)


def layout_ranges(*, segment_sizes: list[int], target: int) -> list[tuple[int, int]]:
    """Cut segments into consecutive ranges of about ``target`` bytes each (at least one segment per range)."""
    ranges: list[tuple[int, int]] = []
    first, held = 0, 0
    for index, size in enumerate(segment_sizes):
        held += size
        if held >= target:
            ranges.append((first, index + 1))
            first, held = index + 1, 0
    if first < len(segment_sizes) or not ranges:
        ranges.append((first, len(segment_sizes)))
    return ranges


def _groups_of(layout: ShardLayout, segment: int) -> list[int]:
    return [segment] if layout.per_group else list(range(len(layout.row_groups)))


def _key_column(metadata: pq.FileMetaData, key: str) -> int:
    for j in range(metadata.num_columns):
        if metadata.schema.column(j).path == key:
            return j
    raise RegistrationError(f"key column {key!r} is not a column of {metadata.schema.to_arrow_schema().names}")


def _as_text(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A key column as the text keys registration checks and indexes (null becomes ``"None"``, as ``str(None)``)."""
    text = pc.cast(column, pa.string()).fill_null("None")
    return text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text


def _read_into(layout: ShardLayout, view: memoryview, start: int, end: int, whole: bytes | memoryview | None = None) -> None:
    if whole is not None:
        if not (isinstance(whole, memoryview) and whole.obj is view.obj):  # (already in this thread's buffer)
            view[start:end] = memoryview(whole)[start:end]
        return
    got = storage.read_range_into(layout.uri, start, view[start:end], cache=False)
    if got != end - start:
        raise RegistrationError(f"{layout.uri}: file ended at byte {start + got}, expected {end}")


def _check_magic(layout: ShardLayout, head: bytes | memoryview) -> None:
    if bytes(head[:4]) != _MAGIC:
        raise RegistrationError(f"{layout.uri}: not a Parquet file (no PAR1 magic at the start)")


def scan_segments(
    layout: ShardLayout, first: int, last: int, *, key: str | None = None, whole: bytes | memoryview | None = None
) -> SegmentScan:
    """Read segments ``[first, last)`` of a file once (in one request when they fit in memory; from ``whole``, the
    file's bytes, when given): check the page headers, hash, and decode ``key`` (as text) from the bytes hashed."""
    metadata = layout.metadata()
    check = PageCheck(metadata)
    sparse, view = file_buffer(layout.size)
    view[layout.footer_start : layout.size] = layout.footer
    span_start, span_end = layout.boundaries[first], layout.boundaries[last]
    held = span_end - span_start <= _HELD_SEGMENT or whole is not None
    if held:
        _read_into(layout, view, span_start, span_end, whole)
    digests: list[str] = []
    keys: list[pa.Array] = []
    checked = True
    for segment in range(first, last):
        start, end = layout.boundaries[segment], layout.boundaries[segment + 1]
        groups = _groups_of(layout, segment)
        if end - start > _HELD_SEGMENT and whole is None:
            if segment == 0:
                _check_magic(layout, storage.read_range(layout.uri, 0, 4, cache=False))
            digests.append(_hash_range(layout.uri, start, end))
            checked = False
            if key is not None:
                keys += [_streamed_keys(layout, metadata, group, key, sparse, view) for group in groups]
            continue
        if not held:
            _read_into(layout, view, start, end)
        segment_view = view[start:end]
        if segment == 0:
            _check_magic(layout, segment_view)
        if end - start <= CHECKED_SEGMENT:
            for group in groups:
                problem = check.problem(group, segment_view, start)
                if problem is not None:
                    raise RegistrationError(f"{layout.uri}: {problem}")
        else:
            checked = False  # its pages are checked on every read instead
        digests.append(digest(segment_view))
        if key is not None:
            keys += [_decoded_keys(layout, sparse, metadata, group, key) for group in groups]
    found = None if key is None else (pa.concat_arrays(keys) if keys else pa.array([], pa.string()))
    return SegmentScan(first, last, tuple(digests), checked, found)


def _decoded_keys(layout: ShardLayout, sparse: pa.Buffer, metadata: pq.FileMetaData, group: int, key: str) -> pa.Array:
    try:
        table = decode_row_group(sparse, metadata, group, [key])
    except Exception as exc:
        raise RegistrationError(f"{layout.uri}: row group {group} cannot be decoded: {exc}") from exc
    if table.num_rows != layout.row_groups[group]:
        raise RegistrationError(
            f"{layout.uri}: row group {group} holds {table.num_rows} rows but its footer says {layout.row_groups[group]}"
        )
    return _as_text(table.column(key))


def _streamed_keys(layout: ShardLayout, metadata: pq.FileMetaData, group: int, key: str, sparse: pa.Buffer, view: memoryview) -> pa.Array:
    """The key column of a row group too large to hold: only its key column chunk is read."""
    column = metadata.row_group(group).column(_key_column(metadata, key))
    start = column.data_page_offset
    if column.has_dictionary_page and column.dictionary_page_offset is not None:
        start = min(start, column.dictionary_page_offset)
    end = start + column.total_compressed_size
    if storage.read_range_into(layout.uri, start, view[start:end], cache=False) != end - start:
        raise RegistrationError(f"{layout.uri}: file ended before byte {end}")
    return _decoded_keys(layout, sparse, metadata, group, key)


def _hash_range(uri: str, start: int, end: int) -> str:
    h = hashlib.sha256()
    pos = start
    while pos < end:
        chunk = storage.read_range(uri, pos, min(_HASH_CHUNK, end - pos), cache=False)
        if not chunk:
            raise RegistrationError(f"{uri}: file ended at byte {pos}, expected {end}")
        h.update(chunk)
        pos += len(chunk)
    return h.hexdigest()[:32]


def shard_info(layout: ShardLayout, scans: list[SegmentScan]) -> ShardInfo:
    """The manifest's description of a file from its layout and the scans of all its segments (in order)."""
    digests = tuple(d for scan in sorted(scans, key=lambda s: s.first) for d in scan.digests)
    if len(digests) != layout.segments:
        raise ValueError(f"{layout.uri}: {len(digests)} segment digests for {layout.segments} segments")
    return ShardInfo(
        uri=layout.uri,
        size=layout.size,
        rows=sum(layout.row_groups),
        row_groups=layout.row_groups,
        boundaries=layout.boundaries,
        segment_digests=digests,
        footer_digest=digest(layout.footer),
        pages_checked=all(scan.pages_checked for scan in scans),
    )


def scan_shard(uri: str) -> tuple[ShardInfo, pa.Schema]:
    """Describe one Parquet file for a manifest: schema and row groups from the footer, digests by reading it once."""
    uri = storage.normalize(uri)
    info = storage.stat(uri)
    if not info.exists:
        raise RegistrationError(f"{uri}: no such file")
    whole = storage.read_range(uri, 0, info.size, cache=False) if info.size <= WHOLE_FILE else None
    layout = read_layout(uri, info.size, whole=whole)
    shard = shard_info(layout, [scan_segments(layout, 0, layout.segments, whole=whole)])
    return shard, layout.schema()


class _Parquet:
    """The Parquet shard format (see :mod:`loaders.storage.formats`): segments are row groups, checked on every fetch."""

    name = "parquet"
    extensions = (".parquet",)

    def scan(self, uri: str) -> tuple[ShardInfo, pa.Schema]:
        return scan_shard(uri)

    def open(self, shard: ShardInfo, *, where: str, cache: bool = True) -> OpenShard:
        return OpenShard(shard, where=where, cache=cache)

    def decoded_bytes(self, shard: ShardInfo, row_group: int) -> int:
        """A lower bound of what decoding one row group holds: its compressed bytes (the footer knows more)."""
        return shard.boundaries[min(row_group + 1, len(shard.boundaries) - 1)] - shard.boundaries[min(row_group, len(shard.boundaries) - 2)]


PARQUET = _Parquet()
