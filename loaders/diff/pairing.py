"""Keyless datasets: pair a removed row with an added row whose text is nearly the same, and report the pair as edited.

Similarity is :meth:`difflib.SequenceMatcher.ratio` over the row's text
columns (characters; words for texts over 2,000 characters). Work is bounded:
at most ``limit`` removed and ``limit`` added rows are considered, candidate
pairs come from shared word-bigram sketches once all pairs would be too
many, cheap upper bounds reject most candidates before the full ratio, and at
most ``8 * limit`` full ratios are computed. Pairs are chosen greedily, most
similar first, each row at most once.

>>> pair_texts(["the cat sat on the mat"], ["a dog", "the cat sat on a mat"], threshold=0.8)
[(0, 1, 0.904762)]
"""

from __future__ import annotations

import difflib
import heapq
import zlib
from collections import Counter, defaultdict
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..catalog.records import Record
from ..catalog.version import DatasetVersion
from .fields import same, words
from .rows import CODES, sort_changes

#: Full similarity computations allowed per considered row.
COMPARISONS_PER_ROW = 8
_SKETCH = 8
_CHAR_LIMIT = 2_000


def fetch_records(version: DatasetVersion, indices: Sequence[int]) -> dict[int, Record]:
    """Decode the rows at global ``indices`` of ``version`` through its verified, cached read path."""
    by_shard: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for index in indices:
        shard, row = version.locate(int(index))
        by_shard[shard].append((row, int(index)))
    out: dict[int, Record] = {}
    for shard, items in sorted(by_shard.items()):
        records = version.read(shard, [row for row, _ in items])
        for (_, index), record in zip(items, records):
            out[index] = record
    return out


def pair_edited(
    a: DatasetVersion,
    b: DatasetVersion,
    changes: pa.Table,
    compared: Sequence[str],
    *,
    similarity: float,
    limit: int,
) -> tuple[pa.Table, int, list[str]]:
    """Turn removed/added pairs of nearly equal text into ``edited`` rows; returns (changes, edited count, notes)."""
    text_columns = [c for c in compared if a.kinds.get(c) == "text" and b.kinds.get(c) == "text"]
    codes = changes.column("change").to_numpy()
    removed_rows = np.flatnonzero(codes == CODES["removed"])
    added_rows = np.flatnonzero(codes == CODES["added"])
    if not text_columns or limit <= 0 or not len(removed_rows) or not len(added_rows):
        return changes, 0, []
    notes = []
    if len(removed_rows) > limit or len(added_rows) > limit:
        notes.append(
            f"edited-row pairing considered the first {min(limit, len(removed_rows)):,} of {len(removed_rows):,} removed "
            f"and {min(limit, len(added_rows)):,} of {len(added_rows):,} added rows (edited_pairing_limit={limit:,})"
        )
    removed_rows, added_rows = removed_rows[:limit], added_rows[:limit]
    a_index = changes.column("a").to_numpy()
    b_index = changes.column("b").to_numpy()
    left = fetch_records(a, a_index[removed_rows].tolist())
    right = fetch_records(b, b_index[added_rows].tolist())
    left_records = [left[int(i)] for i in a_index[removed_rows]]
    right_records = [right[int(i)] for i in b_index[added_rows]]
    pairs = pair_texts(
        [_text(r, text_columns) for r in left_records],
        [_text(r, text_columns) for r in right_records],
        threshold=similarity,
        budget=COMPARISONS_PER_ROW * limit,
    )
    if not pairs:
        return changes, 0, notes
    keep = np.ones(changes.num_rows, bool)
    offsets, values, sims = [0], [], []
    for i, j, ratio in pairs:
        keep[removed_rows[i]] = keep[added_rows[j]] = False
        differing = [k for k, c in enumerate(compared) if not same(left_records[i].get(c), right_records[j].get(c))]
        values.extend(differing)
        offsets.append(offsets[-1] + len(differing))
        sims.append(ratio)
    chosen_removed = removed_rows[[i for i, _, _ in pairs]]
    chosen_added = added_rows[[j for _, j, _ in pairs]]
    edited = pa.table(
        {
            "key": changes.column("key").take(pa.array(chosen_removed)),
            "change": pa.array(np.full(len(pairs), CODES["edited"], np.int8)),
            "a": pa.array(a_index[chosen_removed]),
            "b": pa.array(b_index[chosen_added]),
            "columns": pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, pa.int16())),
            "similarity": pa.array(sims, pa.float32()),
        }
    ).cast(changes.schema)
    merged = pa.concat_tables([changes.filter(pa.array(keep)), edited])
    return sort_changes(merged), len(pairs), notes


