"""Video decoding with PyAV: probe a clip and decode exact frames by seeking to the keyframe before each."""

from __future__ import annotations

import contextlib
import io
import math
import os
from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterator, Sequence, Union

import av
import av.container
import av.error
import numpy as np

from .. import storage
from ..errors import BatchscopeError, DecodeError
from .encode import encode_jpeg, encode_png, encode_video
from .image import resolve_media_path

__all__ = [
    "DecodeStats",
    "VideoInfo",
    "VideoSource",
    "decode_frames",
    "encode_jpeg",
    "encode_png",
    "encode_video",
    "frame_at_time",
    "probe",
    "video_source",
]

#: A clip: encoded bytes held inline, or a local path / filesystem URI.
VideoSource = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]"]

#: Refuse streams larger than this many pixels per frame (8K UHD is 33 million).
MAX_VIDEO_PIXELS = 64 * 1024 * 1024
#: A wanted frame at most this many frames ahead is reached by demuxing forward, not by a new seek.
FORWARD_LIMIT = 600
_SEEK_RETRIES = 12
_DECODE_ERRORS: tuple[type[BaseException], ...] = (av.error.FFmpegError, OSError, ValueError, EOFError, MemoryError)


@dataclass(frozen=True)
class VideoInfo:
    """What a clip is: container, codec, size, rate and length, read without decoding pixels.

    ``frame_count`` comes from the stream's metadata, else from counting packets;
    ``keyframes`` (seconds) is filled when ``probe(..., keyframes=True)``.
    """

    container: str
    codec: str
    width: int
    height: int
    fps: float
    duration: float
    frame_count: int
    keyframes: tuple[float, ...] | None = None

    def time_of(self, index: int) -> float:
        """Seconds from the start of the clip at which frame ``index`` is shown."""
        return index / self.fps


@dataclass
class DecodeStats:
    """Counters ``decode_frames`` fills when given one: how much work a request cost."""

    seeks: int = 0
    decoded: int = 0


# -- opening -----------------------------------------------------------------
@contextlib.contextmanager
def _opened(source: VideoSource, where: str) -> Iterator[tuple[av.container.InputContainer, bytes]]:
    """Open ``source`` for reading; yields the container and the first bytes of the file."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if not data:
            raise DecodeError(f"{where}: cannot decode video: zero-length value")
        target: Any = io.BytesIO(data)
        head = data[:64]
    else:
        uri = storage.normalize(source)
        if storage.is_remote(uri):
            data = storage.read_bytes(uri)
            if not data:
                raise DecodeError(f"{where}: cannot decode video: {uri} is empty")
            target, head = io.BytesIO(data), data[:64]
        else:
            if not os.path.isfile(uri):
                raise DecodeError(f"{where}: cannot decode video: no such file {uri}")
            if os.path.getsize(uri) == 0:
                raise DecodeError(f"{where}: cannot decode video: {uri} is empty")
            with open(uri, "rb") as handle:
                head = handle.read(64)
            target = uri
    try:
        container = av.open(target, mode="r")
    except _DECODE_ERRORS as exc:
        raise DecodeError(f"{where}: cannot decode video: {_cause(exc)}") from exc
    try:
        yield container, head
    finally:
        container.close()


def _cause(exc: BaseException) -> str:
    if isinstance(exc, av.error.FFmpegError):
        return f"{exc.strerror or type(exc).__name__}"
    return str(exc) or type(exc).__name__


def _video_stream(container: av.container.InputContainer, where: str) -> av.video.stream.VideoStream:
    if not container.streams.video:
        raise DecodeError(f"{where}: cannot decode video: the file has no video stream")
    stream = container.streams.video[0]
    if stream.codec_context is None:
        raise DecodeError(f"{where}: cannot decode video: unsupported codec (this build has no decoder for the stream)")
    width, height = stream.codec_context.width, stream.codec_context.height
    if width <= 0 or height <= 0:
        raise DecodeError(f"{where}: cannot decode video: the stream has no frame size")
    if width * height > MAX_VIDEO_PIXELS:
        raise DecodeError(f"{where}: cannot decode video: {width}x{height} frames exceed the {MAX_VIDEO_PIXELS:,}-pixel limit")
    return stream


def _container_name(format_name: str, head: bytes) -> str:
    """A short container name: ``mp4``/``mov`` from the ftyp brand, ``webm``/``matroska`` from the DocType."""
    names = format_name.split(",")
    if "mp4" in names:
        brand = head[8:12] if head[4:8] == b"ftyp" else b""
        return "mov" if brand == b"qt  " else "mp4"
    if "webm" in names:
        return "webm" if b"webm" in head else "matroska"
    return names[0]


class _Timeline:
    """Exact frame index <-> pts mapping for constant-frame-rate streams."""

    def __init__(self, stream: av.video.stream.VideoStream, where: str) -> None:
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        if not rate or rate <= 0 or stream.time_base is None:
            raise DecodeError(f"{where}: cannot decode video: the stream has no frame rate or time base")
        self.fps = Fraction(rate)
        self.time_base = Fraction(stream.time_base)
        self.start = int(stream.start_time or 0)
        self._frames_per_tick = float(self.time_base * self.fps)

    def index(self, pts: int) -> int:
        """The frame index of a frame or packet timestamp."""
        return int(round((pts - self.start) * self._frames_per_tick))

    def seek_pts(self, index: int) -> int:
        """A timestamp inside frame ``index``'s display interval (half a frame in)."""
        return self.start + int((Fraction(index) + Fraction(1, 2)) / (self.fps * self.time_base))

    def ticks(self, seconds: float) -> int:
        return int(seconds / self.time_base)


