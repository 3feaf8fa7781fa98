"""``batchscope attach olmo`` end to end, over the ground truth of OLMo-core's own Trainer run for real on 2 gloo ranks
(``tests/support/olmo_run.py``): every field every rank received at every step is the attached run's; where inverts
it for every document; every page and command works on it; bad input is one line and leaves nothing; a token file
changed after attaching is refused naming it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app import urls
from loaders import Catalog
from loaders.catalog.version import clear_read_caches
from tests.support.attached import assert_commands, assert_pages, assert_refused, batches, cli, client, metrics
from tests.support.olmo_run import built_once, received, train_run_and_resumption

pytest.importorskip("olmo_core", reason="the olmo extra is not installed")
pytestmark = pytest.mark.slow

RANKS = 2
SPIKE = 40


@pytest.fixture(scope="session")
def olmo_run(tmp_path_factory) -> Path:
    return built_once(tmp_path_factory.getbasetemp(), "olmo-run", train_run_and_resumption)


@pytest.fixture(scope="session")
def truth(olmo_run) -> dict:
    return received(olmo_run / "run" / "received", RANKS)


@pytest.fixture(scope="module")
def root(olmo_run, truth, tmp_path_factory) -> str:
    """A catalog with the run attached from its last checkpoint, its loss curve and the instances it logged imported."""
    folder = tmp_path_factory.mktemp("olmo-attach")
    root = str(folder / "catalog")
    curve = metrics(folder / "loss.jsonl", steps=60, step_base=1, spike=SPIKE, batch={r: 2 for r in range(RANKS)})
    logged = batches(folder / "logged.jsonl", {(step - 1, rank): b["index"].tolist() for (step, rank), b in truth.items()})
    checkpoint = olmo_run / "run" / "checkpoints" / "step60"
    code, output = cli("attach", "olmo", "olmo", "--checkpoint", checkpoint, "--metrics", curve, "--batches", logged, "--root", root)
    assert code == 0 and "attached replayed run olmo: OLMo-core, 60 steps × 2 ranks (global batch 4)" in " ".join(output.split()), output
    return root


def _value(field: Any, row: int) -> Any:
    """Instance ``row``'s value of a field of the batch OLMo-core yielded, as plain values."""
    value = field[row]
    return value.tolist() if hasattr(value, "tolist") else value


def test_every_field_every_rank_received_at_every_step_is_the_attached_runs(root, truth):
    run = Catalog(root).run("olmo")
    assert (run.total_steps, run.world_size) == (60, RANKS)
    read: dict[int, set[tuple[int, int, int]]] = {}
    for (trainer_step, rank), expected in sorted(truth.items()):
        batch = run.batch(trainer_step - 1, rank)
        assert batch.indices == expected["index"].tolist()
        for row, sample in enumerate(batch.samples):
            fields = {name: _value(value, row) for name, value in expected.items() if name != "epoch"}
            assert {name: sample.inputs[name] for name in fields} == fields, (trainer_step, rank, row)
            mask = [int(m and fields["instance_mask"]) for m in fields["label_mask"]]
            assert sample.inputs["loss_mask"] == mask and {d.epoch for d in sample.documents} == {expected["epoch"] - 1}
            text = [
                t
                for d in sample.documents
                for t in d.record["tokens"][d.span["offset"] : d.span["offset"] + d.span["end"] - d.span["start"]]
            ]
            assert text == fields["input_ids"]
            for d in sample.documents:
                read.setdefault(run.version(0).index_of(d.address.shard, d.address.row), set()).add((trainer_step - 1, rank, row))
    for record in range(run.version(0).rows):
        assert {(r.step, r.rank, r.sample) for r in run.where(0, record).reads} == read.get(record, set()), record


def test_every_page_and_command_works_on_the_attached_run(root, tmp_path):
    assert_pages(client(root, tmp_path), Catalog(root), "olmo", title="OLMo-core", framework="olmo", spike=SPIKE)
    assert_commands(root, "olmo", step=SPIKE, rank=1, logged=60 * RANKS)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--checkpoint", "{missing}"], "OLMo-core checkpoint {missing} has no config.json"),
        (["--checkpoint", "{step60}", "--seed", "3"], "data seed 3 contradicts the trainer state's seed 17"),
        (
            ["--checkpoint", "{step60}", "--dp-world-size", "3"],
            "cannot split a global batch of 4 instances (64 tokens, sequence length 16) over 3",
        ),
        (["--checkpoint", "{step60}", "--path-map", "nowhere"], "--path-map 'nowhere': give THEN=NOW"),
    ],
)
def test_bad_input_is_one_line_and_leaves_nothing_attached(olmo_run, tmp_path, flags, message):
    values = {"missing": str(tmp_path / "nowhere"), "step60": str(olmo_run / "run" / "checkpoints" / "step60")}
    assert_refused(tmp_path / "catalog", ["olmo", "job", *[f.format(**values) for f in flags]], message.format(**values))


def test_a_token_file_changed_after_attaching_is_refused_naming_it(olmo_run, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(olmo_run / "data", data)
    root = tmp_path / "catalog"
    checkpoint = olmo_run / "run" / "checkpoints" / "step60"
    assert cli("attach", "olmo", "copy", "--checkpoint", checkpoint, "--path-map", f"{olmo_run / 'data'}={data}", "--root", root)[0] == 0
    instance = Catalog(root).run("copy").batch(0, 0).samples[0]
    document = instance.documents[0]
    path = Path(Catalog(root).run("copy").version(0).shards[document.address.shard].uri)
    tokens = np.memmap(path, dtype=np.uint16, mode="r+")
    tokens[document.record["start"] + document.span["offset"]] += 1  # the first token of the instance
    tokens.flush()
    clear_read_caches()
    http = client(root, tmp_path)
    response = http.get(urls.api(urls.rank("copy", 0, 0)))
    assert response.status_code == 409 and path.name in response.json()["error"] and "\n" not in response.json()["error"]
    assert http.get(urls.home()).status_code == 200
