"""Video decoding through real H.264/MP4 and VP9/WebM clips whose frames carry their index as a frame code."""

from __future__ import annotations

import io
from pathlib import Path

import av
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from loaders.errors import DecodeError
from loaders.media.framecode import draw_frame_code, read_frame_code
from loaders.media.video import (
    DecodeStats,
    decode_frames,
    encode_jpeg,
    encode_png,
    encode_video,
    frame_at_time,
    probe,
    video_source,
)

FRAMES, FPS, GOP = 90, 30, 30
CODECS = ("h264", "vp9")
WHERE = "dataset videos version abc shard 1 row 4 column video"


def coded_frames(count: int = FRAMES, size: tuple[int, int] = (128, 96)) -> list[np.ndarray]:
    frames = []
    for index in range(count):
        img = Image.new("RGB", size, (index * 5 % 256, 90, 200 - index % 100))
        frames.append(np.asarray(draw_frame_code(img, index)))
    return frames


@pytest.fixture(scope="module")
def clips() -> dict[str, bytes]:
    frames = coded_frames()
    return {codec: encode_video(frames, fps=FPS, codec=codec, gop=GOP, crf=32) for codec in CODECS}


def codes(frames: list[np.ndarray]) -> list[int]:
    return [read_frame_code(frame) for frame in frames]


# -- exact frames ------------------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
def test_decodes_exactly_the_requested_frames_in_the_order_asked(clips: dict[str, bytes], codec: str) -> None:
    wanted = [45, 3, 29, 30, 31, 89, 0, 59, 60, 61, 44, 45, 17]
    frames = decode_frames(clips[codec], wanted, where=WHERE)
    assert codes(frames) == wanted
    assert all(frame.shape == (96, 128, 3) and frame.dtype == np.uint8 for frame in frames)


@pytest.mark.parametrize("codec", CODECS)
def test_every_frame_in_sequence(clips: dict[str, bytes], codec: str) -> None:
    assert codes(decode_frames(clips[codec], range(FRAMES), where=WHERE)) == list(range(FRAMES))


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=15, deadline=None)
@given(wanted=st.lists(st.integers(0, FRAMES - 1), min_size=1, max_size=5))
def test_any_request_gives_its_frames(clips: dict[str, bytes], codec: str, wanted: list[int]) -> None:
    assert codes(decode_frames(clips[codec], wanted, where=WHERE)) == wanted


@pytest.mark.parametrize("codec", CODECS)
def test_one_frame_seeks_to_its_keyframe_instead_of_decoding_the_clip(clips: dict[str, bytes], codec: str) -> None:
    stats = DecodeStats()
    assert codes(decode_frames(clips[codec], [88], where=WHERE, stats=stats)) == [88]
    # keyframes at 0, 30, 60: frame 88 needs 60..88 (29 frames) plus what the decoder holds back
    assert stats.seeks == 1 and 29 <= stats.decoded <= 29 + 8

    stats = DecodeStats()
    decode_frames(clips[codec], [61, 65, 70], where=WHERE, stats=stats)
    assert stats.seeks == 1, "frames ahead in the same GOP continue decoding forward"
    assert stats.decoded <= 11 + 8

    stats = DecodeStats()
    decode_frames(clips[codec], [5, 75], where=WHERE, stats=stats)
    # 0..5, then jump to keyframe 60 without decoding 6..59
    assert stats.decoded <= 6 + 16 + 8


def test_frames_in_the_middle_of_a_gop_with_b_frames(clips: dict[str, bytes]) -> None:
    """libx264 reorders B-frames: packet order differs from display order, the index must not."""
    container = av.open(io.BytesIO(clips["h264"]))
    pts = [packet.pts for packet in container.demux(video=0) if packet.size]
    container.close()
    assert pts != sorted(pts), "the H.264 clip should have B-frames"
    assert codes(decode_frames(clips["h264"], [47, 46, 33, 58], where=WHERE)) == [47, 46, 33, 58]


# -- probing and time --------------------------------------------------------------
@pytest.mark.parametrize("codec, container", [("h264", "mp4"), ("vp9", "webm")])
def test_probe(clips: dict[str, bytes], codec: str, container: str) -> None:
    info = probe(clips[codec], where=WHERE, keyframes=True)
    assert (info.container, info.codec, info.width, info.height) == (container, codec, 128, 96)
    assert info.fps == 30.0 and info.frame_count == FRAMES and abs(info.duration - 3.0) < 0.05
    assert info.keyframes == (0.0, 1.0, 2.0)
    assert info.time_of(45) == 1.5
    assert probe(clips[codec], where=WHERE).keyframes is None


@pytest.mark.parametrize("codec", CODECS)
def test_frame_at_time(clips: dict[str, bytes], codec: str) -> None:
    assert [frame_at_time(clips[codec], t, where=WHERE) for t in (0.0, 0.02, 1.5, 2.99)] == [0, 0, 45, 89]
    for bad in (-0.1, 3.0, float("nan")):
        with pytest.raises(DecodeError, match="out of range"):
            frame_at_time(clips[codec], bad, where=WHERE)


