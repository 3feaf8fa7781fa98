"""Every scan on both engines gives byte-identical outputs; registrations resume, and refuse files that change under them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loaders import Catalog, RegistrationError
from loaders.catalog import registration
from loaders.catalog.version import clear_read_caches
from loaders.diff import diff_versions
from loaders.importers import import_jsonl, import_parquet
from tests.support.ray_cluster import RAY_GROUP

pytestmark = RAY_GROUP


def _write_files(directory: Path, *, files: int = 5, rows: int = 12, row_group: int = 3, seed: int = 0, key_prefix: str = "k") -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for f in range(files):
        ids = [f"{key_prefix}-{f}-{i:03d}" for i in range(rows)]
        table = pa.table(
            {
                "id": ids,
                "text": [" ".join(rng.choice(["alpha", "beta", "gamma", "delta"], size=int(rng.integers(2, 9)))) for _ in ids],
                "score": rng.random(rows),
            }
        )
        path = directory / f"part-{f}.parquet"
        pq.write_table(table, path, row_group_size=row_group)
        paths.append(str(path))
    return paths


def _manifest(version) -> dict:
    data = version.manifest.to_json()
    data.pop("created")
    return data


def _key_index_bytes(version) -> bytes:
    return Path(version._key_index_path()).read_bytes()


def test_register_gives_the_same_version_manifest_and_key_index_on_both_engines(tmp_path, engine):
    paths = _write_files(tmp_path / "data")
    local = Catalog(tmp_path / "local").register("docs", paths, key="id", engine="local")
    other = Catalog(tmp_path / engine).register("docs", paths, key="id", engine=engine)
    assert other.id == local.id
    assert _manifest(other) == _manifest(local)
    assert _key_index_bytes(other) == _key_index_bytes(local)
    # the key column read from the registered bytes is the one a verified read of the version gives
    assert other.key_column().keys.to_pylist() == [f"k-{f}-{i:03d}" for f in range(5) for i in range(12)]
    assert other.sample("k-3-007")["id"] == "k-3-007"


def test_duplicate_keys_are_refused_or_suffixed_alike_on_both_engines(tmp_path, engine):
    paths = _write_files(tmp_path / "data", files=2)
    twice = paths + [str(tmp_path / "copy.parquet")]
    Path(twice[-1]).write_bytes(Path(paths[0]).read_bytes())
    with pytest.raises(RegistrationError, match=r"'k-0-000' at shard 0 row 0, shard 2 row 0"):
        Catalog(tmp_path / engine).register("docs", twice, key="id", engine=engine)
    local = Catalog(tmp_path / "local").register("docs", twice, key="id", allow_duplicate_keys=True, engine="local")
    other = Catalog(tmp_path / engine).register("docs", twice, key="id", allow_duplicate_keys=True, engine=engine)
    assert other.id == local.id and _manifest(other) == _manifest(local)
    assert other.sample("k-0-000~1")["id"] == "k-0-000"


def test_imports_give_the_same_version_on_both_engines(tmp_path, engine):
    lines = [json.dumps({"id": f"n-{i}", "text": f"note {i}", "score": i / 3}) for i in range(40)]
    (tmp_path / "notes.jsonl").write_text("\n".join(lines) + "\n")
    paths = _write_files(tmp_path / "parquet", files=3)
    catalog = Catalog(tmp_path / "catalog")  # shards land below the catalog: the same catalog, so the same shard URIs
    versions = {}
    for name in ("local", engine):
        jsonl = import_jsonl(catalog, "notes", tmp_path / "notes.jsonl", key="id", row_group_size=7, rows_per_shard=14, engine=name)
        parquet = import_parquet(catalog, "docs", paths, key="id", row_group_size=5, rows_per_shard=10, engine=name)
        versions[name] = (jsonl, parquet)
        clear_read_caches()
    for mine, theirs in zip(versions[engine], versions["local"]):
        assert mine.id == theirs.id  # computed again from the shards on each engine
        assert len(mine.shards) > 1 and mine.rows == theirs.rows
    assert [len(v.shards) for v in versions[engine]] == [3, 4]


def test_diff_tables_are_identical_on_both_engines(tmp_path, engine):
    old = _write_files(tmp_path / "v1", files=4, rows=30, row_group=4)
    new_dir = tmp_path / "v2"
    new_dir.mkdir()
    for f, path in enumerate(old):  # every shard changed: rows edited, removed, added, reordered
        table = pq.read_table(path)
        scores = table.column("score").to_numpy().copy()
        scores[f::5] += 1
        table = table.set_column(2, "score", pa.array(scores)).slice(1)
        extra = pa.table({"id": [f"new-{f}-{i}" for i in range(3)], "text": ["fresh"] * 3, "score": [0.5] * 3})
        table = pa.concat_tables([table.take(np.arange(table.num_rows)[::-1]), extra])
        pq.write_table(table, new_dir / f"part-{f}.parquet", row_group_size=4)
    news = sorted(str(p) for p in new_dir.glob("*.parquet"))
    results = {}
    for name in ("local", engine):
        catalog = Catalog(tmp_path / f"c-{name}")
        a = catalog.register("docs", old, key="id", tag="v1", engine=name)
        b = catalog.register("docs", news, key="id", tag="v2", engine=name)
        for rows in (10**6, 8):  # matched in one partition, and spilled over key buckets with shard pairs too big to hold
            diff = diff_versions(a, b, cache=False, partition_rows=rows, engine=name)
            results[(name, rows)] = (diff.to_json(limit=1000), diff.changes)
    for rows in (10**6, 8):
        mine, theirs = results[(engine, rows)], results[("local", rows)]
        assert mine[0] == theirs[0]
        assert mine[1].equals(theirs[1])
    counts = results[("local", 8)][0]["counts"]
    assert counts["removed"] == 4 and counts["added"] == 12 and counts["changed"] == sum(len(range(f, 29, 5)) for f in range(4)) - 1


# -- resuming -------------------------------------------------------------------------------------------------
_STALL = """
import sys, time
from loaders import Catalog

