"""LLM RL rollouts: checked facts of one rollout, its token view with logprob heat layers, and the ``rollout`` field renderer.

A rollout value is a mapping with (any of) ``prompt``, ``completion``,
``prompt_ids``, ``completion_ids``, ``logprobs``, ``ref_logprobs``, ``reward``,
``advantage``, ``group_id``, ``finish_reason`` and ``turns`` (a list of
``{role, content}`` messages for multi-turn rollouts with tool calls).
``rollout_facts`` reads one and says what is inconsistent in it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

from .. import urls
from .chat import ChatView, chat_view
from .registry import CellView, FieldContext, View
from .text import TextView, text_view
from .tokens import TokenView, token_view

if TYPE_CHECKING:
    from tokenizers import Tokenizer

#: Problem bits of one rollout (the rollout index stores them per row).
LOGPROBS_LENGTH = 1
REF_LENGTH = 2
BAD_REWARD = 4
BAD_ADVANTAGE = 8
NO_GROUP = 16
NO_COMPLETION_IDS = 32
#: Finish reason of a completion cut by the sampler's length limit.
TRUNCATED = "length"
ALT_LEVELS = 8


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


# -- token layers ------------------------------------------------------------------
@dataclass
class RolloutTokensView(View):
    """A completion's tokens with the logprob heat layer, and ``logprobs − ref_logprobs`` as a second layer."""

    partial: ClassVar[str] = "_partials/_rollout_tokens.html"
    toggles: ClassVar[tuple[str, ...]] = ("ids",)
    completion: TokenView | None = None
    prompt: TokenView | None = None
    alt_name: str | None = None
    alt_max: str = ""
    alt_levels: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _diffs(logprobs: Sequence[Any], ref: Sequence[Any], count: int) -> list[float | None]:
    out: list[float | None] = []
    for i in range(count):
        a = as_float(logprobs[i]) if i < len(logprobs) else None
        b = as_float(ref[i]) if i < len(ref) else None
        out.append(a - b if finite(a) and finite(b) else None)  # type: ignore[operator]
    return out


def rollout_tokens(facts: RolloutFacts, *, tokenizer: "Tokenizer | None") -> RolloutTokensView:
    """The token layers of one rollout (prompt tokens plain, completion tokens with heat)."""
    view = RolloutTokensView()
    if facts.prompt_ids is not None:
        view.prompt = token_view(facts.prompt_ids, tokenizer=tokenizer)
    if facts.completion_ids is None:
        view.warnings.append("no completion_ids: no token view")
        return view
    ids = facts.completion_ids
    completion = token_view(ids, tokenizer=tokenizer, values=facts.logprobs, value_name="logprob" if facts.logprobs is not None else None)
    if facts.logprobs is not None and facts.ref_logprobs is not None:
        diffs = _diffs(facts.logprobs, facts.ref_logprobs, len(ids))
        if len(facts.ref_logprobs) != len(ids):
            completion.warnings.append(f"ref_logprobs have {len(facts.ref_logprobs)} entries for {len(ids)} tokens")
        largest = max((abs(d) for d in diffs if d is not None), default=0.0)
        for token, diff in zip(completion.tokens, diffs):
            if diff is None:
                token.title += " · logprob − ref n/a"
                continue
            level = 0 if largest == 0 else min(ALT_LEVELS - 1, int(abs(diff) / largest * ALT_LEVELS))
            token.classes += f" alt{level}"
            token.title += f" · logprob − ref {diff:+.4g}"
        view.alt_name = "|logprob − ref_logprob|"
        view.alt_max = f"{largest:.3g}"
        view.alt_levels = [f"alt{i}" for i in range(ALT_LEVELS)]
    view.completion = completion
    return view


# -- the field renderer ------------------------------------------------------------------
@dataclass
class RolloutView(View):
    """One rollout in full: facts, warnings, prompt, completion (or chat turns) and the token layers."""

    partial: ClassVar[str] = "_partials/_rollout.html"
    toggles: ClassVar[tuple[str, ...]] = ("ws", "ids")
    facts: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    where: str = ""
    prompt: TextView | None = None
    completion: TextView | None = None
    turns: ChatView | None = None
    tokens: RolloutTokensView | None = None
    deferred_url: str | None = None
    token_count: int = 0
    classes: str = ""
    links: list[tuple[str, str]] = field(default_factory=list)


def card_classes(facts: RolloutFacts) -> str:
    """CSS classes of a rollout: ``truncated``, ``inconsistent``."""
    classes = ["truncated"] if facts.finish_reason == TRUNCATED else []
    if facts.warnings:
        classes.append("inconsistent")
    return " ".join(classes)


def fact_pairs(facts: RolloutFacts) -> list[tuple[str, str]]:
    """``(name, text)`` of reward, advantage, length, finish reason and group."""
    return [
        ("reward", number_text(facts.reward)),
        ("advantage", number_text(facts.advantage)),
        ("length", "—" if facts.length is None else f"{facts.length:,} tokens"),
        ("finish", facts.finish_reason or "—"),
        ("group", facts.group_id or "—"),
    ]


def turns_view(facts: RolloutFacts, ctx: FieldContext) -> ChatView | None:
    """Multi-turn rollouts (with tool calls) as chat turns."""
    if not facts.turns:
        return None
    plain = FieldContext(column=ctx.column, kind="chat", record={}, kinds={}, collapse_chars=ctx.collapse_chars, full=ctx.full)
    return chat_view(facts.turns, plain)


def rollout_field(value: Any, ctx: FieldContext) -> View:
    facts = rollout_facts(value)
    count = facts.length or 0
    plain = FieldContext(column=ctx.column, kind="text", record={}, kinds={}, full=ctx.full, collapse_chars=ctx.collapse_chars)
    view = RolloutView(
        facts=fact_pairs(facts),
        warnings=list(facts.warnings),
        where=ctx.where,
        prompt=text_view(facts.prompt, plain),
        completion=text_view(facts.completion, plain),
        turns=turns_view(facts, ctx),
        token_count=count,
        classes=card_classes(facts),
    )
    parts = urls.sample_parts(ctx.fragment_url) if ctx.fragment_url else None
    if parts is not None:
        name, version, _ = parts
        first = next((c for c, k in ctx.kinds.items() if k == "rollout"), None)
        column = None if ctx.column == first else ctx.column
        if facts.group_id is not None:
            view.links.append((f"group {facts.group_id}", urls.rollout_groups(name, version, column=column, group=facts.group_id)))
        view.links.append(("all groups", urls.rollout_groups(name, version, column=column)))
    if not ctx.full and count > ctx.token_threshold and ctx.fragment_url:
        view.deferred_url = ctx.fragment_url
    else:
        view.tokens = rollout_tokens(facts, tokenizer=ctx.tokenizer)
    return view


def rollout_cell(value: Any, ctx: FieldContext) -> View:
    facts = rollout_facts(value)
    parts = [f"reward {number_text(facts.reward)}", f"adv {number_text(facts.advantage)}"]
    if facts.length is not None:
        parts.append(f"{facts.length:,} tok")
    parts.append(facts.finish_reason or "no finish reason")
    if facts.group_id:
        parts.append(facts.group_id)
    text = ("⚠ " if facts.warnings else "") + " · ".join(parts)
    title = "; ".join(facts.warnings) or facts.prompt[:300]
    return CellView(text=text, title=title)