@pytest.mark.parametrize("fps", [24, 25])
def test_other_frame_rates_map_exactly_in_millisecond_webm_timestamps(fps: int) -> None:
    clip = encode_video(coded_frames(2 * fps, (64, 64)), fps=fps, codec="vp9", gop=fps)
    wanted = [2 * fps - 1, fps + 1, fps - 1, 1, fps // 2]
    assert codes(decode_frames(clip, wanted, where=WHERE)) == wanted
    assert probe(clip, where=WHERE).frame_count == 2 * fps


def test_sources_by_path(clips: dict[str, bytes], tmp_path: Path) -> None:
    (tmp_path / "v1" / "media").mkdir(parents=True)
    (tmp_path / "v1" / "media" / "a.webm").write_bytes(clips["vp9"])
    shard = str(tmp_path / "v1" / "part-00000.parquet")
    source = video_source({"bytes": None, "path": "media/a.webm"}, shard_uri=shard, where=WHERE)
    assert source == str(tmp_path / "v1" / "media" / "a.webm")
    assert codes(decode_frames(source, [50, 10], where=WHERE)) == [50, 10]
    assert codes(decode_frames(Path(source), [3], where=WHERE)) == [3]
    assert probe(source, where=WHERE).container == "webm"
    assert video_source({"bytes": b"inline", "path": "a.mp4"}, shard_uri=shard, where=WHERE) == b"inline"
    assert video_source(b"raw", shard_uri=shard, where=WHERE) == b"raw"
    with pytest.raises(DecodeError, match="media path"):
        video_source({"bytes": None, "path": "../../etc/passwd"}, shard_uri=shard, where=WHERE)
    with pytest.raises(DecodeError, match="neither bytes nor a path"):
        video_source({"bytes": None, "path": None}, shard_uri=shard, where=WHERE)
    with pytest.raises(DecodeError, match="no such file"):
        decode_frames(str(tmp_path / "missing.mp4"), [0], where=WHERE)


def test_encoding_is_reproducible() -> None:
    frames = coded_frames(40, (96, 64))
    for codec in CODECS:
        runs = {encode_video(frames, fps=FPS, codec=codec) for _ in range(3)}
        assert len(runs) == 1, f"{codec} bytes differ between runs"


def test_encode_jpeg_and_png() -> None:
    frame = np.asarray(draw_frame_code(Image.new("RGB", (128, 64), "gray"), 1234))
    png = Image.open(io.BytesIO(encode_png(frame)))
    assert np.array_equal(np.asarray(png), frame)
    jpeg = Image.open(io.BytesIO(encode_jpeg(frame, quality=70)))
    assert jpeg.format == "JPEG" and read_frame_code(np.asarray(jpeg)) == 1234
    with pytest.raises(ValueError):
        encode_png(np.zeros((4, 4, 3), np.float32))


# -- bad input -----------------------------------------------------------------------
def backwards(clip: bytes) -> bytes:
    """Remux a WebM clip so the timestamps of packets 40-49 jump back by half a second.

    Muxers refuse decreasing decode timestamps, so each packet's dts is moved a
    second earlier than its pts; Matroska stores only the (now non-monotonic) pts.
    """
    source = av.open(io.BytesIO(clip))
    stream = source.streams.video[0]
    out = io.BytesIO()
    target = av.open(out, mode="w", format="webm")
    copy = target.add_stream_from_template(stream)
    for number, packet in enumerate(p for p in source.demux(stream) if p.size):
        packet.dts = packet.pts - 1000
        if 40 <= number < 50:
            packet.pts -= 500
        packet.stream = copy
        target.mux(packet)
    target.close()
    source.close()
    return out.getvalue()


def test_timestamps_going_backwards(clips: dict[str, bytes]) -> None:
    broken = backwards(clips["vp9"])
    container = av.open(io.BytesIO(broken))
    pts = [packet.pts for packet in container.demux(video=0) if packet.size]
    container.close()
    assert pts[40] < pts[39], "the remux should have made timestamps go backwards"
    assert codes(decode_frames(broken, [10], where=WHERE)) == [10]
    with pytest.raises(DecodeError, match=f"^{WHERE}: timestamps go backwards"):
        decode_frames(broken, [45], where=WHERE)


def _bad_inputs(clips: dict[str, bytes]) -> dict[str, tuple[bytes, str]]:
    return {
        "zero-length": (b"", "zero-length value"),
        "random bytes": (np.random.default_rng(5).bytes(6000), "Invalid data"),
        "truncated MP4 header": (clips["h264"][:300], "(Invalid data|the file has no video stream)"),
        "unsupported codec": (clips["vp9"].replace(b"V_VP9", b"V_QQQ", 1), "unsupported codec"),
        "text": (b"#!/bin/sh\necho this is not a video\n" * 40, "Invalid data"),
    }


@pytest.mark.parametrize("case", ["zero-length", "random bytes", "truncated MP4 header", "unsupported codec", "text"])
def test_bad_video_raises_decode_error_naming_where(clips: dict[str, bytes], case: str) -> None:
    data, cause = _bad_inputs(clips)[case]
    for call in (lambda: probe(data, where=WHERE), lambda: decode_frames(data, [0], where=WHERE)):
        with pytest.raises(DecodeError, match=f"^{WHERE}: cannot decode video: {cause}"):
            call()


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_clip_decodes_what_is_there(clips: dict[str, bytes], codec: str) -> None:
    cut = clips[codec][: len(clips[codec]) // 2]
    assert codes(decode_frames(cut, [5], where=WHERE)) == [5]
    with pytest.raises(DecodeError, match=f"^{WHERE}: frame 89 is out of range"):
        decode_frames(cut, [89], where=WHERE)


@pytest.mark.parametrize("codec", CODECS)
def test_index_out_of_range(clips: dict[str, bytes], codec: str) -> None:
    with pytest.raises(DecodeError, match="frame 90 is out of range: the clip ends after frame 89"):
        decode_frames(clips[codec], [3, 90], where=WHERE)
    with pytest.raises(DecodeError, match="frame -1 is out of range"):
        decode_frames(clips[codec], [-1], where=WHERE)
    assert decode_frames(clips[codec], [], where=WHERE) == []
