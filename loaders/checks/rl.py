"""Checks of RL data as read: non-finite rewards, advantages and log-probabilities, log-probabilities above 0, rewards
outside a declared range, and groups whose rewards do not vary.

Rollouts are the ``rollout`` columns (:mod:`loaders.rl.facts` describes them); episodes (``episode`` columns) have
their per-step ``rewards`` checked for non-finite values too.

>>> nonfinite_entries([-0.5, float("nan"), None, float("inf")])
(2, 3)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import numpy as np

from ..rl.facts import as_float, number_text
from .part import GroupLog
from .spec import Finding

if TYPE_CHECKING:
    from .reads import SampleRead
    from .scan import ReadContext

Hit = tuple[str, "str | None", str]


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


def _rollouts(sample: "SampleRead", ctx: "ReadContext") -> Iterator[tuple[Any, str, Mapping[str, Any]]]:
    for doc in sample.docs:
        for column in ctx.facts(doc.document.source).columns_of("rollout"):
            value = doc.document.record.get(column)
            if type(value) is dict or isinstance(value, Mapping):
                yield doc, column, value


def rollout_values(sample: "SampleRead", ctx: "ReadContext") -> Iterator[Hit]:
    """``rl-nonfinite``: a NaN or infinite reward, advantage, log-probability or reference log-probability, or episode
    reward. ``rl-logprob-positive``: a log-probability above ``max_logprob``. ``rl-reward-range``: a reward outside the
    declared ``[min, max]`` (not run while neither bound is declared)."""
    low, high = ctx.param("rl-reward-range", "min"), ctx.param("rl-reward-range", "max")
    max_logprob = ctx.param("rl-logprob-positive", "max_logprob")
    for doc, column, value in _rollouts(sample, ctx):
        bad = []
        reward, advantage = as_float(value.get("reward")), as_float(value.get("advantage"))
        for name, number in (("reward", reward), ("advantage", advantage)):
            if number is not None and not math.isfinite(number):
                bad.append(f"{name} is {number_text(number)}")
        above = []
        for name in ("logprobs", "ref_logprobs"):
            array = _floats(value.get(name))
            if array is None or not len(array):
                continue
            finite = np.isfinite(array)
            if not finite.all():
                bad.append(f"{int((~finite).sum())} of {len(array)} {name} are NaN or infinite")
            over = array[finite] > max_logprob
            if over.any():
                above.append(f"{int(over.sum())} of {len(array)} {name} above {max_logprob:g} (largest {float(array[finite].max()):.4g})")
        if bad:
            yield "rl-nonfinite", doc.key, f"{column}: {'; '.join(bad)}"
        if above:
            yield "rl-logprob-positive", doc.key, f"{column}: {'; '.join(above)}"
        if reward is not None and math.isfinite(reward) and ((low is not None and reward < low) or (high is not None and reward > high)):
            bounds = f"[{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}]"
            yield "rl-reward-range", doc.key, f"{column}: reward {reward:g} outside the declared range {bounds}"
    for doc in sample.docs:
        for column in ctx.facts(doc.document.source).columns_of("episode"):
            episode = doc.document.record.get(column)
            rewards = episode.get("rewards") if isinstance(episode, Mapping) else None
            if isinstance(rewards, (list, tuple, np.ndarray)):
                count, total = nonfinite_entries(list(rewards))
                if count:
                    yield "rl-nonfinite", doc.key, f"{column}: {count} of {total} episode rewards are NaN or infinite"


def log_groups(sample: "SampleRead", ctx: "ReadContext", step: int, rank: int, groups: GroupLog) -> None:
    """Log each rollout the sample read that has a group id and a finite reward (for ``rl-zero-variance``)."""
    for doc, _, value in _rollouts(sample, ctx):
        group, reward = value.get("group_id"), as_float(value.get("reward"))
        if group is not None and str(group) != "" and reward is not None and math.isfinite(reward):
            groups.add(step, rank, sample.position, doc.key, str(group), reward)


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