# -- probing -------------------------------------------------------------------
def _scan_packets(
    container: av.container.InputContainer, stream: av.video.stream.VideoStream, timeline: _Timeline, where: str
) -> tuple[int, list[float]]:
    """Count packets and list keyframe times by demuxing only (no decoding)."""
    count, keyframes = 0, []
    try:
        for packet in container.demux(stream):
            if packet.size == 0:
                continue
            count += 1
            if packet.is_keyframe and packet.pts is not None:
                keyframes.append(float(timeline.index(packet.pts) / timeline.fps))
    except _DECODE_ERRORS as exc:
        raise DecodeError(f"{where}: cannot read video packets: {_cause(exc)}") from exc
    return count, sorted(keyframes)


def probe(source: VideoSource, *, where: str, keyframes: bool = False) -> VideoInfo:
    """Container, codec, size, fps, duration and frame count of a clip, without decoding any frame.

    With ``keyframes`` the packets are demuxed (not decoded) to list keyframe times.

    >>> probe("clip.mp4", where="example").frame_count   # doctest: +SKIP
    90
    """
    with _opened(source, where) as (container, head):
        stream = _video_stream(container, where)
        timeline = _Timeline(stream, where)
        frame_count = int(stream.frames or 0)
        found: list[float] | None = None
        if frame_count <= 0 or keyframes:
            counted, found = _scan_packets(container, stream, timeline, where)
            frame_count = frame_count if frame_count > 0 else counted
        if stream.duration:
            duration = float(stream.duration * timeline.time_base)
        elif container.duration:
            duration = container.duration / av.time_base
        else:
            duration = frame_count / float(timeline.fps)
        return VideoInfo(
            container=_container_name(container.format.name, head),
            codec=stream.codec_context.name,
            width=stream.codec_context.width,
            height=stream.codec_context.height,
            fps=float(timeline.fps),
            duration=duration,
            frame_count=frame_count,
            keyframes=tuple(found) if keyframes and found is not None else None,
        )


