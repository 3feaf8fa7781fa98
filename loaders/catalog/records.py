"""Records: turning Arrow rows into Python values, and content keys for rows without a key column."""

from __future__ import annotations

import hashlib
import json
import math
import struct
from typing import Any

import numpy as np
import pyarrow as pa

Record = dict[str, Any]


def table_records(table: pa.Table) -> list[Record]:
    """Decode every row of ``table`` into a dict of Python values."""
    return table.to_pylist()


def _encode(value: Any, out: list[bytes]) -> None:
    if value is None:
        out.append(b"N")
    elif isinstance(value, bool):
        out.append(b"T" if value else b"F")
    elif isinstance(value, int):
        out.append(b"i" + str(value).encode() + b";")
    elif isinstance(value, float):
        out.append(b"f" + (b"nan" if math.isnan(value) else struct.pack("<d", value)))
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        out.append(b"s" + str(len(data)).encode() + b":" + data)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        out.append(b"b" + str(len(data)).encode() + b":" + data)
    elif isinstance(value, dict):
        out.append(b"{" + str(len(value)).encode() + b":")
        for key in sorted(value, key=str):
            _encode(str(key), out)
            _encode(value[key], out)
        out.append(b"}")
    elif isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        out.append(b"a" + f"{array.dtype.str}{array.shape}".encode() + b":" + array.tobytes())
    elif isinstance(value, np.generic):
        _encode(value.item(), out)
    elif isinstance(value, (list, tuple)) and value and all(type(v) is int for v in value):
        try:
            out.append(b"I" + str(len(value)).encode() + b":" + np.asarray(value, dtype=np.int64).tobytes())
        except OverflowError:
            out.append(b"[" + str(len(value)).encode() + b":")
            for item in value:
                _encode(item, out)
            out.append(b"]")
    elif isinstance(value, (list, tuple)):
        out.append(b"[" + str(len(value)).encode() + b":")
        for item in value:
            _encode(item, out)
        out.append(b"]")
    else:
        _encode(str(value), out)


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": hashlib.sha256(bytes(value)).hexdigest()}
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        return {"$array": [array.dtype.str, list(array.shape), hashlib.sha256(array.tobytes()).hexdigest()]}
    if isinstance(value, np.generic):
        return value.item()
    return {"$repr": repr(value)}


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True, default=_json_default)


def digest(value: Any, length: int = 32) -> str:
    """A stable sha256 hex digest of any value made of dicts, lists, scalars, bytes and numpy arrays.

    Canonical JSON (sorted keys; bytes and arrays by their own sha256) hashed
    with sha256; values JSON cannot sort (mixed-type dict keys) fall back to a
    typed binary encoding.
    """
    try:
        text = _CANONICAL.encode(value)
    except (TypeError, ValueError):
        parts: list[bytes] = [b"\x00binary:"]
        _encode(value, parts)
        return hashlib.sha256(b"".join(parts)).hexdigest()[:length]
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:length]


def content_key(record: Record) -> str:
    """A stable key for a row without a key column: a hash of its values.

    >>> content_key({"text": "hi"}) == content_key({"text": "hi"})
    True
    """
    parts: list[bytes] = []
    _encode(record, parts)
    return "h" + hashlib.sha256(b"".join(parts)).hexdigest()[:23]


def record_key(record: Record, key_column: str | None) -> str:
    """The key of a row: its key column as text, else its content hash."""
    if key_column is not None:
        return str(record[key_column])
    return content_key(record)
