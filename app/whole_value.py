"""The whole value of one field, served in pieces with ``Range``: what a page links to where it cut a huge value.

A text is its UTF-8 bytes and binary its stored bytes, both sliced straight out
of the verified Arrow row group (nothing is copied into a Python string). Any
other value is JSON, written piece by piece from the Arrow data (a list a few
thousand items at a time), so its size is known before the answer starts
without ever holding it whole: a request for a range produces the pieces up to
it and no further.

>>> import pyarrow as pa
>>> "".join(json_pieces(pa.array([{"t": "a\\"b", "ids": [1, 2, 3]}])))
'{"t":"a\\\\"b","ids":[1,2,3]}'
"""

from __future__ import annotations

import json
import threading
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from fastapi import Request
from fastapi.responses import Response

from loaders.catalog.version import DatasetVersion
from loaders.errors import SampleNotFound

from .decode_budget import DecodeBudget
from .http_semantics import content_tag, etag, ranged
from .jsonable import jsonable
from .pages.row_sizes import reading_row_groups

#: List items and text characters written per JSON piece.
_ITEMS = 4096
_CHARS = 1 << 20


def _text_type(type_: pa.DataType) -> bool:
    return pa.types.is_string(type_) or pa.types.is_large_string(type_)


def _bytes_type(type_: pa.DataType) -> bool:
    return pa.types.is_binary(type_) or pa.types.is_large_binary(type_)


def stored_slice(array: pa.Array) -> tuple[pa.Buffer, int, int]:
    """``(data buffer, start, end)`` of the one text or binary value of ``array`` (zero copy)."""
    offsets = array.buffers()[1]
    width = 8 if pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type) else 4
    at = array.offset * width
    start = int.from_bytes(offsets[at : at + width].to_pybytes(), "little", signed=True)
    end = int.from_bytes(offsets[at + width : at + 2 * width].to_pybytes(), "little", signed=True)
    data = array.buffers()[2]
    return (data if data is not None else pa.py_buffer(b"")), start, end


def json_pieces(array: pa.Array) -> Iterator[str]:
    """The JSON text of the one value of ``array``, in pieces (joined, it is ``json.dumps(jsonable(value))`` without
    spaces)."""
    type_ = array.type
    if array.null_count:
        yield "null"
    elif _text_type(type_):
        length = pc.utf8_length(array)[0].as_py()
        yield '"'
        for start in range(0, length, _CHARS):
            piece = pc.utf8_slice_codeunits(array, start, start + _CHARS)[0].as_py()
            yield json.dumps(piece, ensure_ascii=False)[1:-1]
        yield '"'
    elif pa.types.is_list(type_) or pa.types.is_large_list(type_) or pa.types.is_fixed_size_list(type_):
        items = pc.list_flatten(array)
        yield "["
        for start in range(0, len(items), _ITEMS):
            chunk = items.slice(start, _ITEMS)
            if pa.types.is_nested(chunk.type) or _text_type(chunk.type):
                for i in range(len(chunk)):
                    if start + i:
                        yield ","
                    yield from json_pieces(chunk.slice(i, 1))
            else:  # flat values: one JSON text per chunk
                yield ("," if start else "") + _leaf(chunk.to_pylist())[1:-1]
        yield "]"
    elif pa.types.is_struct(type_):
        yield "{"
        for number, (field, child) in enumerate(zip(type_, array.flatten())):
            yield ("," if number else "") + json.dumps(field.name, ensure_ascii=False) + ":"
            yield from json_pieces(child)
        yield "}"
    else:
        yield _leaf(array[0].as_py())


def _leaf(value: object) -> str:
    return json.dumps(jsonable(value), ensure_ascii=False, separators=(",", ":"))


class PieceReader:
    """``read(offset, length)`` over the bytes of pieces made by ``make()``: forward reads continue where the last one
    stopped; a read before it starts the pieces again."""

    def __init__(self, make: Callable[[], Iterator[str]]) -> None:
        self._make = make
        self._restart()
        self._lock = threading.Lock()

    def _restart(self) -> None:
        self._pieces = self._make()
        self._position = 0
        self._pending = b""

    def _next(self) -> bool:
        piece = next(self._pieces, None)
        self._pending = piece.encode() if piece is not None else b""
        return piece is not None

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (fewer at the end)."""
        with self._lock:
            if offset < self._position:
                self._restart()
            while self._position + len(self._pending) <= offset:
                self._position += len(self._pending)
                if not self._next():
                    return b""
            self._pending = self._pending[offset - self._position :]
            self._position = offset
            out = bytearray()
            while len(out) < length:
                if not self._pending and not self._next():
                    break
                take = self._pending[: length - len(out)]
                out += take
                self._pending = self._pending[len(take) :]
                self._position += len(take)
            return bytes(out)


def json_size(array: pa.Array) -> int:
    """The byte length of the JSON of the one value of ``array`` (its pieces made once, none kept)."""
    return sum(len(piece.encode()) for piece in json_pieces(array))


_SIZES: dict[tuple[str, str, str], int] = {}
_SIZES_LOCK = threading.Lock()


def whole_value(request: Request, version: DatasetVersion, key: str, field: str, budget: DecodeBudget | None, *, filename: str) -> Response:
    """The whole value of ``field`` of the row ``key``: a text's UTF-8, binary's bytes, anything else as JSON; with
    ``Range`` (206), ``ETag`` and ``304``, read from the verified row group (413 first when it needs more than
    ``budget``)."""
    if field not in version.schema.names:
        raise SampleNotFound(f"{version.ref} has no column {field!r} (columns: {', '.join(version.schema.names)})")
    shard, row = version.find(key)
    group, offset = version.row_group_of(shard, row)
    with reading_row_groups(version, [(shard, group)], budget, f"field {field!r} of sample {key!r}"):
        array = version.row_group(shard, group).column(field).slice(offset, 1).combine_chunks()
    tag = etag("value", version.id, key, field)
    stem = filename.rsplit(".", 1)[0]
    if array.null_count:
        return ranged(request, size=4, read=lambda o, n: b"null"[o : o + n], tag=tag, filename=f"{stem}.json", media="application/json")
    if _text_type(array.type) or _bytes_type(array.type):
        data, start, end = stored_slice(array)
        media = "text/plain; charset=utf-8" if _text_type(array.type) else None
        tag = content_tag(memoryview(data)[start:end])  # stored bytes are named by their content, hashed in place
        return ranged(
            request,
            size=end - start,
            read=lambda o, n: data[start + o : start + o + n].to_pybytes(),
            tag=tag,
            filename=filename,
            media=media,
        )
    sized = (version.id, key, field)
    with _SIZES_LOCK:
        size = _SIZES.get(sized)
    if size is None:
        size = json_size(array)
        with _SIZES_LOCK:
            _SIZES[sized] = size
    reader = PieceReader(lambda: json_pieces(array))
    return ranged(request, size=size, read=reader.read, tag=tag, filename=f"{stem}.json", media="application/json")