# -- decoding ------------------------------------------------------------------
class _Cursor:
    """Decodes forward from a keyframe; knows which frame index each decoded frame is.

    Packets are demuxed into a buffer and only decoded once a packet at or past
    the wanted frame shows up; a keyframe at or before the wanted frame empties
    the buffer, so frames of skipped GOPs are never decoded.
    """

    def __init__(self, container: av.container.InputContainer, stream: Any, timeline: _Timeline, where: str, stats: DecodeStats) -> None:
        self.container, self.stream, self.timeline, self.where = container, stream, timeline, where
        self.stats = stats
        self.packets: Iterator[av.Packet] | None = None
        self.ready: deque[tuple[int, Any]] = deque()
        self.previous: tuple[int, Any] | None = None
        self.last_pts: int | None = None
        self.eof = False

    # state ---------------------------------------------------------------
    def _reset(self) -> None:
        self.ready.clear()
        self.previous = None
        self.last_pts = None

    def seek(self, offset: int) -> None:
        try:
            self.stats.seeks += 1
            self.container.seek(offset, backward=True, any_frame=False, stream=self.stream)
        except _DECODE_ERRORS as exc:
            raise DecodeError(f"{self.where}: cannot seek in video: {_cause(exc)}") from exc
        self.packets = self.container.demux(self.stream)
        self.eof = False
        self._reset()

    def position(self) -> int | None:
        """Index of the last frame handed out since the last seek."""
        return self.previous[0] if self.previous else None

    # decoding ------------------------------------------------------------
    def _decode(self, packet: av.Packet | None, target: int) -> None:
        """Decode one packet (None drains); frames before ``target`` are dropped at once, keeping the last.

        Holding on to every decoded frame would keep the decoder from reusing its
        buffers; only frames at or after the target wait in ``ready``.
        """
        try:
            frames = self.stream.decode(packet)
        except _DECODE_ERRORS as exc:
            raise DecodeError(f"{self.where}: cannot decode video frame: {_cause(exc)}") from exc
        for frame in frames:
            self.stats.decoded += 1
            if frame.pts is None:
                raise DecodeError(f"{self.where}: cannot decode video: a decoded frame has no timestamp")
            if self.last_pts is not None and frame.pts <= self.last_pts:
                raise DecodeError(
                    f"{self.where}: timestamps go backwards: a frame with pts {frame.pts} follows pts "
                    f"{self.last_pts} (time base {self.timeline.time_base})"
                )
            self.last_pts = frame.pts
            index = self.timeline.index(frame.pts)
            if index < target and not self.ready:
                self.previous = (index, frame)
            else:
                self.ready.append((index, frame))

    def _next_packet(self) -> av.Packet | None:
        assert self.packets is not None
        try:
            packet = next(self.packets, None)
        except _DECODE_ERRORS as exc:
            raise DecodeError(f"{self.where}: cannot read video packet: {_cause(exc)}") from exc
        return None if packet is None or packet.size == 0 else packet

    def _ends(self) -> str:
        last = self.previous[0] if self.previous else None
        return f"the clip ends after frame {last}" if last is not None else "no frame could be decoded there"

    def _take(self, target: int) -> tuple[Any, bool]:
        """Pop ready frames up to ``target``: ``(frame, done)``; frame None + done means overshoot."""
        while self.ready:
            index, frame = self.ready[0]
            if index > target:
                if self.previous is None:
                    return None, True  # the seek landed after the target
                return self.previous[1], True  # variable frame rate: the frame on screen at that time
            self.ready.popleft()
            self.previous = (index, frame)
            if index == target:
                return frame, True
        return None, False

    def advance(self, target: int) -> Any | None:
        """The decoded frame ``target`` (None when the last seek landed after it)."""
        frame, done = self._take(target)
        if done:
            return frame
        if self.eof:
            raise DecodeError(f"{self.where}: frame {target} is out of range: {self._ends()}")
        buffered: list[av.Packet] = []
        decoding = False
        while True:
            packet = self._next_packet()
            if packet is None:
                for held in buffered:
                    self._decode(held, target)
                self._decode(None, target)
                self.eof = True
                frame, done = self._take(target)
                if done:
                    return frame
                raise DecodeError(f"{self.where}: frame {target} is out of range: {self._ends()}")
            index = self.timeline.index(packet.pts) if packet.pts is not None else None
            if decoding:
                self._decode(packet, target)
            elif packet.is_keyframe and index is not None and index <= target and (self.position() is None or index > self.position()):
                buffered = [packet]  # a later keyframe still at or before the target: skip what came before
                if self.position() is not None or self.ready:
                    self.stream.codec_context.flush_buffers()
                    self._reset()
                continue
            else:
                buffered.append(packet)
                if index is None or index < target:
                    continue
                decoding = True
                for held in buffered:
                    self._decode(held, target)
                buffered = []
            frame, done = self._take(target)
            if done:
                return frame


