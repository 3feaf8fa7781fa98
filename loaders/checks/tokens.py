"""Checks of the tokens a sample read: empty documents, nothing trained, repetition, unknown tokens.

Each function takes the reads of many samples and yields ``(check, read, key, detail)`` for what it finds (``read`` is
the sample or document read it is about: its step, rank and position);
:mod:`.registry` lists them with their thresholds.

>>> import numpy as np
>>> longest_period_run(np.array([1, 2] * 40 + [3, 4, 5]), 13, 32)
(2, 40)
>>> round(entropy_bits(np.array([7] * 60 + [8] * 4)), 3)
0.337
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import numpy as np

from .reads import DocRead, SampleRead

if TYPE_CHECKING:
    from .context import Context as ReadContext
    from .reads import Place

Hit = tuple[str, "Place", "str | None", str]
REPLACEMENT = "\ufffd"


def longest_period_run(ids: np.ndarray, max_period: int, min_repeats: int = 2) -> tuple[int, int]:
    """``(period, repeats)`` of the longest stretch of ``ids`` that repeats an n-gram of ``period`` ≤ ``max_period`` tokens
    back to back at least ``min_repeats`` times (``(0, 0)`` when none does): ``a b a b a b`` is the 2-gram ``a b`` 3 times.

    One vectorized comparison of every token with the ``max_period`` after it; only periods with enough equal pairs
    to reach ``min_repeats`` have their runs measured.
    """
    n = len(ids)
    periods = min(max_period, n - 1)
    if periods < 1:
        return (0, 0)
    padded = (
        np.concatenate([ids, np.full(periods, -1, dtype=ids.dtype)])
        if ids.dtype.kind == "i"
        else np.concatenate([ids.astype(np.int64), np.full(periods, -1)])
    )
    windows = np.lib.stride_tricks.sliding_window_view(padded, periods + 1)[:n]
    same = windows[:, 1:] == windows[:, :1]  # same[i, p - 1]: ids[i + p] == ids[i]
    need = (max(2, min_repeats) - 1) * np.arange(1, periods + 1)
    best = (0, 0)
    for period in (np.flatnonzero(same.sum(axis=0) >= need) + 1).tolist():
        column = np.concatenate(([0], same[:, period - 1].astype(np.int8), [0]))
        edges = np.flatnonzero(np.diff(column))
        repeats = (int((edges[1::2] - edges[::2]).max()) + period) // period
        if repeats >= min_repeats and repeats > best[1]:
            best = (period, repeats)
    return best


def entropy_bits(ids: np.ndarray) -> float:
    """Shannon entropy (bits) of the distribution of ``ids``."""
    _, counts = np.unique(ids, return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum())


def _units(doc: DocRead, ctx: "ReadContext") -> np.ndarray | None:
    """The piece's token ids, or for a record read without tokens, the hashes of the words of its text."""
    if doc.ids is not None:
        return doc.ids
    text = doc.text(ctx.facts(doc.document.source))
    words = text.split()
    return np.array([hash(w) for w in words], dtype=np.int64) if words else None


def empty_document(samples: list[SampleRead], ctx: "ReadContext") -> Iterator[Hit]:
    """A document whose text (text columns and chat turns) holds no character but whitespace, or, without text, that has
    fewer than ``min_tokens`` tokens; judged on the piece that starts it."""
    min_tokens = ctx.param("empty-document", "min_tokens")
    for doc in (d for sample in samples for d in sample.docs):
        if not doc.starts:
            continue
        facts = ctx.facts(doc.document.source)
        if facts.columns_of("text") or facts.columns_of("chat"):
            if not doc.text(facts).strip():
                yield (
                    "empty-document",
                    doc,
                    doc.key,
                    "its text is empty" + ("" if doc.length is None else f" ({doc.length} token(s))"),
                )
        elif doc.length is not None and doc.length < min_tokens:
            yield "empty-document", doc, doc.key, f"{doc.length} token(s)"


def no_trained_token(samples: list[SampleRead], ctx: "ReadContext") -> Iterator[Hit]:
    """A document read whole (of at least ``min_tokens`` tokens) whose tokens are all masked, or a sample none of whose tokens
    (padding aside) is trained."""
    min_tokens = max(1, ctx.param("no-trained-token", "min_tokens"))
    for sample in samples:
        found = False
        for doc in sample.docs:
            if doc.whole and doc.ids is not None and doc.mask is not None and len(doc.ids) >= min_tokens and not doc.mask.any():
                found = True
                yield "no-trained-token", sample, doc.key, f"none of its {len(doc.ids)} tokens is trained"
        if not found and sample.ids is not None and sample.content > 0 and sample.trained == 0:
            key = sample.docs[0].key if sample.docs else None
            yield "no-trained-token", sample, key, f"none of the sample's {sample.content} tokens (padding aside) is trained"


def repetition(samples: list[SampleRead], ctx: "ReadContext") -> Iterator[Hit]:
    """A piece of at least ``min_tokens`` tokens (words for text) that repeats an n-gram of up to ``max_period`` tokens at
    least ``min_repeats`` times back to back, or whose token entropy is below ``min_entropy`` bits."""
    min_tokens = ctx.param("repetition", "min_tokens")
    max_period = int(ctx.param("repetition", "max_period"))
    min_repeats = ctx.param("repetition", "min_repeats")
    min_entropy = ctx.param("repetition", "min_entropy")
    for doc in (d for sample in samples for d in sample.docs):
        if doc.ids is None and not doc.starts:
            continue
        units = _units(doc, ctx)
        if units is None or len(units) < min_tokens:
            continue
        what = "tokens" if doc.ids is not None else "words"
        period, repeats = longest_period_run(units, max_period, int(min_repeats))
        if repeats:
            yield "repetition", doc, doc.key, f"a {period}-gram repeated {repeats} times in a row ({len(units)} {what})"
            continue
        bits = entropy_bits(units)
        if bits < min_entropy:
            yield "repetition", doc, doc.key, f"{what} entropy {bits:.2f} bits over {len(units)} {what}"


def unknown_tokens(samples: list[SampleRead], ctx: "ReadContext") -> Iterator[Hit]:
    """A piece whose share of the tokenizer's unknown token, or a document whose share of U+FFFD characters in its text,
    is above ``max_share``."""
    max_share = ctx.param("unknown-tokens", "max_share")
    for doc in (d for sample in samples for d in sample.docs):
        facts = ctx.facts(doc.document.source)
        if doc.ids is not None and facts.unknown_id is not None and len(doc.ids):
            unknown = int((doc.ids == facts.unknown_id).sum())
            if unknown / len(doc.ids) > max_share:
                yield (
                    "unknown-tokens",
                    doc,
                    doc.key,
                    f"{unknown} of {len(doc.ids)} tokens are the unknown token ({unknown / len(doc.ids):.1%})",
                )
                continue
        if doc.starts:
            text = doc.text(facts)
            bad = text.count(REPLACEMENT) if REPLACEMENT in text else 0
            if bad and bad / len(text) > max_share:
                yield "unknown-tokens", doc, doc.key, f"{bad} of {len(text)} characters are U+FFFD ({bad / len(text):.1%})"
