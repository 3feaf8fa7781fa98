"""Class-label fields: the integer with its class name (from Hugging Face ``ClassLabel`` metadata) beside it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .views import CellView, FieldContext, View


def label_text(value: Any, names: list[str] | tuple[str, ...] | Any) -> str:
    """``1`` → ``'1 · dog'``; an index without a name (or -1, Hugging Face's "no label") is shown alone.

    >>> label_text(1, ["cat", "dog"]), label_text(7, ["cat"]), label_text(-1, ["cat"])
    ('1 · dog', '7 · (no name)', '-1 · (no label)')
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if value == -1:
            return f"{value} · (no label)"
        if 0 <= value < len(names):
            return f"{value} · {names[value]}"
        return f"{value} · (no name)" if names else str(value)
    return str(value)


@dataclass
class ClassLabelView(View):
    """A class id and its name."""

    partial: ClassVar[str] = "_partials/_class_label.html"
    value: Any = None
    name: str | None = None
    classes: int = 0


def class_label_field(value: Any, ctx: FieldContext) -> View:
    names = list(ctx.class_names)
    name = names[value] if isinstance(value, int) and 0 <= value < len(names) else None
    return ClassLabelView(value=value, name=name, classes=len(names))


def class_label_cell(value: Any, ctx: FieldContext) -> View:
    text = label_text(value, list(ctx.class_names))
    return CellView(text=text, title=text)
