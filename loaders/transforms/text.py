"""Text transforms: tokenize, chat template, and pre-tokenized ids with their loss mask."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import CorruptData, DecodeError
from .base import Context, Transform, require


@dataclass(frozen=True)
class Tokenize(Transform):
    """Tokenize ``field`` into ``input_ids`` (+ an all-ones ``loss_mask``), appending EOS when set.

    >>> Tokenize("text").to_json()["type"]
    'tokenize'
    """

    type = "tokenize"

    field: str = "text"
    tokenizer: str | None = None
    eos: str | None = "<|endoftext|>"

    def apply(self, inputs: dict[str, Any], ctx: Context) -> None:
        self.apply_many([(inputs, ctx)])

    def apply_many(self, items: list[tuple[dict[str, Any], Context]]) -> None:
        """Tokenize many documents with one ``encode_batch`` per tokenizer (the tokenizer's own threads)."""
        groups: dict[tuple[str | None, tuple[tuple[str, str], ...]], list[tuple[dict[str, Any], Context]]] = {}
        for inputs, ctx in items:  # one tokenizer lookup per distinct tokenizer, not per document
            name = self.tokenizer if self.tokenizer is not None else (ctx.version.tokenizer if ctx.version else None)
            groups.setdefault((name, tuple(sorted(ctx.tokenizers.items()))), []).append((inputs, ctx))
        for group in groups.values():
            tokenizer = group[0][1].tokenizer(self.tokenizer)
            texts = [str(require(inputs, self.field, self.type, ctx.where)) for inputs, ctx in group]
            eos_id = None
            if self.eos is not None:
                eos_id = tokenizer.token_to_id(self.eos)
                if eos_id is None:
                    raise CorruptData(f"{group[0][1].where}: tokenizer has no EOS token {self.eos!r}")
            # encode_batch_fast (tokenizers >= 0.21) gives the same ids without computing character offsets
            encode_batch = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
            encodings = encode_batch(texts, add_special_tokens=False)
            for (inputs, _), encoding in zip(group, encodings):
                ids = encoding.ids
                if eos_id is not None:
                    ids.append(eos_id)
                inputs["input_ids"] = ids
                inputs["loss_mask"] = [1] * len(ids)


@dataclass(frozen=True)
class ChatTemplate(Transform):
    """Render a chat (list of role/content) with the ChatML template; loss mask on assistant turns."""

    type = "chat_template"

    field: str = "messages"
    tokenizer: str | None = None

    def apply(self, inputs: dict[str, Any], ctx: Context) -> None:
        from .chat import render_chat

        messages = require(inputs, self.field, self.type, ctx.where)
        try:
            ids, mask, spans = render_chat(messages, ctx.tokenizer(self.tokenizer))
        except DecodeError as exc:
            raise DecodeError(f"{ctx.where}: {exc}") from exc
        inputs["input_ids"] = list(ids)
        inputs["loss_mask"] = list(mask)
        inputs["role_spans"] = [list(s) for s in spans]


@dataclass(frozen=True)
class UseTokens(Transform):
    """Take stored token ids (and optionally a stored loss mask) as the model input, unchanged."""

    type = "use_tokens"

    ids: str = "input_ids"
    mask: str | None = "loss_mask"

    def apply(self, inputs: dict[str, Any], ctx: Context) -> None:
        ids = [int(t) for t in require(inputs, self.ids, self.type, ctx.where)]
        if self.mask is not None:
            mask = [int(m) for m in require(inputs, self.mask, self.type, ctx.where)]
            if len(mask) != len(ids):
                raise CorruptData(f"{ctx.where}: {self.mask} has {len(mask)} entries but {self.ids} has {len(ids)}")
        else:
            mask = [1] * len(ids)
        inputs["input_ids"] = ids
        inputs["loss_mask"] = mask
