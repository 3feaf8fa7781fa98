"""Scalars, bytes, JSON trees, nulls and the fallback for kinds without a renderer of their own."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..reveal import visible_piece
from .views import CellView, FieldContext, View

MAX_NODES = 2000
MAX_DEPTH = 64
MAX_STRING = 500


@dataclass
class ScalarView(View):
    partial: ClassVar[str] = "_partials/_scalar.html"
    text: str = ""
    type: str = ""


@dataclass
class BinaryView(View):
    partial: ClassVar[str] = "_partials/_binary.html"
    size: int = 0
    sha256: str = ""
    head_hex: str = ""
    download_url: str | None = None


@dataclass
class JsonNode:
    """One node of a JSON tree: a label, a scalar or the children of a list/object."""

    label: str
    type: str
    text: str = ""
    children: list["JsonNode"] = field(default_factory=list)
    size: int = 0
    open: bool = False


@dataclass
class JsonView(View):
    partial: ClassVar[str] = "_partials/_json.html"
    root: JsonNode | None = None
    truncated: bool = False
    warning: str = ""


def scalar_text(value: Any) -> str:
    """How one scalar value is written.

    >>> scalar_text(True), scalar_text(0.1), scalar_text(None)
    ('true', '0.1', 'null')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value):,} bytes>"
    return visible_piece(str(value))


def _string_text(value: str) -> str:
    shown = value if len(value) <= MAX_STRING else value[:MAX_STRING]
    text = visible_piece(json.dumps(shown, ensure_ascii=False))
    return text if len(value) <= MAX_STRING else f"{text} … ({len(value):,} characters)"


def json_tree(value: Any, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> tuple[JsonNode, bool]:
    """Build a bounded tree (iteratively: hostile nesting cannot exhaust the stack); returns it and whether it was cut.

    >>> root, cut = json_tree({"a": [1, 2]})
    >>> [c.label for c in root.children], cut
    (['a'], False)
    """
    root = JsonNode("", "")
    budget = max_nodes
    truncated = False
    stack: list[tuple[JsonNode, Any, int]] = [(root, value, 0)]
    while stack:
        node, item, depth = stack.pop()
        if isinstance(item, dict):
            node.type, node.size, node.open = "object", len(item), depth < 2
            entries = list(item.items())
        elif isinstance(item, (list, tuple)):
            node.type, node.size, node.open = "array", len(item), depth < 2
            entries = list(enumerate(item))
        else:
            node.type = "string" if isinstance(item, str) else "null" if item is None else type(item).__name__
            node.text = _string_text(item) if isinstance(item, str) else scalar_text(item)
            continue
        if not entries:
            node.text = "{}" if node.type == "object" else "[]"
            continue
        if depth >= max_depth:
            node.text, truncated = f"… nested deeper than {max_depth} levels", True
            continue
        for label, child_value in entries:
            if budget <= 0:
                node.children.append(JsonNode("…", "more", text=f"{len(entries) - len(node.children):,} more not shown"))
                truncated = True
                break
            budget -= 1
            child = JsonNode(visible_piece(str(label)), "")
            node.children.append(child)
            stack.append((child, child_value, depth + 1))
    return root, truncated


def json_field(value: Any, ctx: FieldContext) -> View:
    warning = ""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            warning = f"not valid JSON ({exc}); shown as a string"
    root, truncated = json_tree(value)
    root.open = True
    return JsonView(root=root, truncated=truncated, warning=warning)


def fallback_field(value: Any, ctx: FieldContext) -> View:
    if isinstance(value, (bytes, bytearray)):
        return binary_field(value, ctx)
    if isinstance(value, (dict, list, tuple)):
        return json_field(value, ctx)
    return ScalarView(text=scalar_text(value), type=type(value).__name__)


def scalar_field(value: Any, ctx: FieldContext) -> View:
    return ScalarView(text=scalar_text(value), type=type(value).__name__)


def binary_field(value: Any, ctx: FieldContext) -> View:
    data = bytes(value)
    return BinaryView(size=len(data), sha256=hashlib.sha256(data).hexdigest(), head_hex=data[:32].hex(" "), download_url=ctx.media_url)


def _summary(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value):,} bytes"
    if isinstance(value, dict):
        return "{" + ", ".join(visible_piece(str(k)) for k in list(value)[:6]) + (", …}" if len(value) > 6 else "}")
    if isinstance(value, (list, tuple)):
        return f"[{len(value):,} items]"
    text = scalar_text(value)
    return text if len(text) <= 120 else text[:120] + "…"


def fallback_cell(value: Any, ctx: FieldContext) -> View:
    return CellView(text=_summary(value))


def null_field(value: Any, ctx: FieldContext) -> View:
    return ScalarView(text="null", type="null")


def null_cell(value: Any, ctx: FieldContext) -> View:
    return CellView(text="null")
