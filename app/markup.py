"""Markup of the long runs on a page (text segments, token spans), built in one pass and registered as template filters.

A listing of fifty text cells is a few thousand segments and a packed
sequence a few thousand tokens; a Jinja loop or macro call per item was half
of such a page's time. These filters write exactly what those loops wrote,
every value escaped.

>>> from app.renderers.text import segments
>>> str(segments_html(segments("a <b>\\x00")[0]))
'a<span class="ws" data-sym="·"> </span>&lt;b&gt;<span class="ctl" title="U+0000 control character">␀</span>'
"""

from __future__ import annotations

from typing import Any, Iterable

from markupsafe import Markup, escape


def _segment(segment: Any) -> str:
    text = escape(segment.text)
    if segment.kind == "ws":
        html = f'<span class="ws" data-sym="{escape(segment.symbol)}">{text}</span>'
    elif segment.kind == "ctl":
        html = f'<span class="ctl" title="{escape(segment.title)}">{text}</span>'
    else:
        html = str(text)
    return f"<mark>{html}</mark>" if segment.mark else html


def segments_html(segments: Iterable[Any]) -> Markup:
    """Text segments (``app.renderers.text.Segment``): plain text, whitespace and control stand-ins, search marks."""
    return Markup("".join(map(_segment, segments)))


def token_spans_html(tokens: Iterable[Any]) -> Markup:
    """Token cells (``app.renderers.tokens.Token``): classes, hover title, piece and id of each.

    A page repeats few distinct pieces and class lists, so each is escaped once.

    >>> from app.renderers.tokens import Token
    >>> str(token_spans_html([Token(0, 7, "<s>", "t0 special", "#0 · id 7")]))
    '<span class="tok t0 special" title="#0 · id 7"><span class="p">&lt;s&gt;</span><span class="i">7</span></span>'
    """
    escaped: dict[str, str] = {}

    def once(text: str) -> str:
        found = escaped.get(text)
        if found is None:
            found = escaped[text] = str(escape(text))
        return found

    return Markup(
        "".join(
            f'<span class="tok {once(t.classes)}" title="{escape(t.title)}"><span class="p">{once(t.piece)}</span>'
            f'<span class="i">{int(t.id)}</span></span>'
            for t in tokens
        )
    )
