"""Checks of the images, video and audio a sample read: decode failures, blank images, frozen video, silent audio.

Where a transform made the model's pixels (a crop, sampled frames), those are judged, since they are what the model
got (a blank crop is confirmed on the stored picture, since a crop of a good picture may fall inside a flat region);
otherwise the stored value is decoded here with the read path's decoders (a failure is a ``decode-failure`` finding,
not an error). Media stored by path is read only through its registered checksum: a file that changed stops
the lint (:class:`~loaders.errors.MediaChanged`), it is never judged.

>>> import numpy as np
>>> blank_image(np.zeros((8, 8, 3), np.uint8), min_std=1.0, max_mean=10.0)
'constant image: every pixel is (0, 0, 0)'
>>> blank_image(np.arange(192, dtype=np.uint8).reshape(8, 8, 3) // 40, min_std=1.0, max_mean=10.0)
'near-black image: mean brightness 1.9 of 255'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from ..catalog.media_files import read_media
from ..errors import DecodeError
from ..media.image import image_from_value, open_image, resolve_media_path, to_display_mode

if TYPE_CHECKING:
    from .context import Context as ReadContext
    from .reads import DocRead, Place, SampleRead, SourceFacts

Hit = tuple[str, "Place", "str | None", str]
#: Largest side of the pixels judged (bigger images and frames are subsampled evenly first).
JUDGED_SIDE = 256


def _eight_bit(pixels: np.ndarray) -> np.ndarray:
    """``pixels`` as 0..255 values without an alpha channel, subsampled to at most :data:`JUDGED_SIDE` per side."""
    a = np.asarray(pixels)
    if a.ndim == 3 and a.shape[2] in (2, 4):
        a = a[..., :-1]
    if a.ndim >= 2:
        step = max(1, -(-max(a.shape[0], a.shape[1]) // JUDGED_SIDE))
        a = a[::step, ::step]
    if a.dtype == np.uint8:
        return a
    values = a.astype(np.float32)
    if a.dtype == np.uint16:
        return values / 257.0
    if np.issubdtype(a.dtype, np.floating) and values.size and float(np.nanmax(values)) <= 1.0:
        return values * 255.0
    return values


def blank_image(pixels: np.ndarray, *, min_std: float, max_mean: float) -> str | None:
    """Why ``pixels`` are blank — every channel's standard deviation at most ``min_std`` (constant), or mean brightness
    at most ``max_mean`` of 255 (near black) — or ``None``."""
    a = _eight_bit(pixels)
    if a.size == 0:
        return "image has no pixels"
    channels = a.reshape(-1, a.shape[2] if a.ndim == 3 else 1).astype(np.float32)
    spread = float(channels.std(axis=0).max())
    if spread <= min_std:
        colour = tuple(int(round(float(v))) for v in channels.mean(axis=0))
        return f"constant image: every pixel is {colour if len(colour) > 1 else colour[0]}" + (f" ± {spread:.2f}" if spread else "")
    mean = float(channels.mean())
    if mean <= max_mean:
        return f"near-black image: mean brightness {mean:.1f} of 255"
    return None


def frozen_frames(frames: np.ndarray, indices: list[int] | None, *, max_diff: float) -> str | None:
    """Consecutive sampled frames whose mean absolute difference (0..255) is at most ``max_diff``, or ``None``.

    >>> frozen_frames(np.zeros((3, 4, 4, 3), np.uint8), [0, 6, 12], max_diff=0.0)
    'sampled frames 0 and 1 (frame 0 and 6) are identical; 3 of 3 frames the same'
    """
    if len(frames) < 2:
        return None
    same = []
    for i in range(len(frames) - 1):
        a, b = _eight_bit(frames[i]), _eight_bit(frames[i + 1])
        if a.shape == b.shape and float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean()) <= max_diff:
            same.append(i)
    if not same:
        return None
    first = same[0]
    where = f" (frame {indices[first]} and {indices[first + 1]})" if indices and len(indices) == len(frames) else ""
    verb = "are identical" if max_diff == 0 else f"differ by at most {max_diff:g} per pixel"
    note = (
        "; the same frame index: the clip is shorter than the sampling"
        if where and indices and indices[first] == indices[first + 1]
        else ""
    )
    return f"sampled frames {first} and {first + 1}{where} {verb}{note}; {len(same) + 1} of {len(frames)} frames the same"


def _where(facts: "SourceFacts", doc: "DocRead", column: str) -> str:
    address = doc.document.address
    version = facts.where_version
    place = version.where(address.shard, address.row) if version is not None else f"{facts.name} shard {address.shard} row {address.row}"
    return f"{place} column {column}"


def _stored_bytes(value: Any, facts: "SourceFacts", doc: "DocRead", where: str) -> bytes:
    """The encoded bytes of a media cell, inline or read from its registered file (checked against its checksum)."""
    data = image_from_value(value, where=where)
    if data is not None:
        return data
    path = resolve_media_path(value["path"], shard_uri=facts.shard_uris[doc.document.address.shard], where=where)
    return read_media(facts.where_version, path, where=where)


def _video_frames(value: Any, facts: "SourceFacts", doc: "DocRead", where: str, count: int) -> tuple[np.ndarray, list[int]]:
    from ..media.video import decode_frames, probe, video_source

    source = video_source(value, shard_uri=facts.shard_uris[doc.document.address.shard], where=where)
    if isinstance(source, str) and facts.where_version is not None and facts.where_version.manifest.media_files is not None:
        source = read_media(facts.where_version, source, where=where)
    frames = probe(source, where=where).frame_count
    indices = sorted({int(round(i)) for i in np.linspace(0, max(0, frames - 1), num=max(2, count))})
    return np.stack(decode_frames(source, indices, where=where)), indices


def _silence(data: bytes, where: str, max_dbfs: float) -> str | None:
    from ..media.audio import waveform

    wave = waveform(data, buckets=64, where=where)
    peak = max([abs(v) for v in wave.low + wave.high], default=0.0)
    level = -np.inf if peak <= 0 else 20 * np.log10(peak)
    if level <= max_dbfs:
        return f"silent audio: peak {'-inf' if peak <= 0 else f'{level:.1f}'} dBFS over {wave.seconds:.2f} s"
    return None


def media(samples: list["SampleRead"], ctx: "ReadContext") -> Iterator[Hit]:
    """``decode-failure``, ``blank-image``, ``frozen-video`` and ``silent-audio`` of each document's media columns."""
    for sample, doc in ((s, d) for s in samples for d in s.docs):
        facts = ctx.facts(doc.document.source)
        record, inputs = doc.document.record, sample.inputs
        for column in facts.columns_of("image"):
            yield from _judged(doc, column, lambda: _image(record, inputs, column, facts, doc, ctx), ctx)
        for column in facts.columns_of("video"):
            yield from _judged(doc, column, lambda: _video(record, inputs, column, facts, doc, ctx), ctx)
        for column in facts.columns_of("audio"):
            yield from _judged(doc, column, lambda: _audio(record, column, facts, doc, ctx), ctx)


