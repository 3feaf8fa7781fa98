"""Just enough CSS to compute the colours an element gets from the inspector's style sheets, and their contrast.

Rules are ``selector, selector { property: value [!important]; }`` (no at-rules
in our sheets). Selectors are compound selectors (a tag, ``.class``,
``[class*="x"]``) joined by descendant or child combinators; pseudo-classes
never match (no element is hovered or targeted). The cascade is the CSS one:
``!important`` first, then specificity, then source order; ``color`` is
inherited, backgrounds are not (a transparent element shows its parent's).
A gradient background counts as every colour it names.

>>> sheet = Sheet.parse(":root { --a: #fff; } .x { background: var(--a); color: #000 } .x.y { color: #777 !important }")
>>> sheet.colours([Element("div", ("x",))]), sheet.colours([Element("div", ("x", "y"))])
(('#000000', ['#ffffff']), ('#777777', ['#ffffff']))
>>> round(contrast("#000000", "#ffffff"), 1)
21.0
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
_COMPOUND = re.compile(r"^([a-z][a-z0-9]*|\*)?((?:\.[\w-]+|\[[^\]]+\]|:{1,2}[\w-]+(?:\([^)]*\))?)*)$")
_PART = re.compile(r"\.([\w-]+)|\[([\w-]+)(\*=|=|~=)?\"?([^\"\]]*)\"?\]|(:{1,2}[\w-]+(?:\([^)]*\))?)")
_HEX = re.compile(r"#(?:[0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b")
NAMED = {"white": "#ffffff", "black": "#000000"}


@dataclass(frozen=True)
class Element:
    """One element of an ancestor chain: its tag and classes."""

    tag: str
    classes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rule:
    selector: str
    specificity: tuple[int, int, int]
    order: int
    declarations: dict[str, tuple[str, bool]] = field(hash=False)


def _compound_matches(compound: str, element: Element) -> bool:
    found = _COMPOUND.match(compound)
    if not found:
        raise ValueError(f"selector part {compound!r} is beyond this parser")
    tag, rest = found.group(1), found.group(2)
    if tag not in (None, "*") and tag != element.tag:
        return False
    for cls, attr, op, value, pseudo in _PART.findall(rest):
        if pseudo:
            return False
        if cls and cls not in element.classes:
            return False
        if attr:
            text = " ".join(element.classes) if attr == "class" else None
            if text is None or (op == "*=" and value not in text) or (op == "=" and value != text):
                return False
    return True


def _matches(selector: str, chain: list[Element]) -> bool:
    """Whether ``selector`` matches the last element of ``chain`` (its ancestors before it)."""
    tokens = selector.replace(">", " > ").split()
    position = len(chain) - 1
    if not tokens or not _compound_matches(tokens[-1], chain[position]):
        return False
    i = len(tokens) - 2
    while i >= 0:
        child = tokens[i] == ">"
        compound = tokens[i - 1] if child else tokens[i]
        i -= 2 if child else 1
        if child:
            position -= 1
            if position < 0 or not _compound_matches(compound, chain[position]):
                return False
            continue
        position -= 1
        while position >= 0 and not _compound_matches(compound, chain[position]):
            position -= 1
        if position < 0:
            return False
    return True


def _specificity(selector: str) -> tuple[int, int, int]:
    ids = selector.count("#")
    classes = len(re.findall(r"\.[\w-]+|\[[^\]]+\]|:(?!:)[\w-]+", selector))
    tags = len(re.findall(r"(?:^|[\s>])([a-z][a-z0-9]*)", selector))
    return ids, classes, tags


@dataclass
class Sheet:
    """Rules of one or more style sheets, in order, and the custom properties of ``:root``."""

    rules: list[Rule]
    variables: dict[str, str]

    @classmethod
    def parse(cls, text: str) -> "Sheet":
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        rules, variables = [], {}
        for order, (selectors, body) in enumerate(_RULE.findall(text)):
            declarations = {}
            for item in body.split(";"):
                if ":" not in item:
                    continue
                name, value = (part.strip() for part in item.split(":", 1))
                important = value.endswith("!important")
                declarations[name.lower()] = (value.replace("!important", "").strip(), important)
            for selector in (s.strip() for s in selectors.split(",")):
                if selector == ":root":
                    variables.update({k: v for k, (v, _) in declarations.items() if k.startswith("--")})
                elif selector:
                    rules.append(Rule(selector, _specificity(selector), order, declarations))
        return cls(rules, variables)

    @classmethod
    def read(cls, paths: Iterable[Path]) -> "Sheet":
        return cls.parse("\n".join(Path(p).read_text() for p in paths))

    def _resolve(self, value: str) -> str:
        return re.sub(r"var\((--[\w-]+)\)", lambda m: self.variables[m.group(1)], value)

    def _declared(self, chain: list[Element], prop: str) -> str | None:
        """The cascaded value of ``prop`` on the last element of ``chain`` (``None``: not declared)."""
        best: tuple[bool, tuple[int, int, int], int] | None = None
        value = None
        for rule in self.rules:
            if prop not in rule.declarations or not _matches(rule.selector, chain):
                continue
            declared, important = rule.declarations[prop]
            rank = (important, rule.specificity, rule.order)
            if best is None or rank > best:
                best, value = rank, declared
        return None if value is None else self._resolve(value)

    def colours(self, chain: list[Element], *, page: str = "#ffffff") -> tuple[str, list[str]]:
        """``(text colour, background colours)`` the last element of ``chain`` is drawn with."""
        text = "#000000"
        backgrounds = [page]
        for depth in range(1, len(chain) + 1):
            sub = chain[:depth]
            declared = self._declared(sub, "color")
            if declared is not None and declared not in ("inherit", "currentcolor"):
                text = _hex(declared)
            background = self._declared(sub, "background") or self._declared(sub, "background-color")
            if background is not None:
                found = [_hex(h) for h in _HEX.findall(background)] + [NAMED[w] for w in NAMED if re.search(rf"\b{w}\b", background)]
                if found:
                    backgrounds = found
        return text, backgrounds


def _hex(value: str) -> str:
    value = NAMED.get(value.strip(), value.strip())
    found = _HEX.search(value)
    if not found:
        raise ValueError(f"colour {value!r} is beyond this parser")
    digits = found.group(0)[1:]
    if len(digits) == 3:
        digits = "".join(c * 2 for c in digits)
    return "#" + digits.lower()


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    """The WCAG 2 contrast ratio of two ``#rrggbb`` colours (1 to 21)."""
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)
