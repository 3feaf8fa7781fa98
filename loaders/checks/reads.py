"""What the checks look at: every document a sample read, with the tokens and loss mask the model got for it.

A packed sequence holds pieces of several documents (``doc_spans``: where each piece sits in the sequence, where it
starts in its document and how long the document is); an unpacked sample holds one document. Either way a
:class:`DocRead` is one document's piece in one sample, and :class:`SourceFacts` says how to read a source's records
(its field kinds, content columns, tokenizer and ChatML tokens), found once per source.

>>> sample = SampleRead.build(0, {"input_ids": [5, 6, 7, 0], "loss_mask": [1, 1, 1, 0], "padding": 1}, [])
>>> sample.content, int(sample.trained)
(3, 3)
"""

from __future__ import annotations

import functools
import hashlib
import marshal
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ..catalog.kinds import MEDIA_KINDS, kinds_where
from ..catalog.records import digest
from .chatml import ChatTokens

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from ..sampling.batch import Document, Sample

#: Field kinds whose values are what a document says (its content): duplicates are found by these.
CONTENT_KINDS = kinds_where(content=True)
_TEXT = "text"
_CHAT = "chat"


@dataclass(frozen=True)
class SourceFacts:  # cached properties need a __dict__: no slots
    """How the checks read one run source's records."""

    name: str
    dataset: str
    version: str
    kinds: Mapping[str, str]
    key_column: str | None
    tokenizer: "Tokenizer | None" = None
    chat: ChatTokens | None = None
    unknown_id: int | None = None
    shard_uris: tuple[str, ...] = ()
    where_version: Any = None  # the DatasetVersion, for errors that name a row and for media stored by path

    @functools.cached_property
    def media(self) -> bool:
        """Whether the source has media columns (its text is then a caption: no measure of the document's length)."""
        return any(kind in MEDIA_KINDS for kind in self.kinds.values())

    @functools.cached_property
    def text_only(self) -> bool:
        """Whether the source's content is text (text or chat columns and no media): its length is its characters."""
        return not self.media and bool(self.columns_of("text") or self.columns_of("chat"))

    @functools.cached_property
    def content_columns(self) -> list[str]:
        """Columns whose values are the document's content (none: every non-key column is)."""
        return [c for c, k in self.kinds.items() if k in CONTENT_KINDS and c != self.key_column]

    def columns_of(self, kind: str) -> list[str]:
        """Columns of ``kind`` (the key column left out: a key is a name, not content)."""
        return self._columns.get(kind, [])

    @functools.cached_property
    def _columns(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for column, kind in self.kinds.items():
            if column != self.key_column:
                found.setdefault(kind, []).append(column)
        return found

    @classmethod
    def of(cls, version: Any, tokenizer: "Tokenizer | None", name: str) -> "SourceFacts":
        """The facts of a source read from ``version`` (a :class:`~loaders.DatasetVersion`) with ``tokenizer``."""
        unknown = None
        chat = None
        if tokenizer is not None:
            unk = getattr(tokenizer.model, "unk_token", None)
            unknown = tokenizer.token_to_id(unk) if isinstance(unk, str) else None
            chat = ChatTokens.of(tokenizer)
        return cls(
            name=name,
            dataset=version.name,
            version=version.id,
            kinds=dict(version.kinds),
            key_column=version.key,
            tokenizer=tokenizer,
            chat=chat,
            unknown_id=unknown,
            shard_uris=tuple(s.uri for s in version.shards),
            where_version=version,
        )


def content_hash(record: Mapping[str, Any], facts: SourceFacts) -> int:
    """A 63-bit hash of a record's content columns (every column but the key when it has none): equal for the same values
    in the same structure (strings, numbers, lists, structs and bytes as read; anything else by its digest).

    The values are serialized with :mod:`marshal` format 2, which (unlike later formats) does not depend on how objects
    are shared in memory, so equal values always give equal bytes.

    >>> facts = SourceFacts("s", "d", "v", {"id": "text", "text": "text"}, "id")
    >>> content_hash({"id": "a", "text": "hi"}, facts) == content_hash({"id": "b", "text": "hi"}, facts)
    True
    """
    columns = facts.content_columns or sorted(c for c in record if c != facts.key_column)
    values = tuple(record.get(c) for c in columns)
    try:
        data = marshal.dumps(values, 2)
    except ValueError:  # numpy arrays, dates, decimals...: by their digest
        data = b"d" + digest(values).encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") >> 1


def record_text(record: Mapping[str, Any], facts: SourceFacts) -> str:
    """The text of a record: its text columns and the contents of its chat turns, joined by newlines."""
    parts = [record[c] for c in facts.columns_of(_TEXT) if isinstance(record.get(c), str)]
    for column in facts.columns_of(_CHAT):
        turns = record.get(column)
        if isinstance(turns, (list, tuple)):
            parts += [t.get("content") for t in turns if isinstance(t, Mapping) and isinstance(t.get("content"), str)]
    return "\n".join(parts)


def _mask(inputs: Mapping[str, Any], size: int) -> np.ndarray | None:
    mask = inputs.get("loss_mask")
    if mask is not None:
        array = np.asarray(mask)
        return array.astype(bool) if len(array) == size else None
    labels = inputs.get("labels")
    if labels is not None:
        array = np.asarray(labels)
        return (array != -100) if len(array) == size else None
    return None


@dataclass(slots=True)
class DocRead:
    """One document's piece in one sample: its tokens and mask there (``None`` when the sample holds no token ids)."""

    position: int
    document: "Document"
    ids: np.ndarray | None
    mask: np.ndarray | None
    #: Where the piece starts in its document (0 for an unpacked sample).
    offset: int = 0
    #: The piece starts at the document's first token / reaches its last one (both for an unpacked sample).
    starts: bool = True
    ends: bool = True
    #: Tokens of the whole document (the span's ``length``), or of the piece when it is the whole document.
    length: int | None = None
    #: Identifies one read of the document: the pieces of a document packed across sequences share it.
    read_id: tuple[Any, ...] = ()
    #: The step and rank whose batch held the sample.
    step: int = 0
    rank: int = 0
    _text: str | None = field(default=None, repr=False)

    def text(self, facts: SourceFacts) -> str:
        """:func:`record_text` of the document's record (found once)."""
        if self._text is None:
            self._text = record_text(self.document.record, facts)
        return self._text

    @property
    def key(self) -> str:
        return self.document.key

    @property
    def whole(self) -> bool:
        return self.starts and self.ends


@dataclass(slots=True)
class SampleRead:
    """A sample's model tokens (padding excluded from ``content``) and the documents it read."""

    position: int
    ids: np.ndarray | None
    mask: np.ndarray | None
    padding: int
    docs: list[DocRead] = field(default_factory=list)
    #: The sample's model inputs (what transforms made: crops, sampled frames...).
    inputs: Mapping[str, Any] = field(default_factory=dict)
    #: The step and rank whose batch held the sample.
    step: int = 0
    rank: int = 0

    @property
    def tokens(self) -> int:
        return 0 if self.ids is None else len(self.ids)

    @property
    def content(self) -> int:
        return self.tokens - self.padding

    @property
    def trained(self) -> int:
        """Trained tokens that are not padding (every token when the sample has no mask)."""
        if self.ids is None:
            return 0
        if self.mask is None:
            return self.content
        return int(self.mask[: self.content].sum())

    @classmethod
    def build(
        cls,
        position: int,
        inputs: Mapping[str, Any],
        documents: Sequence["Document"],
        *,
        stream: int = 0,
        index: int = 0,
        step: int = 0,
        rank: int = 0,
    ) -> "SampleRead":
        """The reads of one sample from its model ``inputs`` and ``documents`` (in span order when packed)."""
        raw = inputs.get("input_ids")
        if raw is None and "doc_spans" not in inputs:  # a record read as it is stored (rollouts, media): no tokens to cut
            sample = cls(position, None, None, 0, inputs=inputs, step=step, rank=rank)
            if documents:
                sample.docs.append(DocRead(position, documents[0], None, None, read_id=("sample", index), step=step, rank=rank))
            return sample
        ids = None if raw is None else np.asarray(raw, dtype=np.int64)
        mask = None if ids is None else _mask(inputs, len(ids))
        padding = inputs.get("padding")
        padding = min(max(0, padding), 0 if ids is None else len(ids)) if isinstance(padding, int) and not isinstance(padding, bool) else 0
        sample = cls(position, ids, mask, padding, inputs=inputs, step=step, rank=rank)
        spans = inputs.get("doc_spans")
        if isinstance(spans, list):
            for document, span in zip(documents, spans):
                start, end = int(span["start"]), int(span["end"])
                offset, length = int(span.get("offset", 0)), int(span.get("length", end - start))
                sample.docs.append(
                    DocRead(
                        position,
                        document,
                        None if ids is None else ids[start:end],
                        None if mask is None else mask[start:end],
                        offset=offset,
                        starts=offset == 0,
                        ends=offset + end - start >= length,
                        length=length,
                        read_id=("packed", stream, document.source, document.draw, document.epoch),
                        step=step,
                        rank=rank,
                    )
                )
        elif documents:
            content = None if ids is None else ids[: len(ids) - padding]
            sample.docs.append(
                DocRead(
                    position,
                    documents[0],
                    content,
                    None if mask is None or content is None else mask[: len(content)],
                    length=None if content is None else len(content),
                    read_id=("sample", index),
                    step=step,
                    rank=rank,
                )
            )
        return sample


def sample_read(position: int, sample: "Sample", *, step: int = 0, rank: int = 0) -> SampleRead:
    """:meth:`SampleRead.build` of a batch's ``sample`` at ``position`` (the batch of ``rank`` at ``step``)."""
    return SampleRead.build(position, sample.inputs, sample.documents, stream=sample.stream, index=sample.index, step=step, rank=rank)


#: What a finding of a read check is about: a sample, or one document's piece in it.
Place = SampleRead | DocRead
