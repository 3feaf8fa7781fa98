"""Image decoding: EXIF orientation, display modes, thumbnails, crops, diffs and every kind of bad input."""

from __future__ import annotations

import inspect
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw

from loaders.errors import DecodeError, InvalidPlan
from loaders.media.crop import crop_box, draw_box, random_resized_crop
from loaders.media.image import (
    image_from_value,
    image_info,
    media_type,
    open_image,
    pixel_diff,
    render_png,
    resolve_media_path,
    thumbnail,
    to_display_mode,
)

WHERE = "dataset images version abc shard 0 row 3 column image"


def encoded(img: Image.Image, fmt: str = "PNG", **options: object) -> bytes:
    buffer = io.BytesIO()
    img.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def decoded(data: bytes) -> Image.Image:
    img = Image.open(io.BytesIO(data))
    img.load()
    return img


def upright_arrow(width: int = 60, height: int = 100) -> Image.Image:
    """White picture, black shaft, red head in the top fifth: 'up' is where the red is."""
    img = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img)
    draw.rectangle((width // 2 - 4, height // 5, width // 2 + 4, height - 5), fill="black")
    draw.polygon([(width // 2, 0), (width - 1, height // 5), (0, height // 5)], fill=(255, 0, 0))
    return img


def red_centroid(img: Image.Image) -> tuple[float, float]:
    """(x, y) centre of the red pixels, as fractions of width and height."""
    pixels = np.asarray(img.convert("RGB")).astype(int)
    red = (pixels[..., 0] > 180) & (pixels[..., 1] < 90) & (pixels[..., 2] < 90)
    ys, xs = np.nonzero(red)
    assert len(xs) > 20, "no red arrow head found"
    return xs.mean() / img.width, ys.mean() / img.height


def png_header_only(width: int, height: int, color_type: int = 0) -> bytes:
    """A tiny PNG claiming ``width`` x ``height`` pixels (8-bit gray, or RGB for 2) with almost no data."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


# -- EXIF orientation ------------------------------------------------------------
# Stored pixels = the inverse of what the EXIF orientation asks a viewer to do.
_STORED = {3: Image.Transpose.ROTATE_180, 6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270}


@pytest.mark.parametrize("orientation", sorted(_STORED))
def test_exif_orientation_is_applied_to_pixels(orientation: int) -> None:
    stored = upright_arrow().transpose(_STORED[orientation])
    exif = Image.Exif()
    exif[0x0112] = orientation
    exif[0x010F] = "Example camera maker"
    data = encoded(stored, "JPEG", quality=95, exif=exif.tobytes())

    raw_x, raw_y = red_centroid(decoded(data))
    assert not (0.4 < raw_x < 0.6 and raw_y < 0.3), "the stored pixels must not already be upright"

    shown = open_image(data, where=WHERE)
    assert shown.size == (60, 100)
    x, y = red_centroid(shown)
    assert 0.4 < x < 0.6 and y < 0.2

    info = image_info(data, where=WHERE)
    assert (info.width, info.height) == (60, 100)
    assert info.orientation == orientation
    assert info.exif["Make"] == "Example camera maker"
    assert info.exif["Orientation"] == str(orientation)
    assert info.format == "JPEG" and info.mode == "RGB" and info.byte_size == len(data)

    x, y = red_centroid(decoded(thumbnail(data, max_side=50, where=WHERE)))
    assert 0.4 < x < 0.6 and y < 0.2


def test_image_without_exif_has_no_orientation() -> None:
    info = image_info(encoded(Image.new("RGB", (7, 5))), where=WHERE)
    assert (info.format, info.width, info.height, info.orientation, info.exif) == ("PNG", 7, 5, None, {})


# -- display modes and thumbnails -------------------------------------------------
def _gradient(width: int = 300, height: int = 200) -> np.ndarray:
    return np.tile(np.linspace(0, 1, width), (height, 1))


def _palette(transparent: bool) -> bytes:
    img = Image.fromarray((_gradient() * 255).astype(np.uint8)).convert("RGB").quantize(8)
    if transparent:
        pixels = np.asarray(img).copy()
        pixels[:, :40] = 7
        img = Image.frombytes("P", img.size, pixels.tobytes())
        img.putpalette(list(range(24)))
        return encoded(img, transparency=7)
    return encoded(img)


_CASES = {
    "L": lambda: encoded(Image.fromarray((_gradient() * 255).astype(np.uint8))),
    "1": lambda: encoded(Image.fromarray(_gradient() > 0.5)),
    "P": lambda: _palette(False),
    "P-transparent": lambda: _palette(True),
    "RGBA": lambda: encoded(Image.new("RGBA", (300, 200), (255, 0, 0, 0)).crop((0, 0, 300, 200))),
    "LA": lambda: encoded(Image.merge("LA", [Image.new("L", (300, 200), 90), Image.new("L", (300, 200), 0)])),
    "I;16": lambda: encoded(Image.fromarray((_gradient() * 65535).astype(np.uint16))),
    "I": lambda: encoded(Image.fromarray((_gradient() * 1_000_000).astype(np.int32)), "TIFF"),
    "CMYK": lambda: encoded(Image.new("CMYK", (300, 200), (0, 255, 255, 0)), "JPEG"),
    "RGB-JPEG": lambda: encoded(Image.new("RGB", (300, 200), (10, 200, 30)), "JPEG"),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_thumbnail_has_a_displayable_mode(case: str) -> None:
    data = _CASES[case]()
    thumb = thumbnail(data, max_side=64, where=WHERE)
    img = decoded(thumb)
    assert max(img.size) == 64 and abs(img.width / img.height - 1.5) < 0.05
    alpha = case in ("RGBA", "LA", "P-transparent")
    assert media_type(thumb) == ("image/png" if alpha else "image/webp")
    assert img.mode in (("RGBA", "LA") if alpha else ("RGB",))
    if alpha:
        assert np.asarray(img.getchannel("A")).min() == 0, "transparency was lost"
    pixels = np.asarray(img.convert("RGB")).astype(int)
    if case in ("L", "1", "I;16", "I", "LA"):
        assert np.abs(pixels[..., 0] - pixels[..., 1]).max() <= 3, "grayscale came out coloured"
    if case in ("L", "I;16", "I"):
        # a full-range gradient must stay a gradient, not clip to white or black
        assert pixels[..., 0].min() < 30 and pixels[..., 0].max() > 225
        assert len(np.unique(pixels[..., 0])) > 40
    if case == "CMYK":
        red = pixels.reshape(-1, 3).mean(axis=0)
        assert red[0] > 200 and red[1] < 60 and red[2] < 60


def test_to_display_mode_scales_wide_integer_images() -> None:
    wide = Image.fromarray(np.array([[-5, 0, 2_000_000]], dtype=np.int32))
    assert list(np.asarray(to_display_mode(wide))[0]) == [0, 0, 255]
    small = Image.fromarray(np.array([[0, 7, 255]], dtype=np.int32))
    assert list(np.asarray(to_display_mode(small))[0]) == [0, 7, 255]
    assert to_display_mode(Image.new("I;16", (1, 1), 0x8000)).getpixel((0, 0)) == 0x80


def test_large_jpeg_thumbnail_is_small_and_upright() -> None:
    big = Image.fromarray((np.random.default_rng(0).random((3000, 4000, 3)) * 255).astype(np.uint8))
    thumb = decoded(thumbnail(encoded(big, "JPEG", quality=80), where=WHERE))
    assert thumb.size == (256, 192)


def test_render_png_round_trips_pixels() -> None:
    img = Image.fromarray(np.arange(48, dtype=np.uint8).reshape(4, 4, 3))
    assert np.array_equal(np.asarray(decoded(render_png(img))), np.asarray(img))


# -- bad input -----------------------------------------------------------------
_GOOD_PNG = encoded(Image.fromarray((np.random.default_rng(1).random((120, 160, 3)) * 255).astype(np.uint8)))
_GOOD_JPEG = encoded(Image.fromarray((np.random.default_rng(2).random((120, 160, 3)) * 255).astype(np.uint8)), "JPEG")


@pytest.mark.parametrize(
    "name, data",
    [
        ("truncated PNG", _GOOD_PNG[: len(_GOOD_PNG) // 2]),
        ("truncated JPEG", _GOOD_JPEG[: len(_GOOD_JPEG) // 2]),
        ("random bytes", np.random.default_rng(3).bytes(4000)),
        ("empty", b""),
        ("PNG signature only", b"\x89PNG\r\n\x1a\n"),
        ("text", b"this is not an image at all"),
    ],
)
def test_undecodable_images_raise_decode_error_naming_where(name: str, data: bytes) -> None:
    for call in (lambda: open_image(data, where=WHERE), lambda: thumbnail(data, where=WHERE)):
        with pytest.raises(DecodeError) as caught:
            call()
        assert str(caught.value).startswith(f"{WHERE}: cannot decode image:")


_SAMPLES = [
    encoded(Image.fromarray((np.random.default_rng(6).random((40, 50, 3)) * 255).astype(np.uint8)), fmt)
    for fmt in ("PNG", "JPEG", "WEBP", "GIF", "TIFF", "BMP")
]


@pytest.mark.filterwarnings("ignore")
@settings(max_examples=150, deadline=None)
@given(
    sample=st.sampled_from(range(len(_SAMPLES))),
    edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=6),
    keep=st.floats(0.05, 1.0),
)
def test_damaged_images_decode_or_raise_decode_error(sample: int, edits: list[tuple[float, int]], keep: float) -> None:
    data = bytearray(_SAMPLES[sample])
    for position, value in edits:
        data[int(position * len(data))] = value
    data = bytes(data[: max(1, int(keep * len(data)))])
    for call in (thumbnail, image_info):
        try:
            call(data, where=WHERE)
        except DecodeError as exc:
            assert str(exc).startswith(WHERE)


def test_image_info_reads_headers_only() -> None:
    info = image_info(_GOOD_PNG[: len(_GOOD_PNG) // 2], where=WHERE)
    assert (info.width, info.height, info.mode) == (160, 120, "RGB")


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
@pytest.mark.parametrize("side", [50_000, 10_000])
def test_decompression_bomb_is_refused_from_the_header(side: int) -> None:
    """50,000² is past Pillow's hard limit; 10,000² is only past its warning limit, which we enforce too."""
    bomb = png_header_only(side, side)
    assert len(bomb) < 200
    limit = Image.MAX_IMAGE_PIXELS
    for call in (open_image, image_info, thumbnail):
        with pytest.raises(DecodeError) as caught:
            call(bomb, where=WHERE)
        message = str(caught.value)
        assert message.startswith(WHERE) and (f"{side}x{side}" in message or "decompression bomb" in message)
    assert Image.MAX_IMAGE_PIXELS == limit and limit is not None


def test_decompression_bomb_is_refused_without_a_big_allocation(tmp_path: Path) -> None:
    """With only 200 MB of address space to spare, allocating a 10,000² RGB image (300 MB) would fail."""
    script = tmp_path / "bomb.py"
    script.write_text(
        "import resource, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from loaders.errors import DecodeError\n"
        "from loaders.media.image import open_image, thumbnail\n"
        + inspect.getsource(png_header_only)
        + "pages = int(open('/proc/self/statm').read().split()[0])\n"
        "spare = pages * resource.getpagesize() + (200 << 20)\n"
        "resource.setrlimit(resource.RLIMIT_AS, (spare, spare))\n"
        "for side in (50_000, 10_000):\n"
        "    for call in (open_image, thumbnail):\n"
        "        try:\n"
        "            call(png_header_only(side, side, 2), where='bomb')\n"
        "        except DecodeError as exc:\n"
        "            print('refused', side)\n"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, str(script), str(root)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:8] == ["refused", "50000"] * 2 + ["refused", "10000"] * 2


# -- values and paths --------------------------------------------------------------
def test_image_from_value_shapes() -> None:
    assert image_from_value(b"abc") == b"abc"
    assert image_from_value(memoryview(b"abc")) == b"abc"
    assert image_from_value({"bytes": b"png", "path": "a.png"}) == b"png"
    assert image_from_value({"bytes": None, "path": "media/a.png"}) is None
    for bad in (None, {"bytes": None, "path": None}, {"other": 1}, 42):
        with pytest.raises(DecodeError, match="^row 9: "):
            image_from_value(bad, where="row 9")


def test_resolve_media_path_stays_inside_the_shard_directory(tmp_path: Path) -> None:
    shard = str(tmp_path / "v1" / "part-00000.parquet")
    assert resolve_media_path("media/a.png", shard_uri=shard, where="x") == str(tmp_path / "v1" / "media" / "a.png")
    assert resolve_media_path("./a.png", shard_uri=shard, where="x") == str(tmp_path / "v1" / "a.png")
    assert resolve_media_path("a.png", shard_uri="s3://b/d/part-0.parquet", where="x") == "s3://b/d/a.png"
    for hostile in ("../secret.png", "media/../../x.png", "/etc/passwd", "file:///etc/passwd", "", "."):
        with pytest.raises(DecodeError, match="^row 2: media path"):
            resolve_media_path(hostile, shard_uri=shard, where="row 2")
    assert resolve_media_path("/data/a.png", shard_uri=shard, where="x", allow_absolute=True) == "/data/a.png"


# -- crops, boxes, diffs ----------------------------------------------------------
def test_random_resized_crop_is_deterministic_given_the_rng() -> None:
    img = Image.fromarray((np.random.default_rng(4).random((90, 120, 3)) * 255).astype(np.uint8))
    first = random_resized_crop(img, np.random.default_rng(7), size=(32, 48))
    second = random_resized_crop(img, np.random.default_rng(7), size=(32, 48))
    assert first[1] == second[1] and np.array_equal(np.asarray(first[0]), np.asarray(second[0]))
    assert first[0].size == (48, 32)  # size is (height, width), as in torchvision
    left, top, right, bottom = first[1]
    expected = img.resize((48, 32), Image.Resampling.BILINEAR, box=first[1])
    assert np.array_equal(np.asarray(first[0]), np.asarray(expected))
    assert 0 <= left < right <= 120 and 0 <= top < bottom <= 90


def test_random_resized_crop_falls_back_to_a_center_crop() -> None:
    # a 2:1 crop of the whole area never fits a square; after 10 tries the center crop clamps to ratio 2
    assert crop_box(100, 100, np.random.default_rng(0), scale=(1.0, 1.0), ratio=(2.0, 2.0)) == (0, 25, 100, 75)
    assert crop_box(300, 100, np.random.default_rng(0), scale=(1.0, 1.0), ratio=(0.5, 1.0)) == (100, 0, 200, 100)
    assert crop_box(120, 100, np.random.default_rng(0), scale=(1.0, 1.0), ratio=(0.5, 2.0)) == (0, 0, 120, 100)


@settings(max_examples=60, deadline=None)
@given(
    width=st.integers(1, 400),
    height=st.integers(1, 400),
    seed=st.integers(0, 2**32 - 1),
    low=st.floats(0.01, 1.0),
)
def test_crop_box_stays_inside_and_respects_the_scale(width: int, height: int, seed: int, low: float) -> None:
    left, top, right, bottom = crop_box(width, height, np.random.default_rng(seed), scale=(low, 1.0))
    assert 0 <= left < right <= width and 0 <= top < bottom <= height
    w, h = right - left, bottom - top
    fallback = (w == width or h == height) and left == (width - w) // 2 and top == (height - h) // 2
    if not fallback:
        # rounding w and h each moves the area by at most about (w + h) / 2 + 1 pixels
        assert w * h >= low * width * height - (w + h) / 2 - 1
        assert 3 / 4 * h - 1 <= w <= 4 / 3 * h + 1


def test_crop_options_are_validated() -> None:
    img = Image.new("RGB", (10, 10))
    with pytest.raises(InvalidPlan, match="scale"):
        random_resized_crop(img, np.random.default_rng(0), size=(4, 4), scale=(0.9, 0.1))
    with pytest.raises(InvalidPlan, match="size"):
        random_resized_crop(img, np.random.default_rng(0), size=(0, 4))


def test_draw_box_outlines_a_copy() -> None:
    img = Image.new("L", (40, 30), 128)
    boxed = draw_box(img, (5, 6, 25, 20))
    assert img.getpixel((5, 10)) == 128, "the original was modified"
    assert boxed.mode == "RGB" and boxed.getpixel((5, 10)) == (255, 32, 32)
    assert boxed.getpixel((24, 19)) == (255, 32, 32) and boxed.getpixel((15, 13)) == (128, 128, 128)


def test_pixel_diff_marks_changed_pixels() -> None:
    base = np.full((20, 30, 3), 100, np.uint8)
    changed = base.copy()
    changed[5, 7] = (200, 100, 100)
    diff = pixel_diff(encoded(Image.fromarray(base)), encoded(Image.fromarray(changed)), where=WHERE)
    heat = np.asarray(decoded(diff))
    assert heat.shape == (20, 30, 3)
    assert heat[5, 7].sum() > 300 and np.count_nonzero(heat.sum(axis=-1)) == 1
    same = np.asarray(decoded(pixel_diff(encoded(Image.fromarray(base)), encoded(Image.fromarray(base)), where=WHERE)))
    assert same.max() == 0
    assert pixel_diff(encoded(Image.new("RGB", (3, 3))), encoded(Image.new("RGB", (4, 3))), where=WHERE) is None
    with pytest.raises(DecodeError, match="second image"):
        pixel_diff(encoded(Image.new("RGB", (3, 3))), b"junk", where=WHERE)


def test_media_type_sniffs_signatures() -> None:
    assert media_type(_GOOD_JPEG) == "image/jpeg"
    assert media_type(encoded(Image.new("RGB", (2, 2)), "WEBP")) == "image/webp"
    assert media_type(b"????") == "application/octet-stream"
