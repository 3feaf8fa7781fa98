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
from loaders.run.manifest import READ_FORMAT, create_manifest, fingerprint, stored_plan_json
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
    drop = {"read_format", "cycle_steps", "token_counts", "mixture_exact"}
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


#: Runs of read format 3 (the format before exact mixtures and epoch boundaries), as batchscope created and read them
#: then: the resolved numbers, the documents of every sample at a few steps, the last sample's token ids, the waste.
FORMAT_3 = {
    "mixed": {
        "total_steps": 40,
        "counts": [717, 307],
        "cycle_steps": 128,
        "chunks": [5, 5],
        "keys": {
            "0": ["alpha-47", "alpha-45", "beta-13", "alpha-17", "alpha-53", "beta-5", "alpha-27", "alpha-26"],
            "1": ["alpha-46", "alpha-79", "beta-14", "alpha-15", "alpha-80", "beta-4", "alpha-25", "beta-17"],
            "20": ["alpha-34", "alpha-63", "beta-26", "alpha-66", "alpha-49", "beta-23", "alpha-13", "alpha-50"],
            "39": ["alpha-82", "alpha-83", "beta-10", "alpha-0", "alpha-34", "beta-9", "alpha-91", "beta-21"],
        },
        "ids": {},
        "waste": None,
    },
    "packed-epochs": {
        "total_steps": 24,
        "counts": [683, 341],
        "cycle_steps": 256,
        "chunks": [6, 1],
        "keys": {
            "0": ["alpha-52 alpha-75", "beta-25 beta-7", "alpha-36 alpha-37 alpha-38", "alpha-38 alpha-40"],
            "1": ["alpha-75 alpha-77 alpha-72", "beta-18 beta-10", "alpha-40 alpha-41 alpha-39", "alpha-39 alpha-23"],
            "12": ["alpha-5 alpha-88 alpha-84", "beta-1 beta-18", "alpha-28 alpha-24 alpha-26", "alpha-26 alpha-70 alpha-25"],
            "23": ["alpha-91", "beta-20 beta-23", "alpha-46 alpha-34 alpha-45", "beta-11 beta-3 beta-30"],
        },
        "ids": {
            "0": [47, 4, 2, 5, 5, 5, 5, 0, 3, 49, 4, 2, 5, 5, 5, 5],
            "1": [48, 4, 2, 5, 5, 5, 5, 5, 0, 3, 32, 4, 2, 5, 5, 5],
            "12": [2, 5, 5, 5, 5, 5, 5, 0, 3, 79, 4, 2, 5, 0, 3, 34],
            "23": [5, 5, 0, 3, 12, 4, 2, 5, 5, 5, 5, 0, 3, 39, 4, 2],
        },
        "waste": [1495, 41, 96],
    },
    "packed-steps": {
        "total_steps": 30,
        "counts": [616, 410],
        "cycle_steps": 171,
        "chunks": [4, 1],
        "keys": {
            "0": ["alpha-47 alpha-67", "beta-1 beta-21", "alpha-73 alpha-75", "beta-18 beta-11", "alpha-10 alpha-8", "alpha-8 alpha-9"],
            "1": ["alpha-67 alpha-44", "beta-21 beta-27", "alpha-75 alpha-74", "beta-11 beta-28", "alpha-11 alpha-56", "beta-9 beta-13"],
            "15": [
                "alpha-15 alpha-87",
                "beta-22 beta-20",
                "alpha-32 alpha-4",
                "beta-11 beta-15 beta-8",
                "alpha-69 alpha-76",
                "alpha-76 alpha-68",
            ],
            "29": [
                "alpha-41 alpha-19",
                "beta-20 beta-8",
                "alpha-27 alpha-25",
                "beta-1 beta-7",
                "alpha-93 alpha-84 alpha-87",
                "beta-26 beta-1",
            ],
        },
        "ids": {
            "0": [2, 5, 5, 0, 3, 18, 4, 2, 5, 5, 5, 0],
            "1": [3, 18, 4, 2, 5, 5, 5, 0, 3, 22, 4, 2],
            "15": [5, 5, 0, 3, 77, 4, 2, 5, 5, 5, 5, 5],
            "29": [5, 0, 3, 10, 4, 2, 5, 5, 0, 0, 0, 0],
        },
        "waste": [2109, 51, 180],
    },
}


