"""Renderers: turn field values into view models by kind (see ``registry``); later kinds add modules here."""

from .registry import CellView, ErrorView, FieldContext, View, register, render_cell, render_field

__all__ = ["CellView", "ErrorView", "FieldContext", "View", "register", "render_cell", "render_field"]
