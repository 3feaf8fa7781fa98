"""``batchscope lint RUN``: one line per finding with its sample's URL, the JSON contract, exit codes for CI, and one
clear line (exit 2) for what it cannot lint."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from app import urls
from app.cli import app as cli
from loaders import Catalog, ReadPlan, Source
from loaders.checks import CHECKS
from tests.conftest import write_parquet
from tests.support.lint_catalog import PLANTED

FIELDS = ["check", "severity", "step", "rank", "position", "key", "detail", "url"]


def _lint(catalog: Catalog, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["lint", *args, "--root", str(catalog.root)])
    return result.exit_code, result.stdout, result.stderr


def test_json_is_one_finding_per_bad_read_with_its_url(lint_catalog: Catalog) -> None:
    code, out, _ = _lint(lint_catalog, "lint-texts", "--json")
    data = json.loads(out)
    assert code == 1 and list(data) == ["findings", "summary"]
    findings = data["findings"]
    assert all(list(f) == FIELDS for f in findings)
    duplicates = sorted((f["key"], f["step"]) for f in findings if f["check"] == "duplicate")
    assert [k for k, _ in duplicates] == ["text-dup-a", "text-dup-b"]  # both reads of the document read twice
    for f in findings:
        assert f["url"] == urls.rank("lint-texts", f["step"], f["rank"]) + urls.sample_anchor(f["position"])
    summary = data["summary"]
    assert summary["run"] == "lint-texts" and summary["kind"] == "native" and summary["exit_code"] == 1
    assert summary["by_check"] == {c.name: sum(f["check"] == c.name for f in findings) for c in CHECKS}
    assert summary["findings"] == len(findings) and summary["samples"] == 72 and summary["fail_on"] == "warning"


def test_exit_code_follows_fail_on(lint_catalog: Catalog) -> None:
    """lint-texts finds warnings and info only (empty, repeated, duplicated, unknown, long documents)."""
    assert _lint(lint_catalog, "lint-texts")[0] == 1
    assert _lint(lint_catalog, "lint-texts", "--fail-on", "error")[0] == 0
    assert _lint(lint_catalog, "lint-texts", "--check", "length-outlier")[0] == 0  # info only, below the default warning
    assert _lint(lint_catalog, "lint-texts", "--check", "length-outlier", "--fail-on", "info")[0] == 1
    assert _lint(lint_catalog, "lint-chats", "--fail-on", "error")[0] == 1  # chat masks are errors


def test_lines_name_each_finding_and_its_url(lint_catalog: Catalog) -> None:
    code, out, _ = _lint(lint_catalog, "lint-media", "--check", "blank-image,silent-audio")
    *lines, last = out.splitlines()
    data = json.loads(_lint(lint_catalog, "lint-media", "--check", "blank-image,silent-audio", "--json")[1])
    assert code == 1 and len(lines) == len(data["findings"]) >= 3
    keys = PLANTED["blank-image"] | PLANTED["silent-audio"]
    for line, finding in zip(lines, data["findings"]):
        assert f"  {finding['key']}: " in line and finding["key"] in keys and line.endswith(finding["url"])
    blank = data["summary"]["by_check"]["blank-image"]
    assert last.startswith(f"lint-media: {len(lines)} finding(s) (0 error, {len(lines)} warning, 0 info) in 24 samples of steps 0-3: ")
    assert f"blank-image {blank}, silent-audio 1; exit 1 (findings at or above warning)" in last


def test_steps_and_thresholds(lint_catalog: Catalog) -> None:
    data = json.loads(_lint(lint_catalog, "lint-rollouts", "--json", "--steps", "5:7", "--threshold", "rl-reward-range.max=1")[1])
    assert data["summary"]["steps"] == [5, 7]
    assert {f["key"] for f in data["findings"] if f["check"] == "rl-reward-range"} == {"ro-big-reward"}
    assert data["summary"]["thresholds"]["rl-reward-range.max"] == 1.0


def test_what_cannot_be_linted_is_one_line_and_exit_2(lint_catalog: Catalog, tmp_path: Path) -> None:
    code, out, err = _lint(lint_catalog, "lint-texts", "--check", "nope")
    assert code == 2 and out == "" and err.startswith("error: unknown check 'nope'; checks: empty-document,") and err.count("\n") == 1
    code, _, err = _lint(lint_catalog, "lint-texts", "--steps", "5:500")
    assert code == 2 and err == "error: steps 5:500 are outside run lint-texts (steps 0 to 8; A:B takes B exclusive)\n"
    code, _, err = _lint(lint_catalog, "lint-texts", "--fail-on", "fatal")
    assert code == 2 and err == "error: --fail-on 'fatal' is not one of info, warning, error\n"
    code, _, err = _lint(lint_catalog, "lint-texts", "--threshold", "duplicate=2")
    assert code == 2 and err == "error: threshold 'duplicate' is not CHECK.PARAM=VALUE\n"
    # a shard that changed after registration: the change, once, and nothing linted
    catalog = Catalog(tmp_path / "catalog")
    table = pa.table({"id": [f"d{i}" for i in range(8)], "text": [f"text number {i}" for i in range(8)]})
    (path,) = write_parquet(table, tmp_path / "src")
    catalog.register("docs", [path], key="id", tag="v1")
    catalog.create_run("changed", ReadPlan([Source("docs@v1")], seed=0, global_batch_size=4, epochs=1, streams=1))
    pq.write_table(table.set_column(1, "text", pa.array([f"text NUMBER {i}" for i in range(8)])), path, row_group_size=3)
    code, out, err = _lint(catalog, "changed")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: run changed: its data changed since it was registered, so the lint stopped and judged nothing it read: ")
    assert "dataset docs" in err and "shard 0" in err
