"""Excluding flagged keys: filtered copies (originals untouched), content-hash keys, and ``register --exclude`` end to end."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loaders import Catalog, RegistrationError
from loaders.catalog.exclude import read_key_file, write_excluding, write_key_file
from loaders.catalog.records import content_key
from tests.conftest import write_parquet
from tests.support.local_client import local_client


def sha(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def source(tmp_path: Path) -> list[str]:
    table = pa.table({"id": [f"k{i}" for i in range(10)], "text": [f"text {i}" for i in range(10)]})
    return write_parquet(table, tmp_path / "src", shards=2, row_group=2)


def test_filtered_copies_drop_listed_keys_and_leave_originals(tmp_path: Path, source: list[str]) -> None:
    before = [sha(p) for p in source]
    keyfile = tmp_path / "keys.txt"
    keyfile.write_text(write_key_file(["k1", "k7", "not-there"]))
    catalog = Catalog(tmp_path / "catalog")
    out = write_excluding(catalog, "web", source, str(keyfile), key="id")
    assert [sha(p) for p in source] == before
    assert all(p.startswith(catalog.data_dir("web") + "/excluded-") for p in out)
    assert pq.read_table(out).column("id").to_pylist() == [f"k{i}" for i in range(10) if i not in (1, 7)]
    groups = [[m.row_group(g).num_rows for g in range(m.num_row_groups)] for m in (pq.ParquetFile(p).metadata for p in out)]
    assert groups == [[1, 2, 1], [2, 1, 1]]  # each source row group, less its listed rows
    assert write_excluding(catalog, "web", source, str(keyfile), key="id") == out  # same inputs, same files


def test_keyless_datasets_use_content_hashes(tmp_path: Path, source: list[str]) -> None:
    table = pq.read_table(source[0])
    drop = content_key(table.slice(2, 1).to_pylist()[0])
    keyfile = tmp_path / "keys.txt"
    keyfile.write_text(write_key_file([drop]))
    out = write_excluding(Catalog(tmp_path / "catalog"), "web", source, str(keyfile), key=None)
    assert pq.read_table(out).column("id").to_pylist() == [f"k{i}" for i in range(10) if i != 2]


def test_bad_key_files_are_clear_errors(tmp_path: Path, source: list[str]) -> None:
    catalog = Catalog(tmp_path / "catalog")
    with pytest.raises(RegistrationError, match="does not exist"):
        write_excluding(catalog, "web", source, str(tmp_path / "missing.txt"), key="id")
    bad = tmp_path / "bad.txt"
    bad.write_text('ok\n"unterminated\n')
    with pytest.raises(RegistrationError, match="line 2"):
        read_key_file(str(bad))
    everything = tmp_path / "all.txt"
    everything.write_text(write_key_file([f"k{i}" for i in range(10)]))
    with pytest.raises(RegistrationError, match="nothing left"):
        write_excluding(catalog, "web", source, str(everything), key="id")
    with pytest.raises(RegistrationError, match="key column 'nope'"):
        write_excluding(catalog, "web", source, str(everything), key="nope")


def batchscope() -> str:
    found = shutil.which("batchscope") or str(Path(sys.executable).parent / "batchscope")
    assert Path(found).exists()
    return found


def test_register_exclude_with_exported_flag_keys(tmp_path: Path, source: list[str]) -> None:
    from app import urls
    from app.factory import create_app
    from app.settings import Settings

    root = tmp_path / "catalog"
    catalog = Catalog(root)
    first = catalog.register("web", source, key="id", tag="v1")
    client = local_client(create_app(Settings(root=str(root))))
    for key in ("k3", "k4"):
        assert (
            client.post(urls.api(urls.flags()), json={"dataset": "web", "version": first.id, "key": key, "tags": ["junk"]}).status_code
            == 201
        )
    keyfile = tmp_path / "junk.txt"
    keyfile.write_text(client.get(urls.flags_keys(dataset="web", tag="junk")).text)
    before = [sha(p) for p in source]
    result = subprocess.run(
        [batchscope(), "register", "web", *source, "--key", "id", "--tag", "v2", "--exclude", str(keyfile), "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    second = Catalog(root).resolve("web@v2")
    assert result.stdout.strip() == second.id != first.id
    assert second.rows == 8
    kept = [rec["id"] for s in range(len(second.shards)) for rec in second.read(s, list(range(second.shards[s].rows)))]
    assert kept == [f"k{i}" for i in range(10) if i not in (3, 4)]
    assert [sha(p) for p in source] == before
