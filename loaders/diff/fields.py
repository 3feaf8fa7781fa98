"""Per-field differences of one row: word diffs for text, aligned id sequences for tokens, paths for structures.

>>> [op.op for op in text_ops("the cat sat", "the dog sat")]
['equal', 'replace', 'equal']
>>> [(op.op, op.a_start, op.a_end) for op in seq_ops([1, 2, 3], [1, 9, 3])]
[('equal', 0, 1), ('replace', 1, 2), ('equal', 2, 3)]
"""

from __future__ import annotations

import datetime as _dt
import decimal
import difflib
import hashlib
import json
import math
import re
from typing import Any, Iterable, Mapping, Sequence

from ..catalog.kinds import DIFF_JSON, DIFF_MEDIA, DIFF_PATHS, DIFF_SEQUENCE, kinds_where
from ..catalog.records import content_key
from .model import FieldDiff, PathChange, SeqOp, TextOp

#: Sequences longer than this (after trimming the common prefix and suffix) are shown as one replaced block.
MAX_ALIGN = 20_000
#: Changed paths listed per structured field; the rest are counted as truncated.
MAX_PATHS = 200
_WORD = re.compile(r"\w+|\s+|[^\w\s]+", re.UNICODE)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SEQUENCE_KINDS = frozenset(kinds_where(diff=DIFF_SEQUENCE))
_STRUCTURED_KINDS = frozenset(kinds_where(diff=DIFF_PATHS) + kinds_where(diff=DIFF_JSON))
_JSON_KINDS = frozenset(kinds_where(diff=DIFF_JSON))
_MEDIA_KINDS = frozenset(kinds_where(diff=DIFF_MEDIA))


def same(a: Any, b: Any) -> bool:
    """Value equality as the engine sees it: by content (NaN equals NaN, ``-0.0`` differs from ``0.0``)."""
    if a is b:
        return True
    if type(a) is type(b) and isinstance(a, (str, bytes, int)) and not isinstance(a, bool):
        return a == b
    return content_key({"v": a}) == content_key({"v": b})


def field_diffs(a: Mapping[str, Any], b: Mapping[str, Any], columns: Iterable[str], kinds: Mapping[str, str]) -> list[FieldDiff]:
    """The differing ``columns`` of two decoded rows, in the given column order."""
    out = []
    for column in columns:
        before, after = a.get(column), b.get(column)
        if not same(before, after):
            out.append(field_diff(column, kinds.get(column, "json"), before, after))
    return out


def field_diff(column: str, kind: str, before: Any, after: Any) -> FieldDiff:
    """How one column's value changed, detailed by its field kind (see :class:`FieldDiff`)."""
    change = "added" if before is None else "removed" if after is None else "changed"
    if change != "changed":
        present = after if before is None else before
        if kind in _STRUCTURED_KINDS or isinstance(present, (dict, list, tuple)):
            paths = (PathChange(column, change, jsonable(before), jsonable(after)),)
            return FieldDiff(column, kind, change, paths=paths)
        return FieldDiff(column, kind, change, before=_summary(kind, before), after=_summary(kind, after))
    if kind in _MEDIA_KINDS:
        return FieldDiff(column, kind, change, before=media_summary(before), after=media_summary(after))
    if kind in _JSON_KINDS and isinstance(before, str) and isinstance(after, str):
        parsed = _parse_json(before), _parse_json(after)
        if parsed[0] is not _INVALID and parsed[1] is not _INVALID:
            paths, truncated = struct_paths(parsed[0], parsed[1], column)
            return FieldDiff(column, kind, change, paths=paths, truncated=truncated)
    if isinstance(before, str) and isinstance(after, str):
        return FieldDiff(column, kind, change, before=before, after=after, words=text_ops(before, after))
    if kind in _SEQUENCE_KINDS and _is_sequence(before) and _is_sequence(after):
        ops, truncated = _seq_ops(list(before), list(after))
        return FieldDiff(column, kind, change, before=jsonable(list(before)), after=jsonable(list(after)), ops=ops, truncated=truncated)
    if isinstance(before, (dict, list, tuple)) or isinstance(after, (dict, list, tuple)):
        paths, truncated = struct_paths(before, after, column)
        return FieldDiff(column, kind, change, paths=paths, truncated=truncated)
    return FieldDiff(column, kind, change, before=jsonable(before), after=jsonable(after))


