"""Model inputs made from media: the frames a ``SampleFrames`` transform sampled, and a ``RandomResizedCrop``'s crop.

The step/rank page renders these kinds with ``ctx.media_url`` set to
``urls.input_media(run, step, rank, position, name)``: the endpoint that
recomputes the batch and serves the input's pixels exactly as the model got
them (PNG), frame ``j`` of sampled frames at ``.../{j}``.

* ``model_frames``: ``{"frame_indices", "frame_times", "field", "dataset", "version", "key"}``
  → a filmstrip of exactly those frames, labelled, beside a link to the clip
  opened on the first of them.
* ``model_image``: ``{"field", "crop_box", "source_size", "size", "dataset", "version", "key"}``
  → the crop beside the original with the crop box drawn on it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from .. import urls
from .video import seconds
from .views import CellView, ErrorView, FieldContext, View

#: Longest side of the original-with-box image beside a crop.
BOXED_SIDE = 512


class BadInputValue(ValueError):
    """A model-input value without the keys its kind needs."""


def _source(value: Mapping[str, Any], kind: str) -> tuple[str, str, str, str]:
    try:
        return str(value["dataset"]), str(value["version"]), str(value["key"]), str(value["field"])
    except (KeyError, TypeError):
        have = sorted(value) if isinstance(value, Mapping) else type(value).__name__
        raise BadInputValue(f"a {kind} value needs dataset, version, key and field; got {have}") from None


@dataclass
class ModelFrame:
    """One frame the model got: its place ``j`` among the sampled frames, clip frame index and time."""

    j: int
    index: int
    time: float | None
    label: str
    src: str | None
    clip_url: str


@dataclass
class ModelFramesView(View):
    partial: ClassVar[str] = "_partials/_model_frames.html"
    frames: list[ModelFrame] = field(default_factory=list)
    clip_url: str = ""
    column: str = ""
    shape: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class ModelImageView(View):
    partial: ClassVar[str] = "_partials/_model_image.html"
    crop_url: str | None = None
    size: list[int] = field(default_factory=list)
    crop_box: list[int] = field(default_factory=list)
    source_size: list[int] = field(default_factory=list)
    boxed_url: str = ""
    boxed_full_url: str = ""
    original_url: str = ""
    sample_url: str = ""
    column: str = ""
    #: Display size of the crop: the model input scaled up to at least 192 pixels, pixels kept sharp.
    display: tuple[int, int] = (0, 0)


def frames_view(value: Mapping[str, Any], ctx: FieldContext) -> ModelFramesView:
    """The filmstrip of exactly the sampled frames (images from ``ctx.media_url``/``j``)."""
    dataset, version, key, column = _source(value, "model_frames")
    indices = [int(i) for i in value.get("frame_indices") or []]
    times = list(value.get("frame_times") or [])
    warnings = []
    if times and len(times) != len(indices):
        warnings.append(f"{len(times)} frame times for {len(indices)} frame indices")
    if any(b <= a for a, b in itertools.pairwise(indices)):
        warnings.append(f"frames are not in increasing order: {indices}")
    frames = []
    for j, index in enumerate(indices):
        time = float(times[j]) if j < len(times) else None
        frames.append(
            ModelFrame(
                j=j,
                index=index,
                time=time,
                label=f"frame {index}" + (f" · {seconds(time)}" if time is not None else ""),
                src=f"{ctx.media_url}/{j}" if ctx.media_url else None,
                clip_url=urls.media_view(dataset, version, key, column, frame=index),
            )
        )
    first = indices[0] if indices else None
    return ModelFramesView(
        frames=frames,
        clip_url=urls.media_view(dataset, version, key, column, frame=first),
        column=column,
        shape=[int(v) for v in value.get("shape") or []],
        warnings=warnings,
    )


def _display(size: list[int]) -> tuple[int, int]:
    if len(size) != 2 or min(size) <= 0:
        return (0, 0)
    height, width = size
    scale = max(1, 192 // max(1, max(height, width)))
    return (width * scale, height * scale)


def crop_view(value: Mapping[str, Any], ctx: FieldContext) -> ModelImageView:
    """The crop the model got (from ``ctx.media_url``) beside the original with the crop box drawn."""
    dataset, version, key, column = _source(value, "model_image")
    box = [int(v) for v in value.get("crop_box") or []]
    if len(box) != 4:
        raise BadInputValue(f"crop_box must be four integers left, top, right, bottom; got {value.get('crop_box')!r}")
    size = [int(v) for v in value.get("size") or []]
    return ModelImageView(
        crop_url=ctx.media_url,
        size=size,
        crop_box=box,
        source_size=[int(v) for v in value.get("source_size") or []],
        boxed_url=urls.boxed(dataset, version, key, column, box, size=BOXED_SIDE),
        boxed_full_url=urls.boxed(dataset, version, key, column, box),
        original_url=urls.media_view(dataset, version, key, column),
        sample_url=urls.sample(dataset, version, key),
        column=column,
        display=_display(size),
    )


def model_frames_field(value: Any, ctx: FieldContext) -> View:
    try:
        return frames_view(value, ctx)
    except (BadInputValue, TypeError, ValueError) as exc:
        return ErrorView(message=f"{ctx.where} input {ctx.column!r}: {exc}")


def model_image_field(value: Any, ctx: FieldContext) -> View:
    try:
        return crop_view(value, ctx)
    except (BadInputValue, TypeError, ValueError) as exc:
        return ErrorView(message=f"{ctx.where} input {ctx.column!r}: {exc}")


def model_frames_cell(value: Any, ctx: FieldContext) -> View:
    indices = value.get("frame_indices") if isinstance(value, Mapping) else None
    return CellView(text=f"frames {indices}" if indices is not None else "frames")


def model_image_cell(value: Any, ctx: FieldContext) -> View:
    box = value.get("crop_box") if isinstance(value, Mapping) else None
    return CellView(text=f"crop {box}" if box is not None else "crop")
