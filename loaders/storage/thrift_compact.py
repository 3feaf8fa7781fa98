"""Just enough of the Thrift compact protocol to read Parquet metadata structures (page headers, footers).

:class:`CompactReader` decodes a struct into ``{field id: value}`` (nested
structs as dicts, lists as lists, binaries as their byte span) and records
where each integer field sits (when asked to), so a caller can check claims or rewrite them.

>>> CompactReader(memoryview(b"\\x15\\x06\\x00"), 0, 3).struct()
{1: 3}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(1, 13)
_MAX_DEPTH = 64


@dataclass(frozen=True)
class IntField:
    """Where one integer field sits: its path of field ids (and list positions) and its byte span."""

    path: tuple[int, ...]
    start: int
    end: int


class CompactReader:
    """Reads Thrift compact values from ``data[pos:end]``; raises ValueError on anything malformed or past ``end``."""

    def __init__(self, data: memoryview | bytes, pos: int, end: int, *, record: bool = False) -> None:
        """Read from ``data[pos:end]``; with ``record``, note every integer field's span in ``fields``."""
        self.data, self.pos, self.end = data, pos, end
        self.record = record
        self.fields: list[IntField] = []

    def byte(self) -> int:
        if self.pos >= self.end:
            raise ValueError(f"structure runs past its end (byte {self.end})")
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
            if shift > 70:
                raise ValueError(f"varint too long at byte {self.pos}")

    def _skip(self, length: int) -> None:
        if length < 0 or self.pos + length > self.end:
            raise ValueError(f"structure runs past its end (byte {self.end})")
        self.pos += length

    def value(self, kind: int, path: tuple[int, ...]) -> Any:
        if len(path) > _MAX_DEPTH:
            raise ValueError("structure nested too deeply")
        if kind in (_TRUE, _FALSE):  # a struct field's boolean is carried in its type
            return kind == _TRUE
        if kind == _BYTE:
            return self.byte()
        if kind in (_I16, _I32, _I64):
            start = self.pos
            raw = self.varint()
            if self.record:
                self.fields.append(IntField(path, start, self.pos))
            return (raw >> 1) ^ -(raw & 1)
        if kind == _DOUBLE:
            self._skip(8)
            return None
        if kind == _BINARY:
            length = self.varint()
            start = self.pos
            self._skip(length)
            return (start, self.pos)
        if kind in (_LIST, _SET):
            header = self.byte()
            size, element = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            items = []
            for i in range(size):
                if element in (_TRUE, _FALSE):
                    items.append(self.byte() == _TRUE)
                else:
                    items.append(self.value(element, path + (i,)))
            return items
        if kind == _MAP:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.value(types >> 4, path)
                    self.value(types & 0x0F, path)
            return None
        if kind == _STRUCT:
            return self.struct(path)
        raise ValueError(f"unknown Thrift compact type {kind} at byte {self.pos}")

    def struct(self, path: tuple[int, ...] = ()) -> dict[int, Any]:
        """One struct, from its first field header to its stop byte."""
        fields: dict[int, Any] = {}
        last = 0
        while True:
            header = self.byte()
            if header == 0:
                return fields
            delta, kind = header >> 4, header & 0x0F
            if delta:
                field_id = last + delta
            else:
                raw = self.varint()
                field_id = (raw >> 1) ^ -(raw & 1)
            last = field_id
            fields[field_id] = self.value(kind, path + (field_id,))
