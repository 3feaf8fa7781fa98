"""The catalog CLI through real subprocesses of the installed console script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

BATCHSCOPE = str(Path(sys.executable).parent / "batchscope")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([BATCHSCOPE, *args], capture_output=True, text=True, timeout=120)


def test_register_list_versions_and_errors(tmp_path):
    root = str(tmp_path / "catalog")
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["x", "y"]}), tmp_path / "one.parquet")
    done = _cli("register", "docs", str(tmp_path / "one.parquet"), "--key", "id", "--tag", "v1", "--root", root)
    assert done.returncode == 0, done.stderr
    version_id = done.stdout.strip()
    assert len(version_id) == 32
    again = _cli("register", "docs", str(tmp_path / "one.parquet"), "--key", "id", "--root", root)
    assert again.stdout.strip() == version_id
    listing = _cli("datasets", "--root", root)
    assert "docs" in listing.stdout and version_id[:12] in listing.stdout
    versions = _cli("versions", "docs", "--root", root)
    assert version_id in versions.stdout and "v1" in versions.stdout

    (tmp_path / "bad.parquet").write_text("not parquet at all")
    bad = _cli("register", "docs", str(tmp_path / "bad.parquet"), "--root", root)
    assert bad.returncode != 0
    assert "bad.parquet" in bad.stderr and "not a Parquet file" in bad.stderr
    assert "Traceback" not in bad.stderr
    unknown = _cli("versions", "nope", "--root", root)
    assert unknown.returncode != 0 and "no dataset named 'nope'" in unknown.stderr
