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
from typing import Any

from .kinds import FALLBACK, NULL, PRESENTATIONS, presentation
from .views import CellView, ErrorView, FieldContext, Renderer, View

__all__ = ["CellView", "ErrorView", "FieldContext", "Renderer", "View", "kinds_with_renderers", "render_cell", "render_field"]

log = logging.getLogger("batchscope.app")


def kinds_with_renderers() -> list[str]:
    """The kinds that have a renderer of their own, and ``*``, the declared fallback of any other kind."""
    return sorted([*PRESENTATIONS, FALLBACK.kind])


def _safe(cell: bool, value: Any, ctx: FieldContext) -> View:
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
