"""The media test catalog (images, clips, a run that crops and samples frames), and checks that its bad rows really are bad.

Other media tests build it with ``build_media_catalog(root)``: small images in
every awkward mode, JPEGs with EXIF orientation, H.264/MP4 and VP9/WebM clips
whose every frame carries its index (``loaders.media.framecode``), files
stored by path next to the shards, and hostile or broken values.
"""

from __future__ import annotations

import io
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

from loaders import Catalog, RandomResizedCrop, ReadPlan, SampleFrames, Source
from loaders.errors import DecodeError
from loaders.media import (
    decode_frames,
    draw_frame_code,
    encode_video,
    image_info,
    open_image,
    probe,
)
from tests.conftest import write_parquet

MEDIA = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
RED = (230, 20, 20)
#: The upright test picture: a red block in the top-left corner of a blue field.
RED_BOX = (0, 0, 60, 40)
CLIP_SIZE = (128, 96)
CLIPS = {"h264": (30, 60, 15), "vp9": (25, 50, 10)}  # codec: (fps, frames, keyframe interval)


def upright(width: int = 300, height: int = 200) -> Image.Image:
    img = Image.new("RGB", (width, height), (30, 60, 200))
    img.paste(RED, RED_BOX)
    return img


def encoded(img: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    img.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def exif_rotated(orientation: int = 6) -> bytes:
    """A JPEG whose stored pixels are the upright picture turned so that EXIF ``orientation`` turns them back."""
    stored = upright(200, 300).transpose({6: Image.Transpose.ROTATE_90, 3: Image.Transpose.ROTATE_180}[orientation])
    exif = Image.Exif()
    exif[0x0112] = orientation
    exif[0x010F] = "batchscope test camera"
    return encoded(stored, "JPEG", quality=92, exif=exif.tobytes())


def png_header_only(width: int, height: int) -> bytes:
    """A tiny PNG claiming ``width`` x ``height`` gray pixels: a decompression bomb's header."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")


def coded_frames(count: int, size: tuple[int, int] = CLIP_SIZE) -> list[np.ndarray]:
    frames = []
    for index in range(count):
        img = Image.new("RGB", size, (index * 7 % 256, 120, 200 - index % 100))
        frames.append(np.asarray(draw_frame_code(img, index)))
    return frames


def clip(codec: str) -> bytes:
    fps, count, gop = CLIPS[codec]
    return encode_video(coded_frames(count), fps=fps, codec=codec, gop=gop, crf=30)


def backwards(webm: bytes) -> bytes:
    """Remux a WebM clip so the timestamps of packets 32-35 jump back 200 ms (Matroska keeps the non-monotonic pts)."""
    source = av.open(io.BytesIO(webm))
    stream = source.streams.video[0]
    out = io.BytesIO()
    target = av.open(out, mode="w", format="webm")
    copy = target.add_stream_from_template(stream)
    for number, packet in enumerate(p for p in source.demux(stream) if p.size):
        packet.dts = packet.pts - 1000
        if 32 <= number < 36:
            packet.pts -= 200
        packet.stream = copy
        target.mux(packet)
    target.close()
    source.close()
    return out.getvalue()


@dataclass
class MediaCatalog:
    catalog: Catalog
    pics: str  # version ids
    clips: str
    run: str
    images: dict[str, bytes]
    videos: dict[str, bytes]


#: Rows of ``pics`` that cannot be shown, and the cause their error names.
BAD_PICS = {
    "svg": "not a recognised image format",
    "corrupt": "not a recognised image format",
    "bomb": "decompression bomb",
    "escape": "does not name a file inside the shard's directory",
}
#: A frame of ``backwards`` whose decoding meets the timestamps going back.
BACKWARDS_FRAME = 35
#: Rows of ``clips`` that cannot be shown at all, and the cause.
BAD_CLIPS = {"unsupported": "unsupported codec", "garbage": "Invalid data"}


def _pics() -> dict[str, bytes]:
    photo = encoded(upright(), "JPEG", quality=92)
    return {
        "plain-png": encoded(upright(), "PNG"),
        "photo": photo,
        "exif-6": exif_rotated(6),
        "exif-3": exif_rotated(3),
        "gray": encoded(upright().convert("L"), "PNG"),
        "rgba": encoded(Image.new("RGBA", (80, 60), (0, 200, 0, 128)), "PNG"),
        "sixteen": encoded(Image.fromarray(np.linspace(0, 65535, 64 * 48).reshape(48, 64).astype(np.uint16)), "PNG"),
        "tiff": encoded(upright(), "TIFF"),
        "svg": b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
        "truncated": photo[: len(photo) // 2],
        "corrupt": np.random.default_rng(3).bytes(3000),
        "bomb": png_header_only(50_000, 50_000),
    }


def build_media_catalog(root: Path) -> MediaCatalog:
    """``pics`` (images, 2 shards of 3-row groups), ``clips`` (videos), clean ``crops``/``good-clips`` and run ``mm``."""
    catalog = Catalog(root / "catalog")
    images = _pics()
    ids = list(images) + ["by-path", "escape"]
    values = [{"bytes": data, "path": f"{key}.bin"} for key, data in images.items()]
    values += [{"bytes": None, "path": "media/by-path.png"}, {"bytes": None, "path": "../outside.png"}]
    table = pa.table({"id": ids, "image": pa.array(values, MEDIA), "label": [f"label of {k}" for k in ids]})
    paths = write_parquet(table, root / "src" / "pics", shards=2)
    for path in paths:  # a by-path file next to every shard (the row may land in either)
        (Path(path).parent / "media").mkdir(exist_ok=True)
        (Path(path).parent / "media" / "by-path.png").write_bytes(images["plain-png"])
    (root / "src" / "outside.png").write_bytes(images["plain-png"])
    pics = catalog.register("pics", paths, key="id", tag="v1", kinds={"image": "image"})

    videos = {codec: clip(codec) for codec in CLIPS}
    videos["backwards"] = backwards(videos["vp9"])
    videos["unsupported"] = videos["vp9"].replace(b"V_VP9", b"V_QQQ", 1)
    videos["garbage"] = np.random.default_rng(4).bytes(5000)
    videos["truncated"] = videos["h264"][: len(videos["h264"]) * 2 // 3]
    clip_ids = list(videos) + ["by-path"]
    clip_values = [{"bytes": data, "path": f"{key}.bin"} for key, data in videos.items()]
    clip_values.append({"bytes": None, "path": "media/by-path.webm"})
    clip_table = pa.table({"id": clip_ids, "video": pa.array(clip_values, MEDIA), "note": [f"clip {k}" for k in clip_ids]})
    clip_paths = write_parquet(clip_table, root / "src" / "clips", shards=1)
    (Path(clip_paths[0]).parent / "media").mkdir(exist_ok=True)
    (Path(clip_paths[0]).parent / "media" / "by-path.webm").write_bytes(videos["vp9"])
    clips = catalog.register("clips", clip_paths, key="id", tag="v1", kinds={"video": "video"})

    good = ["plain-png", "photo", "exif-6", "gray"]
    crops = pa.table({"id": good, "image": pa.array([{"bytes": images[k], "path": None} for k in good], MEDIA)})
    catalog.register("crops", write_parquet(crops, root / "src" / "crops"), key="id", tag="v1", kinds={"image": "image"})
    good_clips = pa.table({"id": list(CLIPS), "video": pa.array([{"bytes": videos[k], "path": None} for k in CLIPS], MEDIA)})
    catalog.register("good-clips", write_parquet(good_clips, root / "src" / "good-clips"), key="id", tag="v1", kinds={"video": "video"})
    plan = ReadPlan(
        [
            Source("crops@v1", weight=1, transforms=[RandomResizedCrop("image", size=(32, 48), scale=(0.2, 0.9))]),
            Source("good-clips@v1", weight=1, transforms=[SampleFrames("video", k=4, stride=3)]),
        ],
        seed=5,
        global_batch_size=4,
        steps=3,
        streams=2,
    )
    catalog.create_run("mm", plan)
    return MediaCatalog(catalog, pics.id, clips.id, "mm", images, videos)


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> MediaCatalog:
    return build_media_catalog(tmp_path_factory.mktemp("media"))


# -- the fixture's bad rows are bad for the read path itself -------------------------------
@pytest.mark.parametrize("key", ["svg", "corrupt", "bomb"])
def test_bad_images_fail_their_header(media: MediaCatalog, key: str) -> None:
    with pytest.raises(DecodeError, match=BAD_PICS[key]):
        image_info(media.images[key], where="x")


def test_truncated_image_has_a_header_but_no_pixels(media: MediaCatalog) -> None:
    assert image_info(media.images["truncated"], where="x").width == 300
    with pytest.raises(DecodeError, match="truncated"):
        open_image(media.images["truncated"], where="x")


def test_exif_fixtures_are_stored_turned(media: MediaCatalog) -> None:
    stored = Image.open(io.BytesIO(media.images["exif-6"]))
    assert stored.size == (300, 200) and open_image(media.images["exif-6"], where="x").size == (200, 300)


def test_bad_clips_are_bad(media: MediaCatalog) -> None:
    for key, cause in BAD_CLIPS.items():
        with pytest.raises(DecodeError, match=cause):
            probe(media.videos[key], where="x")
    assert probe(media.videos["backwards"], where="x").frame_count == CLIPS["vp9"][1]
    with pytest.raises(DecodeError, match="timestamps go backwards"):
        decode_frames(media.videos["backwards"], [BACKWARDS_FRAME], where="x")
    with pytest.raises(DecodeError, match="out of range"):
        decode_frames(media.videos["truncated"], [CLIPS["h264"][1] - 1], where="x")
