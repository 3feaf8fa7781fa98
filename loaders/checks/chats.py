"""Checks of ChatML chats as the model got them: turns that lack their end-of-turn token, and loss masks that train
another role's turn or miss the assistant's.

A packed sequence may hold only a piece of a chat: the turn it starts inside is not judged (its header is in an earlier
sequence), and the turn it ends inside is judged only on the tokens present (a missing ``<|im_end|>`` there is the
next sequence's to judge).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import numpy as np

from ..transforms.chat import IM_END
from .chatml import expected_mask, mask_errors, mask_shift, missing_end
from .reads import DocRead

if TYPE_CHECKING:
    from .context import Context as ReadContext
    from .reads import Place, SampleRead

Hit = tuple[str, "Place", "str | None", str]


def _turns(doc: DocRead, ctx: "ReadContext") -> Iterator[tuple[int, int, str | None, int, bool]]:
    """``(start, end, role, header length, cut)`` of every turn of the piece that starts in it."""
    chat = ctx.facts(doc.document.source).chat
    if chat is None or doc.ids is None:
        return
    starts = np.flatnonzero(doc.ids == chat.start).tolist()
    ends = starts[1:] + [len(doc.ids)]
    for start, end in zip(starts, ends):
        role, header = chat.role_at(doc.ids, start)
        yield start, end, role, header, end == len(doc.ids) and not doc.ends


def _where(doc: DocRead, start: int, role: str | None) -> str:
    return f"the {role or 'unknown-role'} turn at token {doc.offset + start}"


def chat_turns(samples: list["SampleRead"], ctx: "ReadContext") -> Iterator[Hit]:
    """``end-of-turn``: more than ``max_unclosed`` turns with no ``<|im_end|>`` before the next turn or the chat's end. ``chat-mask``: a non-assistant
    turn with trained tokens, an assistant turn with untrained content or ``<|im_end|>``, a trained header, or trained
    tokens after ``<|im_end|>`` (more than ``max_wrong`` tokens in all; the detail says when the mask is the template's
    shifted by one token)."""
    max_wrong = ctx.param("chat-mask", "max_wrong")
    max_unclosed = ctx.param("end-of-turn", "max_unclosed")
    for doc in (d for sample in samples for d in sample.docs):
        turns = list(_turns(doc, ctx))
        if not turns:
            continue
        chat = ctx.facts(doc.document.source).chat
        assert chat is not None and doc.ids is not None
        ids = doc.ids.tolist()
        mask = doc.mask.tolist() if doc.mask is not None else None
        unclosed, wrong, count = [], [], 0
        for start, end, role, header, cut in turns:
            close = missing_end(ids, start, end, end_id=chat.end)
            if close is None and not cut:
                unclosed.append(_where(doc, start, role))
            if mask is not None and role is not None:
                errors = mask_errors(role, start, end, mask, header=header, close=close)
                if errors:
                    wrong.append(f"{_where(doc, start, role)}: {', '.join(text for _, text in errors)}")
                    count += sum(tokens for tokens, _ in errors)
        if len(unclosed) > max_unclosed:
            yield "end-of-turn", doc, doc.key, f"no {IM_END} closes {'; '.join(unclosed)}"
        if wrong and count > max_wrong:
            yield "chat-mask", doc, doc.key, _shifted(doc, turns, ids, mask, chat.end) + "; ".join(wrong)


def _shifted(doc: DocRead, turns: list[tuple[int, int, str | None, int, bool]], ids: list[int], mask: list[int] | None, end_id: int) -> str:
    """``"loss mask shifted by +1 token: "`` when the piece's mask is the template's moved by one token, else ``""``."""
    if mask is None or any(role is None for _, _, role, _, _ in turns):
        return ""
    first = turns[0][0]
    segments = [(start - first, end - first) for start, end, _, _, _ in turns]
    expected = expected_mask(ids[first:], segments, [(role or "", header) for _, _, role, header, _ in turns], end_id)
    delta = mask_shift(expected, mask[first:])
    return f"loss mask shifted by {delta:+d} token against the template: " if delta is not None else ""
