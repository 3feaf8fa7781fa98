"""Chats: turns by role, and when the record carries token ids and a loss mask, each turn's tokens and a consistency check.

The check follows the read path's ChatML template (``loaders.transforms.chat``): a turn
is ``<|im_start|>{role}\\n{content}<|im_end|>\\n``; for trained roles the
content and the closing ``<|im_end|>`` are trained, everything else is masked.
A turn without its ``<|im_end|>``, a mask shifted against the assistant spans,
or trained tokens in a user turn get a warning badge on the turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

from loaders.checks.chatml import expected_mask, mask_shift, turn_problems
from loaders.transforms.chat import IM_END, IM_START, header_length

from .text import TextView, text_view
from .tokens import TokenView, _int_list, companions, token_view
from .views import CellView, FieldContext, View


@dataclass
class Turn:
    """One message of a chat, with the tokens that encode it when the record has them."""

    number: int
    role: str
    text: TextView
    tokens: TokenView | None = None
    trained: int | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class ChatView(View):
    partial: ClassVar[str] = "_partials/_chat.html"
    toggles: ClassVar[tuple[str, ...]] = ("ws", "ids")
    turns: list[Turn] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    token_column: str | None = None
    note: str = ""

    @property
    def ok(self) -> bool:
        return not self.warnings and not any(t.warnings for t in self.turns)


def _token_column(ctx: FieldContext) -> str | None:
    columns = [c for c, k in ctx.kinds.items() if k == "tokens" and _int_list(ctx.record.get(c)) is not None]
    columns.sort(key=lambda c: (0 if c == "input_ids" else 1, c))
    return columns[0] if columns else None


def chat_view(messages: Sequence[Mapping[str, Any]], ctx: FieldContext) -> ChatView:
    """Turns with their text; token views and checks when ids, a mask and a ChatML tokenizer are present."""
    turns: list[Turn] = []
    for number, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValueError(f"chat message {number} is a {type(message).__name__}, not a {{role, content}} mapping")
        content = message.get("content")
        text = text_view(content if isinstance(content, str) else "" if content is None else str(content), ctx)
        turns.append(Turn(number, str(message.get("role") or "?"), text))
    view = ChatView(turns=turns)
    column = _token_column(ctx)
    if column is None:
        return view
    view.token_column = column
    tokenizer = ctx.tokenizer
    start_id = tokenizer.token_to_id(IM_START) if tokenizer is not None else None
    end_id = tokenizer.token_to_id(IM_END) if tokenizer is not None else None
    if tokenizer is None or start_id is None or end_id is None:
        view.note = f"the token view per turn needs a tokenizer with {IM_START} and {IM_END}; see the {column} field"
        return view
    ids = _int_list(ctx.record[column]) or []
    extra = companions(ctx, len(ids))
    mask_value = extra.get("mask")
    if mask_value is None and extra.get("labels") is not None:
        mask_value = [int(x) != -100 for x in extra["labels"]]
    mask = [1 if m else 0 for m in mask_value] if mask_value is not None else None
    if mask is not None and len(mask) != len(ids):
        view.warnings.append(f"loss mask has {len(mask)} entries for {len(ids)} tokens")
        mask = (mask + [0] * len(ids))[: len(ids)]
    starts = [i for i, t in enumerate(ids) if t == start_id]
    segments = [(s, e) for s, e in zip(starts, starts[1:] + [len(ids)])]
    if len(segments) != len(turns):
        view.warnings.append(f"{column} holds {len(segments)} turn(s) ({IM_START} tokens) but the chat has {len(turns)}")
    if mask is not None and segments:
        headers = [(t.role, header_length(t.role, tokenizer)) for t in turns[: len(segments)]]
        expected = expected_mask(ids, segments, headers, end_id)
        delta = mask_shift(expected, mask) if expected != mask else None
        if delta is not None:
            view.warnings.append(f"loss mask is shifted by {delta:+d} token against the assistant spans")
    for turn, (start, end) in zip(turns, segments):
        turn.tokens = token_view(
            ids[start:end],
            tokenizer=tokenizer,
            mask=mask[start:end] if mask is not None else None,
            offset=start,
        )
        turn.trained = turn.tokens.trained
        turn.warnings = turn_problems(turn.role, ids, start, end, mask, header=header_length(turn.role, tokenizer), end_id=end_id)
    return view


def chat_field(value: Any, ctx: FieldContext) -> View:
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"expected a list of messages, got {type(value).__name__}")
    return chat_view(value, ctx)


def chat_cell(value: Any, ctx: FieldContext) -> View:
    messages = value if isinstance(value, list) else []
    roles = [str(m.get("role")) for m in messages if isinstance(m, Mapping)]
    first = next((m.get("content") for m in messages if isinstance(m, Mapping) and m.get("role") == "user"), "") or ""
    text = f"{len(messages)} turns ({', '.join(roles[:4])}{', …' if len(roles) > 4 else ''})"
    return CellView(text=text, title=str(first)[:300])
