"""Byte-level Parquet damage for the bad-input corpus: truncation, wrong magic, and footers that lie about row counts.

The footer is Thrift compact protocol; :func:`footer_fields` walks it just far
enough to find the row-count fields, so a test can rewrite them and keep the
rest of the file intact.

>>> zigzag_varint(3)
b'\\x06'
"""

from __future__ import annotations

import struct
from pathlib import Path

from loaders.storage.thrift_compact import CompactReader, IntField

MAGIC = b"PAR1"


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


def footer_fields(footer: bytes) -> list[IntField]:
    """Every integer field of a Parquet ``FileMetaData`` footer, with its path of field ids and list positions."""
    reader = CompactReader(footer, 0, len(footer), record=True)
    reader.struct()
    return reader.fields


def split(data: bytes) -> tuple[bytes, bytes]:
    """``(body, footer)`` of a Parquet file's bytes (body includes the leading magic)."""
    length = struct.unpack("<I", data[-8:-4])[0]
    return data[: len(data) - 8 - length], data[len(data) - 8 - length : -8]


def join(body: bytes, footer: bytes) -> bytes:
    """A Parquet file from a body and a (possibly rewritten) footer."""
    return body + footer + struct.pack("<I", len(footer)) + MAGIC


def rewrite_row_counts(path: Path, *, file_rows: int | None, group_rows: dict[int, int], columns_too: bool = False) -> None:
    """Make ``path``'s footer claim ``file_rows`` rows in all and ``group_rows[g]`` rows in row group ``g``.

    FileMetaData field 3 is ``num_rows``; field 4 lists the row groups, whose
    field 3 is their ``num_rows``. Column chunks are left as they are, so the
    footer lies about the data it describes; with ``columns_too`` each column
    chunk's ``num_values`` (row group field 1, chunk field 3, its field 5)
    tells the same lie, so only the page headers still hold the truth.
    """
    body, footer = split(path.read_bytes())
    edits: list[tuple[IntField, int]] = []
    for field in footer_fields(footer):
        p = field.path
        if p == (3,) and file_rows is not None:
            edits.append((field, file_rows))
        elif len(p) == 3 and p[0] == 4 and p[2] == 3 and p[1] in group_rows:
            edits.append((field, group_rows[p[1]]))
        elif columns_too and len(p) == 6 and p[0] == 4 and p[1] in group_rows and (p[2], p[4], p[5]) == (1, 3, 5):
            edits.append((field, group_rows[p[1]]))
    if len([e for e in edits if len(e[0].path) < 6]) != len(group_rows) + (file_rows is not None):
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


def inflate_first_page(path: Path, *, claimed: int) -> None:
    """Make the first page of a one-column, one-row-group file claim to inflate to ``claimed`` bytes.

    The page header's ``uncompressed_page_size`` (field 2) is re-encoded in
    place, which may lengthen the header; the column chunk's
    ``total_compressed_size`` (ColumnMetaData field 7) grows to match, so the
    file stays readable up to the moment a reader believes the claim.
    """
    body, footer = split(path.read_bytes())
    start = next(f for f in footer_fields(footer) if f.path == (4, 0, 1, 0, 3, 9))  # data_page_offset
    offset = CompactReader(footer, start.start, start.end).varint() >> 1
    reader = CompactReader(body, offset, len(body), record=True)
    reader.struct()
    size_field = next(f for f in reader.fields if f.path == (2,))
    new_body = body[: size_field.start] + zigzag_varint(claimed) + body[size_field.end :]
    grown = len(new_body) - len(body)
    total = next(f for f in footer_fields(footer) if f.path == (4, 0, 1, 0, 3, 7))
    value = CompactReader(footer, total.start, total.end).varint() >> 1
    new_footer = footer[: total.start] + zigzag_varint(value + grown) + footer[total.end :]
    path.write_bytes(join(new_body, new_footer))