def _frame_at(cursor: _Cursor, target: int) -> Any:
    """Decode frame ``target``: continue forward when it is just ahead, else seek to its keyframe."""
    position = cursor.position()
    if cursor.packets is None or position is None or target <= position or target - position > FORWARD_LIMIT:
        cursor.seek(cursor.timeline.seek_pts(target))
    frame = cursor.advance(target)
    attempt = 0
    while frame is None:
        # Some demuxers index by decode time; step back until the keyframe lands before the target.
        offset = cursor.timeline.seek_pts(target) - cursor.timeline.ticks(2.0**attempt)
        attempt += 1
        if offset <= cursor.timeline.start or attempt >= _SEEK_RETRIES:
            offset = cursor.timeline.start
        cursor.seek(offset)
        frame = cursor.advance(target)
        if frame is None and offset == cursor.timeline.start:
            raise DecodeError(f"{cursor.where}: frame {target} cannot be reached: decoding from the start begins after it")
    return frame


def _to_rgb(frame: Any, where: str) -> np.ndarray:
    try:
        return frame.to_ndarray(format="rgb24")
    except _DECODE_ERRORS as exc:
        raise DecodeError(f"{where}: cannot convert video frame to RGB: {_cause(exc)}") from exc


def decode_frames(source: VideoSource, indices: Sequence[int], *, where: str, stats: DecodeStats | None = None) -> list[np.ndarray]:
    """Decode frames ``indices`` of a clip as H x W x 3 uint8 RGB arrays, in the order asked.

    Each wanted frame is reached by seeking to the nearest keyframe at or before
    it and decoding forward only to it; a frame further ahead in the same run is
    reached by continuing. The whole clip is never decoded for one frame.
    ``stats``, when given, counts the seeks made and the frames decoded.

    >>> decode_frames("clip.mp4", [45, 3], where="example")[0].shape   # doctest: +SKIP
    (96, 128, 3)
    """
    wanted = [int(i) for i in indices]
    for index in wanted:
        if index < 0:
            raise DecodeError(f"{where}: frame {index} is out of range: frame indices start at 0")
    if not wanted:
        return []
    got: dict[int, np.ndarray] = {}
    with _opened(source, where) as (container, _):
        stream = _video_stream(container, where)
        stream.codec_context.thread_type = "AUTO"
        counters = stats if stats is not None else DecodeStats()
        cursor = _Cursor(container, stream, _Timeline(stream, where), where, counters)
        try:
            for target in sorted(set(wanted)):
                got[target] = _to_rgb(_frame_at(cursor, target), where)
        except BatchscopeError:
            raise
        except _DECODE_ERRORS as exc:
            raise DecodeError(f"{where}: cannot decode video: {_cause(exc)}") from exc
    return [got[i] for i in wanted]


def frame_at_time(source: VideoSource, seconds: float, *, where: str) -> int:
    """The index of the frame shown at ``seconds`` from the start of the clip.

    >>> frame_at_time("clip.mp4", 1.5, where="example")   # doctest: +SKIP
    45
    """
    info = probe(source, where=where)
    if not math.isfinite(seconds) or seconds < 0 or seconds >= info.duration:
        raise DecodeError(f"{where}: time {seconds}s is out of range: the clip lasts {info.duration:.3f}s")
    return min(info.frame_count - 1, int(math.floor(seconds * info.fps + 1e-6)))


# -- sources and encoding ---------------------------------------------------------
def video_source(value: Any, *, shard_uri: str, where: str, allow_absolute: bool = False) -> VideoSource:
    """The decodable source of a video cell: its inline bytes, or its path resolved against the shard.

    Accepts raw bytes, a ``{"bytes", "path"}`` struct (bytes win; a null ``bytes``
    means stored by path) or a string path/URI. Relative paths are resolved against
    the directory of ``shard_uri`` and may not leave it.

    >>> video_source({"bytes": None, "path": "media/a.mp4"}, shard_uri="/d/v1/part-0.parquet", where="x")
    '/d/v1/media/a.mp4'
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, dict):
        raw = value.get("bytes")
        if isinstance(raw, (bytes, bytearray, memoryview)):
            return bytes(raw)
        value = value.get("path")
    if isinstance(value, str) and value:
        return resolve_media_path(value, shard_uri=shard_uri, where=where, allow_absolute=allow_absolute)
    raise DecodeError(f"{where}: video value has neither bytes nor a path")
