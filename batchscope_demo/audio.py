"""The demo's ``sounds`` dataset: short synthesized clips (chirps, tones, noise bursts) as WAV and FLAC, with class labels."""

from __future__ import annotations

import io
import json
import wave

import numpy as np
import pyarrow as pa

from loaders import Catalog

from .common import DemoChanges, register_pair

NAME = "sounds"
CLIPS = 24
ADDED = 3
RATE = 16_000
SECONDS = 0.5
#: Labels, each drawn by its own synthesizer below.
LABELS = ("chirp-up", "chirp-down", "two-tone", "noise-burst")
#: v1 was made with a gain bug: these clips are amplified 4x and clip at full scale; v2 fixes them.
CLIPPED = 3
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("audio", pa.binary()),
        ("label", pa.int32()),
        ("codec", pa.string()),
        ("sample_rate", pa.int32()),
        ("seconds", pa.float32()),
    ],
    # What Hugging Face ``datasets`` writes for a ``ClassLabel``: the label is an id, its names are in the metadata.
    metadata={b"huggingface": json.dumps({"info": {"features": {"label": {"_type": "ClassLabel", "names": list(LABELS)}}}}).encode()},
)


def _signal(label: str, rng: np.random.Generator) -> np.ndarray:
    """One clip of ``label`` in [-1, 1], with a little noise and a fade in and out."""
    t = np.arange(int(RATE * SECONDS)) / RATE
    low, high = float(rng.uniform(200, 400)), float(rng.uniform(1200, 2400))
    if label == "chirp-up":
        wave_ = np.sin(2 * np.pi * (low * t + (high - low) * t**2 / (2 * SECONDS)))
    elif label == "chirp-down":
        wave_ = np.sin(2 * np.pi * (high * t - (high - low) * t**2 / (2 * SECONDS)))
    elif label == "two-tone":
        wave_ = np.where(t < SECONDS / 2, np.sin(2 * np.pi * low * t), np.sin(2 * np.pi * high * t))
    else:
        wave_ = rng.normal(0.0, 0.5, t.size) * np.exp(-6 * t / SECONDS)
    fade = np.minimum(1.0, np.minimum(t, SECONDS - t) / 0.02)
    return np.clip(0.5 * wave_ * fade + rng.normal(0.0, 0.01, t.size), -1.0, 1.0)


def _pcm(signal: np.ndarray, *, gain: float = 1.0) -> np.ndarray:
    return (np.clip(signal * gain, -1.0, 1.0) * 32767).astype(np.int16)


def encode_wav(samples: np.ndarray) -> bytes:
    """16-bit mono WAV bytes of ``samples`` (the standard library's writer)."""
    out = io.BytesIO()
    with wave.open(out, "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(RATE)
        handle.writeframes(samples.tobytes())
    return out.getvalue()


def encode_flac(samples: np.ndarray) -> bytes:
    """FLAC bytes of 16-bit mono ``samples`` (PyAV's encoder)."""
    import av

    out = io.BytesIO()
    with av.open(out, "w", format="flac") as container:
        stream = container.add_stream("flac", rate=RATE, layout="mono")
        frame = av.AudioFrame.from_ndarray(samples[None, :], format="s16", layout="mono")
        frame.sample_rate = RATE
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return out.getvalue()


def _row(number: int, signal: np.ndarray, label: int, *, gain: float = 1.0) -> dict[str, object]:
    codec = "flac" if number % 3 == 2 else "wav"
    samples = _pcm(signal, gain=gain)
    data = encode_flac(samples) if codec == "flac" else encode_wav(samples)
    return {"id": f"clip-{number:03d}", "audio": data, "label": label, "codec": codec, "sample_rate": RATE, "seconds": SECONDS}


def build(catalog: Catalog, *, seed: int) -> None:
    """Register ``sounds`` v1 and v2.

    v1 has a gain bug: three clips are amplified 4x and clip; v2 fixes them
    (edited), drops two clips and adds three.
    """
    rng = np.random.default_rng([seed, 7])
    labels = [n % len(LABELS) for n in range(CLIPS + ADDED)]
    signals = [_signal(LABELS[label], rng) for label in labels]
    clipped = {int(n) for n in rng.choice(CLIPS, size=CLIPPED, replace=False)}
    removed = {int(n) for n in rng.choice([n for n in range(CLIPS) if n not in clipped], size=2, replace=False)}
    rows = {n: _row(n, signals[n], labels[n]) for n in range(CLIPS + ADDED)}
    v1_rows = [_row(n, signals[n], labels[n], gain=4.0) if n in clipped else rows[n] for n in range(CLIPS)]
    v2_rows = [rows[n] for n in range(CLIPS + ADDED) if n not in removed]
    changes = DemoChanges.between(
        v1_rows,
        v2_rows,
        notes={
            "clipped": {f"clip-{n:03d}": "v1 amplified it 4x, so it clips at full scale" for n in sorted(clipped)},
            "codecs": "every third clip is FLAC, the others 16-bit WAV; all mono at 16 kHz",
        },
    )
    register_pair(
        catalog,
        NAME,
        pa.Table.from_pylist(v1_rows, schema=SCHEMA),
        pa.Table.from_pylist(v2_rows, schema=SCHEMA),
        changes,
        key="id",
        rows_per_shard=12,
        row_group_size=4,
    )
