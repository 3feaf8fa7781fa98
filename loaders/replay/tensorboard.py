"""TensorBoard event files read without TensorBoard: the scalars of every ``tfevents`` file, records checked by CRC.

An event file is a sequence of TFRecords (``uint64 length``, masked CRC-32C of the length, ``length`` bytes of a
serialized ``Event`` protocol buffer, masked CRC-32C of those bytes). An ``Event`` carries a ``step`` (field 2) and a
``Summary`` (field 5) of ``Value`` entries (field 1), each with a ``tag`` (1) and either a ``simple_value`` float (2),
as ``torch.utils.tensorboard`` and TF1 write scalars, or a scalar ``TensorProto`` (8), as TF2 and ``tensorboardX``'s
new style do. Everything else (images, histograms, graphs) is skipped. A record whose checksum fails is refused,
naming the file and its byte offset.

>>> masked_crc(b"")
2726488792
>>> list(_fields(bytes([0x10, 0x07])))
[(2, 0, 7)]
"""

from __future__ import annotations

import struct
from typing import Iterator

from ..errors import ReplayError


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """The masked CRC-32C TFRecords store."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data):
            raise ValueError("truncated varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` of a serialized protocol buffer (varints as ints, the rest as bytes)."""
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, position = _varint(data, position)
            yield number, wire, value
        elif wire == 1:
            yield number, wire, data[position : position + 8]
            position += 8
        elif wire == 2:
            length, position = _varint(data, position)
            yield number, wire, data[position : position + length]
            position += length
        elif wire == 5:
            yield number, wire, data[position : position + 4]
            position += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    if position != len(data):
        raise ValueError("truncated field")


#: TensorFlow DataType → struct format of one element.
_DTYPES = {1: "<f", 2: "<d", 3: "<i", 9: "<q", 19: "<e"}


def _tensor_scalar(data: bytes) -> float | None:
    """The value of a ``TensorProto`` holding one number (None for anything else)."""
    dtype, content, shape_dims, values = 0, b"", 0, []
    for number, wire, value in _fields(data):
        if number == 1 and wire == 0:
            dtype = int(value)  # type: ignore[arg-type]
        elif number == 2 and wire == 2:
            shape_dims = sum(1 for n, _, _ in _fields(value) if n == 2)  # type: ignore[arg-type]
        elif number == 4 and wire == 2:
            content = value  # type: ignore[assignment]
        elif number in (5, 6) and wire == 2:  # packed float_val / double_val
            fmt = "<f" if number == 5 else "<d"
            values += [v for (v,) in struct.iter_unpack(fmt, value)]  # type: ignore[arg-type]
        elif number == 5 and wire == 5:
            values.append(struct.unpack("<f", value)[0])  # type: ignore[arg-type]
        elif number == 6 and wire == 1:
            values.append(struct.unpack("<d", value)[0])  # type: ignore[arg-type]
        elif number in (7, 10) and wire == 0:
            values.append(float(value))  # type: ignore[arg-type]
    if shape_dims:
        return None
    if content and dtype in _DTYPES and len(content) == struct.calcsize(_DTYPES[dtype]):
        return float(struct.unpack(_DTYPES[dtype], content)[0])
    return float(values[0]) if len(values) == 1 else None


def _scalars(summary: bytes) -> Iterator[tuple[str, float]]:
    for number, wire, value in _fields(summary):
        if number != 1 or wire != 2:
            continue
        tag, found = "", None
        for n, w, v in _fields(value):  # type: ignore[arg-type]
            if n == 1 and w == 2:
                tag = v.decode("utf-8", "replace")  # type: ignore[union-attr]
            elif n == 2 and w == 5:
                found = struct.unpack("<f", v)[0]  # type: ignore[arg-type]
            elif n == 8 and w == 2:
                found = _tensor_scalar(v)  # type: ignore[arg-type]
        if tag and found is not None:
            yield tag, float(found)


def records(data: bytes, *, where: str) -> Iterator[bytes]:
    """The payloads of a TFRecord file's records, each checked against its CRCs."""
    position = 0
    while position < len(data):
        header = data[position : position + 12]
        if len(header) < 12:
            raise ReplayError(f"{where}: truncated record header at byte {position}")
        (length,) = struct.unpack("<Q", header[:8])
        (length_crc,) = struct.unpack("<I", header[8:])
        if masked_crc(header[:8]) != length_crc:
            raise ReplayError(f"{where}: record at byte {position} fails its length checksum (not an event file, or corrupt)")
        payload = data[position + 12 : position + 12 + length]
        footer = data[position + 12 + length : position + 16 + length]
        if len(payload) != length or len(footer) != 4:
            raise ReplayError(f"{where}: truncated record at byte {position}")
        if masked_crc(payload) != struct.unpack("<I", footer)[0]:
            raise ReplayError(f"{where}: record at byte {position} fails its data checksum (corrupt)")
        yield payload
        position += 16 + length


def scalar_events(data: bytes, *, where: str) -> Iterator[tuple[int, str, float]]:
    """``(step, tag, value)`` of every scalar in an event file's bytes, in file order.

    >>> list(scalar_events(b"", where="empty"))
    []
    """
    for payload in records(data, where=where):
        step, summary = 0, None
        try:
            for number, wire, value in _fields(payload):
                if number == 2 and wire == 0:
                    step = int(value)  # type: ignore[arg-type]
                elif number == 5 and wire == 2:
                    summary = value
            if summary is not None:
                for tag, value in _scalars(summary):  # type: ignore[arg-type]
                    yield step, tag, value
        except ValueError as exc:
            raise ReplayError(f"{where}: an event record cannot be decoded ({exc})") from exc
