"""Turn page data (dataclasses, records holding bytes, NaN, dates) into plain JSON values."""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import decimal
import hashlib
import math
from typing import Any

#: Field metadata that keeps a dataclass field (a view model, breadcrumbs) out of the JSON twin.
HTML_ONLY = {"json": False}


def html_only(default: Any = None, *, default_factory: Any = None) -> Any:
    """A dataclass field that the HTML uses but the JSON twin leaves out."""
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=HTML_ONLY)
    return dataclasses.field(default=default, metadata=HTML_ONLY)


def bytes_summary(data: bytes) -> dict[str, Any]:
    """How bytes appear in JSON: size and hash, plus base64 when small.

    >>> bytes_summary(b"hi")["size"]
    2
    """
    out: dict[str, Any] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    if len(data) <= 1024:
        out["base64"] = base64.b64encode(data).decode()
    return out


def jsonable(value: Any) -> Any:
    """A JSON-ready copy of ``value``.

    >>> jsonable({"x": float("nan"), "b": b"\\x00"})["x"]
    'NaN'
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value) if f.metadata.get("json", True)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes_summary(bytes(value))
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return jsonable(value.tolist())
    return str(value)
