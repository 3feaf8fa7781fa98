"""Shards: Parquet files described by their footer and checked segment by segment on every read.

A shard's bytes are cut into segments, one per row group (segment ``i`` runs
from the start of row group ``i`` to the start of row group ``i + 1``; the
first starts at byte 0, the last ends where the footer starts) plus the
footer. Registration hashes each segment once; a read fetches one segment,
checks its hash and decodes the row group from exactly the bytes it checked,
so a shard changed after registration is never silently read.
"""

from __future__ import annotations

import functools
import hashlib
import io
import threading
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import ChecksumMismatch, CorruptData, RegistrationError
from . import files as storage
from .parquet_check import PageCheck, footer_problem

_MAGIC = b"PAR1"


def digest(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


@dataclass(frozen=True)
class ShardInfo:
    """What the manifest records about one Parquet file."""

    uri: str
    size: int
    rows: int
    row_groups: tuple[int, ...]
    boundaries: tuple[int, ...]
    segment_digests: tuple[str, ...]
    footer_digest: str
    #: Registration walked every row group's page headers (so reads, which check the same bytes by digest, need not).
    pages_checked: bool = False

    @functools.cached_property
    def checksum(self) -> str:
        """One content checksum for the whole shard, derived from its segment digests."""
        h = hashlib.sha256(self.footer_digest.encode())
        for digest in self.segment_digests:
            h.update(digest.encode())
        return "sha256:" + h.hexdigest()

    def to_json(self) -> dict[str, object]:
        return {
            "uri": self.uri,
            "size": self.size,
            "rows": self.rows,
            "checksum": self.checksum,
            "row_groups": list(self.row_groups),
            "boundaries": list(self.boundaries),
            "segment_digests": list(self.segment_digests),
            "footer_digest": self.footer_digest,
            **({"pages_checked": True} if self.pages_checked else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> "ShardInfo":
        return cls(
            uri=str(data["uri"]),
            size=int(data["size"]),  # type: ignore[arg-type]
            rows=int(data["rows"]),  # type: ignore[arg-type]
            row_groups=tuple(int(x) for x in data["row_groups"]),  # type: ignore[union-attr]
            boundaries=tuple(int(x) for x in data["boundaries"]),  # type: ignore[union-attr]
            segment_digests=tuple(str(x) for x in data["segment_digests"]),  # type: ignore[union-attr]
            footer_digest=str(data["footer_digest"]),
            pages_checked=bool(data.get("pages_checked", False)),
        )


def parse_footer(uri: str, footer: bytes) -> pq.FileMetaData:
    try:
        return pq.ParquetFile(io.BytesIO(_MAGIC + footer)).metadata
    except Exception as exc:
        raise RegistrationError(f"{uri}: unreadable Parquet footer ({exc})") from exc


def _owned(table: pa.Table, source: pa.Buffer) -> pa.Table:
    """``table``, copied if any of its buffers points into ``source`` (which must not stay pinned by a cached table)."""
    low, high = source.address, source.address + source.size
    for column in table.columns:
        for chunk in column.chunks:
            if any(b is not None and low <= b.address < high for b in chunk.buffers()):
                return pa.Table.from_arrays([pa.concat_arrays(c.chunks) for c in table.columns], schema=table.schema)
    if any(column.num_chunks != 1 for column in table.columns):
        return table.combine_chunks()
    return table


def decode_row_group(sparse: pa.Buffer, metadata: pq.FileMetaData, row_group: int, columns: list[str] | None) -> pa.Table:
    """Decode one row group from a buffer standing for the whole file (its segment and footer filled in); the table
    owns its memory, so the buffer can be reused."""
    parquet = pq.ParquetFile(pa.BufferReader(sparse), metadata=metadata, pre_buffer=False)
    return _owned(parquet.read_row_group(row_group, columns=columns, use_threads=False), sparse)


#: Shards up to this size are decoded in a buffer each thread keeps and reuses (fresh memory costs a page fault
#: per 4 KiB touched; a reused buffer's pages are already there). Larger shards get a fresh, sparse buffer.
REUSED_BUFFER_LIMIT = 256 << 20


class _ThreadBuffer(threading.local):
    buffer: pa.Buffer | None = None
    view: memoryview | None = None


_THREAD_BUFFER = _ThreadBuffer()


def file_buffer(size: int) -> tuple[pa.Buffer, memoryview]:
    """``(buffer of exactly size bytes, writable byte view of it)`` standing for a whole shard file.

    The allocation is virtual: only the pages written become resident. Tables
    decoded from it are copied out when they point into it (``_owned``), so a
    thread can reuse its buffer for the next row group.
    """
    if size > REUSED_BUFFER_LIMIT:
        buffer = pa.allocate_buffer(size)
        return buffer, memoryview(buffer).cast("B")
    local = _THREAD_BUFFER
    if local.buffer is None or local.buffer.size < size:
        local.buffer = pa.allocate_buffer(size)
        local.view = memoryview(local.buffer).cast("B")
    assert local.view is not None
    return local.buffer.slice(0, size), local.view


def check_present(shard: ShardInfo, *, where: str) -> None:
    """Refuse a shard file that is missing or not the size it was registered at (``ChecksumMismatch`` naming it)."""
    stat = storage.stat(shard.uri)
    if not stat.exists:
        raise ChecksumMismatch(f"{where}: shard file {shard.uri} is missing")
    if stat.size != shard.size:
        raise ChecksumMismatch(
            f"{where}: shard {shard.uri} is {stat.size} bytes, registered as {shard.size} bytes (changed after registration)"
        )


class OpenShard:
    """A registered shard opened for reading: footer checked once, row groups checked on every fetch."""

    def __init__(self, shard: ShardInfo, *, where: str, cache: bool = True) -> None:
        """Open ``shard`` (``cache``: whether remote byte ranges go through the disk cache; one-pass scans skip it)."""
        self.shard = shard
        self.where = where
        self.cache = cache
        check_present(shard, where=where)
        self._footer_start = shard.boundaries[-1]
        footer = storage.read_range(shard.uri, self._footer_start, shard.size - self._footer_start, cache=cache)
        if digest(footer) != shard.footer_digest:
            storage.evict(shard.uri, self._footer_start, shard.size - self._footer_start)
            raise ChecksumMismatch(f"{where}: footer of shard {shard.uri} changed after registration")
        self._footer = footer
        self.metadata = parse_footer(shard.uri, footer)
        problem = footer_problem(self.metadata, body_end=self._footer_start)
        if problem is not None:  # registered before footers were bounded: refuse before allocating anything
            raise CorruptData(f"{where}: shard {shard.uri}: {problem}")
        self._pages = PageCheck(self.metadata)
        # Pages registration checked (the manifest says so, under its id) or this shard checked already: the same
        # verified bytes give the same answer, so each row group's page headers are walked at most once.
        self._pages_checked: set[int] = set(range(len(shard.row_groups))) if shard.pages_checked else set()

    def _segment_of(self, row_group: int) -> int:
        return row_group if len(self.shard.segment_digests) == len(self.shard.row_groups) else 0

    def read_row_group(self, row_group: int, columns: list[str] | None = None) -> pa.Table:
        """Fetch, verify and decode one row group."""
        segment = self._segment_of(row_group)
        start, end = self.shard.boundaries[segment], self.shard.boundaries[segment + 1]
        # Arrow decodes natively from one buffer standing for the whole file in which only the verified segment
        # and footer are filled in. The allocation is virtual (only the pages written become resident), and the
        # verified footer names exactly which bytes each column chunk occupies, so nothing else is ever read.
        # The bytes land in Arrow-owned memory: tables pointing into Python memory can abort the interpreter.
        sparse, view = file_buffer(self.shard.size)
        segment_view = view[start:end]
        got = storage.read_range_into(self.shard.uri, start, segment_view, cache=self.cache)
        if got != end - start or digest(segment_view) != self.shard.segment_digests[segment]:
            storage.evict(self.shard.uri, start, end - start)  # a bad cached copy must not stick
            raise ChecksumMismatch(
                f"{self.where}: row group {row_group} of shard {self.shard.uri} (bytes {start}-{end}) "
                "does not match its registered checksum"
            )
        if row_group not in self._pages_checked:
            problem = self._pages.problem(row_group, segment_view, start)
            if problem is not None:
                raise CorruptData(f"{self.where}: shard {self.shard.uri}: {problem}")
            self._pages_checked.add(row_group)
        view[self._footer_start : self.shard.size] = self._footer
        try:
            table = decode_row_group(sparse, self.metadata, row_group, columns)
        except Exception as exc:
            raise CorruptData(f"{self.where}: row group {row_group} of shard {self.shard.uri} cannot be decoded: {exc}") from exc
        expected = self.shard.row_groups[row_group]
        if table.num_rows != expected:  # a footer that lies about row counts would shift every row after it
            raise CorruptData(
                f"{self.where}: row group {row_group} of shard {self.shard.uri} holds {table.num_rows} rows but its footer says {expected}"
            )
        return table
