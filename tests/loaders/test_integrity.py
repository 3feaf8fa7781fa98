"""Every stored byte verified or refused: manifests, tags, key indexes, media by path, footers, keys, interrupted writes."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loaders import AmbiguousKey, Catalog, CatalogCorrupt, CorruptData, MediaChanged, RegistrationError, SampleNotFound, VersionNotFound
from loaders.catalog.keys import suffixed_keys
from loaders.catalog.version import _OPEN, clear_read_caches
from loaders.importers import import_jsonl
from loaders.storage import derived
from tests.corpus import media_faults as media
from tests.corpus import parquet_faults as faults
from tests.corpus.legacy import register_unchecked
from tests.corpus.server import batchscope


def _write(path: Path, table: pa.Table, row_group: int = 2) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group)
    return str(path)


def _texts(keys: list[str], prefix: str = "row") -> pa.Table:
    return pa.table({"id": keys, "text": [f"{prefix} {i}" for i in range(len(keys))]})


def _fresh_process_state() -> None:
    """What a new process would start with: no open shards, no decoded row groups, no checked indexes."""
    clear_read_caches()
    _OPEN.clear()


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return Catalog(tmp_path / "catalog")


def _manifest_path(catalog: Catalog, name: str, version_id: str) -> Path:
    return Path(catalog.root) / "datasets" / name / "versions" / f"{version_id}.json"


# -- manifests and tags ------------------------------------------------------------------
def test_a_manifest_edited_to_point_at_another_file_is_refused_naming_it(catalog: Catalog, tmp_path: Path) -> None:
    good = catalog.register("a", [_write(tmp_path / "a.parquet", _texts(["x", "y"]))], key="id")
    other = catalog.register("b", [_write(tmp_path / "b.parquet", _texts(["p", "q"], "other"))], key="id")
    path = _manifest_path(catalog, "a", good.id)
    data = json.loads(path.read_text())
    data["shards"] = json.loads(_manifest_path(catalog, "b", other.id).read_text())["shards"]  # consistent: real checksums
    path.write_text(json.dumps(data))
    with pytest.raises(CatalogCorrupt) as info:
        catalog.resolve("a@latest").read(0, [0])
    assert str(path) in info.value.message and "does not match its id" in info.value.message
    assert catalog.resolve("b").read(0, [0])[0]["text"] == "other 0"  # the rest of the catalog keeps working


def test_a_tag_that_is_a_path_is_refused(catalog: Catalog, tmp_path: Path) -> None:
    catalog.register("a", [_write(tmp_path / "a.parquet", _texts(["x"]))], key="id")
    other = catalog.register("b", [_write(tmp_path / "b.parquet", _texts(["p"], "other"))], key="id")
    refs = Path(catalog.root) / "datasets" / "a" / "refs.json"
    data = json.loads(refs.read_text())
    data["tags"]["v1"] = f"../../b/versions/{other.id}"
    refs.write_text(json.dumps(data))
    with pytest.raises(CatalogCorrupt) as info:
        catalog.resolve("a@v1")
    assert str(refs) in info.value.message and "'v1'" in info.value.message and "not a version id" in info.value.message
    assert catalog.resolve("b").id == other.id
    with pytest.raises(VersionNotFound):  # a path is never a version id, even without a tag
        catalog._load("b", f"../../b/versions/{other.id}")


def test_a_tokenizer_edited_after_it_was_stored_is_refused_and_a_moved_name_is_followed(catalog: Catalog) -> None:
    from tests.support.readpath import words_tokenizer_json

    text = words_tokenizer_json()
    digest = catalog.put_tokenizer("words", text)
    blob = Path(catalog.root) / "tokenizers" / "blobs" / f"{digest}.json"
    blob.write_text(text.replace('"alpha"', '"ALPHA"'))
    with pytest.raises(CatalogCorrupt) as info:
        catalog.tokenizer("words")
    assert str(blob) in info.value.message and "does not match its content id" in info.value.message
    blob.write_text(text)
    assert catalog.tokenizer("words").token_to_id("alpha") is not None
    moved = json.loads(text)
    moved["model"]["vocab"]["gamma"] = len(moved["model"]["vocab"])
    catalog.put_tokenizer("words", json.dumps(moved))  # the name now means another tokenizer
    assert catalog.tokenizer("words").token_to_id("gamma") is not None
    assert catalog.tokenizer(digest).token_to_id("gamma") is None  # the content id still pins the old one


@pytest.mark.parametrize("which", ["manifest", "refs"])
def test_unreadable_json_is_one_line_naming_the_file(catalog: Catalog, tmp_path: Path, which: str) -> None:
    version = catalog.register("a", [_write(tmp_path / "a.parquet", _texts(["x"]))], key="id")
    catalog.register("b", [_write(tmp_path / "b.parquet", _texts(["p"]))], key="id")
    broken = _manifest_path(catalog, "a", version.id) if which == "manifest" else Path(catalog.root) / "datasets" / "a" / "refs.json"
    broken.write_text('{"name": "a", "shards": [')
    with pytest.raises(CatalogCorrupt) as info:
        catalog.resolve("a")
    assert info.value.message.startswith(f"{broken}: ") and "not valid JSON" in info.value.message
    assert catalog.resolve("b").rows == 1
    result = subprocess.run([batchscope(), "versions", "a", "--root", catalog.root], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr  # cannot check, not "mismatch"
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) <= 2  # one line (wrapped at most once)
    assert str(broken) in " ".join(result.stderr.split()).replace(" ", "") or broken.name in result.stderr
    listed = subprocess.run([batchscope(), "datasets", "--root", catalog.root], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "b" in listed.stdout and "error" in listed.stdout


# -- key indexes ---------------------------------------------------------------------------
def _tamper_index(version, *, keep_digest: bool) -> Path:
    """Rewrite the key index so key 'k0' points at the row of 'k3' (and the other way round)."""
    path = Path(version._key_index_path())
    table = pq.read_table(path)
    keys = table.column("key").to_pylist()
    rows = table.column("row").to_pylist()
    i, j = keys.index("k0"), keys.index("k3")
    rows[i], rows[j] = rows[j], rows[i]
    forged = table.set_column(2, "row", pa.array(rows, pa.int64()))
    if keep_digest:  # a careful forger recomputes every digest the index carries about itself
        meta = dict(forged.schema.metadata)
        groups = json.loads(meta[derived.GROUP_DIGESTS])
        groups[0]["digest"] = derived.table_digest(forged.replace_schema_metadata(None))
        meta[derived.GROUP_DIGESTS] = json.dumps(groups).encode()
        forged = forged.replace_schema_metadata(meta)
    else:
        forged = forged.replace_schema_metadata(None)
    pq.write_table(forged, path)
    return path


@pytest.mark.parametrize("keep_digest", [False, True], ids=["naive", "digest-recomputed"])
def test_a_tampered_key_index_never_serves_another_row(catalog: Catalog, tmp_path: Path, keep_digest: bool) -> None:
    keys = [f"k{i}" for i in range(6)]
    version = catalog.register("a", [_write(tmp_path / "a.parquet", _texts(keys))], key="id")
    assert version.sample("k0")["text"] == "row 0"
    _tamper_index(version, keep_digest=keep_digest)
    _fresh_process_state()
    fresh = catalog.resolve("a")
    assert fresh.sample("k0")["text"] == "row 0"
    assert fresh.sample("k3")["text"] == "row 3"
    assert fresh.find("k3") == (0, 3)


def test_an_index_of_another_version_or_garbage_is_rebuilt(catalog: Catalog, tmp_path: Path) -> None:
    first = catalog.register("a", [_write(tmp_path / "a.parquet", _texts(["x", "y"]))], key="id")
    second = catalog.register("a", [_write(tmp_path / "b.parquet", _texts(["y", "x"], "second"))], key="id")
    shutil.copy(first._key_index_path(), second._key_index_path())
    _fresh_process_state()
    assert catalog.resolve(f"a@{second.id}").sample("x")["text"] == "second 1"
    Path(second._key_index_path()).write_bytes(b"not parquet")
    _fresh_process_state()
    assert catalog.resolve(f"a@{second.id}").sample("y")["text"] == "second 0"


def test_an_index_without_metadata_from_an_older_version_is_rebuilt(catalog: Catalog, tmp_path: Path) -> None:
    version = catalog.register("a", [_write(tmp_path / "a.parquet", _texts(["x", "y", "z"]))], key="id")
    path = Path(version._key_index_path())
    pq.write_table(pq.read_table(path).replace_schema_metadata(None), path)
    _fresh_process_state()
    assert catalog.resolve("a").find("z") == (0, 2)
    assert derived.open_row_groups(str(path), derived.Derivation("key index", version.id, layout=2)) is not None


# -- keys unique or said to be -----------------------------------------------------------------
def test_duplicate_keys_are_refused_naming_the_first_ones_and_their_rows(catalog: Catalog, tmp_path: Path) -> None:
    path = _write(tmp_path / "a.parquet", _texts(["a", "b", "a", "c", "a", "b"]))
    with pytest.raises(RegistrationError) as info:
        catalog.register("dup", [path], key="id")
    message = info.value.message
    assert "'a' at shard 0 row 0, shard 0 row 2, shard 0 row 4" in message and "'b' at shard 0 row 1, shard 0 row 5" in message
    assert not (Path(catalog.root) / "datasets" / "dup").exists()


def test_allowed_duplicates_get_stable_suffixes_and_every_link_shows_its_own_record(catalog: Catalog, tmp_path: Path) -> None:
    keys = ["a", "b", "a", "a~1", "a"]
    path = _write(tmp_path / "a.parquet", _texts(keys))
    version = catalog.register("dup", [path], key="id", allow_duplicate_keys=True)
    assert catalog.register("dup", [path], key="id", allow_duplicate_keys=True).id == version.id  # stable
    linked = [version.key_at(*version.locate(i), version.record(i)) for i in range(version.rows)]
    assert linked == ["a", "b", "a~2", "a~1", "a~3"]
    for index, key in enumerate(linked):
        assert version.sample(key)["text"] == f"row {index}"
    assert suffixed_keys(["x", "x", "x~1"]) == {1: "x~2"}
    from loaders import ReadPlan, Shuffle, Source

    run = catalog.create_run(
        "dup-run", ReadPlan([Source(f"dup@{version.id}")], seed=0, global_batch_size=5, steps=1, streams=1, shuffle=Shuffle(enabled=False))
    )
    batch = run.batch(0, 0)  # the read path (and so the ledger) names rows by the same keys as the links
    assert sorted(batch.keys) == sorted(linked) and sorted(d.key for s in batch.samples for d in s.documents) == sorted(linked)


def test_a_version_registered_before_keys_were_checked_refuses_an_ambiguous_key(catalog: Catalog, tmp_path: Path) -> None:
    version = register_unchecked(catalog, "old", [_write(tmp_path / "a.parquet", _texts(["a", "b", "a"]))])
    with pytest.raises(AmbiguousKey, match="key 'a' names 2 rows"):
        version.sample("a")
    assert version.sample("b")["text"] == "row 1"


def test_identical_rows_without_a_key_column_share_a_content_key_and_link_to_the_same_values(catalog: Catalog, tmp_path: Path) -> None:
    version = catalog.register("same", [_write(tmp_path / "a.parquet", pa.table({"text": ["x", "y", "x"]}))])
    keys = [version.key_at(0, row, version.read(0, [row])[0]) for row in range(3)]
    assert keys[0] == keys[2] != keys[1]
    assert version.sample(keys[2]) == {"text": "x"}


# -- footers and row counts --------------------------------------------------------------------------
def test_a_row_group_holding_more_rows_than_its_footer_says_is_refused(catalog: Catalog, tmp_path: Path) -> None:
    path = Path(_write(tmp_path / "a.parquet", _texts([str(i) for i in range(25)]), row_group=25))
    faults.rewrite_row_counts(path, file_rows=1, group_rows={0: 1}, columns_too=True)
    with pytest.raises(RegistrationError, match="row group 0 holds 25 rows .* but its footer says 1"):
        catalog.register("lie", [str(path)], key="id")
    version = register_unchecked(catalog, "lie", [str(path)], key=None)  # registered by an older version
    with pytest.raises(CorruptData, match="row group 0 holds 25 rows"):
        version.read(0, [0])


def test_a_trillion_row_footer_is_refused_before_anything_is_allocated(catalog: Catalog, tmp_path: Path) -> None:
    path = Path(_write(tmp_path / "a.parquet", _texts(["a", "b"]), row_group=10))
    faults.rewrite_row_counts(path, file_rows=10**12, group_rows={0: 10**12}, columns_too=True)
    assert path.stat().st_size < 3000
    with pytest.raises(RegistrationError, match="claims 1,000,000,000,000 rows in .* bytes .* decompression bomb"):
        catalog.register("bomb", [str(path)], key="id")
    version = register_unchecked(catalog, "bomb", [str(path)])  # under a memory cap: tests/hardening/test_integrity_server.py
    with pytest.raises(CorruptData, match="decompression bomb"):
        version.read(0, [0])


# -- media stored by path -----------------------------------------------------------------------------
def _media_dataset(tmp_path: Path) -> tuple[str, Path]:
    (tmp_path / "src" / "images").mkdir(parents=True)
    image = tmp_path / "src" / "images" / "a.png"
    image.write_bytes(media.small_png(side=16))
    kind = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table(
        {"id": ["a", "b"], "image": pa.array([{"bytes": None, "path": "images/a.png"}, {"bytes": None, "path": "images/gone.png"}], kind)}
    )
    return _write(tmp_path / "src" / "part-0.parquet", table), image


def test_media_by_path_are_checksummed_at_registration_and_verified_on_read(catalog: Catalog, tmp_path: Path) -> None:
    from loaders.catalog.media_files import read_media

    shard, image = _media_dataset(tmp_path)
    version = catalog.register("pics", [shard], key="id")
    assert version.manifest.media_files == {"digest": version.manifest.media_files["digest"], "files": 2}
    assert read_media(version, str(image), where="a") == media.small_png(side=16)
    image.write_bytes(media.small_png(side=18))
    with pytest.raises(MediaChanged, match="changed after registration"):
        read_media(version, str(image), where="a")
    gone = tmp_path / "src" / "images" / "gone.png"
    gone.write_bytes(media.small_png())  # appeared after registration: not what was registered
    with pytest.raises(MediaChanged, match="was not present when"):
        read_media(version, str(gone), where="b")


def test_a_version_records_only_the_checks_it_needed(catalog: Catalog, tmp_path: Path) -> None:
    version = catalog.register("plain", [_write(tmp_path / "a.parquet", _texts(["x"]))], key="id")
    stored = json.loads(_manifest_path(catalog, "plain", version.id).read_text())
    assert "media_files" not in stored and "key_suffixes" not in stored
    assert stored["shards"][0]["pages_checked"] is True  # part of the id: reads need not walk these pages again
    old = register_unchecked(catalog, "old", [_write(tmp_path / "b.parquet", _texts(["x"]))])
    assert old.shards[0].pages_checked is False and old.read(0, [0])[0]["text"] == "row 0"


# -- all or nothing ------------------------------------------------------------------------------------
HOLD_AN_IMPORT = """
import sys, time
from loaders import Catalog
from loaders.importers.writer import staged_import
import pyarrow as pa
with staged_import(Catalog(sys.argv[1]), "texts", "jsonl") as staging:
    writer = staging.writer(pa.schema([("id", pa.string())]), rows_per_shard=None, row_group_size=1, key=None)
    writer.write(pa.table({"id": ["a", "b"]}))
    print(staging.directory, flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("next_one", ["import of the same dataset", "register of another dataset", "import of another dataset"])
def test_an_import_killed_by_sigkill_is_cleaned_up_by_the_next_one(catalog: Catalog, tmp_path: Path, next_one: str) -> None:
    process = subprocess.Popen([sys.executable, "-c", HOLD_AN_IMPORT, catalog.root], stdout=subprocess.PIPE, text=True)
    try:
        staging = Path(process.stdout.readline().strip())
        assert staging.is_dir() and staging.name.startswith(".staging-jsonl-")
        survivor = import_jsonl(catalog, "texts", [_jsonl(tmp_path)], key="id")  # a live import's staging is left alone
        catalog.register("bystander", [_write(tmp_path / "b.parquet", _texts(["p"]))], key="id")  # by any writer
        assert staging.is_dir() and Path(str(staging) + ".lock").exists() and survivor.rows == 2
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert staging.is_dir()  # SIGKILL ran no cleanup
    if next_one == "import of the same dataset":
        import_jsonl(catalog, "texts", [_jsonl(tmp_path)], key="id")
    elif next_one == "import of another dataset":
        import_jsonl(catalog, "others", [_jsonl(tmp_path)], key="id")
    else:
        catalog.register("another", [_write(tmp_path / "c.parquet", _texts(["q"]))], key="id")
    assert not staging.exists() and not Path(str(staging) + ".lock").exists()
    assert [p.name for p in staging.parent.iterdir() if p.name.startswith(".staging-")] == []


def _jsonl(tmp_path: Path) -> str:
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "text": "alpha"}\n{"id": "b", "text": "beta"}\n')
    return str(path)


