"""The Streaming replay against Streaming running for real: torchrun jobs (gloo, CPU, 2 and 3 ranks, DataLoader
workers) train on StreamingDataset for 2 epochs and ≥ 50 steps, and record what each rank's DataLoader yielded at each
step; the replay gives exactly the same samples, in the same order, for every (step, rank) of every variant."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from loaders.replay.streaming import StreamingReplay
from tests.support.streaming_runs import Variant, sample_digest, settings_of, truth

# Streaming names its shared memory by scanning for a free prefix, which races between processes: every test that runs
# it shares one xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("streaming-shm")]

VARIANTS = ["mixture", "weighted", "resumed"]


@pytest.fixture(scope="session")
def runs(tmp_path_factory, worker_id) -> dict[str, Variant]:
    base = tmp_path_factory.getbasetemp()
    return truth(base if worker_id == "master" else base.parent)


@pytest.fixture(scope="session")
def replays(runs) -> dict[str, StreamingReplay]:
    return {name: StreamingReplay(settings_of(variant)) for name, variant in runs.items()}


def _expected_address(variant: Variant, uid: str) -> tuple[int, int, int]:
    """(stream, shard of the stream, row of the shard) of ``<stream>-<row>``, from the streams' index.json alone."""
    name, row = uid.rsplit("-", 1)
    stream = next(i for i, s in enumerate(variant.streams) if Path(s["local"]).name == name)
    row = int(row)
    index = json.loads((Path(variant.streams[stream]["local"]) / "index.json").read_text())
    for shard, info in enumerate(index["shards"]):
        if row < info["samples"]:
            return stream, shard, row
        row -= info["samples"]
    raise AssertionError(f"{uid} is not in its stream")


@pytest.mark.parametrize("name", VARIANTS)
def test_every_step_and_rank_equals_what_the_real_dataloaders_yielded(runs, replays, name):
    variant, replay = runs[name], replays[name]
    assert replay.total_steps >= 50 and replay.total_steps == 1 + max(step for step, _ in variant.records)
    pairs = [(step, rank) for step in range(replay.total_steps) for rank in range(replay.world_size_at(step))]
    assert sorted(pairs) == sorted(variant.records), "the replay's (step, rank) pairs are the run's"
    assert {replay.epoch_at(step) for step in range(replay.total_steps)} == {0, 1}
    for step, rank in pairs:
        samples = replay.batch(step, rank)
        got = [(replay.decoded(s)["uid"], sample_digest(replay.decoded(s))) for s in samples]
        assert got == variant.records[(step, rank)], f"{name}: step {step} rank {rank}"
        for sample in samples:
            uid = got[sample.position][0]
            assert (sample.stream, sample.shard, sample.row) == _expected_address(variant, uid)
            assert Path(sample.shard_file).parent == Path(variant.streams[sample.stream]["local"])


def test_the_resumed_launch_starts_where_its_state_was_saved_on_its_own_world(runs, replays):
    variant, replay = runs["resumed"], replays["resumed"]
    first, second = replay.launches()
    assert (first.start_step, first.end_step, first.world_size) == (0, variant.launches[0]["stop_after"], 2)
    assert (second.start_step, second.world_size, second.resumed_at_sample) == (first.end_step, 3, variant.states[0]["sample_in_epoch"])
    assert first.global_batch_size == second.global_batch_size == 12
    assert replay.world_size_history() == [(0, 2), (first.end_step, 3)]


@pytest.mark.parametrize("name", VARIANTS)
def test_where_finds_every_read_of_a_sample(replays, name):
    replay = replays[name]
    reads: dict[tuple[int, int], set[tuple[int, int, int]]] = {}
    for step in range(replay.total_steps):
        for rank in range(replay.world_size_at(step)):
            for sample in replay.batch(step, rank):
                reads.setdefault((sample.sample_id, sample.epoch), set()).add((step, rank, sample.position))
    for (sample_id, epoch), expected in reads.items():
        assert {(p.step, p.rank, p.position) for p in replay.where(sample_id, epoch=epoch)} == expected
    repeated = max(reads, key=lambda k: len(reads[k]))
    assert len(replay.where(repeated[0])) == sum(len(v) for (i, _), v in reads.items() if i == repeated[0])


def test_records_render_text_tokens_and_images_as_the_model_received_them(replays):
    from PIL import Image

    kinds = set()
    for name in VARIANTS:
        replay = replays[name]
        for sample in replay.batch(replay.total_steps - 1, 0):
            decoded, record = replay.decoded(sample), replay.record(sample)
            assert record["text"] == decoded["text"]
            if "tokens" in decoded:
                assert record["tokens"] == decoded["tokens"].tolist() and all(isinstance(t, int) for t in record["tokens"])
                kinds.add("tokens")
            if "image" in decoded:
                shown = Image.open(io.BytesIO(record["image"]["bytes"]))
                assert shown.format == "PNG" and np.array_equal(np.asarray(shown), np.asarray(decoded["image"]))
                kinds.add("image")
    assert kinds == {"tokens", "image"}
