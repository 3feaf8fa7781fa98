"""Video fields: container, codec, fps, duration and frame count; a filmstrip and a scrubber over the whole clip.

The frame shown is part of the view page's URL (``?frame=N`` or ``?t=s``)
and is rendered by the server, so a link opens on that frame without
JavaScript; ``static/media.js`` makes the scrubber live (it swaps the frame
image and rewrites ``?frame=`` with ``history.replaceState``). Every frame
image comes from ``/media/...?frame=N``, which decodes that one frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlsplit

from loaders.errors import DecodeError
from loaders.media import VideoInfo, probe

from .. import urls
from ..templating import human_bytes
from .image import fit, stored_path_of, where_of
from .views import CellView, ErrorView, FieldContext, View

#: Frames in a filmstrip over the whole clip.
STRIP_FRAMES = 10
#: Longest side of a filmstrip frame.
STRIP_SIDE = 160


def strip_indices(frame_count: int, count: int = STRIP_FRAMES) -> list[int]:
    """Evenly spaced frame indices from the first to the last frame.

    >>> strip_indices(91, 4), strip_indices(2, 4)
    ([0, 30, 60, 90], [0, 1])
    """
    if frame_count <= 0:
        return []
    if frame_count <= count:
        return list(range(frame_count))
    return sorted({round(i * (frame_count - 1) / (count - 1)) for i in range(count)})


def seconds(value: float) -> str:
    """``2.5`` → ``'2.500 s'``."""
    return f"{value:.3f} s" if math.isfinite(value) else "? s"


def summary(info: VideoInfo, size: int | None = None) -> str:
    """``mp4 h264 160×120 30 fps · 2.533 s · 76 frames``."""
    text = f"{info.container} {info.codec} {info.width}×{info.height} {info.fps:g} fps · {seconds(info.duration)} · {info.frame_count:,} frames"
    return f"{text} · {human_bytes(size)}" if size else text


@dataclass
class StripFrame:
    """One frame of a filmstrip: its index, time, image and the link that opens the clip on it."""

    index: int
    time: float
    label: str
    src: str | None
    href: str | None
    current: bool = False


@dataclass
class VideoCellView(CellView):
    """A listing cell: the first frame as a lazily loaded thumbnail, and a one-line summary."""

    partial: ClassVar[str] = "_partials/_video_cell.html"
    thumb_url: str | None = None
    href: str | None = None
    width: int = 0
    height: int = 0


@dataclass
class VideoView(View):
    """A clip: its facts, the frame shown, a filmstrip over the whole clip and a scrubber."""

    partial: ClassVar[str] = "_partials/_video.html"
    container: str = ""
    codec: str = ""
    width: int = 0
    height: int = 0
    fps: float = 0.0
    duration: float = 0.0
    frame_count: int = 0
    frame: int = 0
    time: float = 0.0
    #: The shown frame's image, and the URL it comes from with ``frame`` left for the scrubber to set.
    frame_url: str | None = None
    frame_base: str | None = None
    #: The view page opened on the shown frame (what "link to this frame" copies).
    link_url: str | None = None
    #: True on the view page itself, whose ``?frame=`` the scrubber keeps up to date.
    page: bool = False
    form_action: str | None = None
    form_hidden: list[tuple[str, str]] = field(default_factory=list)
    strip: list[StripFrame] = field(default_factory=list)
    original_url: str | None = None
    summary: str = ""
    error: str = ""
    path: str | None = None
    deferred: bool = False
    fragment_url: str | None = None


def _form(view_url: str) -> tuple[str, list[tuple[str, str]]]:
    """The scrubber form's action (path) and hidden inputs (the view URL's query without ``frame``/``t``)."""
    parts = urlsplit(view_url)
    return parts.path, [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in ("frame", "t")]


def video_view(info: VideoInfo, ctx: FieldContext, *, frame: int = 0, page: bool = False, error: str = "") -> VideoView:
    """The view of a probed clip opened on ``frame``; ``page`` marks the view page (its URL follows the scrubber)."""
    base = ctx.media_url
    frame = max(0, min(frame, info.frame_count - 1)) if info.frame_count else 0
    strip, form_action, hidden, link = [], None, [], None
    if base:
        view_url = urls.view_of(base)
        link = urls.view_of(base, frame=frame)
        form_action, hidden = _form(view_url)
        for index in strip_indices(info.frame_count):
            strip.append(
                StripFrame(
                    index=index,
                    time=info.time_of(index),
                    label=f"{index} · {seconds(info.time_of(index))}",
                    src=urls.add_query(base, frame=index, thumb=STRIP_SIDE),
                    href=urls.view_of(base, frame=index),
                    current=index == frame,
                )
            )
    return VideoView(
        container=info.container,
        codec=info.codec,
        width=info.width,
        height=info.height,
        fps=info.fps,
        duration=info.duration,
        frame_count=info.frame_count,
        frame=frame,
        time=round(info.time_of(frame), 6),
        frame_url=urls.add_query(base, frame=frame) if base else None,
        frame_base=base,
        link_url=link,
        page=page,
        form_action=form_action,
        form_hidden=hidden,
        strip=strip,
        original_url=base,
        summary=summary(info),
        error=error,
    )


def _inline(value: Any) -> bytes | None:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, dict) and isinstance(value.get("bytes"), (bytes, bytearray, memoryview)):
        return bytes(value["bytes"])
    return None


def _stored_path(value: Any, ctx: FieldContext) -> str | ErrorView:
    """The path a video stored by path names, or the inline error to show instead."""
    try:
        path = stored_path_of(value, where=where_of(ctx))
    except DecodeError as exc:
        return ErrorView(message=exc.message)
    if path is None:
        return ErrorView(message=f"{where_of(ctx)}: video value has neither bytes nor a path")
    return path


def video_field(value: Any, ctx: FieldContext) -> View:
    data = _inline(value)
    if data is None:
        path = _stored_path(value, ctx)
        if isinstance(path, ErrorView):
            return path
        view_url = urls.view_of(ctx.media_url) if ctx.media_url else None
        return VideoView(path=path, summary=f"stored by path: {path}", deferred=view_url is not None, fragment_url=view_url)
    try:
        return video_view(probe(data, where=where_of(ctx)), ctx)
    except DecodeError as exc:
        return ErrorView(message=exc.message)


def video_cell(value: Any, ctx: FieldContext) -> View:
    thumb = urls.add_query(ctx.media_url, thumb=urls.THUMBNAIL_SIDE) if ctx.media_url else None
    href = urls.view_of(ctx.media_url) if ctx.media_url else None
    data = _inline(value)
    if data is None:
        path = _stored_path(value, ctx)
        if isinstance(path, ErrorView):
            return path
        return VideoCellView(text=f"stored by path: {path}", title=path, thumb_url=thumb, href=href)
    try:
        info = probe(data, where=where_of(ctx))
    except DecodeError as exc:
        return ErrorView(message=exc.message)
    width, height = fit(info.width, info.height)
    text = summary(info, len(data))
    return VideoCellView(text=text, title=text, thumb_url=thumb, href=href, width=width, height=height)
