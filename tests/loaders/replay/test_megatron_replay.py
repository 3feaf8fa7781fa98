"""The Megatron-Core replay equals what megatron-core's own pipeline gave each rank under torchrun, for every
(iteration, data-parallel rank) of a plain run, a blend, a batch-size ramp-up and skipped iterations; it uses the
run's cached indexes in place (building nothing), detects a tampered cache, and refuses bad input in one line."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from loaders.errors import InvalidPlan, InvalidQuery, RankOutOfRange, RegistrationError, StepOutOfRange
from loaders.replay.megatron import CacheMismatch, MegatronReplay, parse_args, read_args_file, read_checkpoint_args
from tests.support import megatron_truth as truth

pytest.importorskip("megatron.core", reason="the megatron extra is not installed")
pytestmark = pytest.mark.slow

CASES = ("plain", "blend", "rampup", "skip")
RANKS = 2


@pytest.fixture(scope="session")
def shared(tmp_path_factory, worker_id) -> Path:
    """The corpora, the run's cache and what each rank received: made once per test session (one torchrun)."""
    base = tmp_path_factory.getbasetemp()
    return truth.ground_truth((base.parent if worker_id != "master" else base) / "megatron-truth")


def _argv(shared: Path, case: str) -> list[str]:
    spec = {c["name"]: c["argv"] for c in truth.cases(shared / "data", shared / "cache")}
    return [*spec[case], "--data-parallel-size", str(RANKS)]


@pytest.fixture(scope="session")
def replays(shared, tmp_path_factory) -> dict[str, MegatronReplay]:
    work = tmp_path_factory.mktemp("megatron-work")
    return {case: MegatronReplay.open(parse_args(_argv(shared, case)), work_dir=work / case) for case in CASES}


@pytest.mark.parametrize("case", CASES)
def test_every_iteration_and_rank_equals_what_megatron_gave_the_rank(shared, replays, case):
    replay = replays[case]
    meta = truth.meta(shared / "out", case)
    assert replay.total_iterations == meta["train_iters"] >= 50
    assert replay.schedule.consumed_total == meta["consumed_samples"]
    for rank in range(RANKS):
        received = truth.load(shared / "out", case, rank)
        assert sorted(set(received["iteration"].tolist())) == list(range(replay.total_iterations))
        for iteration in range(replay.total_iterations):
            got = replay.batch(iteration, rank)
            rows = received["iteration"] == iteration
            assert [(s.microbatch, s.row) for s in got.samples] == list(zip(received["microbatch"][rows], received["row"][rows]))
            assert np.array_equal(np.stack([s.tokens for s in got.samples]), received["tokens"][rows]), (case, iteration, rank)
            assert [s.index for s in got.samples] == received["sample"][rows].tolist()
            assert [s.dataset for s in got.samples] == received["dataset_id"][rows].tolist()
            assert got.skipped == bool(received["skipped"][rows][0])


def test_cases_cover_two_epochs_a_ramp_and_skips(replays):
    """What the proof covers: every dataset read for more than two epochs of its train tokens, a growing global
    batch, skipped iterations."""
    for case in ("plain", "blend", "rampup"):
        replay = replays[case]
        read = [s.dataset for i in range(replay.total_iterations) for r in range(RANKS) for s in replay.batch(i, r).samples]
        for position, gpt in enumerate(replay.gpt_datasets):
            assert read.count(position) * replay.args.seq_length > 2 * gpt._get_num_tokens_per_epoch(), (case, position)
    ramp = replays["rampup"].schedule
    assert [ramp.global_batch_size_at(i) for i in (0, 13, 19, 68)] == [4, 8, 12, 12]
    assert [i for i in range(60) if replays["skip"].schedule.skipped(i)] == [3, 17, 40]


def test_spans_name_the_documents_and_offsets_whose_tokens_make_the_sample(replays):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    for case in ("blend", "rampup"):
        replay = replays[case]
        data = {prefix: IndexedDataset(prefix) for prefix in replay.args.prefixes}
        for iteration in (0, replay.total_iterations - 1):
            for sample in replay.batch(iteration, 1).samples:
                text = np.concatenate([data[sample.prefix].get(s.document, offset=s.offset, length=s.length) for s in sample.spans])
                assert len(text) == replay.args.seq_length + 1
                assert [s.start for s in sample.spans] == np.cumsum([0] + [s.length for s in sample.spans])[:-1].tolist()
                assert np.array_equal(text[:-1], sample.tokens) and np.array_equal(text[1:], sample.labels)


