"""Media transforms: video frame sampling and image random-resized crops, recording what they chose."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import storage
from ..errors import DecodeError, InvalidPlan
from .base import Context, Transform, require


def media_source(value: Any, ctx: Context) -> bytes:
    """A media cell's bytes: inline, or read from its stored path inside the shard's directory (never outside it).

    A file stored by path is checked against the checksums its version recorded at registration, exactly as the
    inspector checks it (:func:`loaders.catalog.media_files.read_media`): a changed, vanished or unrecorded file is
    ``MediaChanged``, never decoded into a training batch.
    """
    from ..catalog.media_files import read_media
    from ..media.video import video_source

    if ctx.shard_uri is None:
        raise DecodeError(f"{ctx.where}: media transforms need the record's shard")
    source = video_source(value, shard_uri=ctx.shard_uri, where=ctx.where)
    if isinstance(source, bytes):
        return source
    if ctx.version is None:
        return storage.read_bytes(source)  # applied outside a run: no registered version to check against
    return read_media(ctx.version, source, where=ctx.where)


@dataclass(frozen=True)
class SampleFrames(Transform):
    """Sample ``k`` frames of a video at a frame ``stride`` (or at ``fps``); the start comes from the sample RNG.

    Outputs ``frame_indices``, ``frame_times`` (seconds) and ``frames`` (k×H×W×3 uint8).
    """

    type = "sample_frames"
    releases_gil = True
    decodes_media = True

    field: str = "video"
    k: int = 8
    stride: int | None = None
    fps: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or self.k < 1:
            raise InvalidPlan(f"sample_frames k={self.k!r} is out of range: must be an integer >= 1")
        if self.stride is not None and self.fps is not None:
            raise InvalidPlan("sample_frames takes stride or fps, not both")
        if self.stride is not None and self.stride < 1:
            raise InvalidPlan(f"sample_frames stride={self.stride!r} is out of range: must be >= 1")
        if self.fps is not None and not self.fps > 0:
            raise InvalidPlan(f"sample_frames fps={self.fps!r} is out of range: must be > 0")

    def choose(self, frame_count: int, fps: float, rng: np.random.Generator) -> list[int]:
        """The frame indices for a clip of ``frame_count`` frames at ``fps``."""
        if self.fps is not None:
            step = max(1.0, fps / self.fps)
        elif self.stride is not None:
            step = float(self.stride)
        else:
            step = max(1.0, frame_count / self.k)
        span = step * (self.k - 1)
        latest_start = max(0.0, frame_count - 1 - span)
        start = float(rng.uniform(0.0, latest_start)) if latest_start > 0 else 0.0
        return [min(frame_count - 1, int(round(start + i * step))) for i in range(self.k)]

    def apply(self, inputs: dict[str, Any], ctx: Context) -> None:
        from ..media.video import decode_frames, probe

        source = media_source(require(inputs, self.field, self.type, ctx.where), ctx)
        info = probe(source, where=ctx.where)
        indices = self.choose(info.frame_count, info.fps, ctx.rng)
        frames = decode_frames(source, indices, where=ctx.where)
        inputs["frame_indices"] = indices
        inputs["frame_times"] = [round(i / info.fps, 6) for i in indices]
        inputs["frames"] = np.stack(frames)


@dataclass(frozen=True)
class RandomResizedCrop(Transform):
    """torchvision-style random resized crop of an image field; outputs the crop and its box.

    The box is drawn on the upright image (EXIF orientation applied) and given in
    its full-size pixels. With ``reduced_decode`` (the default) a JPEG whose box
    shrinks at least 2x to ``size`` is decoded at 1/2, 1/4 or 1/8 scale, which is
    faster and close to, not bit-identical with, the full-size crop; set it to
    False for full-size decoding of every image (see ``loaders.media.decode_crop``).
    """

    type = "random_resized_crop"
    releases_gil = True
    decodes_media = True

    field: str = "image"
    size: tuple[int, int] = (224, 224)
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    reduced_decode: bool = True

    def __post_init__(self) -> None:
        if len(self.size) != 2 or min(self.size) < 1:
            raise InvalidPlan(f"random_resized_crop size={self.size!r} is out of range: two integers >= 1")
        if not 0 < self.scale[0] <= self.scale[1] <= 1:
            raise InvalidPlan(f"random_resized_crop scale={self.scale!r} is out of range: 0 < min <= max <= 1")
        if not 0 < self.ratio[0] <= self.ratio[1]:
            raise InvalidPlan(f"random_resized_crop ratio={self.ratio!r} is out of range: 0 < min <= max")
        if not isinstance(self.reduced_decode, bool):
            raise InvalidPlan(f"random_resized_crop reduced_decode={self.reduced_decode!r} must be true or false")

    def apply(self, inputs: dict[str, Any], ctx: Context) -> None:
        from ..media.crop import decode_crop

        data = media_source(require(inputs, self.field, self.type, ctx.where), ctx)
        crop = decode_crop(
            data,
            ctx.rng,
            size=(int(self.size[0]), int(self.size[1])),
            scale=tuple(self.scale),
            ratio=tuple(self.ratio),
            reduced=self.reduced_decode,
            where=ctx.where,
        )
        inputs[self.field] = np.asarray(crop.image, dtype=np.uint8)
        inputs["crop_box"] = [int(v) for v in crop.box]
        inputs["source_size"] = [int(v) for v in crop.source_size]
