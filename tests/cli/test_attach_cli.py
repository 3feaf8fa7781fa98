"""``batchscope attach``, then ``verify``, ``where``, ``show`` and ``runs`` on the replayed run: one line and exit 2
for anything refused (nothing left attached), verify's exit codes against what the run logged."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from app.cli import app as cli
from loaders import Catalog
from tests.support.replays import hf_corpus

FLAGS = ["--seed", "4", "--world-size", "2", "--batch-size", "3", "--shuffle-seed", "1", "--key", "id"]


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return hf_corpus(tmp_path_factory.mktemp("cli"), rows=20)


def _logged(catalog: Catalog, run: str, path, *, wrong: tuple[int, int] | None = None) -> str:
    replayed = catalog.run(run)
    with open(path, "w") as out:
        for step in range(replayed.total_steps):
            for rank in range(2):
                indices = replayed.batch(step, rank).indices
                out.write(json.dumps({"step": step, "rank": rank, "indices": indices[::-1] if (step, rank) == wrong else indices}) + "\n")
    return str(path)


def test_attach_then_verify_against_what_the_run_logged(tmp_path, corpus):
    root = str(tmp_path / "catalog")
    code, output = _cli("attach", "hf", "job", "--dataset", corpus, *FLAGS, "--root", root)
    assert code == 0, output
    assert "attached replayed run job: Hugging Face datasets + torch DistributedSampler, 4 steps × 2 ranks (global batch 6)" in output
    code, output = _cli("verify", "job", "--root", root)
    assert code == 2 and "replayed run job logged no batches to compare: attach it with --batches FILE" in output
    catalog = Catalog(root)
    good = _logged(catalog, "job", tmp_path / "good.jsonl")
    bad = _logged(catalog, "job", tmp_path / "bad.jsonl", wrong=(2, 1))
    assert _cli("attach", "hf", "logged", "--dataset", corpus, *FLAGS, "--batches", good, "--root", root)[0] == 0
    code, output = _cli("verify", "logged", "--root", root)
    assert code == 0 and "logged: 8 replayed and matching what the run logged, 0 mismatched" in output
    assert _cli("attach", "hf", "wrong", "--dataset", corpus, *FLAGS, "--batches", bad, "--root", root)[0] == 0
    code, output = _cli("verify", "wrong", "--root", root)
    assert code == 1 and "✗ step 2 rank 1: sampler indices differ at 2 position(s)" in output
    code, output = _cli("runs", "--root", root)
    assert code == 0 and "job" in output and "corpus@" in output


@pytest.mark.parametrize(
    "args, message",
    [
        (["hf", "job", "--dataset", "{missing}", *FLAGS], "error: --dataset {missing}: no such folder"),
        (
            ["hf", "job", "--dataset", "{corpus}", "--seed", "4", "--world-size", "2"],
            "error: attach hf: the following arguments are required: --batch-size",
        ),
        (["megatrone", "job"], "error: no replay for framework 'megatrone'; known: grain, hf, hf-trainer"),
        (["hf", "job", "--dataset", "{corpus}", *FLAGS, "--metrics", "{missing}"], "error: {missing}: no such metrics file"),
    ],
)
def test_a_refused_attach_is_one_line_exit_2_and_leaves_nothing(tmp_path, corpus, args, message):
    root = tmp_path / "catalog"
    values = {"missing": str(tmp_path / "missing"), "corpus": str(corpus)}
    code, output = _cli("attach", *[a.format(**values) for a in args], "--root", root)
    assert code == 2 and output.strip().replace("\n", " ") == message.format(**values)
    assert not os.path.exists(root / "runs") and not os.path.exists(root / "datasets")


def test_where_and_show_read_the_replayed_run(tmp_path, corpus):
    root = str(tmp_path / "catalog")
    assert _cli("attach", "hf", "job", "--dataset", corpus, *FLAGS, "--root", root)[0] == 0
    run = Catalog(root).run("job")
    sample = run.batch(1, 1).samples[0]
    code, output = _cli("where", f"corpus@{sample.address.version}", sample.key, "--run", "job", "--json", "--root", root)
    assert code == 0
    reads = json.loads(output)[0]["reads"]
    assert {(r["step"], r["rank"], r["sample"]) for r in reads} >= {(1, 1, 0)}
    code, output = _cli("show", "job", "--step", "1", "--rank", "1", "--root", root)
    assert code == 0 and "replayed · the run logged no batches to compare" in " ".join(output.split())
    ids = sample.inputs["input_ids"]
    assert f"‹{ids[0]}¦{ids[1]}›¦{ids[2]}" in output  # the two tokens labels mask with -100, then trained ones
