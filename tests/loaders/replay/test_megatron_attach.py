"""``batchscope attach megatron`` end to end, over the ground truth of megatron-core's own pipeline run for real under
torchrun (``tests/support/megatron_truth.py``): every (iteration, data-parallel rank) of an attached blend (flags)
and batch-size ramp-up (an arguments file) is what the rank received; the run's cached indexes are used in place;
every page and command works on it; bad input is one line and leaves nothing; a data file changed after attaching is
refused naming it."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest

from app import urls
from loaders import Catalog
from loaders.catalog.version import clear_read_caches
from tests.support import megatron_truth as truth
from tests.support.attached import assert_commands, assert_pages, assert_refused, batches, cli, client, metrics

pytest.importorskip("megatron.core", reason="the megatron extra is not installed")
pytestmark = pytest.mark.slow

RANKS = 2
SPIKE = 31


@pytest.fixture(scope="session")
def shared(tmp_path_factory, worker_id) -> Path:
    base = tmp_path_factory.getbasetemp()
    return truth.ground_truth((base.parent if worker_id != "master" else base) / "megatron-truth")


def _argv(shared: Path, case: str) -> list[str]:
    spec = {c["name"]: c["argv"] for c in truth.cases(shared / "data", shared / "cache")}
    return [*spec[case], "--data-parallel-size", str(RANKS)]


def _logged(shared: Path, case: str) -> dict[tuple[int, int], list[int]]:
    """What each rank's sampler drew at each iteration, as the real run recorded it."""
    out = {}
    for rank in range(RANKS):
        received = truth.load(shared / "out", case, rank)
        for iteration in np.unique(received["iteration"]).tolist():
            out[(iteration, rank)] = received["sample"][received["iteration"] == iteration].tolist()
    return out