def test_where_finds_every_place_a_document_was_read(replays):
    replay = replays["blend"]
    read: dict[tuple[str, int], set] = {}
    for iteration in range(replay.total_iterations):
        for rank in range(RANKS):
            for s in replay.batch(iteration, rank).samples:
                for span in s.spans:
                    read.setdefault((s.prefix, span.document), set()).add((iteration, rank, s.microbatch, s.row, span.offset))
    for (prefix, document), places in list(read.items())[::7]:
        assert {(w.iteration, w.rank, w.microbatch, w.row, w.span.offset) for w in replay.where(prefix, document)} == places
    never = next(d for d in range(120) if (replay.args.prefixes[0], d) not in read)  # a valid/test-split document
    assert replay.where(replay.args.prefixes[0], never) == []


def test_attach_uses_the_run_cache_in_place_and_builds_nothing(shared, tmp_path):
    cache = shared / "cache"
    before = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    for case in ("plain", "blend", "rampup"):
        replay = MegatronReplay.open(parse_args(_argv(shared, case)), work_dir=tmp_path / case)
        assert replay.built_seconds is None and {s.origin for s in replay.index_sets} == {"run cache"}
        assert not (tmp_path / case).exists() or not any((tmp_path / case).rglob("*.npy"))
        pinned = {f.role for f in replay.files()}
        assert {"bin", "idx", "document_index", "sample_index", "shuffle_index", "description"} <= pinned
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == before
    assert {s.files["sample_index"].parent for s in replay.index_sets} == {shared / "data" / "beta" / "cache" / "GPTDataset_indices"}


def test_without_the_run_cache_megatron_builds_the_same_indexes_into_our_folder(shared, replays, tmp_path):
    argv = _argv(shared, "blend")
    argv[argv.index("--data-cache-path") + 1] = str(tmp_path / "empty-cache")
    rebuilt = MegatronReplay.open(parse_args(argv), work_dir=tmp_path / "work")
    assert rebuilt.built_seconds is not None and {s.origin for s in rebuilt.index_sets} == {"built"}
    assert not (tmp_path / "empty-cache").exists()  # the run's folders are never written
    assert rebuilt.fingerprint == replays["blend"].fingerprint
    for iteration in (0, 31, 89):
        a, b = rebuilt.batch(iteration, 1).samples, replays["blend"].batch(iteration, 1).samples
        assert all(np.array_equal(x.tokens, y.tokens) for x, y in zip(a, b))


def _copied_cache(shared: Path, tmp_path: Path) -> list[str]:
    shutil.copytree(shared / "cache", tmp_path / "cache")
    argv = _argv(shared, "plain")
    argv[argv.index("--data-cache-path") + 1] = str(tmp_path / "cache")
    return argv


def test_a_tampered_cache_is_refused_naming_the_file(shared, tmp_path):
    argv = _argv(shared, "plain")
    name = MegatronReplay.open(parse_args(argv), work_dir=tmp_path / "w0").index_sets[0].files
    argv = _copied_cache(shared, tmp_path)
    sample_index = tmp_path / "cache" / name["sample_index"].name
    array = np.load(sample_index)
    array[1:, 1] += 1  # every sample starts one token later
    np.save(sample_index, array)
    with pytest.raises(CacheMismatch, match="sample_index.npy: sample .* starts at"):
        MegatronReplay.open(parse_args(argv), work_dir=tmp_path / "w1")
    np.save(sample_index, np.load(name["sample_index"]))
    shuffle_index = tmp_path / "cache" / name["shuffle_index"].name
    array = np.load(shuffle_index)
    array[[10, 11]] = array[[11, 10]]  # still a permutation: only a rebuild can tell
    np.save(shuffle_index, array)
    MegatronReplay.open(parse_args(argv), work_dir=tmp_path / "w2")
    with pytest.raises(CacheMismatch, match="shuffle_index.npy: position 10 differs from megatron-core's rebuild"):
        MegatronReplay.open(parse_args(argv), work_dir=tmp_path / "w3", check="rebuild")
    description = tmp_path / "cache" / name["description"].name
    description.write_text(description.read_text().replace('"random_seed": 7', '"random_seed": 8'))
    with pytest.raises(CacheMismatch, match="description does not match"):
        MegatronReplay.open(parse_args(argv), work_dir=tmp_path / "w4")


