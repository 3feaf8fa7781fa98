"""A rollout index checked against the rollouts a page read: each row it shows, and each group it shows in full.

The index is sealed derived data (``loaders.storage.derived``); a page still
reads, from verified shards, every rollout it shows, so it can check for free
that the index agrees with them: the reward, advantage, finish reason and group
of each row, and, for a group whose members are all on the page, the group's
statistics recomputed from them. A disagreement raises ``IndexDisagrees``: the
caller rebuilds the index and answers again, never showing the stored numbers.

>>> from loaders.rl import rollout_facts
>>> facts = [rollout_facts({"reward": r, "group_id": "g"}) for r in (1.0, 0.0)]
>>> index = RolloutIndex.from_facts(facts)
>>> confirm(index, [0, 1], facts, groups=[0])
>>> index.mean[0] = 0.987654
>>> confirm(index, [0, 1], facts, groups=[0])
Traceback (most recent call last):
...
loaders.rl.confirm.IndexDisagrees: group 'g' of the index has mean 0.987654, its rollouts 0.5
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from .facts import RolloutFacts
from .query import RolloutIndex

#: Group statistics recomputed from a group's rollouts and compared (sizes and counts exactly, means within rounding).
_COMPARED = ("sizes", "finite", "mean", "std", "min", "max", "zero_variance", "truncated_count", "mean_advantage", "mean_length")


class IndexDisagrees(Exception):
    """A stored rollout index disagrees with the verified rollouts a page read: it must be rebuilt, not shown."""


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def _same(a: Any, b: Any) -> bool:
    x, y = _number(a), _number(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _row_problem(index: RolloutIndex, p: int, facts: RolloutFacts) -> str | None:
    code = int(index.finish[p])
    finish = index.finish_names[code] if 0 <= code < len(index.finish_names) else None
    g = int(index.group_of[p])
    checks = (
        ("reward", index.reward[p], facts.reward, _same),
        ("advantage", index.advantage[p], facts.advantage, _same),
        ("finish reason", finish, _text(facts.finish_reason), lambda a, b: a == b),
        ("group", index.group_id(g), _text(facts.group_id), lambda a, b: a == b),
    )
    for name, stored, read, equal in checks:
        if not equal(stored, read):
            return f"row {int(index.row[p])} of the index has {name} {stored!r}, the rollout {read!r}"
    return None


def confirm(index: RolloutIndex, positions: Sequence[int], facts: Sequence[RolloutFacts], *, groups: Sequence[int] = ()) -> None:
    """Check the index at ``positions`` against ``facts`` read there from verified rows, and each of ``groups`` whose
    members all are among ``positions`` against statistics recomputed from them; ``IndexDisagrees`` names the first
    difference."""
    read = {int(p): f for p, f in zip(positions, facts)}
    for p, f in read.items():
        problem = _row_problem(index, p, f)
        if problem is not None:
            raise IndexDisagrees(problem)
    for g in groups:
        start, size = int(index.starts[g]), int(index.sizes[g])
        members = range(start, start + size)
        if not all(p in read for p in members):
            continue
        prompts = {read[p].prompt for p in members}
        if index.group_id(g) is None and len(prompts) > 1:
            raise IndexDisagrees(f"group {int(g)} of the index joins rollouts of {len(prompts)} different prompts without a group id")
        recomputed = RolloutIndex.from_facts([read[p] for p in members])
        if len(recomputed.starts) != 1:
            raise IndexDisagrees(f"group {index.group_id(g)!r} of the index holds rollouts of {len(recomputed.starts)} groups")
        for name in _COMPARED:
            stored, fresh = getattr(index, name)[g], getattr(recomputed, name)[0]
            if not _same(stored, fresh):
                raise IndexDisagrees(
                    f"group {index.group_id(g)!r} of the index has {name} {_number(stored):g}, its rollouts {_number(fresh):g}"
                )
