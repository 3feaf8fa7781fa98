"""View models of one field's difference between two versions: word highlights, aligned tokens, paths, media side by side.

The version diff engine (``loaders.diff``) says *what* differs (``FieldDiff``);
these builders lay it out for ``templates/_partials/_diff_*.html``. Nothing
here reads data: the diff page passes in tokenizers, media URLs and image
sizes.

>>> from loaders.diff import field_diff
>>> view = text_diff_view(field_diff("text", "text", "the cat sat", "the dog sat"))
>>> [(s.op, s.text) for s in view.left], [(s.op, s.text) for s in view.right]
([('equal', 'the '), ('del', 'cat'), ('equal', ' sat')], [('equal', 'the '), ('ins', 'dog'), ('equal', ' sat')])
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from loaders.diff import FieldDiff, PathChange, SeqOp, TextOp

from ..reveal import WHITESPACE, visible_text
from .tokens import Token, token_view
from .views import View

if TYPE_CHECKING:
    from tokenizers import Tokenizer

#: An unchanged stretch of text longer than this is cut to its ends (the sample permalinks have all of it).
TEXT_KEEP = 1200
TEXT_CONTEXT = 400
#: An unchanged run of more tokens than this shows only its first and last ``TOKEN_CONTEXT`` tokens.
TOKEN_KEEP = 24
TOKEN_CONTEXT = 8
#: A JSON value in a path diff is cut after this many characters.
VALUE_CHARS = 400
#: Whitespace symbols of a whitespace-only change; a deleted or inserted line feed keeps its line break.
_WS_SYMBOLS = {**WHITESPACE, "\n": WHITESPACE["\n"] + "\n"}


def _changed_text(text: str) -> str:
    """An inserted or deleted piece: whitespace-only pieces with every character as a symbol, line feeds marked."""
    text = visible_text(text)
    if text and text.isspace():
        return "".join(_WS_SYMBOLS.get(ch, ch) for ch in text)
    return text.replace("\n", _WS_SYMBOLS["\n"])


# -- text ---------------------------------------------------------------------
@dataclass
class Segment:
    """A run of text on one side: ``equal``, ``del`` (only in A), ``ins`` (only in B) or ``gap`` (``cut`` unchanged characters left out)."""

    op: str
    text: str = ""
    cut: int = 0


@dataclass
class TextDiffView(View):
    """Both texts side by side, deleted words marked in A and inserted ones in B."""

    partial: ClassVar[str] = "_partials/_diff_text.html"
    left: list[Segment] = field(default_factory=list)
    right: list[Segment] = field(default_factory=list)
    deleted: int = 0
    inserted: int = 0


def _equal(text: str, *, first: bool, last: bool) -> list[Segment]:
    if len(text) <= TEXT_KEEP:
        return [Segment("equal", visible_text(text))]
    head = "" if first else text[:TEXT_CONTEXT]
    tail = "" if last else text[-TEXT_CONTEXT:]
    out = [Segment("equal", visible_text(head))] if head else []
    out.append(Segment("gap", cut=len(text) - len(head) - len(tail)))
    if tail:
        out.append(Segment("equal", visible_text(tail)))
    return out


def text_segments(ops: Sequence[TextOp]) -> tuple[list[Segment], list[Segment], int, int]:
    """Left (A) and right (B) segments of a word diff, with the number of deleted and inserted characters.

    >>> left, right, deleted, inserted = text_segments([TextOp("equal", "a "), TextOp("replace", "b", "c")])
    >>> [s.op for s in left], [s.op for s in right], deleted, inserted
    (['equal', 'del'], ['equal', 'ins'], 1, 1)
    """
    left: list[Segment] = []
    right: list[Segment] = []
    deleted = inserted = 0
    for number, op in enumerate(ops):
        if op.op == "equal":
            equal = _equal(op.a, first=number == 0, last=number == len(ops) - 1)
            left.extend(equal)
            right.extend(equal)
            continue
        if op.op in ("delete", "replace") and op.a:
            left.append(Segment("del", _changed_text(op.a)))
            deleted += len(op.a)
        if op.op in ("insert", "replace") and op.b:
            right.append(Segment("ins", _changed_text(op.b)))
            inserted += len(op.b)
    return left, right, deleted, inserted


def text_diff_view(diff: FieldDiff) -> TextDiffView:
    """The side-by-side word diff of a text field."""
    left, right, deleted, inserted = text_segments(diff.words)
    return TextDiffView(left=left, right=right, deleted=deleted, inserted=inserted)


# -- tokens -------------------------------------------------------------------
@dataclass
class TokenBlock:
    """One aligned block: the same ids (``equal``) or what A had against what B has.

    ``same_text`` marks a changed block whose pieces spell the same text on
    both sides: a re-tokenization. In a long equal block ``cut`` tokens are
    left out after the first ``split`` shown.
    """

    op: str
    a_start: int
    a_end: int
    b_start: int
    b_end: int
    a_tokens: list[Token] = field(default_factory=list)
    b_tokens: list[Token] = field(default_factory=list)
    same_text: bool = False
    split: int = -1
    cut: int = 0


@dataclass
class TokenDiffView(View):
    """Two token sequences aligned block by block, changed pieces highlighted, each side decoded by its own tokenizer."""

    partial: ClassVar[str] = "_partials/_diff_tokens.html"
    toggles: ClassVar[tuple[str, ...]] = ("ids",)
    blocks: list[TokenBlock] = field(default_factory=list)
    a_count: int = 0
    b_count: int = 0
    changed: int = 0
    retokenized: int = 0
    a_tokenizer: str | None = None
    b_tokenizer: str | None = None
    decoded: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def tokenizer_changed(self) -> bool:
        return self.a_tokenizer != self.b_tokenizer


def _mark(tokens: list[Token], extra: str) -> list[Token]:
    return [Token(t.index, t.id, t.piece, f"{t.classes} {extra}", t.title) for t in tokens]


def _ids(value: Any) -> list[int]:
    if not isinstance(value, (list, tuple)):
        return []
    return [int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else int(bool(v)) for v in value]


def token_diff_view(
    diff: FieldDiff,
    *,
    a_tokenizer: Tokenizer | None = None,
    b_tokenizer: Tokenizer | None = None,
    a_tokenizer_name: str | None = None,
    b_tokenizer_name: str | None = None,
) -> TokenDiffView:
    """Align the token (or mask/label) sequences of a field from ``diff.ops``; each side's pieces come from its tokenizer."""
    before, after = _ids(diff.before), _ids(diff.after)
    decode = diff.kind == "tokens"
    a_view = token_view(before, tokenizer=a_tokenizer if decode else None)
    b_view = token_view(after, tokenizer=b_tokenizer if decode else None)
    a_all, b_all = a_view.tokens, b_view.tokens
    blocks: list[TokenBlock] = []
    changed = retokenized = 0
    for op in diff.ops:
        block = _token_block(op, a_all, b_all)
        if op.op != "equal":
            changed += 1
            retokenized += block.same_text
        blocks.append(block)
    warnings = [f"A: {w}" for w in a_view.warnings] + [f"B: {w}" for w in b_view.warnings]
    if diff.truncated:
        warnings.append("the sequences differ over too long a stretch to align token by token: the differing middle is one block")
    return TokenDiffView(
        blocks=blocks,
        a_count=len(before),
        b_count=len(after),
        changed=changed,
        retokenized=retokenized,
        a_tokenizer=a_tokenizer_name if decode else None,
        b_tokenizer=b_tokenizer_name if decode else None,
        decoded=decode and a_tokenizer is not None and b_tokenizer is not None,
        warnings=warnings,
    )


