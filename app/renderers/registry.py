"""Rendering a field: its kind's renderer turns the value into a view model that a partial lays out.

Renderers are functions ``(value, ctx) -> View`` in the modules of this
package; the table of ``app.renderers.kinds`` names, for each field kind, the
one that renders a value in full and the one that renders its short form in
a row listing. A view model is a dataclass whose ``partial`` names the
template under ``templates/_partials/`` that lays it out. A renderer that
raises never breaks a page: the field shows an inline error naming where the
value came from.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

if TYPE_CHECKING:
    from tokenizers import Tokenizer

log = logging.getLogger("batchscope.app")


@dataclass
class FieldContext:
    """Everything a renderer may look at besides the value itself."""

    column: str
    kind: str
    record: Mapping[str, Any]
    kinds: Mapping[str, str]
    tokenizer: "Tokenizer | None" = None
    #: Text to highlight (a search query).
    highlight: str | None = None
    #: Render everything: no collapsing, no deferred fragments (the field was asked for on its own).
    full: bool = False
    #: URL that renders this field alone and in full (an htmx fragment); ``None`` when there is none.
    fragment_url: str | None = None
    #: URL of the value's stored bytes (binary, image and video fields of a dataset sample).
    media_url: str | None = None
    collapse_chars: int = 2000
    token_threshold: int = 1024
    #: Where the value came from, for error messages: ``dataset d version v shard s row r``.
    where: str = ""
    #: The class names of a ``class_label`` field (index → name), from the dataset's feature metadata.
    class_names: Sequence[str] = ()


@dataclass
class View:
    """Base of every view model."""

    partial: ClassVar[str] = "_partials/_fallback.html"
    #: Display toggles the field header offers: ``"ws"`` (whitespace), ``"ids"`` (raw token ids).
    toggles: ClassVar[tuple[str, ...]] = ()


@dataclass
class CellView(View):
    """The short form of a value in a row listing."""

    partial: ClassVar[str] = "_partials/_cell.html"
    text: str = ""
    title: str = ""


@dataclass
class ErrorView(View):
    """A value that could not be rendered: the message says where and why."""

    partial: ClassVar[str] = "_partials/_field_error.html"
    message: str = ""


Renderer = Callable[[Any, FieldContext], View]


def kinds_with_renderers() -> list[str]:
    """The kinds that have a renderer of their own, and ``*``, the declared fallback of any other kind."""
    from .kinds import FALLBACK, PRESENTATIONS  # the table imports every renderer module, and they import this one

    return sorted([*PRESENTATIONS, FALLBACK.kind])


def _safe(cell: bool, value: Any, ctx: FieldContext) -> View:
    from .kinds import NULL, presentation

    shown = presentation(NULL if value is None else ctx.kind)
    function = shown.cell if cell else shown.field
    try:
        return function(value, ctx)
    except Exception as exc:  # hostile data must never break the page
        log.warning("cannot render %s field %s: %s", ctx.where, ctx.column, exc)
        return ErrorView(message=f"{ctx.where} field {ctx.column!r} cannot be shown as {ctx.kind}: {type(exc).__name__}: {exc}")


def render_field(value: Any, ctx: FieldContext) -> View:
    """The full view of one field value."""
    return _safe(False, value, ctx)


def render_cell(value: Any, ctx: FieldContext) -> View:
    """The listing cell of one field value."""
    return _safe(True, value, ctx)
