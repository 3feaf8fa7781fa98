"""Random resized crops from encoded images: the full-size path is exactly the old one; reduced-scale JPEG decoding stays close."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from loaders import Catalog, RandomResizedCrop, ReadPlan, Source
from loaders.errors import DecodeError, InvalidPlan
from loaders.media import decode_crop, open_image, random_resized_crop, thumbnail, to_display_mode
from loaders.media.crop import reduced_box
from loaders.transforms.base import transform_from_json

WHERE = "dataset crops version abc shard 0 row 1 column image"

#: How to store an upright picture so that a viewer applying EXIF ``orientation`` shows it upright again.
_STORED = {
    1: None,
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_90,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_270,
}


def cells(width: int, height: int, *, seed: int = 0, cell: int = 40) -> Image.Image:
    """Cells of random colours with sharp edges (so a misplaced box shows) and a little noise."""
    rng = np.random.default_rng(seed)
    colours = rng.integers(0, 256, size=(height // cell + 1, width // cell + 1, 3), dtype=np.uint8)
    pixels = np.repeat(np.repeat(colours, cell, 0), cell, 1)[:height, :width].astype(np.int16)
    pixels += rng.normal(0, 4, pixels.shape).astype(np.int16)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def jpeg(img: Image.Image, *, orientation: int = 1, quality: int = 92) -> bytes:
    """``img`` stored so that EXIF ``orientation`` turns it upright again."""
    stored = img if _STORED[orientation] is None else img.transpose(_STORED[orientation])
    exif = Image.Exif()
    exif[0x0112] = orientation
    buffer = io.BytesIO()
    stored.save(buffer, format="JPEG", quality=quality, exif=exif.tobytes())
    return buffer.getvalue()


def psnr(a: Image.Image, b: Image.Image) -> float:
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return 10 * np.log10(255**2 / max(mse, 1e-12))


def full_size_crop(data: bytes, seed: int, **options: object) -> tuple[Image.Image, tuple[int, int, int, int]]:
    """The crop as it was always made: decode at full size, upright, RGB, then ``random_resized_crop``."""
    image = to_display_mode(open_image(data, where=WHERE)).convert("RGB")
    return random_resized_crop(image, np.random.default_rng(seed), **options)  # type: ignore[arg-type]


# -- the full-size path is unchanged ---------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), low=st.floats(0.05, 1.0), orientation=st.sampled_from(sorted(_STORED)))
def test_without_reduction_the_crop_is_exactly_the_full_size_crop(seed: int, low: float, orientation: int) -> None:
    data = jpeg(cells(203, 151, seed=3), orientation=orientation)
    crop = decode_crop(data, np.random.default_rng(seed), size=(24, 32), scale=(low, 1.0), reduced=False, where=WHERE)
    expected, box = full_size_crop(data, seed, size=(24, 32), scale=(low, 1.0))
    assert crop.box == box and crop.reduction == 1
    assert crop.source_size == (203, 151)  # upright, whatever the stored orientation
    assert np.array_equal(np.asarray(crop.image), np.asarray(expected))


@pytest.mark.parametrize("fmt", ["PNG", "WEBP", "GIF"])
def test_other_formats_are_decoded_at_full_size(fmt: str) -> None:
    buffer = io.BytesIO()
    cells(800, 600).save(buffer, format=fmt)
    data = buffer.getvalue()
    for seed in range(3):
        crop = decode_crop(data, np.random.default_rng(seed), size=(32, 32), where=WHERE)
        expected, box = full_size_crop(data, seed, size=(32, 32))
        assert crop.reduction == 1 and crop.box == box
        assert np.array_equal(np.asarray(crop.image), np.asarray(expected))


def test_a_jpeg_crop_shrunk_less_than_twice_is_decoded_at_full_size() -> None:
    data = jpeg(cells(300, 200))
    # the whole 300x200 image into 160x120: shrinks less than 2x in height (200 / 120)
    crop = decode_crop(data, np.random.default_rng(0), size=(120, 160), scale=(1.0, 1.0), ratio=(1.5, 1.5), where=WHERE)
    expected, box = full_size_crop(data, 0, size=(120, 160), scale=(1.0, 1.0), ratio=(1.5, 1.5))
    assert crop.reduction == 1 and crop.box == box == (0, 0, 300, 200)
    assert np.array_equal(np.asarray(crop.image), np.asarray(expected))


# -- reduced-scale decoding ------------------------------------------------------------------------
@pytest.mark.parametrize("orientation", sorted(_STORED))
def test_reduced_decoding_draws_the_same_box_and_stays_close(orientation: int) -> None:
    # 1003x757 is not a multiple of 8, so a flipped axis must account for the rounded-up decoded size
    data = jpeg(cells(1003, 757), orientation=orientation)
    reductions = set()
    for seed in range(6):
        reduced = decode_crop(data, np.random.default_rng(seed), size=(48, 64), scale=(0.2, 1.0), where=WHERE)
        expected, box = full_size_crop(data, seed, size=(48, 64), scale=(0.2, 1.0))
        assert reduced.box == box, "the box is drawn on the full-size upright image"
        assert reduced.source_size == (1003, 757)
        assert reduced.image.size == (64, 48) and reduced.image.mode == "RGB"
        assert psnr(reduced.image, expected) > 30, f"seed {seed}: the reduced crop is not where the box is"
        reductions.add(reduced.reduction)
    assert reductions <= {2, 4, 8} and len(reductions) >= 1


def test_a_photo_crop_is_nearly_identical() -> None:
    ys, xs = np.mgrid[0:1200, 0:1600].astype(np.float32)
    rng = np.random.default_rng(5)
    pixels = np.stack([128 + 100 * np.sin(xs / 90) * np.cos(ys / 70), 128 + 90 * np.sin((xs + ys) / 120), xs / 1600 * 255], -1)
    pixels += rng.normal(0, 5, pixels.shape[:2] + (1,))
    data = jpeg(Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)), quality=90)
    for seed in range(4):
        reduced = decode_crop(data, np.random.default_rng(seed), size=(64, 64), scale=(0.3, 1.0), where=WHERE)
        expected, _ = full_size_crop(data, seed, size=(64, 64), scale=(0.3, 1.0))
        assert reduced.reduction >= 4
        difference = np.abs(np.asarray(reduced.image, np.int16) - np.asarray(expected, np.int16))
        assert difference.mean() < 1.0 and psnr(reduced.image, expected) > 40


@settings(max_examples=30, deadline=None)
@given(
    width=st.integers(64, 900),
    height=st.integers(64, 900),
    out=st.integers(8, 96),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_reduction_is_the_largest_that_keeps_the_box_at_least_the_output(width: int, height: int, out: int, seed: int) -> None:
    data = jpeg(cells(width, height, cell=16), quality=70)
    crop = decode_crop(data, np.random.default_rng(seed), size=(out, out), scale=(0.1, 1.0), where=WHERE)
    box_w, box_h = crop.box[2] - crop.box[0], crop.box[3] - crop.box[1]
    shrink = min(box_w, box_h) / out
    assert crop.reduction in (1, 2, 4, 8)
    if crop.reduction > 1:
        assert shrink >= crop.reduction, "decoded smaller than the output: the crop would be upscaled"
    if crop.reduction < 8:
        assert shrink < 2 * crop.reduction, "a larger reduction was possible"


@pytest.mark.parametrize("orientation", sorted(_STORED))
def test_reduced_box_without_reduction_is_the_box(orientation: int) -> None:
    stored = (70, 40)
    upright = (40, 70) if orientation >= 5 else (70, 40)
    box = (3, 5, upright[0] - 7, upright[1] - 2)
    assert reduced_box(box, orientation=orientation, stored_size=stored, decoded_size=stored, reduction=1) == box


def test_bad_bytes_fail_naming_the_sample() -> None:
    with pytest.raises(DecodeError, match=f"^{WHERE}: cannot decode image"):
        decode_crop(jpeg(cells(400, 300))[:2000], np.random.default_rng(0), size=(32, 32), where=WHERE)
    with pytest.raises(InvalidPlan, match="size"):
        decode_crop(jpeg(cells(40, 30)), np.random.default_rng(0), size=(0, 32), where=WHERE)


# -- thumbnails -------------------------------------------------------------------------------------
def test_a_wide_jpeg_thumbnail_has_the_right_size_and_pixels() -> None:
    wide = cells(2400, 600, cell=100)
    thumb = Image.open(io.BytesIO(thumbnail(jpeg(wide), max_side=240, where=WHERE))).convert("RGB")
    assert thumb.size == (240, 60)
    reference = wide.resize((240, 60), Image.Resampling.LANCZOS)
    assert psnr(thumb, reference) > 25


# -- the transform ------------------------------------------------------------------------------------
def test_the_transform_records_its_decoding_and_validates_it() -> None:
    transform = RandomResizedCrop("image", size=(32, 32))
    assert transform.to_json()["reduced_decode"] is True
    exact = transform_from_json({**transform.to_json(), "reduced_decode": False})
    assert exact == RandomResizedCrop("image", size=(32, 32), reduced_decode=False)
    with pytest.raises(InvalidPlan, match="reduced_decode"):
        RandomResizedCrop("image", reduced_decode="yes")  # type: ignore[arg-type]


def test_the_reader_and_run_batch_give_the_same_crops(tmp_path) -> None:
    images = [jpeg(cells(640, 480, seed=i)) for i in range(6)]
    media = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table({"id": [f"img-{i}" for i in range(6)], "image": pa.array([{"bytes": d, "path": None} for d in images], media)})
    pq.write_table(table, tmp_path / "images.parquet", row_group_size=2)
    catalog = Catalog(tmp_path / "catalog")
    catalog.register("images", [str(tmp_path / "images.parquet")], key="id", tag="v1", kinds={"image": "image"})
    plans = {
        reduced: ReadPlan(
            [Source("images@v1", transforms=[RandomResizedCrop("image", size=(32, 32), scale=(0.5, 1.0), reduced_decode=reduced)])],
            seed=3,
            global_batch_size=3,
            steps=2,
            streams=1,
        )
        for reduced in (True, False)
    }
    fast, exact = (catalog.create_run(f"crops-{reduced}", plan) for reduced, plan in plans.items())
    with fast.reader(0, 1, ledger=False) as reader:
        read = list(reader)
    for step, batch in enumerate(read):
        again, full = fast.batch(step), exact.batch(step)
        assert batch.digest == again.digest
        for mine, other, reference in zip(batch.samples, again.samples, full.samples):
            assert np.array_equal(mine.inputs["image"], other.inputs["image"])
            assert mine.inputs["crop_box"] == reference.inputs["crop_box"] and mine.inputs["source_size"] == [640, 480]
            assert np.abs(mine.inputs["image"].astype(np.int16) - reference.inputs["image"]).mean() < 8