def _text(record: Mapping[str, Any], columns: Sequence[str]) -> str:
    return "\n".join(str(record.get(c) or "") for c in columns)


def similarity(left: str, right: str) -> float:
    """The similarity edited pairing uses: difflib's ratio over characters (words for long texts)."""
    x, y = _units(left), _units(right)
    return difflib.SequenceMatcher(None, x, y, autojunk=False).ratio()


def _units(text: str) -> str | list[str]:
    return text if len(text) <= _CHAR_LIMIT else words(text)


def pair_texts(left: Sequence[str], right: Sequence[str], *, threshold: float, budget: int = 80_000) -> list[tuple[int, int, float]]:
    """Greedy one-to-one pairs ``(i, j, ratio)`` with ``ratio >= threshold``, most similar first."""
    units_left = [_units(t) for t in left]
    units_right = [_units(t) for t in right]
    found: list[tuple[float, int, int]] = []
    comparisons = 0
    for i, j in _candidates(left, right, budget):
        x, y = units_left[i], units_right[j]
        total = len(x) + len(y)
        if total and 2 * min(len(x), len(y)) / total < threshold:
            continue
        matcher = difflib.SequenceMatcher(None, x, y, autojunk=False)
        if matcher.real_quick_ratio() < threshold or matcher.quick_ratio() < threshold:
            continue
        if comparisons >= budget:
            break
        comparisons += 1
        ratio = matcher.ratio()
        if ratio >= threshold:
            found.append((ratio, i, j))
    found.sort(key=lambda item: (-item[0], item[1], item[2]))
    used_left: set[int] = set()
    used_right: set[int] = set()
    pairs = []
    for ratio, i, j in found:
        if i not in used_left and j not in used_right:
            used_left.add(i)
            used_right.add(j)
            pairs.append((i, j, round(ratio, 6)))
    return sorted(pairs)


def _candidates(left: Sequence[str], right: Sequence[str], budget: int) -> list[tuple[int, int]]:
    """All pairs when they fit the budget; otherwise pairs sharing sketch entries, best-sharing first per row."""
    if len(left) * len(right) <= budget:
        return [(i, j) for i in range(len(left)) for j in range(len(right))]
    index: dict[int, list[int]] = defaultdict(list)
    for j, text in enumerate(right):
        for signature in _sketch(text):
            index[signature].append(j)
    out = []
    for i, text in enumerate(left):
        shared: Counter[int] = Counter()
        for signature in _sketch(text):
            shared.update(index.get(signature, ()))
        best = heapq.nsmallest(COMPARISONS_PER_ROW, shared.items(), key=lambda item: (-item[1], item[0]))
        out.extend((i, j) for j, _ in best)
    return out


def _sketch(text: str) -> list[int]:
    """The smallest hashes of the text's word bigrams (of its characters when it has few words)."""
    tokens = [w for w in words(text.lower()) if not w.isspace()]
    if len(tokens) >= 4:
        grams = [f"{x} {y}" for x, y in zip(tokens, tokens[1:])]
    else:
        grams = [text[k : k + 3] for k in range(max(1, len(text) - 2))]
    return heapq.nsmallest(_SKETCH, {zlib.crc32(g.encode("utf-8", "surrogatepass")) for g in grams})


__all__ = ["fetch_records", "pair_edited", "pair_texts", "similarity"]
