"""Byte-level Parquet damage for the bad-input corpus: truncation, wrong magic, and footers that lie about row counts.

The footer is Thrift compact protocol; :func:`footer_fields` walks it just far
enough to find the row-count fields, so a test can rewrite them and keep the
rest of the file intact.

>>> zigzag_varint(3)
b'\\x06'
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"PAR1"

# Thrift compact type ids.
_BOOL_TRUE, _BOOL_FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(1, 13)


def zigzag_varint(value: int) -> bytes:
    """The Thrift compact encoding of a signed 64-bit integer."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


@dataclass(frozen=True)
class Field:
    """Where one integer field of the footer sits: its path of field ids and its byte span."""

    path: tuple[int, ...]
    start: int
    end: int


class _Walker:
    """Walks a Thrift compact struct, recording the byte spans of integer fields."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.fields: list[Field] = []

    def byte(self) -> int:
        value = self.data[self.pos]
        self.pos += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result

    def value(self, kind: int, path: tuple[int, ...]) -> None:
        if kind in (_BOOL_TRUE, _BOOL_FALSE):
            return
        if kind == _BYTE:
            self.pos += 1
        elif kind in (_I16, _I32, _I64):
            start = self.pos
            self.varint()
            self.fields.append(Field(path, start, self.pos))
        elif kind == _DOUBLE:
            self.pos += 8
        elif kind == _BINARY:
            length = self.varint()  # read first: ``self.pos += self.varint()`` would add to the old position
            self.pos += length
        elif kind in (_LIST, _SET):
            header = self.byte()
            size, element = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            for i in range(size):
                if element in (_BOOL_TRUE, _BOOL_FALSE):
                    self.pos += 1
                else:
                    self.value(element, path + (i,))
        elif kind == _MAP:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.value(types >> 4, path)
                    self.value(types & 0x0F, path)
        elif kind == _STRUCT:
            self.struct(path)
        else:
            raise ValueError(f"unknown thrift compact type {kind} at byte {self.pos}")

    def struct(self, path: tuple[int, ...]) -> None:
        last = 0
        while True:
            header = self.byte()
            if header == 0:
                return
            delta, kind = header >> 4, header & 0x0F
            if delta:
                field_id = last + delta
            else:
                raw = self.varint()
                field_id = (raw >> 1) ^ -(raw & 1)
            last = field_id
            self.value(kind, path + (field_id,))


def footer_fields(footer: bytes) -> list[Field]:
    """Every integer field of a Parquet ``FileMetaData`` footer, with its path of field ids and list positions."""
    walker = _Walker(footer)
    walker.struct(())
    return walker.fields


def split(data: bytes) -> tuple[bytes, bytes]:
    """``(body, footer)`` of a Parquet file's bytes (body includes the leading magic)."""
    length = struct.unpack("<I", data[-8:-4])[0]
    return data[: len(data) - 8 - length], data[len(data) - 8 - length : -8]


def join(body: bytes, footer: bytes) -> bytes:
    """A Parquet file from a body and a (possibly rewritten) footer."""
    return body + footer + struct.pack("<I", len(footer)) + MAGIC


def rewrite_row_counts(path: Path, *, file_rows: int | None, group_rows: dict[int, int]) -> None:
    """Make ``path``'s footer claim ``file_rows`` rows in all and ``group_rows[g]`` rows in row group ``g``.

    FileMetaData field 3 is ``num_rows``; field 4 lists the row groups, whose
    field 3 is their ``num_rows``. Column chunks are left as they are, so the
    footer lies about the data it describes.
    """
    body, footer = split(path.read_bytes())
    edits: list[tuple[Field, int]] = []
    for field in footer_fields(footer):
        if field.path == (3,) and file_rows is not None:
            edits.append((field, file_rows))
        elif len(field.path) == 3 and field.path[0] == 4 and field.path[2] == 3 and field.path[1] in group_rows:
            edits.append((field, group_rows[field.path[1]]))
    if len(edits) != len(group_rows) + (file_rows is not None):
        raise ValueError(f"{path}: found {len(edits)} row-count fields, expected {len(group_rows) + (file_rows is not None)}")
    out = bytearray(footer)
    for field, value in sorted(edits, key=lambda e: -e[0].start):  # back to front keeps earlier offsets valid
        out[field.start : field.end] = zigzag_varint(value)
    path.write_bytes(join(body, bytes(out)))


def truncate(path: Path, *, keep: float) -> None:
    """Keep the first ``keep`` fraction of the file (its footer, and so its tail magic, is lost)."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def wrong_magic(path: Path, *, magic: bytes = b"PAR0") -> None:
    """Replace the leading magic: the tail still looks like Parquet, the head does not."""
    data = path.read_bytes()
    path.write_bytes(magic + data[4:])


def flip_byte(path: Path, *, at: float) -> None:
    """Invert one byte at the fraction ``at`` of the file's body (data pages, not the footer)."""
    data = bytearray(path.read_bytes())
    body, _ = split(bytes(data))
    index = max(4, min(len(body) - 1, int(len(body) * at)))
    data[index] ^= 0xFF
    path.write_bytes(bytes(data))
