"""OLMo-core replay against OLMo-core running for real: its Trainer on 2 gloo ranks for 2 epochs (60 steps), resumed
mid-epoch on 1 rank; every field every rank received at every step equals the replay, and bad input is refused in
one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from loaders.errors import ChecksumMismatch, InvalidPlan, NotFound, RankOutOfRange, StateMismatch, StepOutOfRange
from loaders.replay.olmo import OlmoReplay
from tests.support.olmo_run import built_once, received, train_run_and_resumption, write_corpus

pytestmark = pytest.mark.slow
RANKS = 2


@pytest.fixture(scope="session")
def olmo_run(tmp_path_factory) -> Path:
    """A real OLMo-core training run (2 ranks, 2 epochs, checkpoints at steps 25, 50, 60) and its resumption from step
    25 on 1 rank, with what every rank received at every step; trained once per test session."""
    return built_once(tmp_path_factory.getbasetemp(), "olmo-run", train_run_and_resumption)


@pytest.fixture(scope="session")
def truth(olmo_run) -> dict:
    return received(olmo_run / "run" / "received", RANKS)


@pytest.fixture(scope="session")
def replay(olmo_run, tmp_path_factory) -> OlmoReplay:
    return OlmoReplay.attach(olmo_run / "run" / "checkpoints" / "step60", work_dir=tmp_path_factory.mktemp("olmo-replay"))


def _same(expected: dict, got: dict) -> list[str]:
    """The fields of a batch OLMo-core yielded that the replay's batch does not equal (every field, both ways)."""
    keys = (set(expected) - {"epoch"}) | set(got)
    return [
        k
        for k in sorted(keys)
        if not (torch.equal(expected[k], got[k]) if isinstance(expected.get(k), torch.Tensor) else expected.get(k) == got.get(k))
    ]


def test_every_rank_at_every_step_of_two_epochs_is_what_olmo_core_yielded(replay, truth):
    assert len(truth) == 60 * RANKS and {b["epoch"] for b in truth.values()} == {1, 2}
    assert (replay.total_steps, replay.batches_per_epoch, replay.dp_world_size, replay.seed) == (60, 30, 2, 17)
    assert replay.fingerprint == replay.checkpoint.state.dataset_fingerprint
    for (trainer_step, rank), expected in sorted(truth.items()):
        got = replay.batch(trainer_step - 1, rank)
        assert (got.trainer_step, got.epoch) == (trainer_step, expected["epoch"])
        assert _same(expected, got.batch) == [], (trainer_step, rank)
        assert [i.index for i in replay.locate(trainer_step - 1, rank)] == expected["index"].tolist()
        for row, instance in enumerate(got.instances):
            assert np.array_equal(instance.input_ids, expected["input_ids"][row].numpy())
            assert [p.length for p in instance.documents] == [n for n in expected["doc_lens"][row].tolist() if n]


def test_every_field_the_dataset_makes_was_exercised(truth):
    fields = set().union(*(b.keys() for b in truth.values()))
    assert {"input_ids", "index", "label_mask", "instance_mask", "doc_lens", "max_doc_lens", "metadata"} <= fields
    assert not all(bool(m) for b in truth.values() for m in b["instance_mask"]), "the repetition filter masked no instance"


@pytest.mark.parametrize("step", [25, 50])
def test_a_mid_epoch_checkpoint_replays_the_whole_run_the_same(olmo_run, truth, step, tmp_path):
    replay = OlmoReplay.attach(olmo_run / "run" / "checkpoints" / f"step{step}", work_dir=tmp_path)
    state = replay.checkpoint.state
    assert (state.global_step, state.batches_processed) == ((25, 25) if step == 25 else (50, 20))
    assert all(_same(expected, replay.batch(s - 1, rank).batch) == [] for (s, rank), expected in truth.items())


def test_the_run_resumed_on_one_rank_is_the_replay_on_one_rank(olmo_run, replay):
    resumed = received(olmo_run / "resumed" / "received", 1)
    assert sorted(resumed) == [(s, 0) for s in range(26, 61)]
    assert all(_same(expected, replay.batch(s - 1, 0, dp_world_size=1).batch) == [] for (s, _), expected in resumed.items())


