"""Hidden characters in dataset text, and how every view shows them: one table, so nothing can hide or reorder text.

Dataset text is hostile: a key may carry a right-to-left override
(``user\\u202egnp.exe`` reads as ``userexe.png``), a zero-width space makes
two keys look equal, an escape sequence restyles a terminal, tag characters
spell instructions no reader sees. Every place that
shows data revealed some of these, each its own way; they all read
:data:`HIDDEN` now, and each shows a hidden character as its :func:`stand_in`:

>>> visible("user\\u202egnp.exe"), visible("a\\x00b\\x7f"), visible("key\\u200b")
('user⟨U+202E⟩gnp.exe', 'a␀b␡', 'key⟨U+200B⟩')

The views differ only in the whitespace that lays text out, as documented
where each is defined: :func:`visible` (keys, names, titles) reveals line
feeds and tabs too; :func:`visible_text` (multi-line text) keeps them;
:func:`visible_piece` (token pieces, JSON strings, scalars) shows them as
``↵`` and ``→``. The text view (``app.renderers.text``) keeps whitespace and
the ``invisible`` characters in place and shows their :data:`WHITESPACE`
symbol or stand-in on demand; every other hidden character there is always
its stand-in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Hidden:
    """A range of characters (``first`` to ``last``, code points) to reveal, and why.

    ``invisible`` ones (zero-width formatting) change nothing but the look of
    the text around them: the text view keeps them in place, marked, and shows
    their stand-in on demand. The others (controls, bidi overrides and
    isolates, separators) are replaced wherever data is shown.
    """

    first: int
    last: int
    what: str
    invisible: bool = False

    def __contains__(self, char: object) -> bool:
        return isinstance(char, str) and len(char) == 1 and self.first <= ord(char) <= self.last

    def chars(self) -> list[str]:
        return [chr(code) for code in range(self.first, self.last + 1)]


#: Every character shown as a stand-in rather than raw: C0 controls and DEL as their control pictures (``␀``, ``␡``),
#: the rest as their code point (``⟨U+202E⟩``). See :func:`stand_in`.
HIDDEN: tuple[Hidden, ...] = (
    Hidden(0x0000, 0x001F, "C0 controls (tab, line feed and carriage return among them)"),
    Hidden(0x007F, 0x009F, "delete and the C1 controls"),
    Hidden(0x00AD, 0x00AD, "soft hyphen", invisible=True),
    Hidden(0x034F, 0x034F, "combining grapheme joiner", invisible=True),
    Hidden(0x061C, 0x061C, "Arabic letter mark (bidi)"),
    Hidden(0x180E, 0x180E, "Mongolian vowel separator", invisible=True),
    Hidden(0x200B, 0x200F, "zero width space, non-joiner and joiner; left-to-right and right-to-left marks", invisible=True),
    Hidden(0x2028, 0x2029, "line and paragraph separators"),
    Hidden(0x202A, 0x202E, "bidi embeddings and overrides"),
    Hidden(0x2060, 0x2064, "word joiner and invisible operators", invisible=True),
    Hidden(0x2065, 0x2069, "bidi isolates (and the unassigned U+2065 before them)"),
    Hidden(0x206A, 0x206F, "deprecated format characters (symmetric swapping, Arabic form shaping, digit shapes)"),
    Hidden(0xFEFF, 0xFEFF, "zero width no-break space (byte order mark)", invisible=True),
    Hidden(0xFFF9, 0xFFFB, "interlinear annotation controls"),
    Hidden(0xE0000, 0xE007F, "tag characters: invisible letters that can spell hidden text (flags of regions use them)", invisible=True),
    Hidden(0xE0100, 0xE01EF, "variation selectors 17-256: invisible, and a run of them can carry hidden bytes", invisible=True),
)

#: Whitespace that lays text out, and the symbol it is shown as where whitespace is made visible (the text view's
#: whitespace toggle, token pieces, whitespace-only pieces of a diff). Other spaces (``Zs``) show :data:`OTHER_SPACE`.
WHITESPACE: Mapping[str, str] = {" ": "·", "\t": "→", "\n": "↵", "\r": "␍", "\u00a0": "⍽", "\u2028": "⤶", "\u2029": "¶"}
OTHER_SPACE = "␣"
#: What token pieces show for the line feed and the tab (every other hidden character is its stand-in).
PIECE_SYMBOLS: Mapping[str, str] = {char: WHITESPACE[char] for char in "\n\t"}
#: What multi-line text keeps as it is.
LAYOUT = "\n\t"


def _char_class(ranges: tuple[Hidden, ...]) -> str:
    return "".join(re.escape(chr(r.first)) + ("-" + re.escape(chr(r.last)) if r.last > r.first else "") for r in ranges)


#: One character class of every hidden character (for ``re``: ``f"[{HIDDEN_CLASS}]"``).
HIDDEN_CLASS = _char_class(HIDDEN)
_HIDDEN = re.compile(f"[{HIDDEN_CLASS}]")
_INVISIBLE = frozenset(char for r in HIDDEN if r.invisible for char in r.chars())


def is_hidden(char: str) -> bool:
    """Whether ``char`` is in the table.

    >>> is_hidden("\\u202e"), is_hidden("a"), is_hidden(" ")
    (True, False, False)
    """
    return _HIDDEN.fullmatch(char) is not None


def is_invisible(char: str) -> bool:
    """Whether ``char`` is a zero-width formatting character of the table (``Hidden.invisible``)."""
    return char in _INVISIBLE


def stand_in(char: str) -> str:
    """How a hidden character is shown: C0 controls and DEL as their control picture, the others as their code point.

    >>> stand_in("\\x1b"), stand_in("\\x7f"), stand_in("\\u2066")
    ('␛', '␡', '⟨U+2066⟩')
    """
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        return chr(0x2400 + code) if code < 0x20 else "␡"
    return f"⟨U+{code:04X}⟩"


def reveal(text: str, *, keep: str = "", symbols: Mapping[str, str] | None = None) -> str:
    """``text`` with every hidden character as its stand-in, except those in ``keep`` (left as they are) and
    ``symbols`` (shown as given there).

    >>> reveal("a\\tb\\u202ec"), reveal("a\\tb\\nc", keep="\\n"), reveal("a\\tb", symbols={"\\t": "→"})
    ('a␉b⟨U+202E⟩c', 'a␉b\\nc', 'a→b')
    """
    if _HIDDEN.search(text) is None:
        return text
    symbols = symbols or {}

    def shown(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        return symbols[char] if char in symbols else stand_in(char)

    return _HIDDEN.sub(shown, text)


def visible(value: Any) -> str:
    """Short text from data (keys, names, titles, paths) with every hidden character revealed, so nothing can spoof it.

    >>> visible("user\\u202egnp.exe"), visible("a\\x00b"), visible(None)
    ('user⟨U+202E⟩gnp.exe', 'a␀b', '')
    """
    return reveal("" if value is None else str(value))


def visible_text(text: str) -> str:
    """Multi-line text with every hidden character revealed, line feeds and tabs kept.

    >>> visible_text("a\\u202eb\\nc\\x00")
    'a⟨U+202E⟩b\\nc␀'
    """
    return reveal(text, keep=LAYOUT)


def visible_piece(piece: str) -> str:
    """A token piece (or a JSON string, a scalar) on one line: line feeds as ``↵``, tabs as ``→``, the rest revealed.

    >>> visible_piece("a\\nb\\tc\\rd\\u200b")
    'a↵b→c␍d⟨U+200B⟩'
    """
    return reveal(piece, symbols=PIECE_SYMBOLS)
