"""Text: whitespace and hidden characters (``app.reveal``) made visible, long text collapsed, search matches highlighted."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..reveal import HIDDEN_CLASS, OTHER_SPACE, WHITESPACE, is_invisible, stand_in
from .views import FieldContext, View

#: Whitespace and hidden characters: split out of the text to be shown as segments of their own.
_SPECIAL = re.compile(f"[\\s{HIDDEN_CLASS}]+")
SNIPPET_CHARS = 160


@dataclass
class Segment:
    """A run of text. ``kind``: ``""`` plain, ``"ws"`` whitespace (symbol on demand), ``"ctl"`` a stand-in for an unprintable character."""

    text: str
    kind: str = ""
    symbol: str = ""
    title: str = ""
    mark: bool = False


@dataclass
class TextView(View):
    """Text laid out as segments; ``collapsed`` when only the first ``shown`` characters are included."""

    partial: ClassVar[str] = "_partials/_text.html"
    toggles: ClassVar[tuple[str, ...]] = ("ws",)
    segments: list[Segment] = field(default_factory=list)
    length: int = 0
    shown: int = 0
    collapsed: bool = False
    expand_url: str | None = None
    matches: int = 0
    #: A one-line snippet (listing cells, search results) rather than a block of text.
    inline: bool = False
    prefix_cut: bool = False


def _special_segments(run: str, mark: bool) -> list[Segment]:
    out: list[Segment] = []
    ws: list[str] = []

    def flush() -> None:
        if ws:
            text = "".join(ws)
            out.append(
                Segment(text, "ws", "".join(stand_in(c) if is_invisible(c) else WHITESPACE.get(c, OTHER_SPACE) for c in text), mark=mark)
            )
            ws.clear()

    for char in run:
        code = ord(char)
        if char in WHITESPACE or is_invisible(char) or unicodedata.category(char) == "Zs":
            ws.append(char)
            continue
        flush()
        name = unicodedata.name(char, "control character")
        out.append(Segment(stand_in(char), "ctl", title=f"U+{code:04X} {name}", mark=mark))
    flush()
    return out


def segments(text: str, *, highlight: str | None = None) -> tuple[list[Segment], int]:
    """Split ``text`` into display segments; returns them and the number of ``highlight`` matches.

    >>> [s.kind for s in segments("a b\\x00")[0]]
    ['', 'ws', '', 'ctl']
    """
    spans: list[tuple[int, int]] = []
    if highlight:
        spans = [m.span() for m in re.finditer(re.escape(highlight), text, re.IGNORECASE) if m.end() > m.start()]
    pieces: list[tuple[str, bool]] = []
    position = 0
    for start, end in spans:
        if start > position:
            pieces.append((text[position:start], False))
        pieces.append((text[start:end], True))
        position = end
    if position < len(text):
        pieces.append((text[position:], False))
    out: list[Segment] = []
    for piece, mark in pieces:
        cursor = 0
        for match in _SPECIAL.finditer(piece):
            if match.start() > cursor:
                out.append(Segment(piece[cursor : match.start()], mark=mark))
            out.extend(_special_segments(match.group(), mark))
            cursor = match.end()
        if cursor < len(piece):
            out.append(Segment(piece[cursor:], mark=mark))
    return out, len(spans)


def text_view(text: str, ctx: FieldContext) -> TextView:
    """The full (or collapsed) view of a text value."""
    limit = None if ctx.full else ctx.collapse_chars
    collapsed = limit is not None and len(text) > limit
    shown_text = text[:limit] if collapsed else text
    segs, _ = segments(shown_text, highlight=ctx.highlight)
    total = len(re.findall(re.escape(ctx.highlight), text, re.IGNORECASE)) if ctx.highlight else 0
    return TextView(
        segments=segs,
        length=len(text),
        shown=len(shown_text),
        collapsed=collapsed,
        expand_url=ctx.fragment_url if collapsed else None,
        matches=total,
    )


def snippet_view(text: str, highlight: str | None = None, width: int = SNIPPET_CHARS) -> TextView:
    """A one-line snippet: around the first match of ``highlight``, else the start."""
    start = 0
    if highlight:
        found = re.search(re.escape(highlight), text, re.IGNORECASE)
        if found:
            start = max(0, found.start() - width // 3)
    piece = text[start : start + width]
    segs, matches = segments(piece, highlight=highlight)
    return TextView(
        segments=segs,
        length=len(text),
        shown=len(piece),
        collapsed=start + width < len(text),
        matches=matches,
        inline=True,
        prefix_cut=start > 0,
    )


def text_field(value: Any, ctx: FieldContext) -> View:
    return text_view(value if isinstance(value, str) else str(value), ctx)


def text_cell(value: Any, ctx: FieldContext) -> View:
    return snippet_view(value if isinstance(value, str) else str(value), ctx.highlight)
