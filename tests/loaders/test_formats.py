"""Runs and ledgers written by an earlier batchscope keep their meaning: same samples per (step, rank), still verifiable.

The golden values below were produced by the first release (read format 1,
digest format 1) from the same inputs. A change that breaks one of them
changes what existing runs say they read: make it deliberate, and give it a
new format number instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loaders import Catalog, InvalidPlan, Pack, ReadPlan, Shuffle, Source, Tokenize
from loaders.order.mixture import apportion
from loaders.run.facade import Run
from loaders.run.manifest import READ_FORMAT, fingerprint, stored_plan_json
from loaders.sampling.batch import Address, Batch, Document, Sample
from loaders.training.legacy import batch_digests_v1
from loaders.transforms.media import RandomResizedCrop
from tests.support.readpath import alpha_beta_catalog

FORMAT_1_KEYS = {
    0: ["alpha-94", "alpha-59", "alpha-84", "beta-14", "beta-17", "alpha-24", "alpha-81", "alpha-20"],
    5: ["alpha-55", "beta-8", "beta-12", "alpha-76", "alpha-28", "alpha-27", "alpha-82", "beta-28"],
    11: ["alpha-43", "beta-26", "beta-20", "alpha-17", "alpha-4", "alpha-2", "alpha-11", "alpha-34"],
}


def _catalog(tmp_path: Path) -> Catalog:
    return alpha_beta_catalog(tmp_path / "catalog", tokenizer=False)


PLAN = ReadPlan(
    [Source("alpha@v1", weight=2.0), Source("beta@v1", weight=1.0)],
    seed=7,
    global_batch_size=8,
    steps=12,
    streams=4,
    shuffle=Shuffle(chunk_size=6, window_chunks=2),
    mixture_block=64,
)


FORMAT_2_KEYS = {
    0: ["alpha-94", "alpha-59", "alpha-84", "beta-14", "beta-17", "alpha-62", "alpha-18", "alpha-19"],
    5: ["alpha-55", "beta-8", "beta-12", "alpha-76", "alpha-27", "alpha-49", "alpha-80", "beta-26"],
    11: ["alpha-43", "beta-26", "beta-20", "alpha-12", "alpha-29", "alpha-52", "alpha-31", "alpha-32"],
}
#: A fixed-block packed run of read format 2: (step, documents of samples 0 and 1, sample 1's ids and positions).
FORMAT_2_PACKED = [
    (
        0,
        [["alpha-52", "alpha-75"], ["alpha-75", "beta-0", "alpha-77"]],
        [5, 5, 5, 0, 3, 9, 4, 2, 5, 0, 3, 86, 4, 2, 5, 0],
        [7, 8, 9, 10, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5],
    ),
    (
        5,
        [["beta-9", "alpha-3", "alpha-4"], ["alpha-4", "beta-1"]],
        [13, 4, 2, 5, 5, 5, 5, 5, 0, 3, 10, 4, 2, 5, 5, 0],
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6],
    ),
]


def _as_format(manifest: dict, fmt: int, **resolved_changes) -> dict:
    """A manifest as read format ``fmt`` (1 or 2) wrote it, with the fingerprint it had then.

    Format 1 recorded no read format; neither recorded a mixture cycle or token
    counts, apportioned weights over ``mixture_block`` and stored packs without
    a strategy (fixed blocks were the only one).
    """
    drop = {"read_format", "cycle_steps", "token_counts"}
    resolved = {k: v for k, v in manifest["resolved"].items() if k not in drop}
    plan = manifest["plan"]
    resolved["counts"] = apportion([s["weight"] for s in resolved["sources"]], plan["mixture_block"])
    if fmt >= 2:
        resolved["read_format"] = fmt
    resolved.update(resolved_changes)
    transforms = [{k: v for k, v in t.items() if k not in ("strategy", "position_ids")} for t in plan["transforms"]]
    plan = {**plan, "transforms": transforms}
    return {**manifest, "plan": plan, "resolved": resolved, "fingerprint": fingerprint(plan, resolved)}


def _as_format_1(manifest: dict) -> dict:
    return _as_format(manifest, 1)


def test_a_format_1_run_reads_what_it_read_then_and_new_runs_record_their_format(tmp_path):
    catalog = _catalog(tmp_path)
    run = catalog.create_run("r", PLAN)
    assert run.manifest["resolved"]["read_format"] == READ_FORMAT == run.read_format
    stored = json.loads((Path(run.directory) / "run.json").read_text())
    old = Run(catalog, _as_format_1(stored))
    assert old.read_format == 1
    assert {s: old.batch(s, 0, world_size=1).keys for s in FORMAT_1_KEYS} == FORMAT_1_KEYS
    for world_size in (2, 4):  # elastic partition holds in the old format too
        for step in FORMAT_1_KEYS:
            joined = [k for r in range(world_size) for k in old.batch(step, r, world_size=world_size).keys]
            assert joined == FORMAT_1_KEYS[step]
    assert [run.batch(s, 0, world_size=1).keys for s in FORMAT_1_KEYS] != list(FORMAT_1_KEYS.values())  # windows now staggered


def test_a_format_2_run_reads_what_it_read_then(tmp_path):
    catalog = _catalog(tmp_path)
    run = catalog.create_run("r", PLAN)
    old = Run(catalog, _as_format(run.manifest, 2))
    assert old.read_format == 2
    assert {s: old.batch(s, 0, world_size=1).keys for s in FORMAT_2_KEYS} == FORMAT_2_KEYS
    for world_size in (2, 4):
        joined = [k for r in range(world_size) for k in old.batch(5, r, world_size=world_size).keys]
        assert joined == FORMAT_2_KEYS[5]


def test_a_format_2_fixed_block_packed_run_keeps_its_sequences_and_positions(tmp_path):
    catalog = alpha_beta_catalog(tmp_path / "catalog")
    tokenize = [Tokenize("text", tokenizer="words")]
    plan = ReadPlan(
        [Source("alpha@v1", weight=2.0, transforms=tokenize), Source("beta@v1", weight=1.0, transforms=tokenize)],
        seed=4,
        global_batch_size=4,
        steps=6,
        streams=2,
        shuffle=Shuffle(chunk_size=6, window_chunks=2),
        mixture_block=64,
        transforms=[Pack(seq_len=16, docs_per_block=8, strategy="block")],
    )
    run = catalog.create_run("p", plan)
    old = Run(catalog, _as_format(run.manifest, 2, sequences_per_block=4))
    assert ReadPlan.from_json(stored_plan_json(old.manifest)).pack.strategy == "block"
    for step, documents, ids, positions in FORMAT_2_PACKED:
        batch = old.batch(step, 0, world_size=1)
        assert [[d.key for d in s.documents] for s in batch.samples][:2] == documents
        assert batch.samples[1].inputs["input_ids"] == ids and batch.samples[1].inputs["position_ids"] == positions
        assert "cu_seqlens" not in batch.samples[1].inputs  # format 2's inputs, so its ledgers still verify


def test_format_1_plans_keep_full_size_crops():
    plan = ReadPlan([Source("images@v1", transforms=[RandomResizedCrop("image", size=(32, 32))])], seed=0, global_batch_size=2, steps=1)
    stored = plan.to_json()
    for source in stored["sources"]:
        for transform in source["transforms"]:
            del transform["reduced_decode"]  # the first release had no such option
    manifest = {"plan": stored, "resolved": {}}
    crop = ReadPlan.from_json(stored_plan_json(manifest)).sources[0].transforms[0]
    assert crop.reduced_decode is False
    assert (
        ReadPlan.from_json(stored_plan_json({"plan": plan.to_json(), "resolved": {"read_format": 2}}))
        .sources[0]
        .transforms[0]
        .reduced_decode
    )


def test_format_1_digests_are_the_first_release_digests():
    document = Document(
        0, "alpha@v1", "alpha-3", Address("alpha", "0123456789abcdef0123456789abcdef", 1, 2), 0, {"id": "alpha-3", "text": "x"}, None, 5
    )
    sample = Sample(17, 1, 0, [document], {"id": "alpha-3", "text": "x", "input_ids": [1, 2, 3]})
    batch_digest, sample_digests = batch_digests_v1(Batch("old", 2, 0, 1, [sample]))
    assert (sample_digests, batch_digest) == (["0827b0e3cd144722"], "9776d350d9b5faa869e02bb914d2c75f")


def test_a_ledger_written_in_digest_format_1_still_verifies_and_still_catches_changes(tmp_path):
    catalog = _catalog(tmp_path)
    run = catalog.create_run("r", PLAN)
    ledger = Path(run.directory) / "ledger"
    ledger.mkdir(parents=True, exist_ok=True)
    lines = []
    for step in range(3):
        batch = run.batch(step, 0, world_size=1)
        digest, samples = batch_digests_v1(batch)
        lines.append(
            {
                "t": "batch",
                "step": step,
                "rank": 0,
                "world_size": 1,
                "digest": digest,
                "indices": batch.indices,
                "keys": batch.keys,
                "samples": samples,
                "time": 0.0,
            }
        )  # no digest_format: the first release's lines
    lines[2]["digest"] = "0" * 32
    lines[2]["samples"][3] = "0" * 16
    (ledger / "w1-r0.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert [run.verify(step, 0).status for step in range(3)] == ["verified", "verified", "mismatch"]
    assert run.verify(2, 0).differing == [run.batch(2, 0, world_size=1).indices[3]]


def test_reopening_a_format_1_run_keeps_it_and_a_plan_it_cannot_mean_is_refused(tmp_path):
    catalog = _catalog(tmp_path)
    run = catalog.create_run("r", PLAN)
    manifest_path = Path(run.directory) / "run.json"
    manifest_path.write_text(json.dumps(_as_format_1(json.loads(manifest_path.read_text()))))
    reopened = catalog.create_run("r", PLAN, exist_ok=True)
    assert reopened.read_format == 1 and reopened.batch(5, 0, world_size=1).keys == FORMAT_1_KEYS[5]
    with pytest.raises(InvalidPlan, match="different plan"):
        catalog.create_run("r", ReadPlan([Source("alpha@v1")], seed=8, global_batch_size=8, steps=12, streams=4), exist_ok=True)
