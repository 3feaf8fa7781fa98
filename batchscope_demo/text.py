"""The demo's ``web-text`` dataset: real English prose from the docstrings of Python's standard library."""

from __future__ import annotations

import random
import re
import sys

import pyarrow as pa

from loaders import Catalog

from .common import DemoChanges, register_pair
from .stdlib_docs import Doc, stdlib_docs
from .tokenizer import NAME as TOKENIZER
from .tokenizer import ensure_tokenizer

NAME = "web-text"
SOURCE = "cpython-stdlib"
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("title", pa.string()),
        ("text", pa.string()),
        ("source", pa.string()),
        ("n_chars", pa.int32()),
    ]
)


# -- realistic edits between v1 and v2 ---------------------------------------------------------

_WORD = re.compile(r"\b[a-z]{6,}\b")
_REWORDINGS = (
    (r"\bReturn ", "Returns "),
    (r"\be\.g\. ", "for example, "),
    (r"\bi\.e\. ", "that is, "),
    (r"\bIt is ", "It's "),
    (r"\bdoes not\b", "doesn't"),
    (r"\bcan not\b", "cannot"),
    (r"\bthe given\b", "the specified"),
)


def _typo(text: str, rng: random.Random) -> str | None:
    """``text`` with two adjacent letters of one word swapped (v1 carries it; v2 fixes it)."""
    words = list(_WORD.finditer(text))
    if not words:
        return None
    match = words[rng.randrange(len(words))]
    word = match.group()
    at = rng.randrange(1, len(word) - 2)
    if word[at] == word[at + 1]:
        return None
    broken = word[:at] + word[at + 1] + word[at] + word[at + 2 :]
    return text[: match.start()] + broken + text[match.end() :]


def _normalize_whitespace(text: str) -> str | None:
    """Runs of spaces collapsed and trailing spaces dropped, line breaks kept."""
    lines = [re.sub(r"(?<=\S) {2,}", " ", line).rstrip() for line in text.split("\n")]
    normalized = "\n".join(lines)
    return normalized if normalized != text else None


def _reword(text: str, rng: random.Random) -> str:
    """One sentence reworded, or a sentence added to the first paragraph."""
    for pattern, replacement in rng.sample(_REWORDINGS, len(_REWORDINGS)):
        changed = re.sub(pattern, replacement, text, count=1)
        if changed != text:
            return changed
    first, sep, rest = text.partition("\n\n")
    return first.rstrip(".") + ". See the library reference for details." + sep + rest


def _edit(text: str, rng: random.Random) -> tuple[str, str, str]:
    """``(v1 text, v2 text, kind)`` for an edited document."""
    kinds = ["typo_fixed", "whitespace_normalized", "sentence_changed"]
    rng.shuffle(kinds)
    for kind in kinds:
        if kind == "typo_fixed":
            broken = _typo(text, rng)
            if broken is not None:
                return broken, text, kind
        elif kind == "whitespace_normalized":
            normalized = _normalize_whitespace(text)
            if normalized is not None:
                return text, normalized, kind
        else:
            return text, _reword(text, rng), kind
    raise AssertionError("unreachable: sentence_changed always applies")


def _title(doc: Doc) -> str:
    return f"{doc.id} ({doc.kind})"


def _table(rows: list[tuple[Doc, str]]) -> pa.Table:
    rows = sorted(rows, key=lambda row: row[0].id)
    return pa.table(
        {
            "id": [doc.id for doc, _ in rows],
            "title": [_title(doc) for doc, _ in rows],
            "text": [text for _, text in rows],
            "source": [SOURCE] * len(rows),
            "n_chars": [len(text) for _, text in rows],
        },
        schema=SCHEMA,
    )


def build(catalog: Catalog, *, seed: int) -> None:
    """Train ``demo-bpe`` (when missing) and register ``web-text`` v1 and v2.

    v2 drops ~3% of v1's documents, adds ~3% new ones and edits ~5%: a typo
    fixed, whitespace normalized or a sentence reworded. The changes are
    recorded with ``DemoChanges``; ``notes["edits"]`` says which edit each got.
    """
    docs = list(stdlib_docs())
    ensure_tokenizer(catalog)
    rng = random.Random(f"web-text/{seed}")
    order = list(range(len(docs)))
    rng.shuffle(order)
    share = max(1, len(docs) * 3 // 100)
    added = set(order[:share])
    removed = set(order[share : 2 * share])
    edited = order[2 * share : 2 * share + max(1, len(docs) * 5 // 100)]
    v1_text = {i: docs[i].text for i in range(len(docs)) if i not in added}
    v2_text = {i: docs[i].text for i in range(len(docs)) if i not in removed}
    edits: dict[str, list[str]] = {"typo_fixed": [], "whitespace_normalized": [], "sentence_changed": []}
    for i in sorted(edited):
        v1_text[i], v2_text[i], kind = _edit(docs[i].text, rng)
        edits[kind].append(docs[i].id)
    v1 = _table([(docs[i], text) for i, text in v1_text.items()])
    v2 = _table([(docs[i], text) for i, text in v2_text.items()])
    changes = DemoChanges(
        added=sorted(docs[i].id for i in added),
        removed=sorted(docs[i].id for i in removed),
        edited=sorted(docs[i].id for i in v1_text.keys() & v2_text.keys() if v1_text[i] != v2_text[i]),
        notes={"edits": {kind: sorted(ids) for kind, ids in edits.items()}, "python": sys.version.split()[0]},
    )
    register_pair(catalog, NAME, v1, v2, changes, key="id", rows_per_shard=1000, tokenizer=TOKENIZER)