# -- text -----------------------------------------------------------------


def words(text: str) -> list[str]:
    """Split text into words, whitespace runs and punctuation runs (joined, they give the text back)."""
    return _WORD.findall(text)


def text_ops(before: str, after: str) -> tuple[TextOp, ...]:
    """A word-level diff: segments that rebuild ``before`` from the ``a`` sides and ``after`` from the ``b`` sides."""
    a, b = words(before), words(after)
    if max(len(a), len(b)) > MAX_ALIGN:
        a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    ops: list[TextOp] = []
    for op in _aligned(a, b)[0]:
        left, right = "".join(a[op.a_start : op.a_end]), "".join(b[op.b_start : op.b_end])
        if ops and ops[-1].op == op.op:
            ops[-1] = TextOp(op.op, ops[-1].a + left, ops[-1].b + right)
        else:
            ops.append(TextOp(op.op, left, right))
    return tuple(ops)


# -- id sequences ---------------------------------------------------------


def seq_ops(before: Sequence[Any], after: Sequence[Any]) -> tuple[SeqOp, ...]:
    """Align two id sequences (token ids, masks, labels); non-equal blocks carry their ids."""
    return _seq_ops(list(before), list(after))[0]


def _seq_ops(a: list[Any], b: list[Any]) -> tuple[tuple[SeqOp, ...], bool]:
    blocks, truncated = _aligned(a, b)
    ops = tuple(op if op.op == "equal" else _with_ids(op, a, b) for op in blocks)
    return ops, truncated


def _with_ids(op: SeqOp, a: Sequence[Any], b: Sequence[Any]) -> SeqOp:
    return SeqOp(op.op, op.a_start, op.a_end, op.b_start, op.b_end, tuple(a[op.a_start : op.a_end]), tuple(b[op.b_start : op.b_end]))


def _aligned(a: Sequence[Any], b: Sequence[Any]) -> tuple[list[SeqOp], bool]:
    """difflib opcodes, with the common prefix/suffix trimmed first and overlong middles left as one block."""
    prefix = 0
    limit = min(len(a), len(b))
    while prefix < limit and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and a[len(a) - 1 - suffix] == b[len(b) - 1 - suffix]:
        suffix += 1
    ops: list[SeqOp] = []
    if prefix:
        ops.append(SeqOp("equal", 0, prefix, 0, prefix))
    mid_a, mid_b = a[prefix : len(a) - suffix], b[prefix : len(b) - suffix]
    truncated = max(len(mid_a), len(mid_b)) > MAX_ALIGN
    if truncated:
        blocks = [("replace" if mid_a and mid_b else "delete" if mid_a else "insert", 0, len(mid_a), 0, len(mid_b))]
    else:
        blocks = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in blocks:
        if i1 == i2 and j1 == j2:
            continue
        ops.append(SeqOp(tag, prefix + i1, prefix + i2, prefix + j1, prefix + j2))
    if suffix:
        ops.append(SeqOp("equal", len(a) - suffix, len(a), len(b) - suffix, len(b)))
    return ops, truncated


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple))


# -- structures -----------------------------------------------------------


def struct_paths(before: Any, after: Any, root: str) -> tuple[tuple[PathChange, ...], bool]:
    """Changed leaves of two nested values by path (``root[2].content``); returns (changes, truncated).

    Lists of equal length compare item by item; otherwise items are aligned
    by content first, so an inserted chat message shows as one added path.
    Paths of removed items use A's index, the others B's.
    """
    out: list[PathChange] = []
    _walk(before, after, root, out)
    return tuple(out[:MAX_PATHS]), len(out) > MAX_PATHS


