"""The view models renderers make and what a renderer sees: the types every renderer module and partial share.

A view model is a dataclass whose ``partial`` names the template under
``templates/_partials/`` that lays it out. These types import nothing of the
inspector, so the renderers, the kinds table (``app.renderers.kinds``) and the
dispatch (``app.renderers.registry``) all build on them without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

if TYPE_CHECKING:
    from tokenizers import Tokenizer


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
