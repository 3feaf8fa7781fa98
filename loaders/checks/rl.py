"""Checks of RL data as read: non-finite rewards, advantages and log-probabilities, log-probabilities above 0, rewards
outside a declared range, and groups whose rewards do not vary.

Rollouts are the ``rollout`` columns (:mod:`loaders.rl.facts` describes them); episodes (``episode`` columns) have
their per-step ``rewards`` checked for non-finite values too.

>>> nonfinite_entries([-0.5, float("nan"), None, float("inf")])
(2, 3)
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import numpy as np

from ..rl.facts import as_float, number_text
from .part import GroupLog
from .spec import Finding

if TYPE_CHECKING:
    from .context import Context as ReadContext
    from .reads import Place, SampleRead

Hit = tuple[str, "Place", "str | None", str]


def _floats(values: Any) -> np.ndarray | None:
    if values is None:
        return None
    try:
        return np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        return np.asarray([np.nan if v is None else as_float(v) or np.nan for v in values if v is not None], dtype=np.float64)


def nonfinite_entries(values: Any) -> tuple[int, int]:
    """``(non-finite entries, entries)`` of a list of numbers (``None`` entries are left out: masked positions)."""
    array = _floats([v for v in values if v is not None] if isinstance(values, (list, tuple)) else values)
    if array is None:
        return 0, 0
    return int((~np.isfinite(array)).sum()), len(array)


def _rollouts(samples: list["SampleRead"], ctx: "ReadContext") -> list[tuple[Any, str, Mapping[str, Any]]]:
    """``(doc, column, rollout)`` of every rollout the samples read (found once per list of samples)."""
    if ctx.rollouts_of is not None and ctx.rollouts_of[0] is samples:
        return ctx.rollouts_of[1]
    found = []
    for doc in (d for sample in samples for d in sample.docs):
        for column in ctx.facts(doc.document.source).columns_of("rollout"):
            value = doc.document.record.get(column)
            if type(value) is dict or isinstance(value, Mapping):
                found.append((doc, column, value))
    ctx.rollouts_of = (samples, found)
    return found


def _numbers(values: list[Any]) -> np.ndarray:
    """``values`` (rewards, advantages) as floats; missing or non-numeric ones as NaN, flagged apart by ``None``."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([np.nan if (x := as_float(v)) is None else x for v in values], dtype=np.float64)


def _lists(rollouts: list[tuple[Any, str, Mapping[str, Any]]], name: str) -> tuple[np.ndarray, np.ndarray]:
    """Every rollout's ``name`` list concatenated (``None`` entries left out), and where each rollout's entries start."""
    lists = [value.get(name) for _, _, value in rollouts]
    lengths = [len(v) if isinstance(v, (list, tuple)) else 0 for v in lists]
    try:
        flat = np.fromiter(itertools.chain.from_iterable(v for v in lists if isinstance(v, (list, tuple))), np.float64, count=sum(lengths))
    except (TypeError, ValueError):  # None entries (masked positions) or values that are not numbers: one at a time
        parts = [_floats([x for x in v if x is not None]) if isinstance(v, (list, tuple)) else None for v in lists]
        lengths = [0 if p is None else len(p) for p in parts]
        flat = np.concatenate([p for p in parts if p is not None]) if any(lengths) else np.zeros(0)
    return flat, np.r_[0, np.cumsum(lengths)].astype(np.int64)


