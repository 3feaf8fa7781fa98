"""The demo's ``images`` dataset: procedurally drawn shapes in varied sizes, modes and formats, with EXIF cases."""

from __future__ import annotations

import io
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
from PIL import Image, ImageDraw, ImageFont

from loaders import Catalog

from .common import DemoChanges, register_pair

NAME = "images"
ROWS = 120
ADDED = 10
CLASSES = ("circle", "square", "triangle", "star", "ring", "cross", "diamond", "arrow")
IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
SCHEMA = pa.schema([("id", pa.string()), ("image", IMAGE), ("label", pa.string()), ("caption", pa.string()), ("format", pa.string())])
_COLORS = {
    "red": (220, 40, 40),
    "orange": (240, 140, 20),
    "yellow": (235, 210, 30),
    "green": (40, 170, 70),
    "teal": (20, 160, 160),
    "blue": (40, 80, 220),
    "purple": (140, 60, 200),
    "pink": (235, 110, 170),
}
_RATIOS = (1.0, 4 / 3, 3 / 4, 16 / 9, 9 / 16, 2.0, 0.5)
_EXT = {"PNG": "png", "JPEG": "jpg", "WEBP": "webp"}

#: Rows with a special mode or EXIF case, by row number: (mode tag, format, caption note).
SPECIAL: dict[int, tuple[str, str, str]] = {
    3: ("L", "PNG", "grayscale (mode L) PNG"),
    7: ("P", "PNG", "palette (mode P) PNG with 16 colours"),
    11: ("P-transparent", "PNG", "palette PNG with a transparent background"),
    15: ("RGBA", "PNG", "RGBA PNG with a transparent background"),
    19: ("I;16", "PNG", "16-bit grayscale PNG (values span 0-65535)"),
    23: ("exif-6", "JPEG", "EXIF orientation 6: stored rotated 90°; the arrow points up only with EXIF applied"),
    27: ("CMYK", "JPEG", "CMYK JPEG"),
    31: ("L", "JPEG", "grayscale JPEG"),
    35: ("LA", "PNG", "grayscale PNG with alpha (mode LA)"),
    39: ("exif-3", "JPEG", "EXIF orientation 3: stored upside down; the arrow points up only with EXIF applied"),
}


@dataclass(frozen=True)
class _Spec:
    number: int
    label: str
    color: str
    width: int
    height: int
    format: str
    quality: int
    special: str | None


def _key(number: int) -> str:
    return f"img-{number:04d}"


def _spec(number: int, seed: int) -> _Spec:
    rng = np.random.default_rng([seed, number])
    special = SPECIAL.get(number)
    label = "arrow" if special and special[0].startswith("exif") else CLASSES[number % len(CLASSES)]
    width = int(rng.integers(64, 641))
    height = int(np.clip(round(width / float(rng.choice(_RATIOS))), 64, 640))
    fmt = special[1] if special else str(rng.choice(["PNG", "JPEG", "WEBP"], p=[0.35, 0.4, 0.25]))
    color, quality = str(rng.choice(list(_COLORS))), int(rng.integers(80, 96))
    return _Spec(number, label, color, width, height, fmt, quality, special[0] if special else None)


def _background(width: int, height: int, rng: np.random.Generator) -> Image.Image:
    a, b = rng.integers(0, 256, size=3), rng.integers(0, 256, size=3)
    angle = rng.uniform(0, 2 * np.pi)
    ys, xs = np.mgrid[0:height, 0:width]
    t = xs * np.cos(angle) / max(width, 1) + ys * np.sin(angle) / max(height, 1)
    t = (t - t.min()) / max(float(t.max() - t.min()), 1e-9)
    pixels = a[None, None, :] * (1 - t[..., None]) + b[None, None, :] * t[..., None]
    return Image.fromarray(pixels.round().astype(np.uint8))


