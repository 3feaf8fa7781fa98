"""Replayed Hugging Face runs: what torch's DistributedSampler and DataLoader hand each rank of a ``datasets`` folder,
recomputed by batchscope, equals what running them gives — and bad input is one line, leaving nothing behind."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loaders import Catalog
from loaders.errors import PinnedFileChanged, ReplayError, SettingMismatch, StepOutOfRange
from loaders.replay.attach import attach
from loaders.replay.batch_index import RankDraw
from tests.support.replays import hf_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return hf_corpus(tmp_path_factory.mktemp("hf"), rows=45)


def _real(path, *, shuffle_seed, seed, world_size, batch_size, epochs, drop_last):
    """``(step, rank) → ids`` as the training job's own objects yield them (each rank's loop run in this process)."""
    import datasets
    from torch.utils.data import DataLoader, DistributedSampler

    found = {}
    for rank in range(world_size):
        data = datasets.load_from_disk(str(path))
        if shuffle_seed is not None:
            data = data.shuffle(seed=shuffle_seed)
        sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, seed=seed, drop_last=drop_last)
        loader = DataLoader(data.with_format("torch"), batch_size=batch_size, sampler=sampler, drop_last=drop_last)
        step = 0
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for batch in loader:
                found[(step, rank)] = list(batch["id"])
                step += 1
    return found


def _args(path, **options):
    argv = ["--dataset", str(path)]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is not None and value is not False:
            argv += [flag, str(value)]
    return argv


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("world_size", [2, 3])
def test_every_step_of_every_rank_equals_what_the_dataloader_yields(tmp_path, corpus, drop_last, world_size):
    options = dict(shuffle_seed=3, seed=11, world_size=world_size, batch_size=2, epochs=3, drop_last=drop_last)
    real = _real(corpus, **options)
    run = attach(Catalog(tmp_path / "catalog"), "hf", "job", _args(corpus, **options))
    assert run.total_steps * world_size == len(real)
    for (step, rank), ids in real.items():
        assert [s.record["id"] for s in run.batch(step, rank).samples] == ids, (step, rank)


def test_without_a_shuffle_seed_the_sampler_reads_the_folder_in_order(tmp_path, corpus):
    options = dict(shuffle_seed=None, seed=0, world_size=2, batch_size=4, epochs=2, drop_last=False)
    real = _real(corpus, **options)
    run = Catalog(tmp_path / "catalog").run(attach(Catalog(tmp_path / "catalog"), "hf", "plain", _args(corpus, **options)).name)
    assert {key: [s.record["id"] for s in run.batch(*key).samples] for key in real} == real


def test_samples_carry_addresses_keys_epochs_and_their_row_as_inputs(tmp_path, corpus):
    catalog = Catalog(tmp_path / "catalog")
    run = attach(catalog, "hf", "job", _args(corpus, shuffle_seed=3, seed=1, world_size=2, batch_size=3, epochs=2, key="id"))
    per_epoch = run.total_steps // 2
    sample = run.batch(per_epoch + 1, 1).samples[2]
    version = run.version(0)
    assert version.shard_format == "arrow-stream" and version.name == "corpus"
    assert sample.documents[0].epoch == 1 and sample.key == sample.record["id"]
    assert version.read(sample.address.shard, [sample.address.row])[0] == sample.record
    assert version.sample(sample.key) == sample.record  # the permalink resolves
    assert sample.inputs == sample.record and sample.inputs["labels"][:2] == [-100, -100]


def test_where_finds_every_read_of_a_row_by_inverting_the_order(tmp_path, corpus):
    run = attach(Catalog(tmp_path / "catalog"), "hf", "job", _args(corpus, shuffle_seed=5, seed=2, world_size=3, batch_size=2, epochs=2))
    reads = {}
    for step in range(run.total_steps):
        for rank in range(3):
            for position, sample in enumerate(run.batch(step, rank).samples):
                record = run.version(0).index_of(sample.address.shard, sample.address.row)
                reads.setdefault(record, []).append((step, rank, position))
    for record, expected in reads.items():
        assert [(r.step, r.rank, r.sample) for r in run.where(0, record).reads] == sorted(expected), record
    assert len(reads) == 45  # every row read (padding reads some twice)


def test_attaching_again_finds_the_indexes_and_builds_nothing(tmp_path, corpus):
    catalog = Catalog(tmp_path / "catalog")
    argv = _args(corpus, shuffle_seed=3, seed=1, world_size=2, batch_size=3, epochs=2)
    attach(catalog, "hf", "first", argv)
    from loaders.replay import attach as attach_module

    built = []
    original = attach_module.ArrayStore._build

    def spy(self, name, *args):
        built.append(name)
        return original(self, name, *args)

    attach_module.ArrayStore._build = spy
    try:
        second = attach(catalog, "hf", "second", argv)
    finally:
        attach_module.ArrayStore._build = original
    assert built == [] and second.manifest["arrays"] == catalog.run("first").manifest["arrays"]


def _leftovers(catalog: Catalog) -> list[str]:
    found = []
    for folder in ("runs", "datasets", ".attaching", "indexes"):
        path = os.path.join(catalog.root, folder)
        for directory, _, files in os.walk(path):
            found += [os.path.join(directory, f) for f in files if not f.startswith(".lock")]
    return found


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(seed=1, world_size=4, batch_size=16, drop_last=True), r"over 45 rows: each rank's DataLoader yields no batch"),
        (dict(seed=1, world_size=2, batch_size=0), r"argument --batch-size: invalid positive value: '0'"),
        (dict(world_size=2, batch_size=2), r"the following arguments are required: --seed"),
        (dict(seed=1, world_size=2, batch_size=2, split="train"), r"--split train: .* is one Dataset, not a DatasetDict"),
    ],
)
def test_bad_settings_are_one_line_and_leave_nothing(tmp_path, corpus, options, message):
    catalog = Catalog(tmp_path / "catalog")
    with pytest.raises(ReplayError, match=message):
        attach(catalog, "hf", "job", _args(corpus, **options))
    assert _leftovers(catalog) == [] and catalog.runs() == []


def test_a_fingerprint_the_folder_does_not_give_is_refused_naming_the_setting(tmp_path, corpus):
    import datasets

    logged = datasets.load_from_disk(str(corpus)).shuffle(seed=3)._fingerprint  # what the job's dataset reports
    catalog = Catalog(tmp_path / "catalog")
    attach(catalog, "hf", "ok", _args(corpus, shuffle_seed=3, seed=1, world_size=2, batch_size=2, fingerprint=logged))
    with pytest.raises(SettingMismatch, match=rf"--fingerprint {logged} is not .* shuffled with --shuffle-seed 4"):
        attach(catalog, "hf", "wrong", _args(corpus, shuffle_seed=4, seed=1, world_size=2, batch_size=2, fingerprint=logged))
    assert catalog.runs() == ["ok"]


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(ReplayError, match=r"--dataset .*nowhere: no such folder"):
        attach(
            Catalog(tmp_path / "catalog"),
            "hf",
            "job",
            ["--dataset", str(tmp_path / "nowhere"), "--seed", "1", "--world-size", "2", "--batch-size", "2"],
        )


def test_a_file_changed_or_moved_after_attaching_is_refused_naming_it(tmp_path):
    corpus = hf_corpus(tmp_path / "data", rows=20)
    catalog = Catalog(tmp_path / "catalog")
    attach(catalog, "hf", "job", _args(corpus, seed=1, world_size=2, batch_size=2))
    data = sorted(p for p in os.listdir(corpus) if p.endswith(".arrow"))[0]
    original = (corpus / data).read_bytes()
    flipped = bytearray(original)
    flipped[-40] ^= 0xFF  # inside the last record batch: same size, other bytes
    (corpus / data).write_bytes(bytes(flipped))
    run = Catalog(catalog.root).run("job")
    with pytest.raises(PinnedFileChanged, match=rf"{data}.* does not match its registered checksum"):
        for step in range(run.total_steps):
            run.batch(step, 0)
            run.batch(step, 1)
    (corpus / data).write_bytes(original)
    (corpus / "state.json").write_text((corpus / "state.json").read_text() + " ")
    with pytest.raises(PinnedFileChanged, match=r"state.json: pinned by replayed run job at \d+ bytes, now \d+ bytes"):
        Catalog(catalog.root).run("job").batch(0, 0)
    shutil.move(corpus, tmp_path / "moved")
    with pytest.raises(PinnedFileChanged, match=r"state.json: pinned by replayed run job .* is missing or was moved"):
        Catalog(catalog.root).run("job").batch(0, 0)


def test_steps_ranks_and_world_sizes_outside_the_run_are_named(tmp_path, corpus):
    run = attach(Catalog(tmp_path / "catalog"), "hf", "job", _args(corpus, seed=1, world_size=2, batch_size=5))
    with pytest.raises(StepOutOfRange, match=rf"step {run.total_steps} is outside replayed run job \(steps 0 to {run.total_steps - 1}\)"):
        run.batch(run.total_steps, 0)
    with pytest.raises(ReplayError, match=r"read step 0 on 2 data-parallel ranks; its sampler never produced a world size of 4 there"):
        run.batch(0, 0, world_size=4)
    with pytest.raises(ReplayError, match=r"run 'job' already exists"):
        attach(Catalog(run.catalog.root), "hf", "job", _args(corpus, seed=1, world_size=2, batch_size=5))


@given(n=st.integers(0, 200), batch_size=st.integers(1, 17), drop_last=st.booleans())
def test_positions_are_cut_into_batches_exactly_as_torchs_batch_sampler_cuts_them(n, batch_size, drop_last):
    from torch.utils.data import BatchSampler

    positions = np.arange(n, dtype=np.int64)[::-1].copy()
    cut = RankDraw.batched(positions, batch_size, drop_last=drop_last)
    expected = list(BatchSampler(positions.tolist(), batch_size, drop_last))
    ends = np.cumsum(cut.sizes).tolist()
    assert [cut.positions[end - size : end].tolist() for end, size in zip(ends, cut.sizes.tolist())] == expected


def test_the_inverse_index_is_built_on_the_first_where_sealed_and_a_forged_one_is_rebuilt(tmp_path, corpus):
    import json

    from loaders.replay import arrays as arrays_module

    catalog = Catalog(tmp_path / "catalog")
    run = attach(catalog, "hf", "job", _args(corpus, shuffle_seed=5, seed=2, world_size=3, batch_size=2, epochs=1))
    assert not any(name.endswith((".sorted", ".slots")) for name in run.manifest["arrays"])  # attaching drew the forward index only
    expected = [(r.step, r.rank, r.sample) for r in run.where(0, 7).reads]
    assert expected
    folder = next(os.path.dirname(p) for p in _leftovers(catalog) if p.endswith("e0.sorted.npy"))
    path, sidecar = os.path.join(folder, "e0.slots.npy"), os.path.join(folder, "e0.slots.json")
    forged = np.load(path)[::-1].copy()  # every read of a row pointed elsewhere, with a digest that matches
    np.save(path, forged, allow_pickle=False)
    stamp = json.loads(open(sidecar).read())
    stamp["sha256"] = arrays_module.file_digest(path)
    open(sidecar, "w").write(json.dumps(stamp))
    again = Catalog(tmp_path / "catalog").run("job")
    assert [(r.step, r.rank, r.sample) for r in again.where(0, 7).reads] == expected  # rebuilt from the sealed positions
    assert not np.array_equal(np.load(path), forged)


@given(
    rows=st.integers(1, 60),
    world_size=st.integers(1, 5),
    seed=st.integers(0, 2**31 - 1),
    epoch=st.integers(0, 3),
    shuffle=st.booleans(),
    drop_last=st.booleans(),
)
def test_one_draw_of_the_epoch_gives_each_rank_exactly_what_its_own_sampler_yields(rows, world_size, seed, epoch, shuffle, drop_last):
    from torch.utils.data import DistributedSampler

    from loaders.replay.batch_index import Positions
    from loaders.replay.hf import HFReplay

    class Settings:  # only what the draw reads
        pass

    settings = Settings()
    settings.world_size, settings.shuffle, settings.seed, settings.drop_last, settings.batch_size = world_size, shuffle, seed, drop_last, 3
    replay = HFReplay.__new__(HFReplay)
    replay.settings, replay.rows = settings, rows
    drawn = replay._draw(epoch)
    for rank in range(world_size):
        own = DistributedSampler(Positions(rows), num_replicas=world_size, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop_last)
        own.set_epoch(epoch)
        expected = list(own)
        assert drawn[rank].positions.tolist() == (expected[: len(expected) // 3 * 3] if drop_last else expected)