def _format_3_plans() -> dict[str, ReadPlan]:
    tokenize = [Tokenize("text", tokenizer="words")]
    return {
        "mixed": ReadPlan(
            [Source("alpha@v1", weight=0.7), Source("beta@v1", weight=0.3)],
            seed=9,
            global_batch_size=8,
            steps=40,
            streams=4,
            shuffle=Shuffle(chunk_size=5, window_chunks=2),
        ),
        "packed-epochs": ReadPlan(
            [Source("alpha@v1", weight=2.0, transforms=tokenize), Source("beta@v1", weight=1.0, transforms=tokenize)],
            seed=4,
            global_batch_size=4,
            epochs=1,
            streams=2,
            transforms=[Pack(seq_len=16)],
        ),
        "packed-steps": ReadPlan(
            [Source("alpha@v1", weight=0.6, transforms=tokenize), Source("beta@v1", weight=0.4, transforms=tokenize)],
            seed=6,
            global_batch_size=6,
            steps=30,
            streams=3,
            transforms=[Pack(seq_len=12)],
        ),
    }


@pytest.mark.parametrize("name", sorted(FORMAT_3))
def test_a_format_3_run_reads_what_it_read_then(tmp_path, name):
    catalog = alpha_beta_catalog(tmp_path / "catalog")
    plan, golden = _format_3_plans()[name], FORMAT_3[name]
    run = Run(catalog, create_manifest(catalog, name, plan, as_format=3))
    resolved = run.manifest["resolved"]
    assert run.read_format == 3 and "mixture_exact" not in resolved
    assert (resolved["total_steps"], resolved["counts"], resolved["cycle_steps"]) == (
        golden["total_steps"],
        golden["counts"],
        golden["cycle_steps"],
    )
    assert [s["chunk"] for s in resolved["sources"]] == golden["chunks"]
    for step, keys in golden["keys"].items():
        batch = run.batch(int(step), 0, world_size=1)
        assert [" ".join(d.key for d in s.documents) for s in batch.samples] == keys
        if golden["ids"]:
            assert batch.samples[-1].inputs["input_ids"] == golden["ids"][step]
    waste = run.packing_waste()
    assert (None if waste is None else [waste.document_tokens, waste.padding_tokens, waste.sequences]) == golden["waste"]
    reopened = catalog.create_run(name, plan, exist_ok=True)  # the same plan reopens it in its own format
    assert reopened.read_format == 3 and reopened.fingerprint == run.fingerprint


def test_a_format_3_epoch_run_repeats_tokens_and_says_how_many_while_format_4_delivers_each_once(tmp_path):
    catalog = alpha_beta_catalog(tmp_path / "catalog")
    plan = _format_3_plans()["packed-epochs"]
    for fmt in (3, 4):
        run = Run(catalog, create_manifest(catalog, f"epochs-{fmt}", plan, as_format=fmt))
        delivered: dict[tuple[str, int], int] = {}
        padding_only = 0
        for step in range(run.total_steps):
            for sample in run.batch(step, 0, world_size=1).samples:
                padding_only += sample.inputs["padding"] == 16
                for doc in sample.documents:
                    if doc.span is not None:
                        delivered[(doc.key, doc.epoch)] = delivered.get((doc.key, doc.epoch), 0) + doc.span["end"] - doc.span["start"]
        repeated = sum(n for (_, epoch), n in delivered.items() if epoch >= 1)
        waste = run.packing_waste()
        assert waste.repeated_tokens == repeated and waste.document_tokens == sum(delivered.values())
        if fmt == 3:  # the run ends when its slowest stream finishes: the others start their second epoch
            assert repeated > 0 and waste.after_epochs == 0
        else:  # every stream stops at its own epoch boundary: each token once, the rest is padding and says so
            assert repeated == 0 and {epoch for _, epoch in delivered} == {0}
            assert waste.after_epochs == padding_only > 0 and f"{padding_only} sequence(s) of streams that had delivered" in waste.note