def _shape(draw: ImageDraw.ImageDraw, label: str, box: tuple[float, float, float, float], fill: tuple[int, ...]) -> None:
    left, top, right, bottom = box
    cx, cy, rx, ry = (left + right) / 2, (top + bottom) / 2, (right - left) / 2, (bottom - top) / 2
    if label == "circle":
        draw.ellipse(box, fill=fill)
    elif label == "square":
        draw.rectangle(box, fill=fill)
    elif label == "triangle":
        draw.polygon([(cx, top), (right, bottom), (left, bottom)], fill=fill)
    elif label == "star":
        points = []
        for k in range(10):
            radius = 1.0 if k % 2 == 0 else 0.45
            angle = -np.pi / 2 + k * np.pi / 5
            points.append((cx + rx * radius * np.cos(angle), cy + ry * radius * np.sin(angle)))
        draw.polygon(points, fill=fill)
    elif label == "ring":
        draw.ellipse(box, outline=fill, width=max(3, int(min(rx, ry) / 3)))
    elif label == "cross":
        draw.rectangle((cx - rx / 4, top, cx + rx / 4, bottom), fill=fill)
        draw.rectangle((left, cy - ry / 4, right, cy + ry / 4), fill=fill)
    elif label == "diamond":
        draw.polygon([(cx, top), (right, cy), (cx, bottom), (left, cy)], fill=fill)
    else:  # arrow, pointing up: a shaft and a red head at the top
        draw.rectangle((cx - rx / 5, cy - ry / 3, cx + rx / 5, bottom), fill=fill)
        draw.polygon([(cx, top), (right, cy - ry / 3), (left, cy - ry / 3)], fill=(230, 20, 20) + fill[3:])


