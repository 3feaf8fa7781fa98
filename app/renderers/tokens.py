"""Token views: boundaries, pieces and ids, special tokens, the loss-mask overlay, packed documents, a heat layer."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

from ..reveal import visible_piece
from .views import CellView, FieldContext, View

if TYPE_CHECKING:
    from tokenizers import Tokenizer

HEAT_LEVELS = 8
#: At most this many tokens are laid out (a million-token value would make a page of over 100 MB); the JSON twin has all.
MAX_SHOWN_TOKENS = 16_384
#: Columns that describe a token column rather than being one.
POSITION_COLUMNS = ("position_ids", "positions", "pos_ids")
DOC_SPAN_COLUMNS = ("doc_spans", "document_spans", "documents")
SEGMENT_COLUMNS = ("doc_ids", "document_ids", "segment_ids", "sequence_ids")


@dataclass
class Token:
    """One token as shown: its piece, id, the classes that style it and the hover text."""

    index: int
    id: int
    piece: str
    classes: str
    title: str


@dataclass
class TokenView(View):
    """A token sequence laid out with its overlays. ``deferred`` views load from ``fragment_url`` when revealed."""

    partial: ClassVar[str] = "_partials/_tokens.html"
    toggles: ClassVar[tuple[str, ...]] = ("ids",)
    tokens: list[Token] = field(default_factory=list)
    count: int = 0
    trained: int | None = None
    masked: int | None = None
    documents: int = 1
    #: Trailing padding tokens: drawn as one run (no pieces, no boundaries, no documents).
    padding: int = 0
    padding_ids: str = ""
    has_mask: bool = False
    value_name: str | None = None
    value_min: float | None = None
    value_max: float | None = None
    #: ``value_min`` and ``value_max`` as the legend writes them.
    value_range: tuple[str, str] = ("", "")
    heat_levels: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    tokenizer: bool = False
    deferred: bool = False
    fragment_url: str | None = None


class PieceCache:
    """Decoded pieces and special-token ids of one tokenizer (decoding id by id is the slow part)."""

    _by_tokenizer: dict[int, "PieceCache"] = {}

    def __init__(self, tokenizer: "Tokenizer") -> None:
        self.tokenizer = tokenizer
        self.pieces: dict[int, str] = {}
        self._shown: dict[int, tuple[str, str]] = {}
        self.special = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}

    @classmethod
    def of(cls, tokenizer: "Tokenizer") -> "PieceCache":
        key = id(tokenizer)
        if key not in cls._by_tokenizer:
            cls._by_tokenizer[key] = cls(tokenizer)
        return cls._by_tokenizer[key]

    def piece(self, token_id: int) -> str:
        if token_id not in self.pieces:
            if token_id in self.special:
                text = self.tokenizer.id_to_token(token_id) or ""
            else:
                text = self.tokenizer.decode([token_id], skip_special_tokens=False)
            self.pieces[token_id] = text if text != "" else (self.tokenizer.id_to_token(token_id) or f"<{token_id}>")
        return self.pieces[token_id]

    def shown(self, token_id: int) -> tuple[str, str]:
        """The piece as displayed (``visible_piece``) and as quoted in the hover text (``repr``), made once per id."""
        found = self._shown.get(token_id)
        if found is None:
            piece = self.piece(token_id)
            found = self._shown[token_id] = (visible_piece(piece), repr(piece))
        return found


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) or math.isinf(number) else number


def _doc_starts(count: int, position_ids: Sequence[int] | None, doc_spans: Sequence[Any] | None) -> tuple[set[int], set[int]]:
    """Token indices where a packed document starts, and where position ids reset to 0."""
    starts: set[int] = set()
    resets: set[int] = set()
    if position_ids is not None:
        resets = {i for i in range(1, min(count, len(position_ids))) if position_ids[i] == 0}
        starts |= resets
    for span in doc_spans or ():
        start = span.get("start") if isinstance(span, Mapping) else span[0]
        if start is not None and 0 < int(start) < count:
            starts.add(int(start))
    return starts, resets


def token_view(
    ids: Sequence[int],
    *,
    tokenizer: "Tokenizer | None" = None,
    mask: Sequence[Any] | None = None,
    labels: Sequence[int] | None = None,
    position_ids: Sequence[int] | None = None,
    doc_spans: Sequence[Any] | None = None,
    values: Sequence[Any] | None = None,
    value_name: str | None = None,
    offset: int = 0,
    padding: int = 0,
) -> TokenView:
    """Lay out a token sequence with every overlay the record provides.

    ``mask`` (1 = trained) wins over ``labels`` (-100 = masked); ``position_ids``
    resets and ``doc_spans`` mark packed-document boundaries; ``values`` (loss,
    logprob...) drive the heat layer. ``offset`` numbers tokens from there.
    The last ``padding`` tokens are padding: summarized as one run, with no
    boundaries or document starts inside it (and a warning if any is trained).

    >>> view = token_view([5, 6, 7], mask=[0, 1, 1])
    >>> [t.classes for t in view.tokens]
    ['t0 masked', 't1 trained', 't0 trained']
    """
    count = len(ids)
    warnings: list[str] = []
    pieces = PieceCache.of(tokenizer) if tokenizer is not None else None
    trained_flags: list[bool] | None = None
    if mask is not None:
        if len(mask) != count:
            warnings.append(f"loss mask has {len(mask)} entries for {count} tokens")
        trained_flags = [bool(m) for m in mask[:count]] + [False] * max(0, count - len(mask))
    elif labels is not None:
        if len(labels) != count:
            warnings.append(f"labels have {len(labels)} entries for {count} tokens")
        trained_flags = [int(x) != -100 for x in labels[:count]] + [False] * max(0, count - len(labels))
    if position_ids is not None and len(position_ids) != count:
        warnings.append(f"position ids have {len(position_ids)} entries for {count} tokens")
    padding = min(max(0, int(padding)), count)
    content = count - padding
    starts, resets = _doc_starts(content, position_ids, doc_spans)
    if padding:
        pad_trained = sum(trained_flags[content:]) if trained_flags is not None else 0
        if pad_trained:
            warnings.append(f"{pad_trained:,} padding token(s) are trained (loss mask 1)")
    numbers: list[float | None] = []
    low = high = None
    if values is not None:
        if len(values) != count:
            warnings.append(f"{value_name or 'values'} have {len(values)} entries for {count} tokens")
        numbers = [_float(v) for v in values[:count]]
        finite = [v for v in numbers if v is not None]
        if finite:
            low, high = min(finite), max(finite)
    invert = bool(value_name) and "prob" in (value_name or "").lower()
    shown = min(content, MAX_SHOWN_TOKENS)
    if shown < content:
        warnings.append(f"showing the first {shown:,} of {content:,} tokens (the JSON twin of the page has them all)")
    tokens: list[Token] = []
    document = 0
    for i in range(shown):
        token_id = int(ids[i])
        if i in starts:
            document += 1
        classes = [f"t{i % 2}"]
        shown_piece, quoted = pieces.shown(token_id) if pieces is not None else (str(token_id), repr(str(token_id)))
        title = [f"#{offset + i}", f"id {token_id}", f"piece {quoted}"]
        if pieces is not None and token_id in pieces.special:
            classes.append("special")
        if trained_flags is not None:
            classes.append("trained" if trained_flags[i] else "masked")
            title.append("trained" if trained_flags[i] else "masked")
        if i in starts:
            classes.append("doc-start")
            title.append(f"document {document + 1} starts")
        if i in resets:
            classes.append("pos-reset")
        if position_ids is not None and i < len(position_ids):
            title.append(f"position {position_ids[i]}")
        if numbers and i < len(numbers):
            number = numbers[i]
            if number is None:
                title.append(f"{value_name or 'value'} n/a")
            else:
                title.append(f"{value_name or 'value'} {number:.4g}")
                if low is not None and high is not None:
                    share = 0.0 if high == low else (number - low) / (high - low)
                    level = min(HEAT_LEVELS - 1, int((1 - share if invert else share) * HEAT_LEVELS))
                    classes.append(f"heat{level}")
        tokens.append(Token(offset + i, token_id, shown_piece, " ".join(classes), " · ".join(title)))
    return TokenView(
        tokens=tokens,
        count=count,
        trained=sum(trained_flags) if trained_flags is not None else None,
        masked=content - sum(trained_flags[:content]) if trained_flags is not None else None,
        documents=len(starts) + 1 if content else 0,
        padding=padding,
        padding_ids=" ".join(str(i) for i in sorted({int(t) for t in ids[content:]})[:4]),
        has_mask=trained_flags is not None,
        value_name=value_name if values is not None else None,
        value_min=low,
        value_max=high,
        value_range=(f"{low:.3g}", f"{high:.3g}") if low is not None and high is not None else ("", ""),
        heat_levels=[f"heat{i}" for i in range(HEAT_LEVELS)] if values is not None else [],
        warnings=warnings,
        tokenizer=tokenizer is not None,
    )


# -- finding a token column's companions in a record ------------------------
def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, bool)) or v is None for v in value):
        return [int(v or 0) for v in value]
    return None


def companions(ctx: FieldContext, count: int) -> dict[str, Any]:
    """The mask, labels, position ids, document spans and per-token values next to a token column."""
    record, kinds = ctx.record, ctx.kinds
    found: dict[str, Any] = {}
    masks = [c for c, k in kinds.items() if k == "mask" and "attention" not in c.lower() and record.get(c) is not None]
    masks.sort(key=lambda c: (0 if "loss" in c.lower() else 1, c))
    if masks:
        found["mask"] = record[masks[0]]
    labels = [c for c, k in kinds.items() if k == "labels" and record.get(c) is not None]
    if labels:
        found["labels"] = record[labels[0]]
    for column in POSITION_COLUMNS:
        if _int_list(record.get(column)) is not None:
            found["position_ids"] = record[column]
            break
    padding = record.get("padding")
    if isinstance(padding, int) and not isinstance(padding, bool) and 0 < padding <= count:
        found["padding"] = padding
    for column in DOC_SPAN_COLUMNS:
        if isinstance(record.get(column), list):
            found["doc_spans"] = record[column]
            break
    for column in SEGMENT_COLUMNS:
        segment_ids = _int_list(record.get(column))
        if segment_ids is not None and "doc_spans" not in found:
            found["doc_spans"] = [(i, None) for i in range(1, len(segment_ids)) if segment_ids[i] != segment_ids[i - 1]]
            break
    for column, value in record.items():
        if column == ctx.column or kinds.get(column) not in ("json", None):
            continue
        if isinstance(value, list) and len(value) == count and count and all(isinstance(v, float) or v is None for v in value):
            found["values"], found["value_name"] = value, column
            break
    return found


def is_companion(column: str) -> bool:
    """Columns like ``position_ids`` are inferred as tokens but describe another token column."""
    return column.lower() in POSITION_COLUMNS + SEGMENT_COLUMNS


def tokens_field(value: Any, ctx: FieldContext) -> View:
    ids = _int_list(value)
    if ids is None:
        raise ValueError(f"expected a list of token ids, got {type(value).__name__}")
    if is_companion(ctx.column):
        resets = sum(1 for i in range(1, len(ids)) if ids[i] == 0 or ids[i] < ids[i - 1]) if "pos" in ctx.column.lower() else None
        detail = f", {resets} reset(s)" if resets is not None else ""
        return CellView(text=f"{len(ids):,} values{detail}; shown on the token view", title=" ".join(map(str, ids[:64])))
    if not ctx.full and len(ids) > ctx.token_threshold and ctx.fragment_url:
        return TokenView(count=len(ids), deferred=True, fragment_url=ctx.fragment_url, tokenizer=ctx.tokenizer is not None)
    return token_view(ids, tokenizer=ctx.tokenizer, **companions(ctx, len(ids)))


def tokens_cell(value: Any, ctx: FieldContext) -> View:
    ids = _int_list(value) or []
    head = " ".join(str(i) for i in ids[:8])
    return CellView(text=f"{len(ids):,} tokens", title=head + (" …" if len(ids) > 8 else ""))


def per_token_cell(value: Any, ctx: FieldContext) -> View:
    items = value if isinstance(value, list) else []
    if ctx.kind == "mask":
        on = sum(1 for v in items if v)
        return CellView(text=f"{on:,}/{len(items):,} trained")
    on = sum(1 for v in items if v != -100)
    return CellView(text=f"{on:,}/{len(items):,} labelled")
