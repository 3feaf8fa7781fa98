"""``batchscope attach streaming`` end to end, over the ground truth of Streaming's own DataLoaders run for real under
torchrun (``tests/support/streaming_runs.py``): a run resumed on 3 ranks from a state its 2-rank launch saved
(attached from a settings file) and a weighted mixture (attached by flags) give, at every (step, rank), the samples the
real DataLoaders yielded, with the same contents; where inverts them; every page and command works; bad input is one
line and leaves nothing; a shard changed after attaching is refused naming it."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app import urls
from loaders import Catalog
from loaders.catalog.version import clear_read_caches
from tests.support.attached import assert_commands, assert_pages, assert_refused, batches, cli, client, metrics
from tests.support.streaming_runs import Variant, sample_digest, settings_of, truth

# Streaming names its shared memory by scanning for a free prefix, which races between processes: every test that runs
# it shares one xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("streaming-shm")]

SPIKE = 20  # a step of the resumed launch, on 3 ranks


@pytest.fixture(scope="session")
def runs(tmp_path_factory, worker_id) -> dict[str, Variant]:
    base = tmp_path_factory.getbasetemp()
    return truth(base if worker_id == "master" else base.parent)


def _sample_ids(variant: Variant) -> dict[tuple[int, int], list[int]]:
    """What each rank's DataLoader yielded, as Streaming's sample ids (``<stream>-<row>`` uids, streams in order)."""
    first, sizes = {}, 0
    for stream in variant.streams:
        index = json.loads((Path(stream["local"]) / "index.json").read_text())
        first[Path(stream["local"]).name] = sizes
        sizes += sum(shard["samples"] for shard in index["shards"])
    return {key: [first[u.rsplit("-", 1)[0]] + int(u.rsplit("-", 1)[1]) for u, _ in samples] for key, samples in variant.records.items()}


@pytest.fixture(scope="module")
def root(runs, tmp_path_factory) -> str:
    """The resumed run attached from a settings file (its resume state a file beside it), with its loss curve and
    logged samples; the mixture attached by flags."""
    folder = tmp_path_factory.mktemp("streaming-attach")
    root = str(folder / "catalog")
    resumed = runs["resumed"]
    settings = settings_of(resumed).to_json()
    (folder / "state.json").write_text(json.dumps(resumed.states[0]))
    settings["launches"][1]["resume"] = "state.json"
    (folder / "settings.json").write_text(json.dumps(settings))
    curve = metrics(folder / "loss.jsonl", steps=50, step_base=0, spike=SPIKE, batch={r: 4 for r in range(3)})
    logged = batches(folder / "logged.jsonl", _sample_ids(resumed))
    code, output = cli(
        "attach", "streaming", "resumed", "--settings", folder / "settings.json", "--metrics", curve, "--batches", logged, "--root", root
    )
    assert code == 0 and "attached replayed run resumed: MosaicML Streaming, 50 steps × 2 ranks (global batch 12)" in " ".join(
        output.split()
    ), output
    web, code_stream = (s["local"] for s in runs["mixture"].streams)
    flags = [
        "--stream",
        f"{web},proportion=0.6",
        "--stream",
        f"{code_stream},proportion=0.4",
        "--launch",
        "batch_size=4,ranks_per_node=2,workers=2",
    ]
    flags += ["--epochs", "2", "--shuffle", "--shuffle-seed", "17"]
    assert cli("attach", "streaming", "mixture", *flags, "--root", root)[0] == 0
    return root


def _as_streaming(inputs: dict[str, Any], columns: dict[str, str]) -> dict[str, Any]:
    """A sample's stored fields as Streaming decodes them (arrays of their dtype, images as pictures)."""
    from PIL import Image

    out = {}
    for name, value in inputs.items():
        encoding = columns[name]
        if encoding.startswith("ndarray:"):
            value = np.asarray(value, dtype=encoding.split(":")[1])
        elif encoding == "png":
            value = Image.open(io.BytesIO(value["bytes"]))
        out[name] = value
    return out


