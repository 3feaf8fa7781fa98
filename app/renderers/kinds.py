"""How the inspector shows each field kind: its field and cell renderers, the views they make, its diff view. One table.

The domain facts of a kind (shape, inference, media, diff treatment) are in
``loaders.catalog.kinds``; this table adds, once per kind, what the pages do with it.
A new kind is a ``KindSpec`` there and a ``Presentation`` here: importing this
module fails, naming the kind, when a kind of the read path has no
presentation, has no diff view, or is listed twice.

>>> presentation("tokens").views[0].partial
'_partials/_tokens.html'
>>> presentation("no such kind") is FALLBACK
True
"""

from __future__ import annotations

from dataclasses import dataclass

from loaders.catalog.kinds import KINDS

from ..registries import unique
from . import audio, basic, chat, episode, image, labels, model_media, rollout, text, tokens, video
from .diff import ImageDiffView, StructDiffView, TextDiffView, TokenDiffView, ValueDiffView, VideoDiffView
from .views import CellView, Renderer, View


@dataclass(frozen=True)
class Presentation:
    """How one kind is shown: ``field`` renders a value in full, ``cell`` its short form in a row listing."""

    kind: str
    field: Renderer
    cell: Renderer
    #: The view models ``field`` makes of a value it can show (besides ``ErrorView``); each one's ``partial`` lays it out.
    views: tuple[type[View], ...]
    #: The view models ``cell`` makes.
    cell_views: tuple[type[View], ...]
    #: The view of a changed value on the diff page; ``None`` for what is never a dataset column (model inputs, nulls).
    diff: type[View] | None


#: Kinds the inspector shows that are not kinds of a dataset column: pixels a transform made (``app.renderers.inputs``).
MODEL_INPUT_KINDS = ("model_frames", "model_image")
#: What a null value of any kind is shown as.
NULL = "null"

PRESENTATIONS: dict[str, Presentation] = unique(
    [
        Presentation("text", text.text_field, text.text_cell, (text.TextView,), (text.TextView,), TextDiffView),
        Presentation("tokens", tokens.tokens_field, tokens.tokens_cell, (tokens.TokenView, CellView), (CellView,), TokenDiffView),
        Presentation("mask", tokens.per_token_cell, tokens.per_token_cell, (CellView,), (CellView,), TokenDiffView),
        Presentation("labels", tokens.per_token_cell, tokens.per_token_cell, (CellView,), (CellView,), TokenDiffView),
        Presentation("chat", chat.chat_field, chat.chat_cell, (chat.ChatView,), (CellView,), StructDiffView),
        Presentation("image", image.image_field, image.image_cell, (image.ImageView,), (image.ImageCellView,), ImageDiffView),
        Presentation("video", video.video_field, video.video_cell, (video.VideoView,), (video.VideoCellView,), VideoDiffView),
        Presentation("audio", audio.audio_field, audio.audio_cell, (audio.AudioView,), (CellView,), ValueDiffView),
        Presentation(
            "class_label", labels.class_label_field, labels.class_label_cell, (labels.ClassLabelView,), (CellView,), ValueDiffView
        ),
        Presentation("episode", episode.episode_field, episode.episode_cell, (episode.EpisodeView,), (CellView,), StructDiffView),
        Presentation("rollout", rollout.rollout_field, rollout.rollout_cell, (rollout.RolloutView,), (CellView,), StructDiffView),
        Presentation("json", basic.json_field, basic.fallback_cell, (basic.JsonView,), (CellView,), StructDiffView),
        Presentation("scalar", basic.scalar_field, basic.fallback_cell, (basic.ScalarView,), (CellView,), ValueDiffView),
        Presentation("binary", basic.binary_field, basic.fallback_cell, (basic.BinaryView,), (CellView,), ValueDiffView),
        Presentation(
            "model_frames", model_media.model_frames_field, model_media.model_frames_cell, (model_media.ModelFramesView,), (CellView,), None
        ),
        Presentation(
            "model_image", model_media.model_image_field, model_media.model_image_cell, (model_media.ModelImageView,), (CellView,), None
        ),
        Presentation(NULL, basic.null_field, basic.null_cell, (basic.ScalarView,), (CellView,), None),
    ],
    name=lambda p: p.kind,
    what="presentation of kind",
)

#: The declared fallback: a kind without a presentation (a manifest written by hand or by a later version) is shown
#: by its value's type: bytes as binary, structures as JSON, the rest as a scalar.
FALLBACK = Presentation(
    "*", basic.fallback_field, basic.fallback_cell, (basic.BinaryView, basic.JsonView, basic.ScalarView), (CellView,), None
)


def _check() -> None:
    missing = [kind for kind in KINDS if kind not in PRESENTATIONS]
    if missing:
        raise LookupError(f"field kind(s) {', '.join(missing)} of loaders.catalog.kinds have no presentation in {__name__}")
    undiffed = [kind for kind in KINDS if PRESENTATIONS[kind].diff is None]
    if undiffed:
        raise LookupError(f"field kind(s) {', '.join(undiffed)} have no diff view in {__name__}")
    extra = [kind for kind in PRESENTATIONS if kind not in KINDS and kind not in (*MODEL_INPUT_KINDS, NULL)]
    if extra:
        raise LookupError(f"{__name__} presents kind(s) {', '.join(extra)}, which are not field kinds (loaders.catalog.kinds)")


_check()


def presentation(kind: str) -> Presentation:
    """How ``kind`` is shown (the declared ``FALLBACK`` for a kind the table does not know)."""
    return PRESENTATIONS.get(kind, FALLBACK)