def rollout_values(samples: list["SampleRead"], ctx: "ReadContext") -> Iterator[Hit]:
    """``rl-nonfinite``: a NaN or infinite reward, advantage, log-probability or reference log-probability, or episode
    reward. ``rl-logprob-positive``: a log-probability above ``max_logprob``. ``rl-reward-range``: a reward outside the
    declared ``[min, max]`` (not run while neither bound is declared). Judged for a batch at once, with numpy."""
    low, high = ctx.param("rl-reward-range", "min"), ctx.param("rl-reward-range", "max")
    max_logprob = ctx.param("rl-logprob-positive", "max_logprob")
    max_entries = ctx.param("rl-nonfinite", "max_entries")
    rollouts = _rollouts(samples, ctx)
    if rollouts:
        numbers = {name: _numbers([value.get(name) for _, _, value in rollouts]) for name in ("reward", "advantage")}
        bad: dict[int, list[str]] = defaultdict(list)
        count = np.zeros(len(rollouts), dtype=np.int64)  # non-finite values per rollout
        above: dict[int, list[str]] = defaultdict(list)
        for name, array in numbers.items():
            for i in np.flatnonzero(~np.isfinite(array)).tolist():  # a missing or non-numeric value is no NaN: left out
                if as_float(rollouts[i][2].get(name)) is not None:
                    bad[i].append(f"{name} is {number_text(float(array[i]))}")
                    count[i] += 1
        for name in ("logprobs", "ref_logprobs"):
            flat, starts = _lists(rollouts, name)
            if not len(flat):
                continue
            counts = np.diff(starts)
            nonfinite = np.add.reduceat(~np.isfinite(flat), starts[:-1]) * (counts > 0) if len(flat) else np.zeros(len(rollouts), int)
            over = flat > max_logprob  # NaN compares False
            positive = np.add.reduceat(over, starts[:-1]) * (counts > 0)
            for i in np.flatnonzero(nonfinite).tolist():
                bad[i].append(f"{int(nonfinite[i])} of {int(counts[i])} {name} are NaN or infinite")
                count[i] += int(nonfinite[i])
            for i in np.flatnonzero(positive).tolist():
                largest = float(np.nanmax(flat[starts[i] : starts[i + 1]]))
                above[i].append(f"{int(positive[i])} of {int(counts[i])} {name} above {max_logprob:g} (largest {largest:.4g})")
        rewards = numbers["reward"]
        outside = np.zeros(len(rollouts), dtype=bool)
        if low is not None:
            outside |= np.isfinite(rewards) & (rewards < low)
        if high is not None:
            outside |= np.isfinite(rewards) & (rewards > high)
        for i in sorted(set(bad) | set(above) | set(np.flatnonzero(outside).tolist())):
            doc, column, _ = rollouts[i]
            if count[i] > max_entries:
                yield "rl-nonfinite", doc, doc.key, f"{column}: {'; '.join(bad[i])}"
            if above.get(i):
                yield "rl-logprob-positive", doc, doc.key, f"{column}: {'; '.join(above[i])}"
            if outside[i]:
                bounds = f"[{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}]"
                yield "rl-reward-range", doc, doc.key, f"{column}: reward {rewards[i]:g} outside the declared range {bounds}"
    for doc in (d for sample in samples for d in sample.docs):
        for column in ctx.facts(doc.document.source).columns_of("episode"):
            episode = doc.document.record.get(column)
            episode_rewards = episode.get("rewards") if isinstance(episode, Mapping) else None
            if isinstance(episode_rewards, (list, tuple, np.ndarray)):
                nonfinite, total = nonfinite_entries(list(episode_rewards))
                if nonfinite > max_entries:
                    yield "rl-nonfinite", doc, doc.key, f"{column}: {nonfinite} of {total} episode rewards are NaN or infinite"


def log_groups(samples: list["SampleRead"], ctx: "ReadContext", groups: GroupLog) -> None:
    """Log each rollout the samples read that has a group id and a finite reward (for ``rl-zero-variance``)."""
    rollouts = _rollouts(samples, ctx)
    rewards = _numbers([value.get("reward") for _, _, value in rollouts]).tolist()
    for (doc, _, value), reward in zip(rollouts, rewards):
        group = value.get("group_id")
        if group is not None and group != "" and math.isfinite(reward):
            groups.add(doc.step, doc.rank, doc.position, doc.key, group if type(group) is str else str(group), reward)


def zero_variance(groups: GroupLog, *, min_group: float, severity: str) -> list[Finding]:
    """``rl-zero-variance``: a group (``group_id``) of which at least ``min_group`` rollouts were read, all with the same
    reward (no learning signal for group-normalized methods such as GRPO); one finding per rollout read. A group is
    judged on every read of it in the steps linted, so a group split across steps is judged whole."""
    by_group: dict[str, list[int]] = {}
    for i, group in enumerate(groups.group):
        by_group.setdefault(group, []).append(i)
    found = []
    for group, reads in by_group.items():
        rewards = {groups.reward[i] for i in reads}
        if len(reads) >= min_group and len(rewards) == 1:
            steps = sorted({groups.step[i] for i in reads})
            where = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
            detail = f"group {group}: all {len(reads)} rollouts read ({where}) have reward {next(iter(rewards)):g}"
            found += [
                Finding("rl-zero-variance", severity, groups.step[i], groups.rank[i], groups.position[i], groups.key[i], detail)
                for i in reads
            ]
    return found
