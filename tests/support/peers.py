"""Files written by the peers' own libraries (Hugging Face ``datasets``, mosaicml-streaming, webdataset, pandas, polars, DuckDB).

Each writer makes a tiny dataset in a folder and returns where it is; tests
import it and compare the records with what the library itself reads back.
"""

from __future__ import annotations

import io
import math
import struct
import wave
from pathlib import Path

from PIL import Image

TEXTS = ["a cat", "a dog", "two cats", "no dog"]
LABEL_NAMES = ["cat", "dog"]
LABELS = [0, 1, 0, 1]


def png(shade: int, size: tuple[int, int] = (6, 4)) -> bytes:
    """A small PNG of one colour."""
    out = io.BytesIO()
    Image.new("RGB", size, (shade, 40, 200 - shade)).save(out, format="PNG")
    return out.getvalue()


def jpeg(shade: int) -> bytes:
    """A small JPEG of one colour."""
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (shade, shade, 90)).save(out, format="JPEG", quality=90)
    return out.getvalue()


def wav(*, rate: int = 8000, seconds: float = 0.25, hz: float = 440.0) -> bytes:
    """A mono 16-bit WAV of a sine tone."""
    frames = int(rate * seconds)
    samples = b"".join(struct.pack("<h", int(12000 * math.sin(2 * math.pi * hz * t / rate))) for t in range(frames))
    out = io.BytesIO()
    with wave.open(out, "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(samples)
    return out.getvalue()


def hf_dataset(*, image_paths: list[str] | None = None):  # type: ignore[no-untyped-def]
    """A ``datasets.Dataset``: text, a ClassLabel, an Image (bytes, or file paths) and an Audio column."""
    import datasets

    datasets.disable_progress_bars()
    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=LABEL_NAMES), "picture": datasets.Image()}
    )
    pictures = image_paths if image_paths is not None else [{"bytes": png(40 * i), "path": None} for i in range(len(TEXTS))]
    data = datasets.Dataset.from_dict({"text": TEXTS, "label": LABELS, "picture": pictures}, features=features)
    # Audio() needs torchcodec to encode; casting a {bytes, path} column stores the bytes as they are.
    sounds = [{"bytes": wav(hz=220.0 * (i + 1)), "path": f"tone-{i}.wav"} for i in range(len(TEXTS))]
    return data.add_column("voice", sounds).cast_column("voice", datasets.Audio(sampling_rate=8000))


def hf_saved_dict(folder: Path) -> Path:
    """``DatasetDict.save_to_disk``: train (4 rows) and test (1 row) as Arrow files."""
    import datasets

    data = hf_dataset()
    datasets.DatasetDict({"train": data, "test": data.select([2])}).save_to_disk(str(folder))
    return folder


def hf_hub_parquet(folder: Path) -> Path:
    """A Hub-style repository: ``data/train-0000x-of-00002.parquet`` and ``data/test-00000-of-00001.parquet``."""
    data = hf_dataset()
    (folder / "data").mkdir(parents=True)
    data.select([0, 1]).to_parquet(str(folder / "data" / "train-00000-of-00002.parquet"))
    data.select([2, 3]).to_parquet(str(folder / "data" / "train-00001-of-00002.parquet"))
    data.select([1]).to_parquet(str(folder / "data" / "test-00000-of-00001.parquet"))
    return folder


def hf_configs(folder: Path) -> Path:
    """A repository whose README declares two configs (``default`` with two splits, ``small`` with one)."""
    data = hf_dataset()
    for config, split, rows in (("main", "train", [0, 1, 2]), ("main", "test", [3]), ("small", "train", [0])):
        (folder / config).mkdir(parents=True, exist_ok=True)
        data.select(rows).to_parquet(str(folder / config / f"{split}.parquet"))
    (folder / "README.md").write_text(
        "---\nconfigs:\n"
        "- config_name: default\n  data_files:\n  - split: train\n    path: main/train.parquet\n"
        "  - split: test\n    path: main/test.parquet\n"
        "- config_name: small\n  data_files: small/*.parquet\n---\n# A dataset card\n"
    )
    return folder


def mds_folder(folder: Path, *, compression: str | None = None) -> Path:
    """mosaicml-streaming ``MDSWriter`` output: str, int, float, json, jpeg (from bytes) and png columns, 2 shards."""
    from bench.peers import import_streaming

    import_streaming()
    from streaming.base.format.mds.writer import MDSWriter

    columns = {"text": "str", "n": "int", "score": "float32", "meta": "json", "photo": "jpeg", "mask": "png"}
    with MDSWriter(out=str(folder), columns=columns, size_limit=700, compression=compression) as writer:
        for i, text in enumerate(TEXTS):
            writer.write(
                {"text": text, "n": i, "score": i / 4, "meta": {"i": i, "tags": ["x"]},
                 "photo": Image.open(io.BytesIO(jpeg(50 * i))), "mask": Image.open(io.BytesIO(png(30 * i, (3, 3))))}
            )  # fmt: skip
    return folder