def test_where_finds_exactly_the_places_each_instance_was_read(replay, truth):
    seen: dict[int, set] = {}
    for (trainer_step, rank), batch in truth.items():
        for position, index in enumerate(batch["index"].tolist()):
            seen.setdefault(index, set()).add((trainer_step - 1, rank, position))
    for index in range(len(replay.dataset)):
        assert {(p.step, p.rank, p.position) for p in replay.where(index)} == seen.get(index, set()), index
    dropped = [i for i in range(len(replay.dataset)) if len(seen.get(i, ())) < 2]
    assert dropped, "each epoch drops the instance that makes no whole batch"


def test_an_instance_is_read_for_rendering_with_its_provenance(replay, truth):
    batch = truth[(1, 0)]
    index = int(batch["index"][0])
    instance = replay.instance(index)
    assert np.array_equal(instance.input_ids, batch["input_ids"][0].numpy())
    start, end = instance.tokens.start, instance.tokens.end
    on_disk = np.fromfile(instance.tokens.path, dtype=np.uint16)[start:end]
    assert np.array_equal(on_disk, instance.input_ids) and end - start == 16
    assert replay.instance_at(instance.tokens.path, start + 3) == index
    assert instance.documents[0].position == 0 and sum(p.length for p in instance.documents) == 16
    assert json.dumps(instance.to_json())


def test_documents_carry_the_dolma_ids_of_the_file_that_has_metadata(replay):
    pinned = {(Path(p.path).name, p.role) for p in replay.files()}
    assert ("part-00.csv.gz", "metadata") in pinned and ("part-01.csv.gz", "metadata") not in pinned
    for index in range(len(replay.dataset)):
        for piece in replay.instance(index).documents:
            named = piece.file == 0 and piece.terminated
            assert (piece.id, piece.src) == ((f"part-00-doc{piece.number}", "s3://raw/part-00.jsonl.gz") if named else (None, None))


def test_reopened_from_its_description_without_hashing_again(replay, truth):
    again = OlmoReplay.from_json(json.loads(json.dumps(replay.to_json())), work_dir=replay.work_dir)
    assert [p.checksum for p in again.files()] == [p.checksum for p in replay.files()]
    assert [p.role for p in again.files()] == ["tokens"] * 3 + ["label_mask"] * 3 + ["metadata"]
    assert _same(truth[(40, 1)], again.batch(39, 1).batch) == []


def _copy(olmo_run: Path, tmp_path: Path) -> tuple[Path, tuple]:
    data = tmp_path / "data"
    shutil.copytree(olmo_run / "data", data)
    return data, ((str(olmo_run / "data"), str(data)),)


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_a_token_file_changed_after_attaching_is_refused(olmo_run, tmp_path):
    data, path_map = _copy(olmo_run, tmp_path)
    replay = OlmoReplay.attach(olmo_run / "run" / "checkpoints" / "step60", work_dir=tmp_path / "w", path_map=path_map)
    target = replay.batch(0, 0).instances[0].tokens
    tokens = np.memmap(target.path, dtype=np.uint16, mode="r+")
    tokens[target.start + 1] += 1
    tokens.flush()
    del tokens
    with pytest.raises(ChecksumMismatch) as refused:
        replay.batch(0, 0)
    assert f"token file {target.path} changed after it was pinned" in _one_line(refused)
    with open(data / "part-00.npy", "ab") as grown:
        grown.write(b"\0\0")
    with pytest.raises(ChecksumMismatch, match="part-00.npy is 1402 bytes, it was pinned with 1400 bytes"):
        OlmoReplay.from_json(replay.to_json(), work_dir=replay.work_dir)


