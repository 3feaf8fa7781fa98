"""Checks shared by the hardening tests: a page holds no markup from data, text shows literally, the catalog is untouched.

>>> printable_runs("a\\x00bc\\u202ed")
['a', 'bc', 'd']
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from pathlib import Path

from bs4 import BeautifulSoup

#: Attributes that carry a URL a browser may load or navigate to.
URL_ATTRIBUTES = (
    "href",
    "xlink:href",
    "src",
    "action",
    "formaction",
    "poster",
    "data",
    "hx-get",
    "hx-post",
    "hx-put",
    "hx-delete",
    "hx-patch",
)
#: Elements that embed or reconfigure content; none may come from data.
FORBIDDEN_ELEMENTS = ("iframe", "object", "embed", "base", "frame", "frameset", "applet", "style", "link[rel=import]")
#: Folders of a catalog root that hold derived, rebuildable indexes (written on first use by design).
DERIVED = ("indexes", "diffs", "lint", "token-counts")  # derived data a page may build and keep (sealed)
_VISIBLE_BREAK = re.compile(r"[\n\t]")


def assert_inert(dom: BeautifulSoup) -> None:
    """Nothing on the page came from data as markup: only our own scripts, same-origin URLs, no handlers or inline styles."""
    for script in dom.find_all("script"):
        assert script.get("src", "").startswith("/static/") and not script.get_text(strip=True), f"foreign script: {script}"
    for selector in FORBIDDEN_ELEMENTS:
        assert dom.select(selector) == [], f"forbidden element {selector}: {dom.select(selector)[:1]}"
    for meta in dom.find_all("meta"):
        assert meta.get("http-equiv", "").lower() not in ("refresh", "set-cookie", "content-security-policy"), str(meta)
    for element in dom.find_all(True):
        for name, value in element.attrs.items():
            lowered = name.lower()
            assert not lowered.startswith("on"), f"event handler attribute on <{element.name}>: {name}={value!r}"
            assert not lowered.startswith(("hx-on", "data-hx-on")), f"htmx inline handler on <{element.name}>: {name}"
            assert lowered not in ("style", "srcdoc"), f"inline {lowered} on <{element.name}>"
            if lowered in URL_ATTRIBUTES:
                text = value if isinstance(value, str) else " ".join(value)
                assert_same_origin(text, where=f"<{element.name} {name}>")
    for svg in dom.find_all("svg"):  # only the server's own charts (app/svg.py), never markup from data
        assert "chart" in svg.get("class", []), f"inline svg that is not a chart: {str(svg)[:200]}"
        assert svg.find_all(["script", "foreignobject", "set", "animate", "use"]) == [], f"active svg content: {str(svg)[:200]}"
    for element in dom.find_all(["img", "video", "audio", "source"]):
        src = element.get("src")
        assert src is None or src.startswith("/"), f"<{element.name}> loads {src!r}"


def assert_same_origin(url: str, *, where: str) -> None:
    """``url`` stays on this server: a path, a query or a fragment; never a scheme, another host or ``javascript:``."""
    squeezed = re.sub(r"[\s\x00-\x1f]", "", url).lower()
    assert not squeezed.startswith(("javascript:", "vbscript:", "data:", "//", "http:", "https:", "\\\\")), f"{where} = {url!r}"
    assert squeezed == "" or squeezed[0] in "/?#", f"{where} = {url!r} is not a same-origin path"


def is_hidden_char(ch: str) -> bool:
    """Characters a page must show as a visible symbol rather than raw: controls, format (bidi, zero-width) and line separators."""
    return ch not in "\n\t" and unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")


def printable_runs(text: str) -> list[str]:
    """The maximal runs of ``text`` between hidden characters (and line breaks); each must appear on the page literally."""
    runs, current = [], []
    for ch in text:
        if is_hidden_char(ch) or ch in "\n\t\r":
            if current:
                runs.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current:
        runs.append("".join(current))
    return [r for r in runs if r.strip()]


def assert_shows_literally(dom: BeautifulSoup, value: str) -> None:
    """``value`` is on the page as text: every printable run of it in the DOM text, none of its hidden characters raw in it.

    Hidden characters may stay raw in attribute values (a form must post the
    exact key) and inside ``.ws`` segments, which show a symbol for them on
    demand; anywhere else a reader must see a stand-in, not have the text
    reordered or hidden.
    """
    text = dom.get_text()
    for run in printable_runs(value):
        assert run.strip() in text, f"{run!r} (from {value!r}) is not shown on the page"
    hidden = {ch for ch in value if is_hidden_char(ch)}
    for node in dom.find_all(string=True):
        if node.find_parent(class_="ws") is not None or node.find_parent(["script", "style"]) is not None:
            continue
        raw = sorted(f"U+{ord(ch):04X}" for ch in hidden if ch in node)
        assert not raw, f"hidden characters {raw} shown raw in <{node.parent.name} class={node.parent.get('class')}>: {str(node)[:80]!r}"


def snapshot(*roots: Path) -> dict[str, str]:
    """``{path: sha256}`` of every file below ``roots`` except derived indexes; equal snapshots mean nothing changed."""
    found: dict[str, str] = {}
    for root in roots:
        for directory, folders, files in os.walk(root):
            relative = Path(directory).relative_to(root)
            if relative.parts[:1] and relative.parts[0] in DERIVED:
                folders[:] = []
                continue
            for name in files:
                path = Path(directory) / name
                if path.is_symlink():
                    found[str(path)] = "symlink:" + os.readlink(path)
                    continue
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def diff_snapshots(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What changed between two snapshots, one line per file (empty when nothing did)."""
    lines = [f"removed {p}" for p in sorted(set(before) - set(after))]
    lines += [f"added {p}" for p in sorted(set(after) - set(before))]
    lines += [f"changed {p}" for p in sorted(set(before) & set(after)) if before[p] != after[p]]
    return lines
