"""The demo's byte-level BPE tokenizer (``demo-bpe``), trained deterministically on the web-text prose."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from loaders import Catalog
from loaders.transforms.chat import CHAT_TEMPLATE, SPECIAL_TOKENS, RenderedChat, chat_text, render_chat

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "CHAT_TEMPLATE",
    "NAME",
    "SPECIAL_TOKENS",
    "VOCAB_SIZE",
    "RenderedChat",
    "chat_text",
    "ensure_tokenizer",
    "render_chat",
    "train_tokenizer",
]

#: Catalog name of the demo tokenizer.
NAME = "demo-bpe"
#: Vocabulary size, special tokens included.
VOCAB_SIZE = 4000


def train_tokenizer(texts: Iterable[str], *, vocab_size: int = VOCAB_SIZE) -> "Tokenizer":
    """Train a byte-level BPE on ``texts`` with the chat special tokens first in the vocabulary.

    The trainer breaks ties between equally frequent pairs deterministically,
    so the same texts in the same order give the same JSON (tests check it).

    >>> tokenizer = train_tokenizer(["Return the value.", "Return a list."] * 5, vocab_size=300)
    >>> tokenizer.token_to_id("<|im_start|>")
    1
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(texts), trainer=trainer)
    return tokenizer


def ensure_tokenizer(catalog: Catalog) -> "Tokenizer":
    """The catalog's ``demo-bpe``; trained on the standard-library prose and stored when missing."""
    if NAME not in catalog.tokenizers():
        from .stdlib_docs import stdlib_docs

        tokenizer = train_tokenizer(doc.text for doc in stdlib_docs())
        catalog.put_tokenizer(NAME, tokenizer.to_str())
    return catalog.tokenizer(NAME)