def _walk(a: Any, b: Any, path: str, out: list[PathChange]) -> None:
    if len(out) > MAX_PATHS or same(a, b):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            sub = _child(path, key)
            if key not in b:
                out.append(PathChange(sub, "removed", before=jsonable(a[key])))
            elif key not in a:
                out.append(PathChange(sub, "added", after=jsonable(b[key])))
            else:
                _walk(a[key], b[key], sub, out)
        return
    if _is_sequence(a) and _is_sequence(b):
        if len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                _walk(x, y, f"{path}[{i}]", out)
            return
        prints_a = [content_key({"v": x}) for x in a]
        prints_b = [content_key({"v": y}) for y in b]
        for op in _aligned(prints_a, prints_b)[0]:
            if op.op == "equal":
                continue
            common = min(op.a_end - op.a_start, op.b_end - op.b_start)
            for offset in range(common):
                _walk(a[op.a_start + offset], b[op.b_start + offset], f"{path}[{op.b_start + offset}]", out)
            for i in range(op.a_start + common, op.a_end):
                out.append(PathChange(f"{path}[{i}]", "removed", before=jsonable(a[i])))
            for j in range(op.b_start + common, op.b_end):
                out.append(PathChange(f"{path}[{j}]", "added", after=jsonable(b[j])))
        return
    if a is None:
        out.append(PathChange(path, "added", after=jsonable(b)))
    elif b is None:
        out.append(PathChange(path, "removed", before=jsonable(a)))
    else:
        ops = text_ops(a, b) if isinstance(a, str) and isinstance(b, str) else ()
        out.append(PathChange(path, "changed", before=jsonable(a), after=jsonable(b), words=ops))


def _child(path: str, key: Any) -> str:
    text = str(key)
    return f"{path}.{text}" if _IDENT.match(text) else f"{path}[{json.dumps(text)}]"


_INVALID = object()


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _INVALID


# -- values ---------------------------------------------------------------


def bytes_summary(data: bytes) -> dict[str, Any]:
    """Bytes as the diff reports them: length and a sha256 prefix."""
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()[:16]}


def media_summary(value: Any) -> Any:
    """An image or video value as ``{"size", "sha256"}`` (plus ``path``/``uri`` when it has one)."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()[:16]}
    if isinstance(value, dict):
        summary = media_summary(value.get("bytes")) or {}
        if value.get("path"):
            summary["path"] = value["path"]
        return summary or None
    if isinstance(value, str):
        return {"uri": value}
    return jsonable(value)


def _summary(kind: str, value: Any) -> Any:
    return media_summary(value) if kind in _MEDIA_KINDS else jsonable(value)


def jsonable(value: Any) -> Any:
    """A JSON-ready copy of a decoded value: bytes summarized, dates as ISO text, non-finite floats as text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes_summary(bytes(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (_dt.date, _dt.time, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return str(value)


def preview(record: Mapping[str, Any], kinds: Mapping[str, str], *, width: int = 160) -> str:
    """A one-line glimpse of a row for change lists: its first text column, else its first values."""
    for column, value in record.items():
        if kinds.get(column) == "text" and isinstance(value, str):
            return _clip(" ".join(value.split()), width)
    parts = []
    for column, value in record.items():
        shown = value if not isinstance(value, (bytes, bytearray)) else f"<{len(value)} bytes>"
        parts.append(f"{column}={shown!r}")
    return _clip(", ".join(parts), width)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


__all__ = [
    "bytes_summary",
    "field_diff",
    "field_diffs",
    "jsonable",
    "media_summary",
    "preview",
    "same",
    "seq_ops",
    "struct_paths",
    "text_ops",
    "words",
]
