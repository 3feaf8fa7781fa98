"""Huge values cut before an answer is built: pages and JSON twins show a value's beginning and link to the whole.

A field of one row can hold hundreds of megabytes (a text cell, a token list);
rendering it, or writing it as JSON, would need several times that again. Every
page and JSON twin that shows record values passes them through ``cut_record``
first: a value bigger than ``value_bytes`` (the setting; text by characters,
lists by their items, nested values in document order) keeps its beginning, of
the same type, and the answer names what was cut (``Cut``) with the URL of the
whole value, which the media endpoint serves with ``Range`` and without
building it in memory (``app.whole_value``). Bytes are never cut: pages show
their size, hash and first bytes, and link to them already.

>>> value, cut = cut_value("x" * 10, 4)
>>> value, cut.total, cut.shown, cut.unit
('xxxx', 10, 4, 'characters')
>>> cut_value([1, 2, 3], 100)
([1, 2, 3], None)
>>> cut_value({"a": "yyyy", "b": [1, 2, 3]}, 3)[0]
{'a': 'yyy', 'b': []}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

#: What one number, boolean or null counts for against the limit.
_SCALAR = 8
#: The limit of answers that do not take the ``field_bytes`` setting (a field diff's JSON): its default.
DEFAULT_LIMIT = 1 << 20


@dataclass
class Cut:
    """What of a field a page shows: ``shown`` of ``total`` ``unit`` (characters of a text, items of a list, bytes
    otherwise), and ``url``, the whole value (its stored bytes, a text's UTF-8 or JSON, with ``Range``)."""

    total: int
    shown: int
    unit: str
    url: str = ""

    @property
    def text(self) -> str:
        """One line saying what is shown."""
        return f"showing the first {self.shown:,} of {self.total:,} {self.unit}"


def _cut(value: Any, budget: int) -> tuple[Any, int, bool]:
    """``(value cut to about budget, what it used, whether anything was cut)``."""
    if isinstance(value, str):
        if len(value) <= budget:
            return value, len(value), False
        return value[: max(0, budget)], max(0, budget), True
    if isinstance(value, (bytes, bytearray, memoryview)):
        return value, _SCALAR, False  # shown by size, hash and first bytes: never built whole into an answer
    if isinstance(value, (list, tuple)):
        first = next((v for v in value if v is not None), None) if value else None
        if first is None or isinstance(first, (bool, int, float)):  # values from Arrow: one type per list, sized by count
            if len(value) * _SCALAR <= budget:
                return value, len(value) * _SCALAR, False
            keep = max(0, budget // _SCALAR)
            return value[:keep], keep * _SCALAR, True
        kept, used, cut = [], 0, False
        for item in value:
            if used >= budget:
                cut = True
                break
            piece, size, inner = _cut(item, budget - used)
            kept.append(piece)
            used += size
            cut = cut or inner
        return (type(value)(kept) if isinstance(value, tuple) else kept), used, cut
    if isinstance(value, Mapping):
        out, used, cut = {}, 0, False
        for name, item in value.items():
            piece, size, inner = _cut(item, max(0, budget - used))
            out[name] = piece
            used += size
            cut = cut or inner
        return out, used, cut
    return value, _SCALAR, False


def cut_value(value: Any, limit: int) -> tuple[Any, Cut | None]:
    """``value`` whole when it fits ``limit``, else its beginning (of the same type) and what was cut."""
    kept, used, cut = _cut(value, limit)
    if not cut:
        return value, None
    if isinstance(value, str):
        return kept, Cut(len(value), len(kept), "characters")
    if isinstance(value, (list, tuple)):
        return kept, Cut(len(value), len(kept), "items")
    return kept, Cut(_approximate_size(value), used, "bytes (about)")


def _approximate_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, (list, tuple)):
        return sum(_approximate_size(v) for v in value)
    if isinstance(value, Mapping):
        return sum(_approximate_size(v) for v in value.values())
    return _SCALAR


def cut_json(value: dict[str, Any], limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
    """A JSON object cut to ``limit`` in document order, with ``cut`` saying so when it was.

    >>> cut_json({"before": "x" * 5, "after": "y" * 5}, 6)
    {'before': 'xxxxx', 'after': 'y', 'cut': {'total': 10, 'shown': 6, 'unit': 'bytes (about)', 'url': ''}}
    """
    shown, cut = cut_value(value, limit)
    if cut is None:
        return value
    return {**shown, "cut": {"total": cut.total, "shown": cut.shown, "unit": cut.unit, "url": cut.url}}


def cut_record(record: Mapping[str, Any], limit: int, whole: Callable[[str], str]) -> tuple[dict[str, Any], dict[str, Cut]]:
    """Each field of ``record`` cut to ``limit``; returns the record to show and, by column, what was cut (its
    ``url`` from ``whole(column)``)."""
    shown: dict[str, Any] = {}
    cuts: dict[str, Cut] = {}
    for column, value in record.items():
        shown[column], cut = cut_value(value, limit)
        if cut is not None:
            cut.url = whole(column)
            cuts[column] = cut
    return shown, cuts


def _long_text(array: pa.Array, limit: int) -> int | None:
    """The length in characters of the one text value of ``array`` when it is longer than ``limit``, else None."""
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)) or array.null_count:
        return None
    if pc.binary_length(array)[0].as_py() <= limit:  # bytes bound characters: most texts stop here, cheaply
        return None
    length = pc.utf8_length(array)[0].as_py()
    return length if length > limit else None


def cut_row(row: pa.Table, limit: int, whole: Callable[[str], str]) -> tuple[dict[str, Any], dict[str, Cut]]:
    """``cut_record`` of a one-row Arrow table, cutting long texts before they become Python strings (so a huge cell
    costs only its decoding, never a copy of it)."""
    columns, early = [], {}
    for name, column in zip(row.column_names, row.columns):
        array = column.combine_chunks()
        length = _long_text(array, limit)
        if length is not None:
            array = pc.utf8_slice_codeunits(array, 0, limit)
            early[name] = Cut(length, limit, "characters", whole(name))
        columns.append(array)
    shown, cuts = cut_record(pa.Table.from_arrays(columns, names=row.column_names).to_pylist()[0], limit, whole)
    return shown, {**cuts, **early}