def _cache_state(shared: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for folder in (shared / "cache", shared / "data" / "beta" / "cache") for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def root(shared, tmp_path_factory) -> str:
    """A catalog with the blend attached by flags (its loss curve and logged indices imported) and the ramp-up from
    the launch script that trained it."""
    folder = tmp_path_factory.mktemp("megatron-attach")
    root = str(folder / "catalog")
    cache = _cache_state(shared)
    curve = metrics(folder / "loss.jsonl", steps=90, step_base=1, spike=SPIKE, batch={r: 4 for r in range(RANKS)})
    logged = batches(folder / "logged.jsonl", _logged(shared, "blend"))
    code, output = cli("attach", "megatron", "blend", *_argv(shared, "blend"), "--metrics", curve, "--batches", logged, "--root", root)
    assert code == 0, output
    assert "attached replayed run blend: Megatron-Core, 90 steps × 2 ranks (global batch 8)" in " ".join(output.split())
    script = folder / "train.sh"
    script.write_text("torchrun --nproc_per_node 2 pretrain_gpt.py \\\n    " + shlex.join(_argv(shared, "rampup")) + "  # the ramp-up\n")
    code, output = cli("attach", "megatron", "rampup", "--from-args-file", script, "--root", root)
    assert code == 0, output
    assert _cache_state(shared) == cache, "the run's cache is read in place, never written"
    return root


def test_every_iteration_and_rank_of_the_attached_runs_is_what_megatron_gave_the_rank(shared, root):
    catalog = Catalog(root)
    for case in ("blend", "rampup"):
        run = catalog.run(case)
        assert run.total_steps == truth.meta(shared / "out", case)["train_iters"]
        read: dict[tuple[int, int], set[tuple[int, int, int]]] = {}
        for rank in range(RANKS):
            received = truth.load(shared / "out", case, rank)
            for iteration in range(run.total_steps):
                batch = run.batch(iteration, rank)
                rows = received["iteration"] == iteration
                assert [s.inputs["input_ids"] for s in batch.samples] == received["tokens"][rows].tolist(), (case, iteration, rank)
                assert batch.indices == received["sample"][rows].tolist()
                assert [(s.inputs["microbatch"], s.inputs["row"]) for s in batch.samples] == list(
                    zip(received["microbatch"][rows], received["row"][rows])
                )
                assert [s.documents[0].source for s in batch.samples] == received["dataset_id"][rows].tolist()
                for position, sample in enumerate(batch.samples):
                    for d in sample.documents:
                        read.setdefault((d.source, run.version(d.source).index_of(d.address.shard, d.address.row)), set()).add(
                            (iteration, rank, position)
                        )
        for (source, record), places in list(read.items())[::9]:
            assert {(r.step, r.rank, r.sample) for r in run.where(source, record).reads} == places, (case, source, record)
        assert {p.role.split(" ")[0] for p in run.pins} >= {"document_index", "sample_index", "shuffle_index", "description"}
        work = Path(root) / "indexes" / "replay" / run.manifest["arrays"]["key"]
        assert not list(work.rglob("*.npy")), "attaching over the run's cached indexes builds nothing"
    assert [s.ref for s in catalog.run("blend").sources] == ["alpha", "beta"]
    beside = shared / "data" / "beta" / "cache" / "GPTDataset_indices"  # a run without --data-cache-path caches there
    assert {Path(p.path).parent for p in catalog.run("rampup").pins} == {beside}


def test_every_page_and_command_works_on_the_attached_run(root, tmp_path):
    http = client(root, tmp_path)
    assert_pages(http, Catalog(root), "blend", title="Megatron-Core", framework="megatron", spike=SPIKE)
    assert_commands(root, "blend", step=SPIKE, rank=1, logged=90 * RANKS)
    beyond = http.get(urls.api(urls.rank("blend", 90, 0)))
    assert beyond.status_code == 404 and beyond.json()["error"] == "step 90 is outside replayed run blend (steps 0 to 89)"


@pytest.mark.parametrize(
    "change, message",
    [
        (("--seed", "8"), r"the run's cached indexes contradict the arguments: random_seed (--seed) is 7 there, 8 in the arguments"),
        (("--data-path", "{missing}"), "--data-path prefix {missing}: {missing}.bin does not exist (moved or deleted?)"),
        (("--mock-data", None), "--mock-data reads generated data, not files"),
        (("--train-samples", "100"), "give exactly one of --train-iters and --train-samples"),
        (("--global-batch-size", "6"), "data-parallel size 2 cannot produce global batch size 6"),
    ],
)
def test_bad_input_is_one_line_and_leaves_nothing_attached(shared, tmp_path, change, message):
    argv = _argv(shared, "plain")
    flag, value = change
    missing = str(tmp_path / "nowhere" / "alpha")
    if flag in argv:
        argv[argv.index(flag) + 1] = value.format(missing=missing)
    else:
        argv += [flag] + ([value] if value else [])
    assert_refused(tmp_path / "catalog", ["megatron", "plain", *argv], message.format(missing=missing))


def test_a_data_file_changed_after_attaching_is_refused_naming_it(shared, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for suffix in (".bin", ".idx"):
        shutil.copy(shared / "data" / f"alpha{suffix}", data / f"alpha{suffix}")
    argv = _argv(shared, "plain")
    argv[argv.index("--data-path") + 1] = str(data / "alpha")
    argv[argv.index("--data-cache-path") + 1] = str(tmp_path / "no-cache")
    root = tmp_path / "catalog"
    assert cli("attach", "megatron", "copy", *argv, "--root", root)[0] == 0  # megatron-core builds the indexes once, here
    run = Catalog(root).run("copy")
    assert run.batch(0, 0).indices == _logged(shared, "plain")[(0, 0)]
    document = run.batch(0, 0).samples[0].documents[0]
    record = run.version(0).index_of(document.address.shard, document.address.row)
    tokens = np.memmap(data / "alpha.bin", dtype=np.int32, mode="r+")
    pointer = int(np.frombuffer((data / "alpha.idx").read_bytes()[34 + 4 * run.version(0).rows :], dtype=np.int64)[record]) // 4
    tokens[pointer] += 1
    tokens.flush()
    clear_read_caches()
    http = client(root, tmp_path)
    response = http.get(urls.api(urls.rank("copy", 0, 0)))
    assert response.status_code == 409 and "alpha.bin" in response.json()["error"] and "\n" not in response.json()["error"]
    assert http.get(urls.home()).status_code == 200
