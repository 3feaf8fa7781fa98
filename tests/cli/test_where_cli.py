"""``batchscope where NAME@VERSION KEY``: the reads the sample page lists, as a table or JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from loaders import Catalog
from tests.support.readpath import forward_reads

BATCHSCOPE = str(Path(sys.executable).parent / "batchscope")


def _where(root: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([BATCHSCOPE, "where", *args, "--root", root], capture_output=True, text=True, timeout=120)


def test_where_prints_every_read_of_a_sample_as_json_and_as_a_table(runs_catalog: Catalog):
    root = str(runs_catalog.root)
    done = _where(root, "docs@v1", "doc-7", "--json")
    assert done.returncode == 0, done.stderr
    listed = {run["run"]: {(r["epoch"], r["step"], r["rank"], r["sample"]) for r in run["reads"]} for run in json.loads(done.stdout)}
    expected = {
        name: {(e, s, r, i) for e, s, r, _, i in forward_reads(runs_catalog.run(name)).get((0, 7), set())} for name in ("plain", "pretrain")
    }
    assert listed == expected and expected["pretrain"]
    only = json.loads(_where(root, "docs@v1", "doc-7", "--run", "pretrain", "--epochs", "1", "--json").stdout)
    assert [r["run"] for r in only] == ["pretrain"] and {r["epoch"] for r in only[0]["reads"]} <= {0}
    assert only[0]["next_epoch"] == 1
    table = _where(root, "docs@v1", "doc-7", "--run", "pretrain")
    assert table.returncode == 0
    for epoch, step, rank, sample in expected["pretrain"]:
        assert f"/runs/pretrain/steps/{step}/ranks/{rank}#sample-{sample}" in table.stdout
    missing = _where(root, "docs@v1", "no-such-key")
    assert missing.returncode == 1 and "no-such-key" in missing.stderr