@pytest.mark.parametrize("name", ["resumed", "mixture"])
def test_every_step_and_rank_is_what_the_real_dataloaders_yielded(runs, root, name):
    variant, run = runs[name], Catalog(root).run(name)
    columns = {}
    for stream in variant.streams:
        shard = json.loads((Path(stream["local"]) / "index.json").read_text())["shards"][0]
        columns.update(zip(shard["column_names"], shard["column_encodings"]))
    assert sorted((s, r) for s in range(run.total_steps) for r in range(run.world_size_at(s))) == sorted(variant.records)
    read: dict[tuple[int, int], set[tuple[int, int, int]]] = {}
    for (step, rank), expected in sorted(variant.records.items()):
        batch = run.batch(step, rank)
        assert [(s.inputs["uid"], sample_digest(_as_streaming(s.inputs, columns))) for s in batch.samples] == expected, (name, step, rank)
        for position, sample in enumerate(batch.samples):
            d = sample.documents[0]
            read.setdefault((d.source, run.version(d.source).index_of(d.address.shard, d.address.row)), set()).add((step, rank, position))
    for (source, record), places in list(read.items())[::5]:
        assert {(r.step, r.rank, r.sample) for r in run.where(source, record).reads} == places, (name, source, record)
    if name == "resumed":
        assert [(s.start_step, s.world_size) for s in run.world_size_history()] == [(0, 2), (10, 3)]


def test_every_page_and_command_works_on_the_attached_run(root, tmp_path):
    assert_pages(client(root, tmp_path), Catalog(root), "resumed", title="MosaicML Streaming", framework="streaming", spike=SPIKE)
    assert_commands(root, "resumed", step=SPIKE, rank=2, logged=10 * 2 + 40 * 3)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--stream", "{web}", "--epochs", "1"], "attach streaming: --launch required (or --settings FILE)"),
        (
            ["--stream", "{web},weight=2", "--launch", "4", "--epochs", "1"],
            "PATH then proportion=, repeat=, choose= or split= (not weight)",
        ),
        (["--stream", "{missing}", "--launch", "4", "--epochs", "1"], "stream 0: {missing}/index.json is missing"),
        (
            ["--stream", "{web}", "--launch", "4", "--epochs", "1", "--shuffle-algo", "nope"],
            "shuffle_algo='nope' is not one of mosaicml-streaming",
        ),
        (["--settings", "{missing}"], "--settings {missing}: cannot be read as JSON"),
    ],
)
def test_bad_input_is_one_line_and_leaves_nothing_attached(runs, tmp_path, flags, message):
    values = {"web": runs["mixture"].streams[0]["local"], "missing": str(tmp_path / "nowhere")}
    assert_refused(tmp_path / "catalog", ["streaming", "job", *[f.format(**values) for f in flags]], message.format(**values))


def test_a_shard_changed_after_attaching_is_refused_naming_it(runs, tmp_path):
    data = tmp_path / "web"
    shutil.copytree(runs["mixture"].streams[0]["local"], data)
    root = tmp_path / "catalog"
    assert (
        cli("attach", "streaming", "copy", "--stream", data, "--launch", "batch_size=4,ranks_per_node=2", "--epochs", "1", "--root", root)[
            0
        ]
        == 0
    )
    d = Catalog(root).run("copy").batch(0, 0).samples[0].documents[0]
    shard = Path(Catalog(root).run("copy").version(0).shards[d.address.shard].uri)
    raw = bytearray(shard.read_bytes())
    raw[-2] ^= 0x20  # a letter of the shard's last sample changes case
    shard.write_bytes(bytes(raw))
    clear_read_caches()
    http = client(root, tmp_path)
    response = http.get(urls.api(urls.rank("copy", 0, 0)))
    assert response.status_code == 409 and shard.name in response.json()["error"] and "\n" not in response.json()["error"]
    assert http.get(urls.home()).status_code == 200
