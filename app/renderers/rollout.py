"""LLM RL rollouts: one rollout's token view with logprob heat layers, and the ``rollout`` field renderer.

The facts of a rollout (its values and what is inconsistent in it) come from
``loaders.rl.facts``; this module lays them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from loaders.rl.facts import TRUNCATED, RolloutFacts, as_float, finite, number_text, rollout_facts

from .. import urls
from .chat import ChatView, chat_view
from .text import TextView, text_view
from .tokens import TokenView, token_view
from .views import CellView, FieldContext, View

if TYPE_CHECKING:
    from tokenizers import Tokenizer

ALT_LEVELS = 8


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
