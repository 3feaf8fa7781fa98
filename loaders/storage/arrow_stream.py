"""Arrow IPC files as shards: what Hugging Face ``datasets`` writes (``save_to_disk`` folders, its cache), read in place.

An Arrow IPC stream is a schema message followed by record-batch messages (the IPC *file* format is the same stream
between ``ARROW1`` magic and a footer). Each record batch is one segment: registration finds its byte range and
hashes it; a read fetches that range, checks its digest and decodes exactly those bytes, so a file changed after
registration is refused (naming it), never read. The "footer" of an Arrow shard is every byte outside the batches
(the schema message before them, the end-of-stream marker and any file footer after them), hashed as one.

``ShardInfo`` fields mean here: ``row_groups`` the rows of each record batch, ``boundaries`` the offset where each
batch message starts plus where the last one ends (segment ``i`` is ``[boundaries[i], boundaries[i + 1])``).

>>> ARROW_STREAM.extensions
('.arrow',)
"""

from __future__ import annotations

import hashlib

import pyarrow as pa

from ..errors import ChecksumMismatch, CorruptData, RegistrationError
from . import files as storage
from .shards import ShardInfo, check_present

_FILE_MAGIC = b"ARROW1"
_HASH_CHUNK = 8 << 20


def _digest(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _hash_range(uri: str, start: int, end: int) -> str:
    h = hashlib.sha256()
    position = start
    while position < end:
        chunk = storage.read_range(uri, position, min(_HASH_CHUNK, end - position), cache=False)
        if not chunk:
            raise RegistrationError(f"{uri}: file ended at byte {position}, expected {end}")
        h.update(chunk)
        position += len(chunk)
    return h.hexdigest()[:32]


def _outside(uri: str, start: int, end: int, size: int) -> bytes:
    """The bytes of a shard outside its record batches: before ``start`` and from ``end`` to ``size``."""
    return storage.read_range(uri, 0, start, cache=False) + storage.read_range(uri, end, size - end, cache=False)


def _stream_start(head: bytes) -> int:
    """Where the IPC stream begins: after the 8 bytes of ``ARROW1`` padding in the file format, else at 0."""
    return 8 if head[:6] == _FILE_MAGIC else 0


def scan(uri: str) -> tuple[ShardInfo, pa.Schema]:
    """Describe one Arrow IPC file for a manifest: its schema, its record batches' byte ranges, rows and digests."""
    uri = storage.normalize(uri)
    info = storage.stat(uri)
    if not info.exists:
        raise RegistrationError(f"{uri}: no such file")
    filesystem, path = storage.resolve(uri)
    rows: list[int] = []
    with filesystem.open_input_file(path) as handle:
        start = _stream_start(handle.read_at(min(8, info.size), 0))
        handle.seek(start)
        try:
            reader = pa.ipc.MessageReader.open_stream(handle)
            first = reader.read_next_message()
            if first.type != "schema":
                raise RegistrationError(f"{uri}: not an Arrow IPC stream (its first message is a {first.type}, not a schema)")
            schema = pa.ipc.read_schema(first)
            boundaries = [handle.tell()]
            while True:
                try:
                    message = reader.read_next_message()
                except StopIteration:
                    break
                if message.type != "record batch":
                    raise RegistrationError(f"{uri}: holds a {message.type} message at byte {boundaries[-1]}; only record batches are read")
                rows.append(pa.ipc.read_record_batch(message, schema).num_rows)
                boundaries.append(handle.tell())
        except RegistrationError:
            raise
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise RegistrationError(f"{uri}: not a readable Arrow IPC file ({exc})") from exc
    digests = tuple(_hash_range(uri, a, b) for a, b in zip(boundaries, boundaries[1:]))
    shard = ShardInfo(
        uri=uri,
        size=info.size,
        rows=sum(rows),
        row_groups=tuple(rows),
        boundaries=tuple(boundaries),
        segment_digests=digests,
        footer_digest=_digest(_outside(uri, boundaries[0], boundaries[-1], info.size)),
    )
    return shard, schema


class OpenArrowShard:
    """A registered Arrow IPC shard opened for reading: schema and framing checked once, batches on every fetch."""

    def __init__(self, shard: ShardInfo, *, where: str, cache: bool = True) -> None:
        self.shard = shard
        self.where = where
        self.cache = cache
        check_present(shard, where=where)
        start, end = shard.boundaries[0], shard.boundaries[-1]
        outside = _outside(shard.uri, start, end, shard.size)
        if _digest(outside) != shard.footer_digest:
            raise ChecksumMismatch(f"{where}: schema or framing of shard {shard.uri} changed after registration")
        head = outside[:start]
        try:
            self.schema = pa.ipc.read_schema(pa.ipc.read_message(pa.py_buffer(head[_stream_start(head) :])))
        except pa.ArrowException as exc:
            raise CorruptData(f"{where}: schema of shard {shard.uri} cannot be read: {exc}") from exc

    def read_row_group(self, row_group: int, columns: list[str] | None = None) -> pa.Table:
        """Fetch, verify and decode one record batch."""
        start, end = self.shard.boundaries[row_group], self.shard.boundaries[row_group + 1]
        buffer = pa.allocate_buffer(end - start)
        view = memoryview(buffer).cast("B")
        got = storage.read_range_into(self.shard.uri, start, view, cache=self.cache)
        if got != end - start or _digest(view) != self.shard.segment_digests[row_group]:
            storage.evict(self.shard.uri, start, end - start)
            raise ChecksumMismatch(
                f"{self.where}: record batch {row_group} of shard {self.shard.uri} (bytes {start}-{end}) "
                "does not match its registered checksum"
            )
        try:
            batch = pa.ipc.read_record_batch(pa.ipc.read_message(buffer), self.schema)
        except pa.ArrowException as exc:
            raise CorruptData(f"{self.where}: record batch {row_group} of shard {self.shard.uri} cannot be decoded: {exc}") from exc
        if batch.num_rows != self.shard.row_groups[row_group]:
            raise CorruptData(
                f"{self.where}: record batch {row_group} of shard {self.shard.uri} holds {batch.num_rows} rows, registered as "
                f"{self.shard.row_groups[row_group]}"
            )
        table = pa.Table.from_batches([batch])
        return table.select(columns) if columns is not None else table


class _ArrowStream:
    """The Arrow IPC shard format (see :mod:`loaders.storage.formats`)."""

    name = "arrow-stream"
    extensions = (".arrow",)

    def scan(self, uri: str) -> tuple[ShardInfo, pa.Schema]:
        return scan(uri)

    def open(self, shard: ShardInfo, *, where: str, cache: bool = True) -> OpenArrowShard:
        return OpenArrowShard(shard, where=where, cache=cache)

    def decoded_bytes(self, shard: ShardInfo, row_group: int) -> int:
        """What decoding one record batch holds in memory: its message, which Arrow decodes in place."""
        return shard.boundaries[row_group + 1] - shard.boundaries[row_group]


ARROW_STREAM = _ArrowStream()
