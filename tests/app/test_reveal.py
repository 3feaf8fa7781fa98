"""Hidden characters: one table (``app.reveal.HIDDEN``), and every view that shows data reveals each of them the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.text import Text

from app.cli.diff import _words
from app.cli.show import _field_text
from app.cli.terminal import change, rollout_lines, token_text
from app.pages.stats import _text as stats_text
from app.renderers.basic import json_tree
from app.renderers.diff import text_segments
from app.renderers.text import segments
from app.renderers.tokens import token_view
from app.reveal import (
    HIDDEN,
    LAYOUT,
    PIECE_SYMBOLS,
    WHITESPACE,
    is_hidden,
    is_invisible,
    stand_in,
    visible,
    visible_piece,
    visible_text,
)
from app.templating import Templates
from loaders.diff.model import TextOp
from tests.corpus.checks import is_hidden_char

TABLE = [char for hidden in HIDDEN for char in hidden.chars()]
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "strings.json"
#: Text that mixes the table's characters with ordinary letters, spaces and other scripts.
TEXTS = st.lists(
    st.one_of(st.sampled_from(TABLE + [" ", "\u00a0", "\u3000", "a", "é", "\u05d0"]), st.characters(codec="utf-8")), max_size=40
).map("".join)


#: Format characters that are drawn (number signs and end-of-verse marks that span the digits after them, script
#: joiners that lay out glyphs): shown as they are, like any other letter.
DRAWN_FORMAT = [
    (0x0600, 0x0605), (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
]  # fmt: skip


def test_every_control_format_and_separator_character_is_in_the_table_or_drawn() -> None:
    import unicodedata

    drawn = {code for first, last in DRAWN_FORMAT for code in range(first, last + 1)}
    missing = [
        f"U+{code:04X} {unicodedata.name(chr(code), '?')}"
        for code in range(0x110000)
        if unicodedata.category(chr(code)) in ("Cc", "Cf", "Zl", "Zp") and code not in drawn and not is_hidden(chr(code))
    ]
    assert missing == []
    assert is_hidden("\U000e0041") and is_invisible("\U000e0041") and visible("ok\U000e0069\U000e0067") == "ok⟨U+E0069⟩⟨U+E0067⟩"
    assert is_hidden("\U000e0100") and not is_hidden("\ufe0f")  # emoji presentation selector: everywhere, and harmless


class Pieces:
    """A tokenizer whose token ``n`` is the character with code point ``n``."""

    def get_added_tokens_decoder(self) -> dict:
        return {}

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(map(chr, ids))

    def id_to_token(self, token_id: int) -> str:
        return chr(token_id)


PIECES = Pieces()


def _text_view(text: str) -> str:
    """What the text view shows: stand-ins of control segments, the symbols of whitespace segments, text as it is."""
    return "".join(s.symbol if s.kind == "ws" else s.text for s in segments(text)[0])


#: Every place that shows data, as a function of one string, and what it shows instead of the table's stand-in.
SITES: dict[str, tuple[Callable[[str], str], dict[str, str]]] = {
    "visible (keys, names, titles)": (visible, {}),
    "visible template filter": (lambda s: Templates().env.from_string("{{ s|visible }}").render(s=s), {}),
    "diff text": (lambda s: "".join(seg.text for seg in text_segments([TextOp("equal", s)])[0]), {c: c for c in LAYOUT}),
    "token pieces": (lambda s: "".join(t.piece for t in token_view([ord(c) for c in s], tokenizer=PIECES).tokens), dict(PIECE_SYMBOLS)),
    "JSON keys": (lambda s: json_tree({s: 1})[0].children[0].label, dict(PIECE_SYMBOLS)),
    "column statistics": (lambda s: stats_text(s, False), dict(PIECE_SYMBOLS)),
    "text view": (_text_view, {c: WHITESPACE[c] for c in TABLE if c in WHITESPACE}),
    "terminal tokens": (
        lambda s: token_text([ord(c) for c in s], None, [], PIECES, plain=True).plain.replace("¦", ""),
        dict(PIECE_SYMBOLS),
    ),
    "terminal turns": (
        lambda s: rollout_lines({"prompt": "p", "completion": s, "reward": 1.0})[2].plain.removeprefix("  assistant: "),
        {c: c for c in LAYOUT},
    ),
    "terminal diff": (lambda s: _changed(s), {c: c for c in LAYOUT}),
    "terminal diff, unchanged words": (lambda s: _words((TextOp("equal", s),), plain=True).plain, {c: c for c in LAYOUT}),
    "terminal fields": (_field_text, {c: c for c in LAYOUT}),
}


def _changed(s: str) -> str:
    text = Text()
    change(text, s, "", plain=True)
    return text.plain.removeprefix("[-").removesuffix("-]")


def test_the_table_is_one_class_of_characters_in_order() -> None:
    assert [(h.first, h.last) for h in HIDDEN] == sorted((h.first, h.last) for h in HIDDEN)
    assert all(a.last < b.first for a, b in zip(HIDDEN, HIDDEN[1:]))
    assert all(is_hidden(c) for c in TABLE) and not any(is_hidden(c) for c in "a é\u00a0\u3000")


def test_every_hidden_character_of_the_corpus_is_in_the_table() -> None:
    found = {c for c in json.dumps(json.loads(CORPUS.read_text()), ensure_ascii=False) if is_hidden_char(c)}
    assert len(found) > 10 and sorted(c for c in found if not is_hidden(c)) == []
    assert all(is_hidden(c) for c in "\x1b\x7f\u0085\u061c\u200b\u200e\u2028\u202e\u2066\ufeff\ufff9")


@pytest.mark.parametrize("site", sorted(SITES))
def test_every_call_site_shows_every_table_character_as_the_table_says(site: str) -> None:
    show, layout = SITES[site]
    shown = {c: show(c) for c in TABLE}
    assert {c: s for c, s in shown.items() if s != layout.get(c, stand_in(c))} == {}
    assert show("a\u202eb\x1bc") == "a⟨U+202E⟩b␛c"


@given(TEXTS)
def test_revealed_text_holds_no_table_character_raw(text: str) -> None:
    assert not any(is_hidden(c) for c in visible(text) + visible_piece(text))
    assert not any(is_hidden(c) and c not in LAYOUT for c in visible_text(text))
    segs = segments(text)[0]
    assert not any(is_hidden(c) for s in segs if s.kind != "ws" for c in s.text)
    assert not any(is_hidden(c) for s in segs for c in s.symbol)


@given(TEXTS)
def test_revealing_replaces_each_table_character_and_nothing_else(text: str) -> None:
    def expected(keep: dict[str, str]) -> str:
        return "".join(keep.get(c, stand_in(c)) if is_hidden(c) else c for c in text)

    assert visible(text) == expected({})
    assert visible_text(text) == expected({c: c for c in LAYOUT})
    assert visible_piece(text) == expected(dict(PIECE_SYMBOLS))
    kept = "".join(c for c in text if not is_hidden(c) or c in WHITESPACE or is_invisible(c))
    assert "".join(s.text for s in segments(text)[0] if s.kind != "ctl") == kept


@given(TEXTS)
def test_text_without_table_characters_is_shown_as_it_is(text: str) -> None:
    plain = "".join(c for c in text if not is_hidden(c))
    assert visible(plain) == visible_text(plain) == visible_piece(plain) == plain
    assert "".join(s.text for s in segments(plain)[0]) == plain