def _limited_fsize(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_full_disk_during_register_is_one_line_and_leaves_no_dataset_directory(catalog: Catalog, tmp_path: Path) -> None:
    """A real write failure: the registering process may not grow any file past 256 bytes (RLIMIT_FSIZE → EFBIG)."""
    path = _write(tmp_path / "a.parquet", _texts(["x", "y"]))
    result = subprocess.run(
        [batchscope(), "register", "full", path, "--key", "id", "--root", catalog.root],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limited_fsize(256),
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    line = " ".join(result.stderr.split())
    assert line.startswith("error: registering full failed: File too large"), result.stderr
    assert not (Path(catalog.root) / "datasets" / "full").exists()
    assert catalog.register("full", [path], key="id").rows == 2  # and nothing stands in the way afterwards


def test_a_missing_media_file_of_an_older_version_is_a_decode_error_not_a_change(catalog: Catalog, tmp_path: Path) -> None:
    from loaders.catalog.media_files import read_media
    from loaders.errors import DecodeError

    shard, image = _media_dataset(tmp_path)
    version = register_unchecked(catalog, "old-pics", [shard])
    assert version.manifest.media_files is None
    assert read_media(version, str(image), where="a") == media.small_png(side=16)  # nothing recorded to check against
    os.unlink(image)
    with pytest.raises(DecodeError, match="cannot read media file"):
        read_media(version, str(image), where="a")
    with pytest.raises(SampleNotFound):
        version.find("zzz")


def test_exclude_refuses_a_hostile_footer_before_decoding_it(catalog: Catalog, tmp_path: Path) -> None:
    from loaders.catalog.exclude import write_excluding

    path = Path(_write(tmp_path / "a.parquet", _texts(["a", "b"]), row_group=10))
    faults.rewrite_row_counts(path, file_rows=10**12, group_rows={0: 10**12}, columns_too=True)
    keys = tmp_path / "keys.txt"
    keys.write_text("a\n")
    with pytest.raises(RegistrationError, match="decompression bomb"):
        write_excluding(catalog, "bomb", [str(path)], str(keys), key="id")
    assert not (Path(catalog.root) / "data" / "bomb").exists()


def test_importing_parquet_whose_pages_hold_more_rows_than_its_footer_is_refused(catalog: Catalog, tmp_path: Path) -> None:
    from loaders.importers import import_parquet

    path = Path(_write(tmp_path / "in" / "a.parquet", _texts([str(i) for i in range(25)]), row_group=25))
    faults.rewrite_row_counts(path, file_rows=1, group_rows={0: 1}, columns_too=True)
    with pytest.raises(RegistrationError, match="holds 25 rows"):
        import_parquet(catalog, "lie", str(path), key="id")
    assert not (Path(catalog.root) / "datasets" / "lie").exists()


def test_a_full_disk_during_import_is_one_line_and_leaves_nothing(catalog: Catalog, tmp_path: Path) -> None:
    result = subprocess.run(
        [batchscope(), "import", "jsonl", "texts", _jsonl(tmp_path), "--key", "id", "--root", catalog.root],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limited_fsize(256),
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    line = " ".join(result.stderr.split())
    assert line.startswith("error: importing texts failed:") and "File too large" in line, result.stderr
    assert not (Path(catalog.root) / "data" / "texts").exists()
    assert not (Path(catalog.root) / "datasets" / "texts").exists()


def test_register_exclude_removes_copies_a_killed_run_left_half_written(catalog: Catalog, tmp_path: Path) -> None:
    from loaders.catalog.exclude import write_excluding

    source = _write(tmp_path / "a.parquet", _texts(["a", "b", "c"]))
    keys = tmp_path / "keys.txt"
    keys.write_text("b\n")
    [copy] = write_excluding(catalog, "ex", [source], str(keys), key="id")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a process id that no longer exists
    torn = Path(f"{copy}.{dead.pid}.tmp")
    torn.write_bytes(b"PAR1 half a copy")
    Path(copy).unlink()
    assert write_excluding(catalog, "ex", [source], str(keys), key="id") == [copy]
    assert not torn.exists() and pq.read_table(copy).column("id").to_pylist() == ["a", "c"]


def test_register_removes_temporary_files_a_killed_writer_left(catalog: Catalog, tmp_path: Path) -> None:
    path = _write(tmp_path / "a.parquet", _texts(["x"]))
    version = catalog.register("t", [path], key="id")
    directory = Path(catalog.root) / "datasets" / "t"
    torn = [directory / ".refs.json.0123abcd.tmp", directory / "versions" / f".{version.id}.json.4567ef.tmp"]
    for leftover in torn:
        leftover.write_bytes(b'{"half": ')  # what write_bytes_atomic leaves when killed before its rename
    catalog.register("t", [path], key="id", tag="again")
    assert [p for p in torn if p.exists()] == []
    assert catalog.resolve("t@again").id == version.id


def test_training_transforms_read_media_stored_by_path_only_as_registered(catalog: Catalog, tmp_path: Path) -> None:
    """The read path checks a by-path image or video against its registration exactly as the inspector does."""
    from loaders import ReadPlan, Source
    from loaders.transforms import RandomResizedCrop, SampleFrames

    clips = tmp_path / "clips"
    (clips / "media").mkdir(parents=True)
    (clips / "media" / "a.mp4").write_bytes(media.tiny_clip())
    (clips / "media" / "a.png").write_bytes(media.small_png(side=16))
    image_kind = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table({"id": ["a"], "video": ["media/a.mp4"], "image": pa.array([{"bytes": None, "path": "media/a.png"}], image_kind)})
    catalog.register("clips", [_write(clips / "part-0.parquet", table)], key="id", kinds={"video": "video", "image": "image"})
    transforms = [SampleFrames("video", k=2), RandomResizedCrop("image", size=(8, 8))]
    run = catalog.create_run("clips-run", ReadPlan([Source("clips@latest", transforms=transforms)], seed=0, global_batch_size=1, steps=1))
    inputs = run.batch(0).samples[0].inputs
    assert inputs["frames"].shape[0] == 2 and inputs["image"].shape == (8, 8, 3)

    _fresh_process_state()
    (clips / "media" / "a.mp4").write_bytes(media.tiny_clip()[:-64])  # rewritten after registration
    with pytest.raises(MediaChanged, match=r"media/a\.mp4 changed after registration"):
        catalog.run("clips-run").batch(0)
    (clips / "media" / "a.mp4").write_bytes(media.tiny_clip())
    (clips / "media" / "a.png").write_bytes(media.small_png(side=18))
    _fresh_process_state()
    with pytest.raises(MediaChanged, match=r"media/a\.png changed after registration"):
        catalog.run("clips-run").batch(0)


@pytest.mark.parametrize(
    "content, complaint",
    [(b"{not json", "run manifest is not valid JSON"), (b'{"format": "batchscope.run/1"}', "run manifest is malformed")],
)
def test_an_unreadable_run_manifest_is_one_line_naming_it_and_other_runs_still_open(
    catalog: Catalog, tmp_path: Path, content, complaint
) -> None:
    from loaders import ReadPlan, Source

    catalog.register("texts", [_write(tmp_path / "a.parquet", _texts(["x", "y"]))], key="id")
    for name in ("good", "broken"):
        catalog.create_run(name, ReadPlan([Source("texts@latest")], seed=0, global_batch_size=1, steps=2))
    manifest = Path(catalog.root) / "runs" / "broken" / "run.json"
    manifest.write_bytes(content)
    with pytest.raises(CatalogCorrupt, match=f"{re.escape(str(manifest))}: {complaint}") as caught:
        catalog.run("broken")
    assert "\n" not in str(caught.value)
    assert catalog.run("good").batch(1).keys and sorted(catalog.runs()) == ["broken", "good"]


def test_creating_a_run_over_an_unreadable_manifest_is_one_line_naming_it(catalog: Catalog, tmp_path: Path) -> None:
    from loaders import ReadPlan, Source

    catalog.register("texts", [_write(tmp_path / "a.parquet", _texts(["x", "y"]))], key="id")
    plan = ReadPlan([Source("texts@latest")], seed=0, global_batch_size=1, steps=2)
    catalog.create_run("broken", plan)
    manifest = Path(catalog.root) / "runs" / "broken" / "run.json"
    manifest.write_bytes(b"{not json")
    with pytest.raises(CatalogCorrupt, match=f"{re.escape(str(manifest))}: run manifest is not valid JSON"):
        catalog.create_run("broken", plan, exist_ok=True)
    assert manifest.read_bytes() == b"{not json"  # nothing stored is changed
