"""``batchscope diff`` through real subprocesses: summary text, JSON, and exit codes 0 (same), 1 (different), 2 (error)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from loaders import Catalog
from tests.support.versions import register_pair

BATCHSCOPE = str(Path(sys.executable).parent / "batchscope")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([BATCHSCOPE, *args], capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    catalog = Catalog(str(tmp_path_factory.mktemp("diff-cli") / "catalog"))
    v1 = pa.table({"id": list(range(8)), "text": [f"sentence number {i} is here" for i in range(8)], "score": [0.5] * 8})
    rows = v1.to_pylist()
    rows[2] = dict(rows[2], text="sentence number two is here")
    rows[5] = dict(rows[5], score=0.75)
    rows = [r for r in rows if r["id"] != 7] + [{"id": 9, "text": "a brand new row", "score": 1.0}]
    register_pair(catalog, "docs", v1, pa.Table.from_pylist(rows, schema=v1.schema), rows_per_shard=4, row_group_size=2)
    return catalog


def test_identical_versions_exit_zero(catalog):
    done = _cli("diff", "docs@v1", "docs@v1", "--root", catalog.root)
    assert done.returncode == 0, done.stderr
    assert "identical" in done.stdout and "8 rows skipped without reading" in done.stdout


def test_different_versions_exit_one_with_summary_and_changes(catalog):
    done = _cli("diff", "docs@v1", "docs@v2", "--root", catalog.root)
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert "rows matched by key id" in out
    assert "+1 added" in out and "-1 removed" in out and "~2 changed" in out and "=5 unchanged" in out
    assert "changed columns: text (1), score (1)" in out
    lines = out.splitlines()
    assert any(line.startswith("~ 2  changed") for line in lines)
    assert "    text: sentence number [-2-]{+two+} is here" in lines  # piped: no colours, so the change is spelled out
    assert "    score: [-0.5-]{+0.75+}" in lines
    assert any(line.startswith("+ 9  added") for line in lines) and "    a brand new row" in lines
    assert any(line.startswith("- 7  removed") for line in lines)


def test_limit_and_json(catalog):
    short = _cli("diff", "docs@v1", "docs@v2", "--limit", "1", "--root", catalog.root)
    assert short.returncode == 1 and "… 3 more row change(s)" in short.stdout
    done = _cli("diff", "docs@v1", "docs@v2", "--json", "--limit", "2", "--root", catalog.root)
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert data["counts"] == {"added": 1, "removed": 1, "changed": 2, "edited": 0, "unchanged": 5}
    assert data["same_dataset"] is True and data["identical"] is False and data["key"] == "id"
    assert [(r["key"], r["change"]) for r in data["rows"]] == [("2", "changed"), ("5", "changed")]
    assert data["next"] == "5"
    text = data["rows"][0]["fields"][0]
    assert text["column"] == "text" and {"op": "replace", "a": "2", "b": "two"} in text["words"]


def test_errors_exit_two(catalog, tmp_path):
    missing = _cli("diff", "docs@v1", "docs@v7", "--root", catalog.root)
    assert missing.returncode == 2
    assert "no tag or version 'v7'" in missing.stderr and "Traceback" not in missing.stderr
    nodata = _cli("diff", "nope@v1", "docs@v1", "--root", catalog.root)
    assert nodata.returncode == 2 and "no dataset named 'nope'" in nodata.stderr

    broken = Catalog(str(tmp_path / "broken"))
    table = pa.table({"id": [1, 2, 3], "text": ["a", "b", "c"]})
    edited = pa.table({"id": [1, 2, 3], "text": ["a", "B", "c"]})
    _, v2 = register_pair(broken, "t", table, edited, rows_per_shard=2, row_group_size=2)
    os.remove(v2.shards[0].uri)  # the changed shard: the diff has to read it
    gone = _cli("diff", "t@v1", "t@v2", "--root", broken.root)
    assert gone.returncode == 2
    assert "dataset t version" in gone.stderr and "is missing" in gone.stderr and "Traceback" not in gone.stderr
