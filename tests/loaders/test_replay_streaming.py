"""The Streaming replay in one process: against a real StreamingDataset and DataLoader (one rank, worker processes)
for every batching method, and its refusals — a changed or missing shard, a step or rank outside the run, a world
Streaming's partitioner cannot produce, a resumption that contradicts the run — each one line naming what failed."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import numpy as np
import pytest

from loaders.errors import ChecksumMismatch, InvalidPlan, RankOutOfRange, StepOutOfRange
from loaders.replay.streaming import Launch, PinnedFile, ReplayFileChanged, ResumeState, StreamingReplay, StreamingSettings, StreamSpec
from loaders.replay.streaming.library import installed_version
from tests.support.streaming_runs import ROOT, release_shared_memory, sample_digest, write_stream

# Streaming names its shared memory by scanning for a free prefix, which races between processes: every test that runs
# it shares one xdist worker
pytestmark = pytest.mark.xdist_group("streaming-shm")


@pytest.fixture()
def folder(tmp_path) -> Path:
    write_stream(tmp_path, "web", 40, kind="text", shard_bytes=500)
    write_stream(tmp_path, "code", 25, kind="tokens", shard_bytes=500)
    return tmp_path


def _settings(folder: Path, *launches: Launch, **options) -> StreamingSettings:
    streams = (StreamSpec(str(folder / "web"), proportion=0.6), StreamSpec(str(folder / "code"), proportion=0.4))
    return StreamingSettings(
        streams=streams,
        launches=launches or (Launch(batch_size=4, ranks_per_node=2, workers=1),),
        **{"epochs": 2, "shuffle": True, **options},
    )


# -- against the real thing, in process -------------------------------------------------------------------------
CASES = {
    "random, py1e, drop_last": ({"shuffle_algo": "py1e", "shuffle_block_size": 32}, {"drop_last": True}),
    "per_stream, py2s": ({"shuffle_algo": "py2s", "batching_method": "per_stream", "num_canonical_nodes": 2, "shuffle_block_size": 8}, {}),
    "device_per_stream, naive": ({"shuffle_algo": "naive", "batching_method": "device_per_stream", "num_canonical_nodes": 2}, {}),
    "stratified, py1br, epoch_size, fixed": (
        {"shuffle_algo": "py1br", "batching_method": "stratified", "epoch_size": 90, "sampling_method": "fixed", "shuffle_block_size": 16},
        {},
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_a_real_dataloader_with_workers_yields_what_the_replay_says(folder, case):
    import torch

    from loaders.replay.streaming.library import import_streaming

    import_streaming()
    from streaming.base.dataset import StreamingDataset
    from streaming.base.stream import Stream

    dataset_options, loader_options = CASES[case]
    batch, workers = 3, 2
    streams = [Stream(local=str(folder / "web"), proportion=0.6), Stream(local=str(folder / "code"), proportion=0.4)]
    dataset = StreamingDataset(streams=streams, batch_size=batch, shuffle=True, **dataset_options)
    # forked workers inherit the bare `streaming` package (a spawned one would run its __init__, which needs torchvision),
    # whatever start method another test of this process set
    forked = {"multiprocessing_context": "fork"}
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, num_workers=workers, collate_fn=list, **forked, **loader_options)
    real = [[(s["uid"], sample_digest(s)) for s in got] for _epoch in range(2) for got in loader]
    del loader, dataset
    release_shared_memory([str(folder / "web"), str(folder / "code")])

    replay = StreamingReplay(_settings(folder, Launch(batch_size=batch, workers=workers), **dataset_options, **loader_options))
    replayed = [
        [(replay.decoded(s)["uid"], sample_digest(replay.decoded(s))) for s in replay.batch(step)] for step in range(replay.total_steps)
    ]
    assert replayed == real and len(real) > 10


@pytest.mark.slow
@pytest.mark.parametrize("stop_in_epoch_1", [0, 5], ids=["at the end of epoch 0", "mid-epoch 1"])
def test_a_real_resumption_from_a_state_dict_yields_what_the_replay_says(folder, stop_in_epoch_1):
    import torch

    from loaders.replay.streaming.library import import_streaming

    import_streaming()
    from streaming.base.dataset import StreamingDataset
    from streaming.base.stream import Stream

    options = {"shuffle": True, "num_canonical_nodes": 2, "shuffle_block_size": 16, "batch_size": 3}

    def loader(workers: int) -> tuple:
        streams = [Stream(local=str(folder / "web"), proportion=0.6), Stream(local=str(folder / "code"), proportion=0.4)]
        dataset = StreamingDataset(streams=streams, **options)
        return dataset, torch.utils.data.DataLoader(
            dataset, batch_size=3, num_workers=workers, collate_fn=list, multiprocessing_context="fork"
        )

    dataset, first = loader(2)
    real = [[s["uid"] for s in got] for got in first]  # epoch 0
    yielded = sum(map(len, real))  # what StreamingDataLoader counts (times the ranks: 1) for the state dict
    if stop_in_epoch_1:  # epoch 1, stopped after that many batches
        batches, yielded = iter(first), 0
        for _ in range(stop_in_epoch_1):
            real.append([s["uid"] for s in next(batches)])
            yielded += len(real[-1])
    state = dataset.state_dict(yielded, False)
    del first, dataset
    release_shared_memory([str(folder / "web"), str(folder / "code")])
    dataset, second = loader(1)
    dataset.load_state_dict(state)
    real += [[s["uid"] for s in got] for _epoch in range(state["epoch"], 2) for got in second]
    del second, dataset
    release_shared_memory([str(folder / "web"), str(folder / "code")])

    launches = (Launch(batch_size=3, workers=2), Launch(batch_size=3, workers=1, resume=ResumeState.from_state_dict(state)))
    settings = _settings(folder, *launches, num_canonical_nodes=2, shuffle_block_size=16)
    replay = StreamingReplay(settings)
    assert replay.launches()[1].start_step == (22 + stop_in_epoch_1 if stop_in_epoch_1 else 22)
    assert [[replay.decoded(s)["uid"] for s in replay.batch(step)] for step in range(replay.total_steps)] == real


# -- pinned files --------------------------------------------------------------------------------------------
def test_a_shard_changed_after_pinning_is_refused_in_one_line_naming_it(folder):
    settings = _settings(folder)
    pins = StreamingReplay(settings).pin()
    assert [Path(p).name for p in pins][:2] == ["index.json", "shard.00000.mds"] and len(pins) == len(StreamingReplay(settings).files())
    shard = str(folder / "code" / "shard.00001.mds")
    data = bytearray(Path(shard).read_bytes())
    data[-3] ^= 0xFF  # same size, other bytes
    Path(shard).write_bytes(bytes(data))
    replay = StreamingReplay(settings, pins=pins)  # the order needs only the index: it opens
    victim = next(s for step in range(replay.total_steps) for s in replay.batch(step) if s.shard_file == shard)
    with pytest.raises(ReplayFileChanged, match=rf"^{shard}: changed since the run was attached \(sha256 \w+…, pinned \w+…\)$") as refused:
        replay.record(victim)
    assert isinstance(refused.value, ChecksumMismatch) and refused.value.status == 409  # a 4xx page, not a server error
    Path(shard).write_bytes(bytes(data[:-1]))  # and truncated: refused on opening
    with pytest.raises(
        ReplayFileChanged, match=rf"^{shard}: changed since the run was attached \({len(data) - 1} bytes, pinned {len(data)}\)$"
    ):
        StreamingReplay(settings, pins=pins)


def test_a_changed_index_or_a_missing_shard_is_refused_on_opening(folder):
    settings = _settings(folder)
    pins = StreamingReplay(settings).pin()
    index = folder / "web" / "index.json"
    index.write_text(json.dumps(json.loads(index.read_text()), indent=1))
    with pytest.raises(ReplayFileChanged, match=rf"^{index}: changed since the run was attached"):
        StreamingReplay(settings, pins=pins)
    moved = folder / "moved"
    (folder / "web").rename(moved)
    relocated = StreamingSettings.from_json(
        {**settings.to_json(), "streams": [{"local": str(moved), "proportion": 0.6}, settings.streams[1].to_json()]}
    )
    with pytest.raises(ReplayFileChanged, match=rf"^{moved}/index.json: not among the files pinned when the run was attached"):
        StreamingReplay(relocated, pins=pins)
    moved.rename(folder / "web")
    (folder / "code" / "shard.00000.mds").unlink()
    with pytest.raises(ReplayFileChanged, match=r"^stream 1: shard file .*code/shard.00000.mds is missing$"):
        StreamingReplay(settings)
    with pytest.raises(ReplayFileChanged, match=r"^stream 0: .*nowhere/index.json is missing"):
        StreamingReplay(StreamingSettings(streams=(StreamSpec(str(folder / "nowhere")),), launches=(Launch(batch_size=2),), epochs=1))


def test_a_shard_kept_only_compressed_is_refused_naming_both_files(tmp_path):
    from loaders.replay.streaming.library import import_streaming

    import_streaming()
    from streaming.base.format.mds.writer import MDSWriter

    with MDSWriter(out=str(tmp_path / "zipped"), columns={"text": "str"}, compression="zstd") as writer:
        for number in range(5):
            writer.write({"text": f"row {number}"})
    settings = StreamingSettings(streams=(StreamSpec(str(tmp_path / "zipped")),), launches=(Launch(batch_size=2),), epochs=1)
    with pytest.raises(ReplayFileChanged, match=r"shard.00000.mds is missing \(only its compressed form shard.00000.mds.zstd is there"):
        StreamingReplay(settings)


def test_pins_round_trip_through_json(folder):
    pins = StreamingReplay(_settings(folder)).pin()
    assert {path: PinnedFile.from_json(pin.to_json()) for path, pin in pins.items()} == pins


# -- steps, ranks, worlds ------------------------------------------------------------------------------------
def test_a_step_beyond_the_run_or_a_rank_beyond_its_world_is_refused(folder):
    replay = StreamingReplay(_settings(folder))
    last = replay.total_steps - 1
    assert len(replay.batch(last, 1)) >= 1
    for step in (replay.total_steps, -1, 10**9):
        with pytest.raises(StepOutOfRange, match=rf"^step {step} is not in this run: it has steps 0..{last}$"):
            replay.batch(step)
    with pytest.raises(RankOutOfRange, match=r"^rank 2 is not in step 0's world: it ran on 2 rank\(s\) \(0..1\)$"):
        replay.batch(0, 2)
    assert replay.batch(0, 1, world_size=2) == replay.batch(0, 1)
    with pytest.raises(InvalidPlan, match=r"^step 0 ran on 2 rank\(s\), not 4: a replayed run has only the worlds it ran on$"):
        replay.batch(0, 1, world_size=4)
    capped = StreamingReplay(_settings(folder, max_steps=5))
    assert capped.total_steps == 5 and capped.batch(4) == replay.batch(4)


def test_a_world_the_partitioner_cannot_produce_is_refused_with_streamings_reason(folder):
    settings = _settings(folder, Launch(batch_size=2, nodes=3), num_canonical_nodes=4)
    with pytest.raises(
        InvalidPlan,
        match=r"^Streaming cannot plan epoch 0 on 3 node\(s\) × 1 rank\(s\) × 1 worker\(s\) .*: Either canonical or physical nodes must be evenly divisible by the other",
    ):
        StreamingReplay(settings)


def test_a_resumption_on_a_world_relaxed_partitioning_cannot_produce_is_refused_with_streamings_reason(folder):
    state = ResumeState(epoch=0, sample_in_epoch=12, num_canonical_nodes=4, shuffle_seed=9176, initial_physical_nodes=2)
    settings = _settings(folder, Launch(batch_size=3, nodes=2), Launch(batch_size=3, nodes=3, resume=state), num_canonical_nodes=4)
    with pytest.raises(InvalidPlan, match=r"A global batch size of 9 is not evenly divisible by the initial total number of devices of 2"):
        StreamingReplay(settings)


def test_a_resumption_elsewhere_than_a_step_boundary_or_contradicting_the_run_is_refused(folder):
    def resumed(state: ResumeState, **launch) -> StreamingSettings:
        return _settings(folder, Launch(batch_size=4, ranks_per_node=2), Launch(batch_size=2, ranks_per_node=4, resume=state, **launch))

    good = ResumeState(epoch=0, sample_in_epoch=24)
    assert StreamingReplay(resumed(good)).launches()[1].start_step == 3
    with pytest.raises(
        InvalidPlan,
        match=r"^launch 1 resumed at sample_in_epoch 20 of epoch 0, where no step of launch 0 ends \(its steps end at samples 0, 8, 16, 24",
    ):
        StreamingReplay(resumed(ResumeState(epoch=0, sample_in_epoch=20)))
    with pytest.raises(InvalidPlan, match=r"^launch 1 resumed from a state with shuffle_seed=3, but the run's is 9176$"):
        StreamingReplay(resumed(ResumeState(epoch=0, sample_in_epoch=24, shuffle_seed=3)))
    with pytest.raises(
        InvalidPlan, match=r"^launch 1 is said to start at step 4, but its state \(epoch 0, sample_in_epoch 24\) is where step 3 starts$"
    ):
        StreamingReplay(resumed(good, step=4))
    with pytest.raises(InvalidPlan, match=r"^launch 1 resumed in epoch 5, but the run has 2 epoch\(s\)$"):
        StreamingReplay(resumed(ResumeState(epoch=5, sample_in_epoch=0)))
    other_nodes = _settings(folder, Launch(batch_size=4, ranks_per_node=2), Launch(batch_size=4, nodes=2, resume=ResumeState(0, 24, 1)))
    with pytest.raises(
        InvalidPlan,
        match=r"^launch 1 runs on 2 node\(s\), launch 0 on 1, and num_canonical_nodes is not given: .* \(the state dict records it: 1\)$",
    ):
        StreamingReplay(other_nodes)


def test_settings_name_their_bad_values_and_round_trip_through_json(folder):
    settings = _settings(folder, Launch(batch_size=4, ranks_per_node=2), Launch(batch_size=8, resume=ResumeState(0, 24)), max_steps=9)
    assert StreamingSettings.from_json(json.loads(json.dumps(settings.to_json()))) == settings
    with pytest.raises(InvalidPlan, match=r"^launch batch_size=0 is out of range: must be an integer >= 1$"):
        Launch(batch_size=0)
    with pytest.raises(
        InvalidPlan, match=r"^stream /.*/web: at most one of proportion, repeat, choose may be given \(got proportion, choose\)$"
    ):
        StreamSpec("web", proportion=0.5, choose=3)
    with pytest.raises(InvalidPlan, match=r"^launch 1 has no resume state"):
        _settings(folder, Launch(batch_size=4), Launch(batch_size=4))
    with pytest.raises(InvalidPlan, match=r"^the Streaming settings has unknown setting\(s\) shufle; known: "):
        StreamingSettings.from_json({**settings.to_json(), "shufle": True})
    with pytest.raises(InvalidPlan, match=r"^a launch lacks the setting\(s\) batch_size$"):
        Launch.from_json({"ranks_per_node": 2})
    with pytest.raises(
        InvalidPlan, match=r"^shuffle_algo='py9' is not one of mosaicml-streaming [\d.]+'s: py1br, py1e, py1s, py2s, naive$"
    ):
        StreamingReplay(_settings(folder, shuffle_algo="py9"))
    with pytest.raises(InvalidPlan, match=rf"^the run trained with mosaicml-streaming 0.1.0 but {installed_version()} is installed"):
        StreamingReplay(_settings(folder, streaming_version="0.1.0"))
    with pytest.raises(InvalidPlan, match=r"^Streaming refuses the stream settings: Relative \(`proportion`\) and absolute"):
        StreamingReplay(
            StreamingSettings(
                streams=(StreamSpec(str(folder / "web"), proportion=1.0), StreamSpec(str(folder / "code"), repeat=2.0)),
                launches=(Launch(batch_size=2),),
                epochs=1,
            )
        )


# -- cache and inverse -----------------------------------------------------------------------------------------
def test_cached_epoch_orders_are_reused_and_a_tampered_one_is_recomputed_never_served(folder, tmp_path, caplog):
    settings = _settings(folder)
    fresh = StreamingReplay(settings)
    expected = [fresh.batch(step, 1) for step in range(fresh.total_steps)]
    cache = tmp_path / "cache"
    assert [StreamingReplay(settings, cache_dir=str(cache)).batch(step, 1) for step in range(fresh.total_steps)] == expected
    tables = sorted(cache.glob("*-order1.npy"))
    assert len(tables) == 2 and all(p.with_suffix(".json").exists() for p in tables)
    stamp = [p.stat().st_mtime_ns for p in tables]
    assert [StreamingReplay(settings, cache_dir=str(cache)).batch(step, 1) for step in range(fresh.total_steps)] == expected
    assert [p.stat().st_mtime_ns for p in tables] == stamp, "a second process reads the cached orders"
    table = np.load(tables[1])
    table[0, 0, 1], table[0, 1, 1] = table[0, 1, 1], table[0, 0, 1]
    np.save(tables[1], table)  # a plausible-looking but wrong order
    with caplog.at_level(logging.WARNING):
        assert [StreamingReplay(settings, cache_dir=str(cache)).batch(step, 1) for step in range(fresh.total_steps)] == expected
    assert f"{tables[1]}: recomputing the cached epoch order: its content does not match its digest" in caplog.text


def test_where_refuses_a_sample_id_the_streams_do_not_hold(folder):
    replay = StreamingReplay(_settings(folder))
    with pytest.raises(InvalidPlan, match=r"^sample id 65 is out of range: the streams hold 65 samples$"):
        replay.where(65)
    assert replay.where(0) and all(replay.batch(p.step, p.rank)[p.position].sample_id == 0 for p in replay.where(0))


def test_the_adopt_guide_example_runs_as_it_is(tmp_path, monkeypatch, capsys):
    from loaders.replay.streaming import demo_streams

    doc = (ROOT / "docs" / "adopt.md").read_text()
    example = re.search(r"```python\n(.*?)```", doc[doc.index("\n## MosaicML Streaming\n") :], re.S).group(1)
    demo_streams(str(tmp_path / "data"), web=150, code=70)
    state = {"epoch": 0, "sample_in_epoch": 120, "num_canonical_nodes": 4, "shuffle_seed": 9176, "initial_physical_nodes": 1}
    (tmp_path / "state.json").write_text(json.dumps(state))
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "docs/adopt.md", "exec"), {})
    assert capsys.readouterr().out.splitlines()[0] == "38 10"
    cached = sorted((tmp_path / "replay-cache").iterdir())
    assert {p.stem for p in cached if p.suffix == ".npy"} == {p.stem for p in cached if p.suffix == ".json"}
    assert {p.stem.rsplit("-", 1)[1] for p in cached} == {"order1", "inverse1"}
