"""Audio (WAV, FLAC, MP3, Ogg...): facts and a waveform envelope, decoded with PyAV.

>>> info = probe_audio(wav_bytes, where="dataset speech row 3")          # doctest: +SKIP
>>> info.sample_rate, round(info.duration, 2)                           # doctest: +SKIP
(16000, 2.5)
>>> peaks = waveform(wav_bytes, buckets=200, where="dataset speech row 3")  # doctest: +SKIP
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

from ..errors import DecodeError

#: Decoding stops after this many seconds: a waveform of a longer clip covers its start, and says so.
MAX_WAVEFORM_SECONDS = 600.0


@dataclass(frozen=True)
class AudioInfo:
    """What a clip is: container, codec, sample rate, channels and duration (seconds)."""

    container: str
    codec: str
    sample_rate: int
    channels: int
    duration: float


@dataclass(frozen=True)
class Waveform:
    """Per-bucket minimum and maximum of the mono mix (in -1..1), and how many seconds it covers."""

    low: list[float]
    high: list[float]
    seconds: float
    truncated: bool


def _open(data: bytes, where: str):  # type: ignore[no-untyped-def]
    import av

    try:
        container = av.open(io.BytesIO(data), mode="r")
    except Exception as exc:  # PyAV raises its own error types, ValueError, OSError...
        raise DecodeError(f"{where}: not a readable audio file ({exc})") from exc
    if not container.streams.audio:
        container.close()
        raise DecodeError(f"{where}: holds no audio stream")
    return container


def probe_audio(data: bytes, *, where: str) -> AudioInfo:
    """The facts of an encoded clip, from its headers (and, when they do not say, its decoded length)."""
    container = _open(data, where)
    try:
        stream = container.streams.audio[0]
        rate = int(stream.codec_context.sample_rate or stream.rate or 0)
        channels = int(stream.codec_context.channels or 0)
        if stream.duration is not None and stream.time_base is not None:
            duration = float(stream.duration * stream.time_base)
        elif container.duration is not None:
            duration = container.duration / 1_000_000
        else:
            duration = _decoded_seconds(container, stream, where)
        return AudioInfo(container.format.name.split(",")[0], stream.codec_context.name, rate, channels, duration)
    finally:
        container.close()


def _decoded_seconds(container, stream, where: str) -> float:  # type: ignore[no-untyped-def]
    samples = 0
    try:
        for frame in container.decode(stream):
            samples += frame.samples
    except Exception as exc:
        raise DecodeError(f"{where}: cannot decode the audio ({exc})") from exc
    return samples / stream.codec_context.sample_rate if stream.codec_context.sample_rate else 0.0


def waveform(data: bytes, *, buckets: int, where: str) -> Waveform:
    """The envelope of the clip's mono mix in ``buckets`` columns (the first ``MAX_WAVEFORM_SECONDS`` of it)."""
    import av

    container = _open(data, where)
    try:
        stream = container.streams.audio[0]
        rate = int(stream.codec_context.sample_rate or 0)
        limit = int(rate * MAX_WAVEFORM_SECONDS) if rate else None
        resampler = av.AudioResampler(format="flt", layout="mono")
        parts: list[np.ndarray] = []
        total, truncated = 0, False
        for frame in container.decode(stream):
            for mono in resampler.resample(frame):
                samples = mono.to_ndarray().reshape(-1)
                parts.append(samples)
                total += len(samples)
            if limit is not None and total >= limit:
                truncated = True
                break
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(f"{where}: cannot decode the audio ({exc})") from exc
    finally:
        container.close()
    signal = np.concatenate(parts)[:limit] if parts else np.zeros(0, dtype=np.float32)
    signal = np.clip(np.nan_to_num(signal), -1.0, 1.0)
    if len(signal) == 0:
        return Waveform([], [], 0.0, truncated)
    edges = np.linspace(0, len(signal), min(buckets, len(signal)) + 1).astype(int)
    low = [float(signal[a:b].min()) for a, b in zip(edges[:-1], edges[1:])]
    high = [float(signal[a:b].max()) for a, b in zip(edges[:-1], edges[1:])]
    return Waveform(low, high, len(signal) / rate if rate else 0.0, truncated)
