"""Per-column statistics of a version from its Parquet footers (null counts, min, max): no data pages read."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from loaders.catalog.version import DatasetVersion

from ..reveal import visible_piece

#: Footers of more shards than this are not opened for statistics (they are cheap, but not free).
MAX_SHARDS = 256
_MAX_TEXT = 40


@dataclass
class ColumnStats:
    """What the footers say about one top-level, non-nested column."""

    nulls: int | None = None
    min: str | None = None
    max: str | None = None


_CACHE: dict[tuple[str, str], tuple[dict[str, ColumnStats], bool]] = {}
_LOCK = threading.Lock()


def _text(value: Any, binary: bool) -> str:
    if isinstance(value, bytes):
        if binary:
            return "0x" + value[: _MAX_TEXT // 2 - 2].hex() + ("…" if len(value) > _MAX_TEXT // 2 - 2 else "")
        value = value.decode("utf-8", "replace")
    text = visible_piece(str(value))
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1] + "…"


def _merge(stats: dict[str, dict[str, Any]], name: str, chunk: Any) -> None:
    entry = stats.setdefault(name, {"nulls": 0, "min": None, "max": None, "complete": True})
    statistics = chunk.statistics
    if statistics is None:
        entry["complete"] = False
        return
    if statistics.has_null_count:
        entry["nulls"] += statistics.null_count
    else:
        entry["complete"] = False
    if statistics.has_min_max:
        try:
            if entry["min"] is None or statistics.min < entry["min"]:
                entry["min"] = statistics.min
            if entry["max"] is None or statistics.max > entry["max"]:
                entry["max"] = statistics.max
        except (TypeError, UnicodeDecodeError):  # incomparable values, or string bounds that are not UTF-8: leave them out
            pass


def column_stats(version: DatasetVersion) -> tuple[dict[str, ColumnStats], bool]:
    """Statistics per column, and whether every shard's footer was used (cached per version id); versions stored in
    another format than Parquet carry no column statistics (none, complete)."""
    if version.shard_format != "parquet":
        return {}, True
    key = (version.root, version.id)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    top_level = {f.name for f in version.schema if not _nested(f.type)}
    binary = {
        f.name
        for f in version.schema
        if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type) or pa.types.is_fixed_size_binary(f.type)
    }
    raw: dict[str, dict[str, Any]] = {}
    shards = version.shards[:MAX_SHARDS]
    for number in range(len(shards)):
        metadata = version._open(number).metadata  # the footer, verified against the manifest
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for column in range(row_group.num_columns):
                chunk = row_group.column(column)
                if chunk.path_in_schema in top_level:
                    _merge(raw, chunk.path_in_schema, chunk)
    result = {
        name: ColumnStats(
            nulls=entry["nulls"] if entry["complete"] else None,
            min=_text(entry["min"], name in binary) if entry["min"] is not None else None,
            max=_text(entry["max"], name in binary) if entry["max"] is not None else None,
        )
        for name, entry in raw.items()
    }
    answer = (result, len(shards) == len(version.shards))
    with _LOCK:
        _CACHE[key] = answer
    return answer


def _nested(type_: Any) -> bool:
    return pa.types.is_nested(type_)
