"""Renderers: turn field values into view models by kind (the table is ``kinds``, rendering is ``registry``).

The table is imported with the package, so a field kind without a renderer fails at startup, naming it.
"""

from . import kinds
from .registry import CellView, ErrorView, FieldContext, View, render_cell, render_field

__all__ = ["CellView", "ErrorView", "FieldContext", "View", "kinds", "render_cell", "render_field"]
