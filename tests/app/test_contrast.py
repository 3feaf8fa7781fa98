"""Every token state is readable: text against its background has a contrast ratio of at least 4.5:1 (WCAG AA),
computed from the style sheets themselves (``tests.support.css`` runs their cascade)."""

from __future__ import annotations

import itertools

import pytest

from app.templating import STATIC_DIR
from tests.support.css import Element, Sheet, contrast

#: Every sheet the pages load, in the order base.html links them.
SHEET = Sheet.read(STATIC_DIR / name for name in ("app.css", "media.css", "rl.css", "diff.css"))
AA = 4.5

STRIPES = ("t0", "t1")
LAYERS = ("", *(f"heat{i}" for i in range(8)))
STATES = ("", "trained", "masked", "special", "masked special", "trained special")
ALT = tuple(f"alt{i}" for i in range(8))


def _chain(token: str, part: str, *, field: str = "", scope: str = "tokens", rl_alt: bool = False) -> list[Element]:
    """A token's piece (``p``) or raw id (``i``) where the pages put it: main > .field > .tokens > .tok-seq > .tok."""
    chain = [Element("html"), Element("body"), Element("main", ()), Element("section", tuple(f"field {field}".split()))]
    if rl_alt:
        chain.append(Element("div", ("rl-tokens", "rl-alt")))
    chain += [Element("div", (scope,)), Element("div", ("tok-seq",)), Element("span", tuple(("tok " + token).split()))]
    return chain + [Element("span", (part,))]


def cases() -> list[tuple[str, list[Element]]]:
    """Every state a token is drawn in: stripe × heat level × mask and special, piece or raw id (shown by the toggle)."""
    out = []
    for stripe, layer, state, shown in itertools.product(STRIPES, LAYERS, STATES, ("p", "i")):
        token = " ".join(filter(None, (stripe, state, layer)))
        field = "show-ids" if shown == "i" else ""
        out.append((f"{token} {'raw id' if shown == 'i' else 'piece'}", _chain(token, shown, field=field)))
    for stripe, level, state in itertools.product(STRIPES, ALT, ("", "masked", "special")):  # the RL second layer
        token = " ".join(filter(None, (stripe, state, "heat7", level)))
        out.append((f"{token} (second layer)", _chain(token, "p", rl_alt=True)))
    out.append(("padding run", _chain("pad-run", "p")[:-1]))
    out += [(f"legend {state}", _chain(state, "p")) for state in ("trained", "masked", "special", "masked special")]
    for change in ("tok-del", "tok-ins", "tok-retok"):
        out.append((f"diff {change}", _chain(f"t0 {change}", "p", scope="tok-align")))
    return out


@pytest.mark.parametrize("label, chain", cases(), ids=[label for label, _ in cases()])
def test_every_token_state_has_at_least_aa_contrast(label: str, chain: list[Element]) -> None:
    text, backgrounds = SHEET.colours(chain)
    worst = min(contrast(text, background) for background in backgrounds)
    assert worst >= AA, f"{label}: {text} on {backgrounds} is {worst:.2f}:1"


def test_the_parser_sees_the_known_failures_of_before() -> None:
    """The computation is the one that measured 3.15:1 for masked tokens and 1.06:1 for raw ids on dark heat."""
    old = Sheet.parse(
        ":root { --tok-b: #e1e9f4; } .tok.t1 { background: var(--tok-b); } .tok.masked { color: #8a929c; }"
        ".heat7 { background: #8c2d04 !important; color: #fff; } .tok .i { color: #3f4b59; }"
    )
    masked = old.colours(_chain("masked", "p"))  # the legend's "masked" chip, on the page's white
    assert round(contrast(masked[0], masked[1][0]), 2) == 3.15
    raw = old.colours(_chain("t1 heat7", "i", field="show-ids"))
    assert round(contrast(raw[0], raw[1][0]), 2) == 1.06
