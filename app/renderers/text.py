"""Text: whitespace and control characters made visible, long text collapsed, search matches highlighted."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .registry import FieldContext, View, register

#: Whitespace (and invisible formatting characters) shown as a symbol only when the reader asks.
_WS_SYMBOLS = {" ": "·", "\t": "→", "\n": "↵", "\r": "␍", "\u00a0": "⍽", "\u2028": "⤶", "\u2029": "¶"}
_INVISIBLE = set("\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad\u034f\u180e")
#: Characters that reorder text (bidi embeddings/overrides/isolates): never passed through, always shown as a symbol.
_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u061c")
_SPECIAL = re.compile(
    "[\\s\\x00-\\x1f\\x7f-\\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\u00ad\u034f\u180e\u061c\ufff9-\ufffb]+"
)
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


def _control_symbol(char: str) -> str:
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "␡"
    return f"⟨U+{code:04X}⟩"


def _special_segments(run: str, mark: bool) -> list[Segment]:
    out: list[Segment] = []
    ws: list[str] = []

    def flush() -> None:
        if ws:
            text = "".join(ws)
            out.append(Segment(text, "ws", "".join(_WS_SYMBOLS.get(c, "␣") if c not in _INVISIBLE else f"⟨U+{ord(c):04X}⟩" for c in text), mark=mark))
            ws.clear()

    for char in run:
        code = ord(char)
        printable_ws = char in _WS_SYMBOLS or char in _INVISIBLE or (unicodedata.category(char) == "Zs")
        if printable_ws and char not in _BIDI:
            ws.append(char)
            continue
        flush()
        name = unicodedata.name(char, "control character")
        out.append(Segment(_control_symbol(char), "ctl", title=f"U+{code:04X} {name}", mark=mark))
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


@register("text")
def text_field(value: Any, ctx: FieldContext) -> View:
    return text_view(value if isinstance(value, str) else str(value), ctx)


@register("text", cell=True)
def text_cell(value: Any, ctx: FieldContext) -> View:
    return snippet_view(value if isinstance(value, str) else str(value), ctx.highlight)
