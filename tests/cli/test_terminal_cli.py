"""Terminal parity: `batchscope show` summarizes media, writes rollouts as turns and keeps token boundaries and masks
when piped; `batchscope diff` piped marks [-deleted-]{+inserted+}. Real subprocesses of the console script."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image
from rich.text import Text

from app import urls
from app.cli.terminal import change, media_line, model_media_line, rollout_lines, token_text
from loaders import Catalog, RandomResizedCrop, ReadPlan, Source
from tests.conftest import word_tokenizer, write_parquet
from tests.support.forensics import build_forensics_catalog

BATCHSCOPE = str(Path(sys.executable).parent / "batchscope")
BASE = "http://127.0.0.1:8123"


def _cli(*args: str, columns: int = 600) -> subprocess.CompletedProcess:
    # Wide enough by default that no line of data wraps, so a line can be matched whole.
    env = {"PATH": "/usr/bin:/bin", "BATCHSCOPE_PORT": "8123", "BATCHSCOPE_HOST": "127.0.0.1", "COLUMNS": str(columns)}
    return subprocess.run([BATCHSCOPE, *args], capture_output=True, text=True, timeout=180, env=env)


def _lines(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines()]


def _png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    root = tmp_path_factory.mktemp("terminal")
    catalog = build_forensics_catalog(root, write_parquet, word_tokenizer)
    images = pa.table({"id": ["i0", "i1"], "image": [_png(20, 10), _png(30, 12)], "thumb": [_png(4, 3), _png(5, 2)]})
    catalog.register("pics", write_parquet(images, root / "src" / "pics"), key="id", tag="v1", kinds={"image": "image", "thumb": "image"})
    rollout = [
        {"prompt": "What is 2+2?", "completion": "4", "reward": 1.0, "advantage": 0.5, "group_id": "g0", "finish_reason": "stop"},
        {"prompt": "What is 2+3?", "completion": "6", "reward": 0.0, "advantage": -0.5, "group_id": "g0", "finish_reason": "stop"},
    ]
    catalog.register(
        "rollouts",
        write_parquet(pa.table({"id": ["r0", "r1"], "rollout": rollout}), root / "src" / "rollouts"),
        key="id",
        tag="v1",
        kinds={"rollout": "rollout"},
    )
    catalog.create_run(
        "crops",
        ReadPlan(
            [Source("pics@v1", transforms=[RandomResizedCrop("image", size=(8, 8))])], seed=1, global_batch_size=2, steps=1, streams=1
        ),
    )
    catalog.create_run("rl", ReadPlan([Source("rollouts@v1")], seed=1, global_batch_size=2, steps=1, streams=1))
    docs = pa.table({"id": ["a", "b"], "text": ["the cat sat", "same"], "ids": [[5, 6, 7, 8], [1]]})
    edited = pa.table({"id": ["a", "b"], "text": ["the dog sat", "same"], "ids": [[5, 9, 8], [1]]})
    catalog.register("notes", write_parquet(docs, root / "src" / "notes-1"), key="id", tag="v1", kinds={"ids": "tokens"})
    catalog.register("notes", write_parquet(edited, root / "src" / "notes-2"), key="id", tag="v2", kinds={"ids": "tokens"})
    return catalog


def test_plain_token_text_keeps_boundaries_masks_documents_and_padding() -> None:
    spans = [{"start": 0, "key": "d0", "offset": 0}, {"start": 2, "key": "d1", "offset": 0}]
    text = token_text([11, 12, 13, 14, 0, 0], [0, 1, 0, 0, 0, 0], spans, None, padding=2, plain=True)
    assert text.plain == "▌d0 ‹11›¦12¦▌d1 ‹13¦14›¦[2 padding tokens]"
    styled = token_text([11, 12], [0, 1], [], None, plain=False)
    assert styled.plain == "11 12 " and [s.style for s in styled.spans] == ["dim cyan", "magenta"]
    assert token_text([0, 0], [0, 0], [], None, padding=2, plain=True).plain == "[2 padding tokens]"


def test_change_marks_sides_piped_and_styles_them_in_a_terminal() -> None:
    for old, new, plain in (("a b", "a c", "[-a b-]{+a c+}"), ("", "new", "{+new+}"), ("gone", "", "[-gone-]")):
        text = Text()
        change(text, old, new, plain=True)
        assert text.plain == plain
    styled = Text()
    change(styled, "x", "y", plain=False, arrow=True)
    assert styled.plain == "x → y" and [s.style for s in styled.spans] == ["red", "green"]


def test_media_and_rollout_lines() -> None:
    assert media_line("photo", _png(7, 5), "image") == f"photo: image, {len(_png(7, 5)):,} bytes, 7×5 PNG"
    assert media_line("clip", {"bytes": b"\0" * 3, "path": "c.mp4"}, "video") == "clip: video, 3 bytes, path c.mp4"
    frames = np.zeros((3, 4, 5, 3), np.uint8)
    line = model_media_line("frames", frames, {"frame_indices": [0, 6, 12], "frame_times": [0.0, 0.2, 0.4]})
    assert line == "frames: 3 video frames 3×4×5×3 uint8, frame indices 0, 6, 12 at 0.00–0.40 s"
    turns = {"turns": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], "reward": 2, "advantage": -1}
    assert [t.plain for t in rollout_lines(turns)] == [
        "rollout: reward 2 · advantage -1",
        "  user: hi",
        "  assistant: yo",
        "  warning: no group id",
    ]


def test_show_summarizes_media_instead_of_printing_bytes(catalog: Catalog) -> None:
    done = _cli("show", "crops", "--step", "0", "--root", catalog.root)
    assert done.returncode == 0, done.stderr
    batch = catalog.run("crops").batch(0, 0)
    for position, sample in enumerate(batch.samples):
        thumb = sample.inputs["thumb"]
        width, height = Image.open(io.BytesIO(thumb)).size
        media = BASE + urls.media("pics", sample.address.version, sample.key, "thumb")
        lines = _lines(done.stdout)
        summary = f"thumb: image, {len(thumb):,} bytes, {width}×{height} PNG"
        assert lines[lines.index(summary) + 1] == media  # the URL on a line of its own, whole
        box, size = list(sample.inputs["crop_box"]), sample.inputs["source_size"]
        crop = BASE + urls.input_media("crops", 0, 0, position, "image")
        assert lines[lines.index(f"image: image 8×8×3 uint8, crop box {box} of {size[0]}×{size[1]}") + 1] == crop
    assert "\\x" not in done.stdout and "b'" not in done.stdout  # no bytes literal anywhere


def test_show_writes_rollouts_as_turns_with_reward_and_advantage(catalog: Catalog) -> None:
    done = _cli("show", "rl", "--step", "0", "--root", catalog.root)
    assert done.returncode == 0, done.stderr
    lines = _lines(done.stdout)
    assert "rollout: reward 1 · advantage 0.5 · group g0 · finish stop" in lines
    assert lines[lines.index("rollout: reward 1 · advantage 0.5 · group g0 · finish stop") + 1 :][:2] == [
        "user: What is 2+2?",
        "assistant: 4",
    ]
    assert "rollout: reward 0 · advantage -0.5 · group g0 · finish stop" in lines


def test_show_piped_keeps_token_boundaries_and_padding(catalog: Catalog) -> None:
    done = _cli("show", "spiky", "--step", "3", "--rank", "0", "--root", catalog.root)
    assert done.returncode == 0, done.stderr
    run = catalog.run("spiky")
    inputs = run.batch(3, 0).samples[0].inputs
    tokenizer = catalog.tokenizer("words")
    pieces = [tokenizer.decode([t], skip_special_tokens=False) for t in inputs["input_ids"][: 16 - inputs["padding"]]]
    line = next(line for line in _lines(done.stdout) if line.endswith(f"[{inputs['padding']} padding tokens]"))
    # Every real token, in order, between boundaries (document starts are marked ▌key, masked runs ‹…›).
    assert [p.split(" ", 1)[-1].strip("‹›") for p in line.split("¦")[:-1]] == pieces
    assert "[16 padding tokens]" in done.stdout and "no document: every token is padding" in done.stdout
    assert "mostly padding: 16 of 16 tokens of this sequence (100%) are padding" in done.stdout


def test_piped_diff_marks_deletions_and_insertions(catalog: Catalog) -> None:
    done = _cli("diff", "notes@v1", "notes@v2", "--root", catalog.root)
    assert done.returncode == 1, done.stderr
    assert "text: the [-cat-]{+dog+} sat" in done.stdout
    assert "ids: @1:3 [-6 7-]{+9+}" in done.stdout


def test_show_summarizes_audio_and_reveals_hidden_characters(tmp_path: Path) -> None:
    from tests.support.peers import wav

    catalog = Catalog(str(tmp_path / "catalog"))
    voice = {"bytes": wav(), "path": "hello.wav"}
    table = pa.table({"id": ["v0"], "voice": [voice], "note": ["red \x1b[31malert\x07 \u202eevil"]})
    catalog.register("voices", write_parquet(table, tmp_path / "src"), key="id", tag="v1", kinds={"voice": "audio"})
    catalog.create_run("listen", ReadPlan([Source("voices@v1")], seed=1, global_batch_size=1, steps=1, streams=1))
    done = _cli("show", "listen", "--step", "0", "--root", catalog.root)
    assert done.returncode == 0, done.stderr
    version = catalog.resolve("voices@v1")
    media = BASE + urls.media("voices", version, "v0", "voice")
    lines = _lines(done.stdout)
    assert lines[lines.index(f"voice: audio, {len(voice['bytes']):,} bytes, path hello.wav") + 1] == media
    assert "note: red ␛[31malert␇ ⟨U+202E⟩evil" in _lines(done.stdout)
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout and "b'" not in done.stdout
