"""``--engine`` on the commands that scan: the same version ids and diffs from the default engine and from a Ray cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.support.ray_cluster import RAY_GROUP

pytestmark = RAY_GROUP
BATCHSCOPE = str(Path(sys.executable).parent / "batchscope")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([BATCHSCOPE, *args], capture_output=True, text=True, timeout=180, env={**os.environ, **(env or {})})


def test_register_on_a_ray_cluster_prints_the_version_id_the_default_engine_prints(tmp_path, ray_address):
    for version in (1, 2):
        directory = tmp_path / f"v{version}"
        directory.mkdir()
        for f in range(3):
            ids = [f"d-{f}-{i}" for i in range(9)]
            texts = [f"text {i}" if version == 1 or i % 4 else f"edited {i}" for i in range(9)]
            pq.write_table(pa.table({"id": ids, "text": texts}), directory / f"part-{f}.parquet", row_group_size=2)
    on_ray = _cli(
        "register",
        "docs",
        str(tmp_path / "v1"),
        "--key",
        "id",
        "--engine",
        "ray",
        "--root",
        str(tmp_path / "ray"),
        env={"RAY_ADDRESS": ray_address},
    )
    assert on_ray.returncode == 0, on_ray.stderr
    root = str(tmp_path / "local")
    here = _cli("register", "docs", str(tmp_path / "v1"), "--key", "id", "--tag", "v1", "--root", root)
    assert on_ray.stdout == here.stdout and len(here.stdout.strip()) == 32
    # the other scanning commands take --engine too (the ray engine's diffs and imports: tests/loaders/test_scans.py)
    assert _cli("register", "docs", str(tmp_path / "v2"), "--key", "id", "--tag", "v2", "--engine", "local", "--root", root).returncode == 0
    diffed = _cli("diff", "docs@v1", "docs@v2", "--json", "--engine", "local", "--root", root)
    assert diffed.returncode == 1 and json.loads(diffed.stdout)["counts"]["changed"] == 9, diffed.stderr
    (tmp_path / "notes.jsonl").write_text("".join(json.dumps({"id": f"n{i}", "text": f"note {i}"}) + "\n" for i in range(30)))
    imported = _cli("import", "jsonl", "notes", str(tmp_path / "notes.jsonl"), "--key", "id", "--engine", "local", "--root", root)
    assert imported.returncode == 0 and len(imported.stdout.strip()) == 32, imported.stderr


def test_an_unknown_engine_is_refused_in_one_line(tmp_path):
    pq.write_table(pa.table({"id": ["a"]}), tmp_path / "a.parquet")
    done = _cli("register", "docs", str(tmp_path / "a.parquet"), "--engine", "spark", "--root", str(tmp_path / "c"))
    assert done.returncode == 1
    assert done.stderr.strip() == "error: unknown engine 'spark'; use one of local, ray"
    assert not (tmp_path / "c").exists()