def test_files_that_contradict_the_checkpoint_fingerprint_are_refused(olmo_run, tmp_path):
    data, path_map = _copy(olmo_run, tmp_path)
    with open(data / "part-02.npy", "ab") as grown:
        grown.write(b"\x05\x00" * 16)
    with pytest.raises(InvalidPlan, match="OLMo-core cannot build the dataset: mismatch between size of source file"):
        OlmoReplay.attach(olmo_run / "run" / "checkpoints" / "step60", work_dir=tmp_path / "w", path_map=path_map)
    with open(data / "part-02.mask.npy", "ab") as grown:
        grown.write(b"\x01" * 16)
    with pytest.raises(StateMismatch) as refused:
        OlmoReplay.attach(olmo_run / "run" / "checkpoints" / "step60", work_dir=tmp_path / "w", path_map=path_map)
    assert "dataset fingerprint" in _one_line(refused) and "a file's size (" in str(refused.value)
    (data / "part-01.npy").unlink()
    with pytest.raises(NotFound, match=r"part-01.npy \(config.json dataset.paths\[1\]\) is missing"):
        OlmoReplay.attach(olmo_run / "run" / "checkpoints" / "step60", work_dir=tmp_path / "w", path_map=path_map)


def test_a_seed_or_setting_that_contradicts_the_trainer_state_is_refused(olmo_run, tmp_path):
    step = olmo_run / "run" / "checkpoints" / "step50"
    with pytest.raises(StateMismatch) as refused:
        OlmoReplay.attach(step, work_dir=tmp_path / "w", seed=18)
    assert "data seed 18 contradicts the trainer state's seed 17" in _one_line(refused)
    edited = tmp_path / "step50"
    shutil.copytree(step, edited, ignore=shutil.ignore_patterns("model_and_optim"))
    config = json.loads((edited / "config.json").read_text())
    config["dataset"]["tokenizer"]["eos_token_id"] = 2
    (edited / "config.json").write_text(json.dumps(config))
    with pytest.raises(StateMismatch) as refused:
        OlmoReplay.attach(edited, work_dir=tmp_path / "w")
    assert "dataset fingerprint" in _one_line(refused) and "eos_token_id=2" in str(refused.value)
    config["dataset"]["tokenizer"]["eos_token_id"] = 0
    config["dataset"]["sequence_length"] = 8
    (edited / "config.json").write_text(json.dumps(config))
    with pytest.raises(StateMismatch, match="sequence_length 8 contradicts the trainer state's 16"):
        OlmoReplay.attach(edited, work_dir=tmp_path / "w")
    config["dataset"]["sequence_length"] = 16
    config["dataset"]["_CLASS_"] = "olmo_core.data.numpy_dataset.NumpyPaddedFSLDatasetConfig"
    (edited / "config.json").write_text(json.dumps(config))
    with pytest.raises(InvalidPlan, match="dataset NumpyPaddedFSLDatasetConfig is not replayed"):
        OlmoReplay.attach(edited, work_dir=tmp_path / "w")


@pytest.mark.parametrize(
    ("edit", "error", "message"),
    [
        (
            lambda c: c["data_loader"].update(global_batch_size=128),
            StateMismatch,
            "the trainer state says the run takes 60 steps, its max_duration",
        ),
        (lambda c: c["trainer"]["max_duration"].update(value=3), StateMismatch, r"\(3 epochs\) gives 90 with 30 batches per epoch"),
        (
            lambda c: c["trainer"]["callbacks"].update(bs={"_CLASS_": "olmo_core.train.callbacks.BatchSizeSchedulerCallback"}),
            InvalidPlan,
            "trainer callback 'bs' \\(BatchSizeSchedulerCallback\\) changes batches during the run",
        ),
        (lambda c: c.update(dataset=[{"_CLASS_": "x.InstanceSourceConfig"}]), InvalidPlan, "composable pipeline"),
    ],
)
def test_a_run_whose_steps_the_replay_cannot_follow_is_refused(olmo_run, tmp_path, edit, error, message):
    edited = tmp_path / "step50"
    shutil.copytree(olmo_run / "run" / "checkpoints" / "step50", edited, ignore=shutil.ignore_patterns("model_and_optim"))
    config = json.loads((edited / "config.json").read_text())
    edit(config)
    (edited / "config.json").write_text(json.dumps(config))
    with pytest.raises(error, match=message) as refused:
        OlmoReplay.attach(edited, work_dir=tmp_path / "w")
    _one_line(refused)