def _token_block(op: SeqOp, a_all: list[Token], b_all: list[Token]) -> TokenBlock:
    a_tokens, b_tokens = a_all[op.a_start : op.a_end], b_all[op.b_start : op.b_end]
    if op.op == "equal":
        length = op.a_end - op.a_start
        if length > TOKEN_KEEP:
            keep_a = a_tokens[:TOKEN_CONTEXT] + a_tokens[-TOKEN_CONTEXT:]
            keep_b = b_tokens[:TOKEN_CONTEXT] + b_tokens[-TOKEN_CONTEXT:]
            return TokenBlock(
                op.op, op.a_start, op.a_end, op.b_start, op.b_end, keep_a, keep_b, split=TOKEN_CONTEXT, cut=length - 2 * TOKEN_CONTEXT
            )
        return TokenBlock(op.op, op.a_start, op.a_end, op.b_start, op.b_end, a_tokens, b_tokens)
    same_text = bool(a_tokens) and bool(b_tokens) and "".join(t.piece for t in a_tokens) == "".join(t.piece for t in b_tokens)
    mark_a, mark_b = ("tok-retok", "tok-retok") if same_text else ("tok-del", "tok-ins")
    return TokenBlock(
        op.op, op.a_start, op.a_end, op.b_start, op.b_end, _mark(a_tokens, mark_a), _mark(b_tokens, mark_b), same_text=same_text
    )