marker, root, *paths = sys.argv[1:]

def progress(done, total):
    if total and done >= 0.85 * total:  # 9 of 10 files of about the same size
        open(marker, "w").close()
        time.sleep(120)  # killed here, at 90 %, by the test

Catalog(root).register("big", paths, key="id", engine="local", progress=progress)
"""


def _kill_at_90_percent(tmp_path: Path, root: Path, paths: list[str]) -> None:
    marker = tmp_path / "at-90"
    env = {**os.environ, "BATCHSCOPE_ENGINE_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-c", _STALL, str(marker), str(root), *paths], env=env)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert process.poll() is None, "the registration ended before 90 %"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)


class _Spy:
    """Records which files registration reads segments of (a wrapper around the real scan)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.read: list[str] = []
        real = registration.scan_segments

        def scan_segments(layout, first, last, **options):
            self.read.append(layout.uri)
            return real(layout, first, last, **options)

        monkeypatch.setattr(registration, "scan_segments", scan_segments)


def test_a_registration_killed_at_90_percent_resumes_without_reading_finished_files(tmp_path, monkeypatch):
    monkeypatch.setenv("BATCHSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    paths = _write_files(tmp_path / "data", files=10, rows=30)
    root = tmp_path / "catalog"
    _kill_at_90_percent(tmp_path, root, paths)
    assert not (root / "datasets" / "big" / "versions").exists() or not list((root / "datasets" / "big" / "versions").iterdir())
    # a finished file rewritten since is discarded from the staging area and read again
    rewritten = pq.read_table(paths[0])
    pq.write_table(rewritten.set_column(2, "score", pa.array(np.zeros(30))), paths[0], row_group_size=3)
    spy, reports = _Spy(monkeypatch), []
    version = Catalog(root).register("big", paths, key="id", progress=lambda done, total: reports.append((done, total)))
    assert sorted(set(spy.read)) == sorted({paths[0], paths[-1]})  # 8 of the 9 finished files were not read again
    sizes = [os.path.getsize(p) for p in paths]
    assert reports[0] == (sum(sizes[1:-1]), sum(sizes)) and reports[-1] == (sum(sizes), sum(sizes))
    fresh = Catalog(tmp_path / "fresh").register("big", paths, key="id")
    assert version.id == fresh.id
    assert _key_index_bytes(version) == _key_index_bytes(fresh)
    assert not list((tmp_path / "cache" / "scans").rglob("*.entry"))  # published: the staging area is gone


@pytest.mark.parametrize("read", ["whole", "in ranges"])
def test_a_file_rewritten_while_it_is_registered_is_refused_by_name_and_nothing_is_published(tmp_path, monkeypatch, read):
    monkeypatch.setenv("BATCHSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BATCHSCOPE_ENGINE_THREADS", "1")
    paths = _write_files(tmp_path / "data", files=6)
    catalog = Catalog(tmp_path / "catalog")

    def rewrite_the_last_file() -> None:
        if not rewritten:
            pq.write_table(pq.read_table(paths[-1]).slice(1), paths[-1], row_group_size=3)
            rewritten.append(True)

    rewritten: list[bool] = []
    progress = None
    if read == "whole":  # small files are read whole by one task: rewritten after its bytes were read, before it ends
        real = registration.scan_segments

        def scan_segments(layout, first, last, **options):
            if layout.uri == paths[-1]:
                rewrite_the_last_file()
            return real(layout, first, last, **options)

        monkeypatch.setattr(registration, "scan_segments", scan_segments)
    else:  # files read in ranges after their footers: rewritten once the first file is done, before the last is read
        monkeypatch.setattr(registration, "TASK_BYTES", 1)
        progress = lambda done, total: rewrite_the_last_file() if 0 < done < (total or 0) else None  # noqa: E731
    with pytest.raises(RegistrationError, match=r"part-5\.parquet: the file changed while it was being registered"):
        catalog.register("docs", paths, key="id", progress=progress)
    assert rewritten and not (Path(catalog.root) / "datasets" / "docs").exists()
    assert list((tmp_path / "cache" / "scans").rglob("*.entry"))  # what was finished stays staged for the next run...
    monkeypatch.undo()
    monkeypatch.setenv("BATCHSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    spy = _Spy(monkeypatch)
    version = catalog.register("docs", paths, key="id")
    assert spy.read == [paths[-1]]  # ...which reads only the rewritten file
    assert version.rows == 5 * 12 + 11
    assert not list((tmp_path / "cache" / "scans").rglob("*.entry"))


def test_staging_left_by_a_killed_registration_of_other_files_is_cleaned_by_the_next_run(tmp_path, monkeypatch):
    monkeypatch.setenv("BATCHSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    paths = _write_files(tmp_path / "data", files=10, rows=30)
    root = tmp_path / "catalog"
    _kill_at_90_percent(tmp_path, root, paths)
    assert list((tmp_path / "cache" / "scans").rglob("*.entry"))
    clear_read_caches()
    Catalog(root).register("big", paths[:3], key="id")  # another job of the same dataset
    assert not list((tmp_path / "cache" / "scans").rglob("*.entry"))


# -- resuming an import -----------------------------------------------------------------------------------------
_STALL_IMPORT = """
import sys, time
from loaders import Catalog
from loaders.importers import import_jsonl

marker, root, *paths = sys.argv[1:]

def progress(done, total):
    if total and done >= 0.95 * total:  # past 90 % of the second pass (the first pass is the first half)
        open(marker, "w").close()
        time.sleep(120)  # killed here by the test

import_jsonl(Catalog(root), "notes", paths, key="id", rows_per_shard=200, row_group_size=50, progress=progress)
"""


def test_an_import_killed_at_90_percent_resumes_after_the_shards_it_finished(tmp_path, monkeypatch):
    import loaders.importers.jsonl as jsonl_importer

    paths = []
    for f in range(10):
        path = tmp_path / f"notes-{f}.jsonl"
        path.write_text("".join(json.dumps({"id": f"n-{f}-{i}", "text": f"note {i} of file {f} " * 3}) + "\n" for i in range(300)))
        paths.append(str(path))
    root = tmp_path / "catalog"
    marker = tmp_path / "at-90"
    process = subprocess.Popen([sys.executable, "-c", _STALL_IMPORT, str(marker), str(root), *paths])
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert process.poll() is None, "the import ended before 90 %"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    staged = [p for p in (root / "data" / "notes").iterdir() if p.is_dir() and p.name.startswith(".staging-")]
    journal = json.loads((staged[0] / "journal.json").read_text())
    finished = {e["name"]: (staged[0] / e["name"]).stat().st_ino for e in journal["shards"]}
    assert len(finished) >= 10  # of 15
    opened: list[str] = []
    real = jsonl_importer._lines

    def lines(path, on_bytes):
        opened.append(path)
        return real(path, on_bytes)

    monkeypatch.setattr(jsonl_importer, "_lines", lines)
    version = import_jsonl(Catalog(root), "notes", paths, key="id", rows_per_shard=200, row_group_size=50)
    assert opened and set(opened) <= set(paths[journal["position"]["file"] :])  # no first pass, no finished file again
    monkeypatch.undo()
    fresh = import_jsonl(Catalog(tmp_path / "fresh"), "notes", paths, key="id", rows_per_shard=200, row_group_size=50)
    published = Path(version.shards[0].uri).parent
    assert published.name == Path(fresh.shards[0].uri).parent.name  # named after the shards' bytes: the same bytes
    assert {name: (published / name).stat().st_ino for name in finished} == finished  # the finished shards were kept
    assert version.rows == 3000 and not [p for p in published.parent.iterdir() if p.name.startswith(".staging-")]