@pytest.mark.parametrize(
    ("case", "change", "message"),
    [
        ("plain", ("--seed", "8"), r"random_seed \(--seed\) is 7 there, 8 in the arguments"),
        ("plain", ("--seq-length", "32"), r"sequence_length \(--seq-length\) is 16 there, 32"),
        ("plain", ("--split", "80,10,10"), r"split \(--split\) is '90,8,2' there"),
        ("plain", ("--data-parallel-size", "3"), "data-parallel size 3 cannot produce global batch size 8"),
        ("rampup", ("--seed", "6"), r"random_seed \(--seed\) is 5 there, 6 in the arguments .*GPTDataset_indices"),
        ("rampup", ("--rampup-batch-size", "6"), "--rampup-batch-size 6 4 100 .* megatron-core refuses it"),
    ],
)
def test_a_setting_contradicting_the_run_cache_is_refused_naming_it(shared, tmp_path, case, change, message):
    argv = _argv(shared, case)
    argv[argv.index(change[0]) + 1] = change[1]
    with pytest.raises(InvalidPlan, match=message):
        MegatronReplay.open(parse_args(argv), work_dir=tmp_path)
    assert not (tmp_path / "megatron-indexes").exists()  # nothing half-built left behind


def test_bad_iterations_ranks_documents_and_files_are_one_line_each(shared, replays, tmp_path):
    replay = replays["plain"]
    with pytest.raises(StepOutOfRange, match="iteration 60 is beyond the run: it has iterations 0..59"):
        replay.batch(60, 0)
    with pytest.raises(RankOutOfRange, match="data-parallel rank 2 does not exist: the run has ranks 0..1"):
        replay.batch(0, 2)
    with pytest.raises(InvalidQuery, match="prefix 'nope' is not in --data-path"):
        replay.where("nope", 0)
    moved = tmp_path / "moved"
    shutil.copytree(shared / "data", moved, ignore=shutil.ignore_patterns("alpha.bin", "cache"))
    argv = _argv(shared, "plain")
    argv[argv.index("--data-path") + 1] = str(moved / "alpha")
    with pytest.raises(RegistrationError, match=r"alpha.bin does not exist \(moved or deleted\?\)") as raised:
        MegatronReplay.open(parse_args(argv), work_dir=tmp_path / "w")
    assert "\n" not in str(raised.value)


def test_arguments_from_a_file_and_from_a_checkpoint_open_the_same_replay(shared, replays, tmp_path):
    import torch

    argv = _argv(shared, "blend")
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/bash\n# launch\ntorchrun --nproc-per-node 2 pretrain_gpt.py \\\n  " + " \\\n  ".join(argv) + " --lr 3e-4\n")
    assert read_args_file(script) == parse_args(argv)
    as_json = tmp_path / "args.json"
    as_json.write_text(json.dumps(vars(parse_args(argv).namespace()), default=list))
    assert read_args_file(as_json) == parse_args(argv)

    saved = vars(parse_args(argv).namespace()) | {"train_iters": 60, "consumed_train_samples": 240, "world_size": 2, "lr": 3e-4}
    folder = tmp_path / "checkpoints"
    (folder / "iter_0000030" / "mp_rank_00").mkdir(parents=True)
    torch.save(
        {"args": argparse.Namespace(**saved), "iteration": 30, "checkpoint_version": 3.0},
        folder / "iter_0000030" / "mp_rank_00" / "model_optim_rng.pt",
    )
    (folder / "latest_checkpointed_iteration.txt").write_text("30")
    loaded = read_checkpoint_args(folder)
    assert (loaded.iteration, loaded.consumed_train_samples) == (30, 240)
    assert loaded.args == parse_args(argv)
    assert MegatronReplay.open(loaded.args, work_dir=tmp_path / "w").fingerprint == replays["blend"].fingerprint


def test_without_megatron_core_opening_is_one_line_naming_the_extra(shared, tmp_path):
    code = (
        "import sys; sys.modules['megatron'] = None\n"
        "from loaders.replay.megatron import MegatronReplay, parse_args\n"
        f"MegatronReplay.open(parse_args({_argv(shared, 'plain')!r}), work_dir={str(tmp_path)!r})\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=truth.REPO)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "loaders.replay.megatron._extra.MissingExtra: replaying a Megatron-Core run needs megatron-core: pip install 'batchscope[megatron]'"
    )
