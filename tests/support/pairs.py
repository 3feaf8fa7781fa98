"""Small ``v1``/``v2`` pairs of text, chat tokens, images and clips, with what changed: the diff views' catalog.

Every pair is a few rows in 2-row row groups over several shards, built offline
in a second or two; ``DiffCatalog.changes`` holds the keys each builder added,
removed and edited, and notes naming the rows a test wants (a typo fixed, a
re-encoded picture or clip).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
from PIL import Image

from loaders import Catalog, DatasetVersion
from loaders.media import draw_frame_code, encode_video
from loaders.transforms.chat import render_chat
from tests.support.versions import Changes, register_pair

MEDIA = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
CHAT_TOKENIZER = "diff-words"


@dataclass
class DiffCatalog:
    """The catalog and, by dataset name, the changes from ``v1`` to ``v2``."""

    catalog: Catalog
    changes: dict[str, Changes] = field(default_factory=dict)

    @property
    def root(self) -> str:
        return self.catalog.root

    def resolve(self, ref: str) -> DatasetVersion:
        return self.catalog.resolve(ref)


# -- web-text: typos fixed (same length), sentences appended (n_chars changes) ----------------------
TYPOS = {3: ("teh", "the"), 8: ("recieve", "receive"), 14: ("wierd", "weird")}
APPENDED = (5, 12, 20)


def _text(i: int) -> str:
    typo = TYPOS.get(i, ("plain", "plain"))[0]
    return f"Document {i} is a {typo} note about topic {i % 5}, written for the diff tests."


def text_pair(catalog: Catalog, *, rows: int = 24) -> Changes:
    """``web-text``: ``rows`` documents; v2 removes 3, adds 4, fixes 3 typos and appends a sentence to 3."""
    v1 = [{"id": f"doc-{i:03d}", "text": _text(i)} for i in range(rows)]
    v2 = []
    for i, row in enumerate(v1):
        if i in (2, 11, 19):
            continue
        text = row["text"].replace(*TYPOS[i]) if i in TYPOS else row["text"]
        v2.append({"id": row["id"], "text": text + (" A sentence added in v2." if i in APPENDED else "")})
    v2 += [{"id": f"doc-{i:03d}", "text": f"Document {i} is new in v2."} for i in range(rows, rows + 4)]
    for table in (v1, v2):
        for row in table:
            row["n_chars"] = len(row["text"])
    register_pair(catalog, "web-text", pa.Table.from_pylist(v1), pa.Table.from_pylist(v2), rows_per_shard=8)
    return Changes.between(v1, v2, edits={"typo_fixed": [f"doc-{i:03d}" for i in TYPOS], "appended": [f"doc-{i:03d}" for i in APPENDED]})


# -- sft-chat: rendered by the read path's ChatML template, answers edited -----------------------------
def _chat(i: int, answer: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "answer in one word"},
        {"role": "user", "content": f"name colour number {i}"},
        {"role": "assistant", "content": answer},
    ]


def chat_pair(catalog: Catalog) -> Changes:
    """``sft-chat``: 6 chats with ``input_ids``/``loss_mask``; v2 edits 2 answers, removes one chat and adds one."""
    from tests.conftest import word_tokenizer

    answers = ["red", "blue", "green", "amber", "violet", "grey"]
    words = sorted({w for i in range(7) for m in _chat(i, "") for w in f"{m['role']} {m['content']}".split()} | {*answers, "teal", "gold"})
    catalog.put_tokenizer(CHAT_TOKENIZER, word_tokenizer(words))
    tokenizer = catalog.tokenizer(CHAT_TOKENIZER)

    def row(i: int, answer: str) -> dict[str, object]:
        rendered = render_chat(_chat(i, answer), tokenizer)
        return {
            "id": f"chat-{i}",
            "messages": _chat(i, answer),
            "input_ids": list(rendered.input_ids),
            "loss_mask": list(rendered.loss_mask),
        }

    v1 = [row(i, answer) for i, answer in enumerate(answers)]
    v2 = [row(i, {1: "teal", 4: "gold"}.get(i, answer)) for i, answer in enumerate(answers) if i != 3] + [row(6, "red")]
    schema = pa.schema(
        [("id", pa.string()), ("messages", MESSAGES), ("input_ids", pa.list_(pa.int32())), ("loss_mask", pa.list_(pa.int8()))]
    )
    register_pair(
        catalog, "sft-chat", pa.Table.from_pylist(v1, schema), pa.Table.from_pylist(v2, schema), rows_per_shard=4, tokenizer=CHAT_TOKENIZER
    )
    return Changes.between(v1, v2)


# -- images: small pictures; v2 re-encodes JPEGs at a lower quality (same size) --------------------
def picture(i: int, *, fmt: str, quality: int = 92) -> bytes:
    """Picture ``i``: a coloured block on a gradient, ``40 + 8·(i % 7)`` by ``30 + 6·(i % 5)`` pixels."""
    width, height = 40 + 8 * (i % 7), 30 + 6 * (i % 5)
    ramp = np.linspace(0, 255, width, dtype=np.float64)
    pixels = np.stack([np.tile(ramp, (height, 1)), np.full((height, width), 37 * i % 256), np.tile(ramp[::-1], (height, 1))], axis=-1)
    pixels[height // 4 : height // 2, width // 4 : width // 2] = (230, 20, 20)
    buffer = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8)).save(buffer, format=fmt, **({"quality": quality} if fmt == "JPEG" else {}))
    return buffer.getvalue()


def _image_row(i: int, *, quality: int = 92, label: str | None = None, caption: str | None = None) -> dict[str, object]:
    fmt = "JPEG" if i % 2 else "PNG"
    key = f"img-{i:04d}"
    return {
        "id": key,
        "image": {"bytes": picture(i, fmt=fmt, quality=quality), "path": f"{key}.{fmt.lower()}"},
        "label": label or ("block", "stripe", "dot")[i % 3],
        "caption": caption or f"picture {i}, a red block on a gradient",
        "format": fmt,
    }


def image_pair(catalog: Catalog, *, rows: int = 12) -> Changes:
    """``images``: ``rows`` PNG and JPEG pictures; v2 removes 2, adds 2, re-encodes 2 JPEGs at quality 35, relabels one
    and rewrites one caption."""
    removed, re_encoded, relabeled, recaptioned = (0, 6), (1, 3), 4, 8
    v1 = [_image_row(i) for i in range(rows)]
    v2 = [
        _image_row(
            i,
            quality=35 if i in re_encoded else 92,
            label="ring" if i == relabeled else None,
            caption="picture reviewed in v2" if i == recaptioned else None,
        )  # fmt: skip
        for i in range(rows + 2)
        if i not in removed
    ]
    schema = pa.schema([("id", pa.string()), ("image", MEDIA), ("label", pa.string()), ("caption", pa.string()), ("format", pa.string())])
    register_pair(catalog, "images", pa.Table.from_pylist(v1, schema), pa.Table.from_pylist(v2, schema), rows_per_shard=5)
    return Changes.between(v1, v2, re_encoded={f"img-{i:04d}": "JPEG quality lowered to 35" for i in re_encoded})


# -- videos: clips whose every frame carries its index; v2 re-encodes one --------------------------
def clip(i: int, *, crf: int = 28, gop: int = 4) -> bytes:
    """Clip ``i``: 8 frames of 64×48 at 8 fps, each carrying its frame code."""
    frames = [np.asarray(draw_frame_code(Image.new("RGB", (64, 48), (20 * i % 256, 90, 160 + t * 10)), t)) for t in range(8)]
    return encode_video(frames, fps=8, gop=gop, crf=crf)


def video_pair(catalog: Catalog) -> Changes:
    """``videos``: 3 H.264 clips; v2 drops one, adds one and re-encodes one at a lower quality with 8-frame keyframes."""
    encoded = {i: clip(i) for i in range(4)}
    row = lambda i, data: {"id": f"clip-{i:03d}", "video": {"bytes": data, "path": f"clip-{i:03d}.mp4"}, "caption": f"clip {i}"}  # noqa: E731
    v1 = [row(i, encoded[i]) for i in range(3)]
    v2 = [row(0, encoded[0]), row(1, clip(1, crf=40, gop=8)), row(3, encoded[3])]
    schema = pa.schema([("id", pa.string()), ("video", MEDIA), ("caption", pa.string())])
    register_pair(catalog, "videos", pa.Table.from_pylist(v1, schema), pa.Table.from_pylist(v2, schema), rows_per_shard=2)
    return Changes.between(v1, v2, re_encoded={"clip-001": "crf 28 -> 40, keyframe interval 4 -> 8 frames"})


def build_diff_catalog(root: Path) -> DiffCatalog:
    """Every pair in one catalog under ``root``."""
    catalog = Catalog(str(root / "catalog"))
    changes = {
        "web-text": text_pair(catalog),
        "sft-chat": chat_pair(catalog),
        "images": image_pair(catalog),
        "videos": video_pair(catalog),
    }
    return DiffCatalog(catalog, changes)
