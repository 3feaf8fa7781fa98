"""The demo's ``sft-chat`` dataset: templated multi-turn chats about the standard library, a few broken on purpose."""

from __future__ import annotations

import random
import re
from typing import TYPE_CHECKING, Callable

import pyarrow as pa

from loaders import Catalog
from loaders.transforms.chat import IM_END, header_length, render_chat, special_ids

from .common import DemoChanges, register_pair
from .stdlib_docs import Doc, stdlib_docs
from .tokenizer import NAME as TOKENIZER
from .tokenizer import ensure_tokenizer

if TYPE_CHECKING:
    from tokenizers import Tokenizer

NAME = "sft-chat"
CHATS = 400
#: The system prompt of v1, and its rewording in v2 (which re-tokenizes every chat that has one).
SYSTEM_PROMPT = {
    "v1": "You are a helpful assistant that explains the Python standard library.",
    "v2": "You are a concise, accurate assistant. Answer questions about the Python standard library.",
}
#: How many chats of each deliberately broken kind v1 and v2 both contain.
BROKEN = {"missing_end_of_turn": 4, "mask_shifted": 4, "user_trained": 3}
MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("messages", pa.list_(MESSAGE)),
        ("input_ids", pa.list_(pa.int32())),
        ("loss_mask", pa.list_(pa.int8())),
        ("n_tokens", pa.int32()),
    ]
)

Message = dict[str, str]


def _sentences(text: str) -> list[str]:
    paragraph = " ".join(text.split("\n\n", 1)[0].split())
    return [s for s in re.split(r"(?<=[.!?])\s+", paragraph) if s] or [paragraph]


def _module(doc: Doc) -> str:
    return doc.id if doc.kind == "module" else doc.id.rsplit(".", 1)[0]


def _summarize(doc: Doc, rng: random.Random) -> Message:
    sentences = _sentences(doc.text)
    return {"role": "assistant", "content": " ".join(sentences[: rng.choice((1, 2))])}


def _returns(doc: Doc, rng: random.Random) -> Message:
    found = [s for s in _sentences(doc.text) + doc.text.split("\n") if re.search(r"\b[Rr]eturns?\b", s)]
    if found:
        return {"role": "assistant", "content": found[0].strip()}
    first = _sentences(doc.text)[0]
    return {"role": "assistant", "content": f"Its documentation does not say what `{doc.id}` returns. It begins: {first}"}


def _kind(doc: Doc, rng: random.Random) -> Message:
    where = "is a module of the standard library" if doc.kind == "module" else f"is a {doc.kind} in `{_module(doc)}`"
    return {"role": "assistant", "content": f"`{doc.id}` {where}."}


def _first_line(doc: Doc, rng: random.Random) -> Message:
    return {"role": "assistant", "content": f"```\n{doc.text.splitlines()[0]}\n```"}


def _length(doc: Doc, rng: random.Random) -> Message:
    words, lines = len(doc.text.split()), len(doc.text.splitlines())
    return {"role": "assistant", "content": f"It has {words} words on {lines} line{'s' if lines != 1 else ''}."}


_QUESTIONS: tuple[tuple[str, Callable[[Doc, random.Random], Message]], ...] = (
    ("Summarize the documentation of `{name}`.", _summarize),
    ("What does `{name}` return?", _returns),
    ("Is `{name}` a function, a class or a module?", _kind),
    ("Quote the first line of the docstring of `{name}`.", _first_line),
    ("How long is the documentation of `{name}`?", _length),
)
_FOLLOW_UPS = ("And `{name}`?", "What about `{name}`?", "Now do the same for `{name}`.")


def _chat(docs: list[Doc], by_module: dict[str, list[Doc]], rng: random.Random, system: bool) -> list[Message]:
    """One chat of 1-4 user/assistant exchanges about one module's documentation.

    Later exchanges either ask the same question about another name of the
    module (a short follow-up) or another question about the same name; no
    exchange repeats an earlier one.
    """
    doc = docs[rng.randrange(len(docs))]
    neighbours = by_module[_module(doc)]
    messages: list[Message] = [{"role": "system", "content": "{system}"}] if system else []
    asked: set[tuple[str, int]] = set()

    def ask(doc: Doc, number: int, follow_up: bool) -> None:
        asked.add((doc.id, number))
        question, answer = _QUESTIONS[number]
        text = rng.choice(_FOLLOW_UPS) if follow_up else question
        messages.extend(({"role": "user", "content": text.format(name=doc.id)}, answer(doc, rng)))

    number = rng.randrange(len(_QUESTIONS))
    ask(doc, number, False)
    for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
        others = [d for d in neighbours if (d.id, number) not in asked]
        if others and rng.random() < 0.5:
            doc = others[rng.randrange(len(others))]
            ask(doc, number, True)
        else:
            fresh = [i for i in range(len(_QUESTIONS)) if (doc.id, i) not in asked]
            number = fresh[rng.randrange(len(fresh))]
            ask(doc, number, False)
    return messages


