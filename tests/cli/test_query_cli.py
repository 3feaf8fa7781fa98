"""``batchscope sql`` and ``batchscope find``: JSON, CSV and the terminal table; bad input is one line and exit 2."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from loaders import Catalog
from loaders.query import SqlSession
from loaders.query.find import find_reads

BATCHSCOPE = str(Path(sys.executable).parent / "batchscope")


def _run(root: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([BATCHSCOPE, *args, "--root", root], capture_output=True, text=True, timeout=120, env={**os.environ, **env})


def test_sql_prints_json_csv_and_a_table(runs_catalog: Catalog) -> None:
    root = str(runs_catalog.root)
    query = "SELECT id, length(text) AS n FROM \"docs@v1\" WHERE id IN ('doc-1', 'doc-2') ORDER BY id"
    expected = [{"id": r["id"], "n": len(r["text"])} for r in (runs_catalog.resolve("docs@v1").record(i) for i in (1, 2))]
    done = _run(root, "sql", query, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"columns": ["id", "n"], "rows": expected, "truncated": False}
    exported = _run(root, "sql", query, "--csv")
    assert list(csv.reader(io.StringIO(exported.stdout))) == [["id", "n"]] + [[r["id"], str(r["n"])] for r in expected]
    table = _run(root, "sql", query)
    assert table.returncode == 0 and "doc-1" in table.stdout and "2 row(s)" in table.stderr
    capped = _run(root, "sql", 'SELECT id FROM "docs@v1"', "--json", BATCHSCOPE_SQL_ROWS="3")
    assert json.loads(capped.stdout)["truncated"] is True and len(json.loads(capped.stdout)["rows"]) == 3
    assert "cut at 3 rows" in capped.stderr


@pytest.mark.parametrize(
    "query, message",
    [
        ('SELECT * FROM "docs@v9"', "error: unknown table \"docs@v9\": dataset docs has no tag or version 'v9'"),
        ("COPY (SELECT 1) TO 'x.csv'", "error: only queries run here: COPY is refused"),
    ],
)
def test_sql_bad_input_is_one_line_and_exit_2(runs_catalog: Catalog, query: str, message: str) -> None:
    done = _run(str(runs_catalog.root), "sql", query)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(message)


def test_find_prints_the_matches_contract_and_one_line_per_read(runs_catalog: Catalog) -> None:
    root = str(runs_catalog.root)
    where = "text LIKE 'alpha%'"
    expected = find_reads(runs_catalog.run("pretrain"), where, session=SqlSession(runs_catalog))
    done = _run(root, "find", "pretrain", "--where", where, "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert [(m["step"], m["rank"], m["position"], m["key"], m["source"], m["epoch"]) for m in body["matches"]] == [
        (m.step, m.rank, m.position, m.key, m.source, m.epoch) for m in expected.matches
    ]
    assert body["packed"] is True and body["count"] == len(expected.matches) and body["steps"] == "0:"
    assert body["matches"][0]["url"].endswith(
        f"/runs/pretrain/steps/{expected.matches[0].step}/ranks/{expected.matches[0].rank}#sample-{expected.matches[0].position}"
    )
    window = json.loads(_run(root, "find", "pretrain", "--where", where, "--steps", "6:12", "--json").stdout)
    assert (
        window["matches"] and all(6 <= m["step"] < 12 for m in window["matches"]) and all(m["world_size"] == 1 for m in window["matches"])
    )
    lines = _run(root, "find", "pretrain", "--where", where).stdout.splitlines()
    assert sum(line.startswith("step ") for line in lines) == len(expected.matches)
    bad = _run(root, "find", "pretrain", "--where", "length(text)")
    assert bad.returncode == 2 and bad.stderr == "error: the predicate is BIGINT, not a boolean: 'length(text)'\n"
    steps = _run(root, "find", "pretrain", "--where", where, "--steps", "9:2")
    assert steps.returncode == 2 and "is not A:B" in steps.stderr


def test_sql_over_a_changed_shard_names_it_and_exits_1(tmp_path: Path) -> None:
    import pyarrow as pa

    from tests.conftest import write_parquet

    catalog = Catalog(tmp_path / "catalog")
    (path,) = write_parquet(pa.table({"id": ["a", "b", "c", "d"], "n": [1, 2, 3, 4]}), tmp_path / "src", row_group=2)
    version = catalog.register("data", [path], key="id", tag="v1")
    data = bytearray(Path(path).read_bytes())
    data[version.shards[0].boundaries[1] + 2] ^= 0xFF
    Path(path).write_bytes(bytes(data))
    done = _run(str(catalog.root), "sql", 'SELECT sum(n) FROM "data@v1"')
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"error: dataset data version {version.short_id} shard 0 (part-0.parquet): bytes ")