def _judged(doc: "DocRead", column: str, judge: Any, ctx: "ReadContext") -> Iterator[Hit]:
    try:
        found = judge()
    except DecodeError as exc:
        yield "decode-failure", doc, doc.key, exc.message
        return
    if found is not None:
        yield found[0], doc, doc.key, f"{column}: {found[1]}"


def _image(record: Any, inputs: Any, column: str, facts: "SourceFacts", doc: "DocRead", ctx: "ReadContext") -> tuple[str, str] | None:
    if not ctx.selected("blank-image") and not ctx.selected("decode-failure"):
        return None
    thresholds = {"min_std": ctx.param("blank-image", "min_std"), "max_mean": ctx.param("blank-image", "max_mean")}
    model = inputs.get(column)
    if isinstance(model, np.ndarray) and model.ndim >= 2:
        # A crop of a good picture may fall inside a flat region: blank model pixels are a finding when the stored
        # picture is blank too.
        found = blank_image(model, **thresholds) if ctx.selected("blank-image") else None
        if found is None or record.get(column) is None or blank_image(_stored_pixels(record, column, facts, doc), **thresholds) is None:
            return None
        return "blank-image", f"{found} (model input; the stored image too)"
    if record.get(column) is None:
        return None
    pixels = _stored_pixels(record, column, facts, doc)
    found = blank_image(pixels, **thresholds) if ctx.selected("blank-image") else None
    return None if found is None else ("blank-image", f"{found} (stored image)")


def _stored_pixels(record: Any, column: str, facts: "SourceFacts", doc: "DocRead") -> np.ndarray:
    """The stored picture's pixels as the read path converts them for display (alpha is dropped by the judge, as the read
    path's RGB conversion does)."""
    where = _where(facts, doc, column)
    return np.asarray(to_display_mode(open_image(_stored_bytes(record[column], facts, doc, where), where=where)))


def _video(record: Any, inputs: Any, column: str, facts: "SourceFacts", doc: "DocRead", ctx: "ReadContext") -> tuple[str, str] | None:
    if not ctx.selected("frozen-video") and not ctx.selected("decode-failure"):
        return None
    frames = inputs.get("frames")
    if isinstance(frames, np.ndarray) and frames.ndim >= 3:
        indices, what = inputs.get("frame_indices"), "sampled frames"
    else:
        if record.get(column) is None:
            return None
        where = _where(facts, doc, column)
        frames, indices = _video_frames(record[column], facts, doc, where, int(ctx.param("frozen-video", "frames")))
        what = "frames decoded evenly"
    if not ctx.selected("frozen-video"):
        return None
    found = frozen_frames(frames, list(indices) if indices is not None else None, max_diff=ctx.param("frozen-video", "max_diff"))
    return None if found is None else ("frozen-video", f"{found} ({what})")


def _audio(record: Any, column: str, facts: "SourceFacts", doc: "DocRead", ctx: "ReadContext") -> tuple[str, str] | None:
    if record.get(column) is None or (not ctx.selected("silent-audio") and not ctx.selected("decode-failure")):
        return None
    where = _where(facts, doc, column)
    found = _silence(_stored_bytes(record[column], facts, doc, where), where, ctx.param("silent-audio", "max_dbfs"))
    if not ctx.selected("silent-audio"):
        return None
    return None if found is None else ("silent-audio", found)
