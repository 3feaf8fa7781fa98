"""Facts of one LLM RL rollout as read, with what is inconsistent in it: the rollout index and every rollout view start here.

A rollout value is a mapping with (any of) ``prompt``, ``completion``,
``prompt_ids``, ``completion_ids``, ``logprobs``, ``ref_logprobs``, ``reward``,
``advantage``, ``group_id``, ``finish_reason`` and ``turns`` (a list of
``{role, content}`` messages for multi-turn rollouts with tool calls).
``rollout_facts`` reads one and says what is inconsistent in it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

#: Problem bits of one rollout (the rollout index stores them per row).
LOGPROBS_LENGTH = 1
REF_LENGTH = 2
BAD_REWARD = 4
BAD_ADVANTAGE = 8
NO_GROUP = 16
NO_COMPLETION_IDS = 32
#: Finish reason of a completion cut by the sampler's length limit.
TRUNCATED = "length"


def as_float(value: Any) -> float | None:
    """A number as a float (NaN and inf kept), ``None`` when missing or not a number.

    >>> as_float("1.5"), as_float(None), as_float("x")
    (1.5, None, None)
    """
    if value is None or isinstance(value, (list, dict, tuple)):
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def number_text(value: float | None) -> str:
    """How a reward or advantage is written: ``0.25``, ``NaN``, ``inf``, ``—`` when missing.

    >>> number_text(0.123456), number_text(float("nan")), number_text(None)
    ('0.1235', 'NaN', '—')
    """
    if value is None:
        return "—"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.4g}"


def _list(value: Any) -> list[Any] | None:
    if isinstance(value, (list, tuple)):
        return list(value)
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        converted = value.tolist()
        return converted if isinstance(converted, list) else None
    return None


@dataclass
class RolloutFacts:
    """One rollout as read, with a bitmask of its problems and a sentence for each."""

    prompt: str
    completion: str
    prompt_ids: list[int] | None
    completion_ids: list[int] | None
    logprobs: list[Any] | None
    ref_logprobs: list[Any] | None
    reward: float | None
    advantage: float | None
    group_id: str | None
    finish_reason: str | None
    turns: list[Mapping[str, Any]] | None
    problems: int = 0
    warnings: list[str] = field(default_factory=list)
    #: Completion tokens when ``completion_ids`` were not read (taken from the group index).
    token_count: int | None = None

    @property
    def length(self) -> int | None:
        """Completion tokens (``None`` without ``completion_ids``)."""
        return self.token_count if self.completion_ids is None else len(self.completion_ids)


def _ids(value: Any, name: str, warnings: list[str]) -> list[int] | None:
    items = _list(value)
    if items is None:
        return None
    if set(map(type, items)) <= {int}:  # what Arrow integer lists decode to: nothing to convert
        return items
    try:
        return [int(v) for v in items]
    except (TypeError, ValueError):
        warnings.append(f"{name} holds values that are not token ids")
        return None


def rollout_facts(value: Any, *, lengths: Mapping[str, int | None] | None = None) -> RolloutFacts:
    """Read a rollout value and check it: lengths of per-token lists, finite reward and advantage, a group id.

    ``lengths`` gives the lengths of per-token lists that ``value`` leaves out
    (``completion_ids``, ``logprobs``, ``ref_logprobs``), as a page that reads
    only a rollout's small fields takes them from the group index.

    >>> facts = rollout_facts({"completion_ids": [1, 2, 3], "logprobs": [-0.1, -0.2], "reward": float("nan")})
    >>> facts.warnings
    ['logprobs has 2 entries for 3 completion tokens', 'reward is NaN', 'no group id']
    """
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a rollout struct (a mapping), got {type(value).__name__}")
    known = lengths or {}
    warnings: list[str] = []
    problems = 0
    completion_ids = _ids(value.get("completion_ids"), "completion_ids", warnings)
    prompt_ids = _ids(value.get("prompt_ids"), "prompt_ids", warnings)
    logprobs, ref = _list(value.get("logprobs")), _list(value.get("ref_logprobs"))

    def count(name: str, values: list[Any] | None) -> int | None:
        return len(values) if values is not None else known.get(name)

    tokens = count("completion_ids", completion_ids)
    if tokens is None and ("completion_ids" in value or count("logprobs", logprobs) is not None):
        problems |= NO_COMPLETION_IDS
        warnings.append("no completion_ids")
    for name, values, bit in (("logprobs", logprobs, LOGPROBS_LENGTH), ("ref_logprobs", ref, REF_LENGTH)):
        entries = count(name, values)
        if entries is not None and tokens is not None and entries != tokens:
            problems |= bit
            warnings.append(f"{name} has {entries} entries for {tokens} completion tokens")
    reward, advantage = as_float(value.get("reward")), as_float(value.get("advantage"))
    if not finite(reward):
        problems |= BAD_REWARD
        warnings.append("no reward" if reward is None else f"reward is {number_text(reward)}")
    if "advantage" in value and not finite(advantage):
        problems |= BAD_ADVANTAGE
        warnings.append("no advantage" if advantage is None else f"advantage is {number_text(advantage)}")
    group = value.get("group_id")
    group_id = None if group is None or str(group) == "" else str(group)
    if group_id is None:
        problems |= NO_GROUP
        warnings.append("no group id")
    turns = _list(value.get("turns"))
    finish = value.get("finish_reason")
    return RolloutFacts(
        prompt="" if value.get("prompt") is None else str(value.get("prompt")),
        completion="" if value.get("completion") is None else str(value.get("completion")),
        prompt_ids=prompt_ids,
        completion_ids=completion_ids,
        logprobs=logprobs,
        ref_logprobs=ref,
        reward=reward,
        advantage=advantage,
        group_id=group_id,
        finish_reason=None if finish is None else str(finish),
        turns=[t for t in turns if isinstance(t, Mapping)] if turns else None,
        problems=problems,
        warnings=warnings,
        token_count=tokens,
    )


def advantage_warning(facts: RolloutFacts, *, group_mean: float | None, zero_variance: bool | None) -> str | None:
    """A sentence when the advantage disagrees with the reward's place in its group (wrong sign, or non-zero on a flat group).

    >>> f = rollout_facts({"reward": 1.0, "advantage": -0.7, "group_id": "g"})
    >>> advantage_warning(f, group_mean=0.5, zero_variance=False)
    'advantage -0.7 has the opposite sign of reward − group mean (+0.5)'
    """
    reward, advantage = facts.reward, facts.advantage
    if not (finite(reward) and finite(advantage) and group_mean is not None):
        return None
    assert reward is not None and advantage is not None
    if zero_variance:
        return f"advantage is {number_text(advantage)} though every reward in the group is equal" if abs(advantage) > 1e-6 else None
    delta = reward - group_mean
    if abs(delta) > 1e-9 and abs(advantage) > 1e-9 and (delta > 0) != (advantage > 0):
        return f"advantage {number_text(advantage)} has the opposite sign of reward − group mean ({delta:+.3g})"
    return None


def facts_of(records: Sequence[Mapping[str, Any]], column: str) -> list[RolloutFacts]:
    """``rollout_facts`` of ``column`` of each record; an unreadable value becomes an empty rollout with a warning."""
    out = []
    for record in records:
        try:
            out.append(rollout_facts(record.get(column)))
        except ValueError as exc:
            facts = rollout_facts({})
            facts.warnings.insert(0, str(exc))
            out.append(facts)
    return out