# -- structures (chat, json, rollout, episode) ------------------------------------
@dataclass
class PathRow:
    """One changed leaf: its path, how it changed, both values (cut), and a word diff when both are strings."""

    path: str
    change: str
    before: str
    after: str
    left: list[Segment] = field(default_factory=list)
    right: list[Segment] = field(default_factory=list)


@dataclass
class StructDiffView(View):
    """A structured value's differences, one row per changed path."""

    partial: ClassVar[str] = "_partials/_diff_paths.html"
    rows: list[PathRow] = field(default_factory=list)
    truncated: bool = False


def value_text(value: Any, *, limit: int = VALUE_CHARS) -> str:
    """A JSON-ready value as short readable text: strings as they are, the rest as JSON; cut after ``limit`` characters.

    >>> value_text({"bytes": 3, "sha256": "ab"}), value_text("a" * 5, limit=3)
    ('{"bytes": 3, "sha256": "ab"}', 'aaa… (5 characters)')
    """
    if value is None:
        return "null"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = visible_text(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _path_row(change: PathChange) -> PathRow:
    row = PathRow(change.path, change.change, value_text(change.before), value_text(change.after))
    if change.words:
        row.left, row.right, _, _ = text_segments(change.words)
    return row


def struct_diff_view(diff: FieldDiff) -> StructDiffView:
    """Changed paths of a chat, json, rollout or episode field (added, removed, changed values)."""
    return StructDiffView(rows=[_path_row(p) for p in diff.paths], truncated=diff.truncated)


# -- scalars and one-sided values -----------------------------------------------------
@dataclass
class ValueDiffView(View):
    """A value before and after (a scalar, or a field that is null on one side)."""

    partial: ClassVar[str] = "_partials/_diff_value.html"
    before: str = ""
    after: str = ""


def value_diff_view(diff: FieldDiff) -> ValueDiffView:
    """Before → after of a scalar field, or of a field added or removed (null on the other side)."""
    if diff.paths and diff.change != "changed":
        only = diff.paths[0]
        return ValueDiffView(before=value_text(only.before), after=value_text(only.after))
    return ValueDiffView(before=value_text(diff.before), after=value_text(diff.after))


# -- media ----------------------------------------------------------------------
@dataclass
class MediaSide:
    """One side of a media diff: the picture's URL, the page showing it alone, and what it is."""

    src: str
    view_url: str
    summary: str


@dataclass
class ImageDiffView(View):
    """Both images as thumbnails and, when their sizes match, the per-pixel difference."""

    partial: ClassVar[str] = "_partials/_diff_image.html"
    a: MediaSide | None = None
    b: MediaSide | None = None
    heatmap_url: str | None = None
    note: str = ""


@dataclass
class FramePair:
    """The same frame index of both clips."""

    index: int
    a_src: str
    b_src: str
    a_view: str
    b_view: str


@dataclass
class VideoDiffView(View):
    """Frames at the same indices of both clips, side by side."""

    partial: ClassVar[str] = "_partials/_diff_video.html"
    a: MediaSide | None = None
    b: MediaSide | None = None
    frames: list[FramePair] = field(default_factory=list)
    note: str = ""


def spread(count: int, *, wanted: int = 4) -> list[int]:
    """``wanted`` frame indices spread evenly over ``count`` frames, first and last included.

    >>> spread(85), spread(2), spread(0)
    ([0, 28, 56, 84], [0, 1], [])
    """
    if count <= 0:
        return []
    if count <= wanted:
        return list(range(count))
    return sorted({round(i * (count - 1) / (wanted - 1)) for i in range(wanted)})
