"""The demo's ``videos`` dataset: short H.264/MP4 and VP9/WebM clips whose every frame shows its index."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
from PIL import Image, ImageDraw

from loaders import Catalog, storage
from loaders.media.encode import encode_video
from loaders.media.framecode import draw_frame_code

from .common import DemoChanges, register_pair

NAME = "videos"
CLIPS = 12
VIDEO = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
SCHEMA = pa.schema([("id", pa.string()), ("video", VIDEO), ("codec", pa.string()), ("caption", pa.string())])
#: Clips stored by path (bytes null, path relative to the shard's directory) instead of inline.
BY_PATH = (3, 7)
#: Directory, next to the shards of each version, that holds the clips stored by path.
MEDIA_DIR = "media"
_SIZES = ((64, 64), (96, 64), (128, 96), (160, 120), (192, 108), (256, 144))
_RATES = (24, 25, 30)
_EXT = {"h264": "mp4", "vp9": "webm"}
_QUALITY = {"h264": 30, "vp9": 36}


@dataclass(frozen=True)
class _Clip:
    number: int
    codec: str
    fps: int
    frames: int
    width: int
    height: int
    gop: int
    crf: int

    @property
    def key(self) -> str:
        return f"clip-{self.number:03d}"

    @property
    def filename(self) -> str:
        return f"{self.key}.{_EXT[self.codec]}"


def _clip(number: int, seed: int) -> _Clip:
    rng = np.random.default_rng([seed, number])
    codec = "h264" if number % 2 == 0 else "vp9"
    fps = int(rng.choice(_RATES))
    width, height = _SIZES[int(rng.integers(len(_SIZES)))]
    frames = int(round(fps * float(rng.uniform(2.0, 4.0))))
    return _Clip(number, codec, fps, frames, width, height, gop=fps, crf=_QUALITY[codec])


def frames_of(clip: _Clip, seed: int) -> list[np.ndarray]:
    """The RGB frames of a clip: a ball bouncing over a drifting gradient, each frame carrying its index."""
    rng = np.random.default_rng([seed, clip.number, 1])
    low, high = rng.integers(0, 200, size=3), rng.integers(56, 256, size=3)
    ball = tuple(int(v) for v in rng.integers(0, 256, size=3))
    xs = np.linspace(0.0, 1.0, clip.width)[None, :, None]
    radius = max(5, min(clip.width, clip.height) // 8)
    x, y = float(rng.uniform(radius, clip.width - radius)), float(rng.uniform(radius, clip.height / 2))
    dx, dy = float(rng.choice([-1, 1])) * clip.width / 40, float(rng.choice([-1, 1])) * clip.height / 50
    out = []
    for index in range(clip.frames):
        phase = (xs + index / clip.frames) % 1.0
        pixels = (low + (high - low) * phase).astype(np.uint8)
        img = Image.fromarray(np.ascontiguousarray(np.broadcast_to(pixels, (clip.height, clip.width, 3))))
        ImageDraw.Draw(img).ellipse((x - radius, y - radius, x + radius, y + radius), fill=ball)
        draw_frame_code(img, index)
        out.append(np.asarray(img))
        x, y = x + dx, y + dy
        if not radius <= x <= clip.width - radius:
            dx = -dx
        if not radius <= y <= clip.height - radius:
            dy = -dy
    return out


def _caption(clip: _Clip) -> str:
    seconds = clip.frames / clip.fps
    codec = "H.264 in MP4" if clip.codec == "h264" else "VP9 in WebM"
    stored = "stored by path" if clip.number in BY_PATH else "stored inline"
    return (
        f"A bouncing ball, {clip.frames} frames at {clip.fps} fps ({seconds:.2f} s), {clip.width}x{clip.height}, "
        f"{codec}, keyframe every {clip.gop} frames, {stored}; each frame shows its index"
    )


def _encode(clip: _Clip, seed: int) -> bytes:
    return encode_video(frames_of(clip, seed), fps=clip.fps, codec=clip.codec, gop=clip.gop, crf=clip.crf)


def _row(clip: _Clip, data: bytes, version_dir: str) -> dict[str, object]:
    if clip.number in BY_PATH:
        relative = f"{MEDIA_DIR}/{clip.filename}"
        storage.write_bytes_atomic(os.path.join(version_dir, MEDIA_DIR, clip.filename), data)
        video = {"bytes": None, "path": relative}
    else:
        video = {"bytes": data, "path": clip.filename}
    return {"id": clip.key, "video": video, "codec": clip.codec, "caption": _caption(clip)}


def build(catalog: Catalog, *, seed: int) -> None:
    """Register ``videos`` v1 and v2.

    Half the clips are H.264/MP4 and half VP9/WebM, with a keyframe every second;
    clips ``BY_PATH`` are stored as files under ``media/`` next to the shards.
    v2 drops one clip, adds one, and re-encodes one with a 2 s keyframe
    interval at a lower quality (edited).
    """
    rng = np.random.default_rng(seed)
    clips = {n: _clip(n, seed) for n in range(CLIPS + 1)}
    candidates = [n for n in range(CLIPS) if n not in BY_PATH]
    dropped, reencoded = (int(n) for n in rng.choice(candidates, size=2, replace=False))
    encoded = {n: _encode(c, seed) for n, c in clips.items()}
    original = clips[reencoded]
    changed = replace(original, gop=2 * original.fps, crf=original.crf + 6)
    encoded_v2 = {**encoded, reencoded: _encode(changed, seed)}
    v1_dir, v2_dir = storage.join(catalog.data_dir(NAME), "v1"), storage.join(catalog.data_dir(NAME), "v2")
    v1_rows = [_row(clips[n], encoded[n], v1_dir) for n in range(CLIPS)]
    v2_rows = [_row(changed if n == reencoded else clips[n], encoded_v2[n], v2_dir) for n in range(CLIPS + 1) if n != dropped]
    changes = DemoChanges.between(
        v1_rows,
        v2_rows,
        notes={
            "by_path": {clips[n].key: f"{MEDIA_DIR}/{clips[n].filename}" for n in BY_PATH},
            "re_encoded": {changed.key: f"keyframe interval {original.gop} -> {changed.gop} frames, crf {original.crf} -> {changed.crf}"},
            "codecs": {c.key: c.codec for c in clips.values()},
            "frame_code": "loaders.media.framecode, 16 bits: read_frame_code(frame) gives the frame index",
        },
    )
    v1, v2 = pa.Table.from_pylist(v1_rows, schema=SCHEMA), pa.Table.from_pylist(v2_rows, schema=SCHEMA)
    register_pair(catalog, NAME, v1, v2, changes, key="id", rows_per_shard=6, row_group_size=2)
