"""The ChatML chat template: turns of role/content → token ids, a loss mask and role spans.

Each turn is rendered as ``<|im_start|>{role}\\n{content}<|im_end|>\\n``. The
loss mask is 1 on the content tokens of trained roles (``assistant``) and on
the ``<|im_end|>`` that closes them, 0 everywhere else (the ``<|im_start|>``
header, the trailing newline, and every other role's turn).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, NamedTuple, Sequence

from ..errors import DecodeError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
PAD = "<|pad|>"
#: The special tokens a chat tokenizer must know, in vocabulary order.
SPECIAL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END, PAD)
#: How one turn is written; ``chat_text`` joins the turns of a chat.
CHAT_TEMPLATE = IM_START + "{role}\n{content}" + IM_END + "\n"
#: Roles whose content (and closing ``<|im_end|>``) the loss mask trains.
TRAINED_ROLES: frozenset[str] = frozenset({"assistant"})


class RenderedChat(NamedTuple):
    """A rendered chat; unpacks as ``input_ids, loss_mask, role_spans``.

    ``role_spans`` holds ``(role, start, end)`` per turn: token positions
    ``[start, end)`` covering the whole turn from ``<|im_start|>`` to the
    trailing newline, so the spans tile ``input_ids`` exactly.
    """

    input_ids: list[int]
    loss_mask: list[int]
    role_spans: list[tuple[str, int, int]]


def _turns(messages: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    turns = []
    for number, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise DecodeError(f"chat message {number} is a {type(message).__name__}, not a {{role, content}} mapping")
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str) or not role:
            raise DecodeError(f"chat message {number} has no role (got {role!r})")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise DecodeError(f"chat message {number} ({role}) has content of type {type(content).__name__}, not text")
        turns.append((role, content))
    return turns


def chat_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """The ChatML text of a chat (what ``render_chat``'s ids decode to).

    >>> chat_text([{"role": "user", "content": "Hi"}])
    '<|im_start|>user\\nHi<|im_end|>\\n'
    """
    return "".join(CHAT_TEMPLATE.format(role=role, content=content) for role, content in _turns(messages))


def special_ids(tokenizer: "Tokenizer") -> dict[str, int]:
    """The ids of ``SPECIAL_TOKENS`` in ``tokenizer``; a clear error names any it lacks."""
    ids = {token: tokenizer.token_to_id(token) for token in SPECIAL_TOKENS}
    missing = [token for token, value in ids.items() if value is None]
    if missing:
        raise DecodeError(f"tokenizer has no chat special token(s) {', '.join(missing)}; the ChatML template needs them")
    return {token: int(value) for token, value in ids.items() if value is not None}


def header_length(role: str, tokenizer: "Tokenizer") -> int:
    """Tokens before a turn's content: ``<|im_start|>`` plus the tokens of ``"{role}\\n"``."""
    return 1 + len(tokenizer.encode(f"{role}\n", add_special_tokens=False).ids)


def render_chat(
    messages: Sequence[Mapping[str, Any]],
    tokenizer: "Tokenizer",
    *,
    trained_roles: Iterable[str] = TRAINED_ROLES,
) -> RenderedChat:
    """Render ``messages`` with the ChatML template into ids, a loss mask and role spans.

    Each role header and each content is tokenized on its own (special-token
    strings inside content are not escaped, as in most chat templates).

    >>> ids, mask, spans = render_chat(                    # doctest: +SKIP
    ...     [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}], tokenizer)
    >>> [role for role, _, _ in spans]                      # doctest: +SKIP
    ['user', 'assistant']
    """
    turns = _turns(messages)
    trained = frozenset(trained_roles)
    specials = special_ids(tokenizer)
    pieces = [text for role, content in turns for text in (f"{role}\n", content)]
    try:
        encoded = tokenizer.encode_batch(pieces, add_special_tokens=False) if pieces else []
    except (TypeError, ValueError) as exc:  # e.g. lone surrogates, which are not valid Unicode text
        raise DecodeError(f"chat content cannot be tokenized: {exc}") from exc
    newline = tokenizer.encode("\n", add_special_tokens=False).ids
    input_ids: list[int] = []
    loss_mask: list[int] = []
    spans: list[tuple[str, int, int]] = []
    for number, (role, _) in enumerate(turns):
        header, content = encoded[2 * number].ids, encoded[2 * number + 1].ids
        train = 1 if role in trained else 0
        start = len(input_ids)
        input_ids += [specials[IM_START], *header]
        loss_mask += [0] * (1 + len(header))
        input_ids += [*content, specials[IM_END]]
        loss_mask += [train] * (len(content) + 1)
        input_ids += newline
        loss_mask += [0] * len(newline)
        spans.append((role, start, len(input_ids)))
    return RenderedChat(input_ids, loss_mask, spans)