def test_steps_ranks_and_world_sizes_outside_the_run_are_refused(replay):
    with pytest.raises(StepOutOfRange) as refused:
        replay.batch(60, 0)
    assert _one_line(refused) == "step 60 is outside the OLMo-core run: its steps are 0..59 (trainer steps 1..60)"
    with pytest.raises(InvalidPlan) as refused:
        replay.batch(0, 0, dp_world_size=3)
    assert "cannot split a global batch of 4 instances (64 tokens, sequence length 16) over 3 data-parallel ranks" in _one_line(refused)
    with pytest.raises(RankOutOfRange, match="rank 2 is not below the data-parallel world size 2"):
        replay.batch(0, 2)
    assert len(replay.batch(0, 3, dp_world_size=4).instances) == 1


def _iterate_olmo_core(dataset, *, ranks: int, seed: int, global_batch_size: int, epochs: int, work_dir: Path, workers: int) -> dict:
    """What OLMo-core's own data loader yields to each data-parallel rank (its dp_rank/dp_world_size arguments, and
    ``workers`` data-loading worker processes), epoch after epoch, the way its trainer drives it (reshuffle before an
    epoch, reset after)."""
    from olmo_core.data import DataCollator, NumpyDataLoaderBase

    out = {}
    for rank in range(ranks):
        loader = NumpyDataLoaderBase.wrap_numpy_dataset(
            dataset,
            global_batch_size=global_batch_size,
            collator=DataCollator(pad_token_id=dataset.pad_token_id, vocab_size=dataset.vocab_size),
            work_dir=work_dir,
            seed=seed,
            dp_world_size=ranks,
            dp_rank=rank,
            fs_local_rank=0,
            num_workers=workers,
        )
        step = 0
        for epoch in range(1, epochs + 1):
            loader.reshuffle(epoch=epoch)
            for batch in loader:
                out[(step, rank)] = batch
                step += 1
            loader.reset()
    return out


def test_uint32_tokens_chunked_by_a_target_length_read_by_two_workers_from_a_config_alone(tmp_path):
    from olmo_core.data import NumpyDataLoaderConfig, NumpyFSLDatasetConfig, TokenizerConfig

    corpus = write_corpus(tmp_path / "data", sizes=(1000, 900), dtype="uint32", vocab=70_000, seed=5)
    config = NumpyFSLDatasetConfig(
        paths=corpus.paths,
        sequence_length=16,
        max_target_sequence_length=32,
        tokenizer=TokenizerConfig(vocab_size=70_000, eos_token_id=0, pad_token_id=1),
        dtype="uint32",
        work_dir=str(tmp_path / "olmo-work"),
    )
    loader = NumpyDataLoaderConfig(global_batch_size=64, seed=5)
    expected = _iterate_olmo_core(  # the first of the run's two epochs (every epoch is checked by the tests above)
        config.build(), ranks=2, seed=5, global_batch_size=64, epochs=1, work_dir=tmp_path / "olmo-work", workers=2
    )
    checkpoint = tmp_path / "config.json"
    experiment = {
        "dataset": config.as_config_dict(),
        "data_loader": loader.as_config_dict(),
        "trainer": {"max_duration": {"value": 2, "unit": "epochs"}},
    }
    checkpoint.write_text(json.dumps(experiment))
    with pytest.raises(InvalidPlan, match="no trainer state names the world size: give dp_world_size"):
        OlmoReplay.attach(checkpoint, work_dir=tmp_path / "w").batch(0, 0)
    replay = OlmoReplay.attach(checkpoint, work_dir=tmp_path / "w", dp_world_size=2)
    assert replay.total_steps == 58 and len(expected) // 2 == 29 and replay.checkpoint.state is None
    assert int(np.max([b["input_ids"].max() for b in expected.values()])) > np.iinfo(np.uint16).max
    for (step, rank), batch in expected.items():
        got = replay.batch(step, rank)
        assert _same(batch, got.batch) == [], (step, rank)
        assert all(i.tokens.end - i.tokens.start == 16 and i.tokens.itemsize == 4 for i in got.instances)
    # The target length makes OLMo-core shuffle pairs of neighbouring instances, which rank slicing splits across ranks.
    assert all(torch.equal(expected[(s, 1)]["index"], expected[(s, 0)]["index"] + 1) for s in range(29))
