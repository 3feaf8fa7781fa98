"""Audio fields: codec, sample rate, channels and duration; a waveform (server-made SVG) and an ``<audio>`` player.

The player streams the stored bytes from ``/media/...?field=``, which honours
``Range`` requests, so a browser can seek without downloading the whole clip.
A listing cell reads only the headers (no decoding); the full view decodes
the clip once (PyAV) for its waveform.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from markupsafe import Markup

from loaders.errors import DecodeError
from loaders.media.audio import AudioInfo, Waveform, probe_audio, waveform

from ..templating import human_bytes
from .image import image_from_value, stored_path_of, where_of
from .views import CellView, ErrorView, FieldContext, View

#: Columns (and width in SVG units) of the waveform; its height.
WAVE_WIDTH = 600
WAVE_HEIGHT = 80


def summary(info: AudioInfo, size: int | None = None) -> str:
    """``wav pcm_s16le · 16,000 Hz · 1 ch · 2.500 s``."""
    text = f"{info.container} {info.codec} · {info.sample_rate:,} Hz · {info.channels} ch · {info.duration:.3f} s"
    return f"{text} · {human_bytes(size)}" if size else text


def waveform_svg(wave: Waveform, *, label: str) -> Markup:
    """The envelope as one filled SVG path (min to max per column); every text in it escaped.

    >>> str(waveform_svg(Waveform([-0.5, -1.0], [0.5, 1.0], 1.0, False), label="a <b>")).count("<path")
    1
    """
    mid = WAVE_HEIGHT / 2
    step = WAVE_WIDTH / max(1, len(wave.high))
    top = [f"{i * step:.1f},{mid - h * mid:.1f}" for i, h in enumerate(wave.high)]
    bottom = [f"{i * step:.1f},{mid - lo * mid:.1f}" for i, lo in reversed(list(enumerate(wave.low)))]
    path = f'<path class="wave" d="M{" L".join(top + bottom)} Z" fill="#1f4e79"/>' if top else ""
    return Markup(
        '<svg class="waveform" viewBox="0 0 {w} {h}" width="{w}" height="{h}" preserveAspectRatio="none" role="img" aria-label="{label}">'
        '<line x1="0" y1="{mid}" x2="{w}" y2="{mid}" stroke="#dde2e8"/>{path}</svg>'
    ).format(w=WAVE_WIDTH, h=WAVE_HEIGHT, mid=mid, label=label, path=Markup(path))


@dataclass
class AudioView(View):
    """A clip: its facts, waveform and a player of the stored bytes."""

    partial: ClassVar[str] = "_partials/_audio.html"
    info: AudioInfo | None = None
    summary: str = ""
    waveform: Markup | None = None
    #: The waveform covers only the start of a very long clip.
    truncated: bool = False
    src: str | None = None
    path: str | None = None


def _bytes(value: Any, ctx: FieldContext) -> tuple[bytes | None, str | None]:
    where = where_of(ctx)
    data = image_from_value(value, where=where)
    return data, (stored_path_of(value, where=where) if data is None else None)


def audio_field(value: Any, ctx: FieldContext) -> View:
    try:
        data, path = _bytes(value, ctx)
        if data is None:  # the player streams it from the shard's directory; no waveform without reading the file here
            return AudioView(summary=f"stored by path: {path}", path=path, src=ctx.media_url)
        info = probe_audio(data, where=where_of(ctx))
        wave = waveform(data, buckets=WAVE_WIDTH, where=where_of(ctx))
    except DecodeError as exc:
        return ErrorView(message=exc.message)
    text = summary(info, len(data))
    return AudioView(
        info=info, summary=text, waveform=waveform_svg(wave, label=f"waveform: {text}"), truncated=wave.truncated, src=ctx.media_url
    )


def audio_cell(value: Any, ctx: FieldContext) -> View:
    try:
        data, path = _bytes(value, ctx)
        if data is None:
            return CellView(text=f"stored by path: {path}", title=str(path))
        text = summary(probe_audio(data, where=where_of(ctx)), len(data))
    except DecodeError as exc:
        return ErrorView(message=exc.message)
    return CellView(text=text, title=text)
