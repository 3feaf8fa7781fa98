"""Which catalog root the CLI uses: --root, $BATCHSCOPE_ROOT, ./batchscope-data holding a catalog, ./demo-data, then
./batchscope-data — checked in-process for the order and through the installed console script for `make demo`'s case."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from app.cli.common import cli_root
from loaders import Catalog
from tests.conftest import write_parquet

BATCHSCOPE = str(Path(sys.executable).parent / "batchscope")


def _catalog(path: Path, dataset: str) -> None:
    table = pa.table({"id": ["a", "b"], "text": ["x", "y"]})
    Catalog(path).register(dataset, write_parquet(table, path.parent / f"src-{dataset}"), key="id", tag="v1")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BATCHSCOPE_ROOT", raising=False)
    return tmp_path


def test_resolution_order(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli_root(None) == "./batchscope-data"  # nothing here yet
    (workdir / "demo-data").mkdir()
    assert cli_root(None) == "./batchscope-data"  # an empty directory is not a catalog
    _catalog(workdir / "demo-data", "demo-docs")
    assert cli_root(None) == "demo-data"
    (workdir / "batchscope-data").mkdir()
    (workdir / "batchscope-data" / "inspector.sqlite").write_bytes(b"")  # flags only: still not a catalog
    assert cli_root(None) == "demo-data"
    _catalog(workdir / "batchscope-data", "mine")
    assert cli_root(None) == "./batchscope-data"
    monkeypatch.setenv("BATCHSCOPE_ROOT", "/elsewhere")
    assert cli_root(None) == "/elsewhere"
    assert cli_root("given") == "given"


def test_after_make_demo_commands_read_the_demo_workspace(workdir: Path) -> None:
    _catalog(workdir / "demo-data", "demo-docs")
    env = {k: v for k, v in os.environ.items() if k != "BATCHSCOPE_ROOT"}
    done = subprocess.run([BATCHSCOPE, "datasets"], cwd=workdir, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "demo-docs" in done.stdout and "catalog root: ./demo-data" in done.stderr
    _catalog(workdir / "other", "other-docs")
    chosen = subprocess.run(
        [BATCHSCOPE, "datasets"],
        cwd=workdir,
        env={**env, "BATCHSCOPE_ROOT": str(workdir / "other")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "other-docs" in chosen.stdout and "demo-docs" not in chosen.stdout and "catalog root" not in chosen.stderr