def render(spec: _Spec, seed: int) -> Image.Image:
    """The upright picture of one row (RGB or RGBA), before mode conversion and encoding."""
    rng = np.random.default_rng([seed, spec.number, 1])
    width, height = spec.width, spec.height
    transparent = spec.special in ("RGBA", "P-transparent", "LA")
    img = Image.new("RGBA", (width, height), (0, 0, 0, 0)) if transparent else _background(width, height, rng)
    draw = ImageDraw.Draw(img)
    side = min(width, height)
    margin = side * 0.15
    left, top = (width - side) / 2 + margin, (height - side) / 2 + margin
    box = (left, top, left + side - 2 * margin, top + side - 2 * margin)
    fill = _COLORS[spec.color] if spec.label != "arrow" else (30, 30, 30)
    _shape(draw, spec.label, box, fill + ((255,) if transparent else ()))
    font = ImageFont.load_default(size=max(9, side // 9))
    opaque = (255,) if transparent else ()
    white, black = (255, 255, 255) + opaque, (0, 0, 0) + opaque
    draw.text((4, 2), spec.label, fill=white, font=font, stroke_width=1, stroke_fill=black)
    return img


def _exif(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    exif[0x010F] = "batchscope demo"
    exif[0x0110] = "procedural camera"
    exif[0x0132] = "2024:05:01 12:00:00"
    return exif.tobytes()


def encode(spec: _Spec, seed: int) -> bytes:
    """The stored bytes of one row: mode conversion, EXIF rotation and the row's format."""
    img = render(spec, seed)
    buffer = io.BytesIO()
    options: dict[str, object] = {"quality": spec.quality} if spec.format in ("JPEG", "WEBP") else {}
    if spec.special == "L":
        img = img.convert("L")
    elif spec.special == "LA":
        img = img.convert("LA")
    elif spec.special == "P":
        img = img.convert("RGB").quantize(16)
    elif spec.special == "P-transparent":
        alpha = np.asarray(img)[..., 3]
        quantized = img.convert("RGB").quantize(15)
        pixels = np.asarray(quantized).copy()
        pixels[alpha < 128] = 15
        img = Image.frombytes("P", quantized.size, pixels.tobytes())
        palette = (quantized.getpalette() or [])[: 15 * 3]
        img.putpalette(palette + [0] * (16 * 3 - len(palette)))
        options["transparency"] = 15
    elif spec.special == "I;16":
        ramp = np.linspace(0, 65535, spec.width, dtype=np.float64)[None, :]
        shade = np.asarray(img.convert("L"), dtype=np.float64) / 255.0
        img = Image.fromarray((ramp * (0.5 + 0.5 * shade)).round().astype(np.uint16))
    elif spec.special == "CMYK":
        img = img.convert("CMYK")
    elif spec.special in ("exif-6", "exif-3"):
        orientation = int(spec.special[-1])
        img = img.transpose(Image.Transpose.ROTATE_90 if orientation == 6 else Image.Transpose.ROTATE_180)
        options["exif"] = _exif(orientation)
    elif spec.format == "JPEG":
        img = img.convert("RGB")
    img.save(buffer, format=spec.format, **options)
    return buffer.getvalue()


def _caption(spec: _Spec) -> str:
    note = SPECIAL[spec.number][2] if spec.number in SPECIAL else None
    text = f"A {spec.color} {spec.label}, {spec.width}x{spec.height} {spec.format}"
    if spec.label == "arrow" and note:
        text = f"An arrow pointing up, {spec.width}x{spec.height} {spec.format}"
    return f"{text}; {note}" if note else text


def _row(spec: _Spec, seed: int, *, caption: str | None = None, label: str | None = None) -> dict[str, object]:
    key = _key(spec.number)
    return {
        "id": key,
        "image": {"bytes": encode(spec, seed), "path": f"{key}.{_EXT[spec.format]}"},
        "label": label or spec.label,
        "caption": caption or _caption(spec),
        "format": spec.format,
    }


def build(catalog: Catalog, *, seed: int) -> None:
    """Register ``images`` v1 and v2.

    v2 drops 8 rows, adds 10, corrects two labels that v1 had wrong, rewrites
    four captions, and re-encodes six images (three JPEGs at a lower quality,
    three PNGs as WebP); every such row is ``edited``.
    """
    rng = np.random.default_rng(seed)
    specs = {n: _spec(n, seed) for n in range(ROWS + ADDED)}
    plain = [n for n in range(ROWS) if n not in SPECIAL]
    picked = [int(n) for n in rng.permutation(plain)]
    removed, mislabeled, recaptioned = picked[:8], picked[8:10], picked[10:14]
    jpegs = [n for n in picked[14:] if specs[n].format == "JPEG"][:3]
    pngs = [n for n in picked[14:] if specs[n].format == "PNG"][:3]
    wrong = {n: CLASSES[(CLASSES.index(specs[n].label) + 1) % len(CLASSES)] for n in mislabeled}

    v1_rows = [_row(specs[n], seed, label=wrong.get(n)) for n in range(ROWS)]
    v2_specs = dict(specs)
    for n in jpegs:
        v2_specs[n] = replace(specs[n], quality=35)
    for n in pngs:
        v2_specs[n] = replace(specs[n], format="WEBP", quality=80)
    by_number = {n: row for n, row in zip(range(ROWS), v1_rows)}
    v2_rows = []
    for n in range(ROWS + ADDED):
        if n in removed:
            continue
        if n in jpegs or n in pngs:
            row = _row(v2_specs[n], seed, caption=_caption(specs[n]))
        elif n in recaptioned:
            row = {**by_number[n], "caption": _caption(specs[n]) + " (caption reviewed)"}
        elif n in mislabeled or n >= ROWS:
            row = _row(specs[n], seed)
        else:
            row = by_number[n]
        v2_rows.append(row)

    v1 = pa.Table.from_pylist(v1_rows, schema=SCHEMA)
    v2 = pa.Table.from_pylist(v2_rows, schema=SCHEMA)
    changes = DemoChanges.between(
        v1_rows,
        v2_rows,
        notes={
            "re_encoded": {
                **{_key(n): "JPEG quality lowered to 35" for n in jpegs},
                **{_key(n): "PNG re-encoded as WebP" for n in pngs},
            },
            "label_fixed": {_key(n): {"v1": wrong[n], "v2": specs[n].label} for n in mislabeled},
            "caption_edited": [_key(n) for n in recaptioned],
            "exif_rotated": {_key(n): SPECIAL[n][2] for n in SPECIAL if SPECIAL[n][0].startswith("exif")},
            "modes": {_key(n): SPECIAL[n][0] for n in SPECIAL},
        },
    )
    register_pair(catalog, NAME, v1, v2, changes, key="id", rows_per_shard=40, row_group_size=10)