def _break(
    kind: str, ids: list[int], mask: list[int], spans: list[tuple[str, int, int]], tokenizer: "Tokenizer"
) -> tuple[list[int], list[int]]:
    """Damage a rendered chat the way ``kind`` says; returns the new ``(ids, mask)``."""
    if kind == "missing_end_of_turn":
        end = special_ids(tokenizer)[IM_END]
        role, start, stop = next(span for span in spans if span[0] == "assistant")
        at = max(i for i in range(start, stop) if ids[i] == end)
        return ids[:at] + ids[at + 1 :], mask[:at] + mask[at + 1 :]
    if kind == "mask_shifted":
        return ids, [0] + mask[:-1]
    if kind == "user_trained":
        mask = list(mask)
        newline = len(tokenizer.encode("\n", add_special_tokens=False).ids)
        for role, start, stop in spans:
            if role == "user":
                for i in range(start + header_length(role, tokenizer), stop - newline):
                    mask[i] = 1
        return ids, mask
    raise ValueError(f"unknown breakage {kind!r}")


def _rows(chats: dict[str, list[Message]], version: str, broken: dict[str, str], tokenizer: "Tokenizer") -> pa.Table:
    rows = []
    for key in sorted(chats):
        messages = [{"role": m["role"], "content": SYSTEM_PROMPT[version] if m["role"] == "system" else m["content"]} for m in chats[key]]
        ids, mask, spans = render_chat(messages, tokenizer)
        if key in broken:
            ids, mask = _break(broken[key], ids, mask, spans, tokenizer)
        rows.append({"id": key, "messages": messages, "input_ids": ids, "loss_mask": mask, "n_tokens": len(ids)})
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def build(catalog: Catalog, *, seed: int) -> None:
    """Register ``sft-chat`` v1 and v2, ChatML-tokenized with ``demo-bpe``.

    v2 rewords the system prompt (so every chat with one is re-tokenized:
    edited), drops ~3% of the chats and adds ~3% new ones. Both versions hold
    the same deliberately broken chats, listed in ``notes["broken"]``.
    """
    tokenizer = ensure_tokenizer(catalog)
    docs = list(stdlib_docs())
    by_module: dict[str, list[Doc]] = {}
    for doc in docs:
        by_module.setdefault(_module(doc), []).append(doc)
    rng = random.Random(f"sft-chat/{seed}")
    share = CHATS * 3 // 100
    chats = {f"chat-{i:04d}": _chat(docs, by_module, rng, rng.random() < 0.85) for i in range(CHATS + share)}
    keys = sorted(chats)
    new, old = keys[CHATS:], keys[:CHATS]
    shuffled = rng.sample(old, len(old))
    broken: dict[str, str] = {}
    for kind, count in BROKEN.items():
        for key in shuffled[len(broken) : len(broken) + count]:
            broken[key] = kind
    removed = shuffled[len(broken) : len(broken) + share]
    v1 = _rows({k: chats[k] for k in old}, "v1", broken, tokenizer)
    v2 = _rows({k: chats[k] for k in keys if k not in removed}, "v2", broken, tokenizer)
    before = {row["id"]: row for row in v1.to_pylist()}
    edited = sorted(row["id"] for row in v2.to_pylist() if row["id"] in before and before[row["id"]] != row)
    changes = DemoChanges(
        added=sorted(new),
        removed=sorted(removed),
        edited=edited,
        notes={
            "broken": {kind: sorted(k for k, v in broken.items() if v == kind) for kind in BROKEN},
            "system_prompt": dict(SYSTEM_PROMPT),
        },
    )
    register_pair(catalog, NAME, v1, v2, changes, key="id", rows_per_shard=200, tokenizer=TOKENIZER)
