"""Encoding media for the demo, tests and the inspector: clips (H.264/MP4, VP9/WebM) and frames (JPEG, PNG)."""

from __future__ import annotations

import io
import os
import tempfile
from fractions import Fraction
from typing import Any, Iterable

import av
import numpy as np
from PIL import Image

from ..errors import DecodeError


def _encode(frame: np.ndarray, fmt: str, **options: Any) -> bytes:
    array = np.asarray(frame)
    if array.dtype != np.uint8 or array.ndim not in (2, 3):
        raise ValueError(f"expected an H x W (x C) uint8 array, got {array.dtype} with shape {array.shape}")
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(array)).save(buffer, format=fmt, **options)
    return buffer.getvalue()


def encode_jpeg(frame: np.ndarray, *, quality: int = 85) -> bytes:
    """JPEG bytes of an RGB (or grayscale) uint8 frame.

    >>> encode_jpeg(np.zeros((4, 4, 3), np.uint8))[:2]
    b'\\xff\\xd8'
    """
    return _encode(frame, "JPEG", quality=quality)


def encode_png(frame: np.ndarray) -> bytes:
    """PNG bytes of an RGB (or grayscale) uint8 frame.

    >>> encode_png(np.zeros((4, 4, 3), np.uint8))[:4]
    b'\\x89PNG'
    """
    return _encode(frame, "PNG", compress_level=3)


#: Encoders ``encode_video`` uses, by codec name: (FFmpeg encoder, container format, container options).
ENCODERS: dict[str, tuple[str, str, dict[str, str]]] = {
    "h264": ("libx264", "mp4", {"movflags": "+faststart"}),
    "vp9": ("libvpx-vp9", "webm", {}),
}


def _encoder_options(codec: str, gop: int, crf: int) -> dict[str, str]:
    if codec == "h264":
        # mbtree reads uninitialised lookahead memory on small frames: off, so the bytes are reproducible
        params = f"keyint={gop}:min-keyint={gop}:scenecut=0:mbtree=0"
        return {"preset": "veryfast", "crf": str(crf), "x264-params": params}
    keyframes = {"kf-max-dist": str(gop), "kf-min-dist": str(gop)}
    return {"deadline": "realtime", "cpu-used": "8", "b": "0", "crf": str(crf), **keyframes}


def encode_video(frames: Iterable[np.ndarray], *, fps: int, codec: str = "h264", gop: int | None = None, crf: int = 28) -> bytes:
    """Encode RGB uint8 frames (all the same, even, size) as H.264 in MP4 or VP9 in WebM.

    ``gop`` is the keyframe interval in frames (default: one second); ``crf`` the
    constant quality (lower is better). One encoder thread and bit-exact muxing
    make the bytes the same on every run. Used by the demo and tests to make clips.

    >>> from loaders.media.video import probe
    >>> clip = encode_video([np.zeros((32, 32, 3), np.uint8)] * 4, fps=24)
    >>> probe(clip, where="example").frame_count
    4
    """
    if codec not in ENCODERS:
        raise ValueError(f"unknown codec {codec!r}; choose one of {', '.join(ENCODERS)}")
    encoder, container_format, container_options = ENCODERS[codec]
    if encoder not in av.codecs_available:
        raise DecodeError(f"cannot encode {codec}: this PyAV build has no {encoder} encoder")
    gop = gop or fps
    # moving the MP4 index to the front (faststart) needs a real file to rewrite
    with tempfile.TemporaryDirectory(prefix="batchscope-encode-") as directory:
        path = os.path.join(directory, f"clip.{container_format}")
        _encode_to(path, frames, encoder, container_format, container_options, codec=codec, fps=fps, gop=gop, crf=crf)
        with open(path, "rb") as handle:
            return handle.read()


def _encode_to(
    path: str,
    frames: Iterable[np.ndarray],
    encoder: str,
    container_format: str,
    container_options: dict[str, str],
    *,
    codec: str,
    fps: int,
    gop: int,
    crf: int,
) -> None:
    # bitexact: no random segment/track ids, no version strings; one thread: the same bytes every run
    options = {"fflags": "+bitexact", **container_options}
    with av.open(path, mode="w", format=container_format, options=options) as container:
        stream = None
        for number, array in enumerate(frames):
            array = np.ascontiguousarray(array, dtype=np.uint8)
            if stream is None:
                stream = container.add_stream(encoder, rate=fps)
                stream.height, stream.width = array.shape[:2]
                stream.pix_fmt = "yuv420p"
                stream.codec_context.gop_size = gop
                stream.codec_context.thread_count = 1
                stream.options = _encoder_options(codec, gop, crf)
            frame = av.VideoFrame.from_ndarray(array, format="rgb24")
            frame.pts = number
            frame.time_base = Fraction(1, fps)
            for packet in stream.encode(frame):
                container.mux(packet)
        if stream is None:
            raise ValueError("encode_video needs at least one frame")
        for packet in stream.encode():
            container.mux(packet)
