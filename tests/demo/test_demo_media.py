"""The demo's media datasets (images, videos, episodes, sounds): kinds, recorded changes and decodable contents."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from PIL import Image

from batchscope_demo import audio, episodes, images, videos
from batchscope_demo.common import load_changes
from loaders import Catalog
from loaders.media.audio import probe_audio, waveform
from loaders.media.framecode import read_frame_code
from loaders.media.image import image_from_value, image_info, open_image, pixel_diff, thumbnail
from loaders.media.video import DecodeStats, decode_frames, probe, video_source

BUILDERS = {"images": images.build, "videos": videos.build, "episodes": episodes.build, "sounds": audio.build}
KINDS = {"images": ("image", "image"), "videos": ("video", "video"), "episodes": ("episode", "episode"), "sounds": ("audio", "audio")}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    catalog = Catalog(tmp_path_factory.mktemp("demo-media") / "root")
    for build in BUILDERS.values():
        build(catalog, seed=11)
    return catalog


def rows(catalog: Catalog, ref: str) -> dict[str, tuple[int, dict]]:
    """Every record of a version by key, with its shard, read back through ``version.read``."""
    version = catalog.resolve(ref)
    out = {}
    for shard, info in enumerate(version.shards):
        for record in version.read(shard, list(range(info.rows))):
            out[record["id"]] = (shard, record)
    return out


# -- registration -------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_kinds_are_inferred(demo: Catalog, name: str) -> None:
    column, kind = KINDS[name]
    for tag in ("v1", "v2"):
        assert demo.resolve(f"{name}@{tag}").kinds[column] == kind


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_media_rows_span_several_row_groups(demo: Catalog, name: str) -> None:
    version = demo.resolve(f"{name}@v1")
    assert sum(len(shard.row_groups) for shard in version.shards) >= 4
    assert max(max(shard.row_groups) for shard in version.shards) <= 16


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_recorded_changes_match_the_tables(demo: Catalog, name: str) -> None:
    before = {key: record for key, (_, record) in rows(demo, f"{name}@v1").items()}
    after = {key: record for key, (_, record) in rows(demo, f"{name}@v2").items()}
    changes = load_changes(demo, name)
    assert changes.added and changes.removed and changes.edited
    assert sorted(after.keys() - before.keys()) == changes.added
    assert sorted(before.keys() - after.keys()) == changes.removed
    assert sorted(k for k in before.keys() & after.keys() if before[k] != after[k]) == changes.edited
    assert demo.resolve(f"{name}@v2").manifest.parent == demo.resolve(f"{name}@v1").id


def test_building_again_gives_the_same_versions(demo: Catalog) -> None:
    ids = {name: (demo.resolve(f"{name}@v1").id, demo.resolve(f"{name}@v2").id) for name in BUILDERS}
    for build in BUILDERS.values():
        build(demo, seed=11)
    assert {name: (demo.resolve(f"{name}@v1").id, demo.resolve(f"{name}@v2").id) for name in BUILDERS} == ids


# -- images ---------------------------------------------------------------------------
def test_every_image_decodes_and_thumbnails(demo: Catalog) -> None:
    for tag in ("v1", "v2"):
        version = demo.resolve(f"images@{tag}")
        for key, (shard, record) in rows(demo, f"images@{tag}").items():
            data = image_from_value(record["image"], where=version.where(shard))
            info = image_info(data, where=version.where(shard))
            assert info.format == record["format"]
            assert 64 <= max(info.width, info.height) <= 640
            assert record["image"]["path"] == f"{key}.{ {'PNG': 'png', 'JPEG': 'jpg', 'WEBP': 'webp'}[info.format] }"
            thumb = Image.open(io.BytesIO(thumbnail(data, max_side=96, where=version.where(shard))))
            assert max(thumb.size) <= 96 and thumb.mode in ("RGB", "RGBA", "LA")


def test_image_modes_and_formats_are_varied(demo: Catalog) -> None:
    records = rows(demo, "images@v1")
    modes = load_changes(demo, "images").notes["modes"]
    found = {key: image_info(records[key][1]["image"]["bytes"], where=key).mode for key in modes}
    wanted = {"L": "L", "P": "P", "P-transparent": "P", "RGBA": "RGBA", "I;16": "I;16", "CMYK": "CMYK", "LA": "LA"}
    for key, tag in modes.items():
        if tag in wanted:
            assert found[key] == wanted[tag], key
    assert {record["format"] for _, record in records.values()} == {"PNG", "JPEG", "WEBP"}


def test_exif_rotated_images_show_the_arrow_pointing_up(demo: Catalog) -> None:
    records = rows(demo, "images@v2")
    rotated = load_changes(demo, "images").notes["exif_rotated"]
    assert len(rotated) >= 1
    for key in rotated:
        data = records[key][1]["image"]["bytes"]
        assert image_info(data, where=key).orientation in (3, 6)
        assert "EXIF orientation" in records[key][1]["caption"]
        for img, up in ((open_image(data, where=key), True), (Image.open(io.BytesIO(data)), False)):
            pixels = np.asarray(img.convert("RGB")).astype(int)
            red = (pixels[..., 0] > 180) & (pixels[..., 1] < 80) & (pixels[..., 2] < 80)
            ys, xs = np.nonzero(red)
            centre = (xs.mean() / img.width, ys.mean() / img.height)
            pointing_up = bool(0.35 < centre[0] < 0.65 and centre[1] < 0.45)
            assert pointing_up is up, (key, centre)


def test_re_encoded_images_differ_in_bytes_not_in_picture(demo: Catalog) -> None:
    before, after = rows(demo, "images@v1"), rows(demo, "images@v2")
    re_encoded = load_changes(demo, "images").notes["re_encoded"]
    assert len(re_encoded) >= 4
    for key, how in re_encoded.items():
        old, new = before[key][1], after[key][1]
        assert old["image"]["bytes"] != new["image"]["bytes"]
        if "WebP" in how:
            assert (old["format"], new["format"]) == ("PNG", "WEBP") and new["image"]["path"].endswith(".webp")
        heat = pixel_diff(old["image"]["bytes"], new["image"]["bytes"], where=key)
        assert heat is not None
        # lossy re-encoding moves pixel values a little, not the picture
        assert np.asarray(Image.open(io.BytesIO(heat)).convert("L")).mean() < 160


# -- videos ------------------------------------------------------------------------------
def _sources(catalog: Catalog, tag: str):
    version = catalog.resolve(f"videos@{tag}")
    for key, (shard, record) in rows(catalog, f"videos@{tag}").items():
        where = version.where(shard)
        yield key, record, video_source(record["video"], shard_uri=version.shards[shard].uri, where=where), where


@pytest.mark.parametrize("tag", ["v1", "v2"])
def test_demo_clips_decode_to_exactly_the_requested_frames(demo: Catalog, tag: str) -> None:
    seen_codecs = set()
    for key, record, source, where in _sources(demo, tag):
        info = probe(source, where=where)
        assert info.codec == record["codec"] and info.container == {"h264": "mp4", "vp9": "webm"}[info.codec]
        assert 24 <= info.fps <= 30 and 2.0 <= info.duration <= 4.1 and 64 <= info.width <= 256
        last, middle = info.frame_count - 1, info.frame_count // 2
        wanted = [middle, 0, last, middle + 1, int(info.fps) - 1, int(info.fps) + 1, 3]
        stats = DecodeStats()
        frames = decode_frames(source, wanted, where=where, stats=stats)
        assert [read_frame_code(frame) for frame in frames] == wanted, key
        assert stats.decoded < 2 * info.frame_count
        seen_codecs.add(info.codec)
    assert seen_codecs == {"h264", "vp9"}


def test_clips_stored_by_path_live_next_to_the_shards(demo: Catalog) -> None:
    by_path = load_changes(demo, "videos").notes["by_path"]
    assert len(by_path) >= 2
    for tag in ("v1", "v2"):
        for key, record, source, _ in _sources(demo, tag):
            if key in by_path:
                assert record["video"]["bytes"] is None and record["video"]["path"] == by_path[key]
                assert isinstance(source, str) and os.path.isfile(source)
                assert os.path.dirname(os.path.dirname(source)) == os.path.join(demo.data_dir("videos"), tag)
            else:
                extension = "mp4" if record["codec"] == "h264" else "webm"
                assert isinstance(source, bytes) and record["video"]["path"] == f"{key}.{extension}"


def test_re_encoded_clip_has_sparser_keyframes(demo: Catalog) -> None:
    (key,) = load_changes(demo, "videos").notes["re_encoded"]
    old = dict((k, s) for k, _, s, _ in _sources(demo, "v1"))[key]
    new = dict((k, s) for k, _, s, _ in _sources(demo, "v2"))[key]
    old_info, new_info = probe(old, where=key, keyframes=True), probe(new, where=key, keyframes=True)
    assert old_info.frame_count == new_info.frame_count
    assert len(new_info.keyframes) < len(old_info.keyframes)


# -- episodes ------------------------------------------------------------------------------
@pytest.mark.parametrize("tag", ["v1", "v2"])
def test_episodes_are_consistent(demo: Catalog, tag: str) -> None:
    terminations = set()
    for key, (_, record) in rows(demo, f"episodes@{tag}").items():
        episode, length = record["episode"], record["length"]
        assert {len(episode[field]) for field in ("frames", "actions", "rewards", "dones")} == {length}
        assert episode["dones"] == [False] * (length - 1) + [True]
        assert set(episode["actions"]) <= {0, 1, 2, 3}
        assert record["return"] == pytest.approx(sum(episode["rewards"]), abs=1e-5)
        assert record["termination"] in ("goal", "timeout")
        if record["termination"] == "timeout":
            assert length == episodes.MAX_STEPS
        terminations.add(record["termination"])
        for step in (0, length // 2, length - 1):
            frame = np.asarray(Image.open(io.BytesIO(episode["frames"][step])).convert("RGB"))
            assert frame.shape == (64, 64, 3)
            assert read_frame_code(frame, bits=episodes.FRAME_CODE_BITS) == step
    assert terminations == {"goal", "timeout"}


def test_episode_reward_fix(demo: Catalog) -> None:
    before, after = rows(demo, "episodes@v1"), rows(demo, "episodes@v2")
    fixed = load_changes(demo, "episodes").notes["reward_fix"]
    assert len(fixed) == 3
    for key in fixed:
        old, new = before[key][1], after[key][1]
        assert new["termination"] == "goal"
        assert new["return"] - old["return"] == pytest.approx(episodes.GOAL_BONUS, abs=1e-5)
        assert new["episode"]["frames"] == old["episode"]["frames"]
    for key, (_, record) in after.items():
        if record["termination"] == "goal":
            assert record["episode"]["rewards"][-1] == pytest.approx(episodes.GOAL_BONUS + episodes.STEP_PENALTY)


# -- sounds --------------------------------------------------------------------------------
@pytest.mark.parametrize("tag", ["v1", "v2"])
def test_sounds_decode_as_wav_and_flac_of_the_stated_length(demo: Catalog, tag: str) -> None:
    codecs = set()
    for key, (_, record) in rows(demo, f"sounds@{tag}").items():
        info = probe_audio(record["audio"], where=key)
        assert info.codec.startswith("pcm") if record["codec"] == "wav" else info.codec == "flac", (key, info)
        assert (info.sample_rate, info.channels) == (record["sample_rate"], 1)
        assert info.duration == pytest.approx(record["seconds"], abs=0.01)
        assert 0 <= record["label"] < len(audio.LABELS)
        codecs.add(record["codec"])
    assert codecs == {"wav", "flac"}
    version = demo.resolve(f"sounds@{tag}")
    assert version.kinds["label"] == "class_label" and version.class_names["label"] == list(audio.LABELS)


def test_sounds_v1_clips_the_amplified_clips_and_v2_fixes_them(demo: Catalog) -> None:
    before, after = rows(demo, "sounds@v1"), rows(demo, "sounds@v2")
    clipped = load_changes(demo, "sounds").notes["clipped"]
    assert len(clipped) == audio.CLIPPED

    def peak(record: dict) -> float:
        wave = waveform(record["audio"], buckets=64, where=record["id"])
        return max(-min(wave.low), max(wave.high))

    for key in clipped:
        assert peak(before[key][1]) > 0.99 > 0.6 > peak(after[key][1])
