"""The demo workspace: every kind of data in two versions, and runs made by real training that verify against the ledger."""

from __future__ import annotations

import ast
from dataclasses import asdict
from pathlib import Path

import pytest

from batchscope_demo.common import load_changes
from loaders import Catalog
from tests.loaders.test_diff import assert_diff_matches_recorded_changes
from tests.support.versions import Changes

REPO = Path(__file__).resolve().parents[2]

EXPECTED_KINDS = {
    "web-text": {"text": "text"},
    "sft-chat": {"messages": "chat", "input_ids": "tokens", "loss_mask": "mask"},
    "rl-rollouts": {"rollout": "rollout"},
    "images": {"image": "image"},
    "videos": {"video": "video"},
    "episodes": {"episode": "episode"},
    "sounds": {"audio": "audio", "label": "class_label"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED_KINDS))
def test_every_dataset_has_two_versions_with_inferred_kinds(demo_catalog: Catalog, name: str) -> None:
    v1, v2 = demo_catalog.resolve(f"{name}@v1"), demo_catalog.resolve(f"{name}@v2")
    assert v1.id != v2.id and v2.manifest.parent == v1.id
    for version in (v1, v2):
        for column, kind in EXPECTED_KINDS[name].items():
            assert version.kinds[column] == kind
    changes = load_changes(demo_catalog, name)
    assert changes.added and changes.removed and changes.edited
    v1_keys = {v1.key_of(r) for shard in range(len(v1.shards)) for r in v1.read(shard, range(v1.shards[shard].rows))}
    assert set(changes.removed) <= v1_keys and not set(changes.added) & v1_keys


@pytest.mark.parametrize("name", sorted(EXPECTED_KINDS))
def test_the_diff_of_every_dataset_finds_exactly_the_recorded_changes(demo_catalog: Catalog, name: str) -> None:
    assert_diff_matches_recorded_changes(demo_catalog, name, Changes(**asdict(load_changes(demo_catalog, name))))


@pytest.mark.parametrize("name", ["demo-pretrain", "demo-multimodal", "demo-rl", "demo-episodes"])
def test_demo_runs_verify_against_their_ledgers(demo_catalog: Catalog, name: str) -> None:
    run = demo_catalog.run(name)
    for step in range(0, run.total_steps, max(1, run.total_steps // 12)):
        for rank in range(run.world_size_at(step)):
            assert run.verify(step, rank).status == "verified", (name, step, rank)
    assert "loss" in run.ledger.metric_names()


def test_pretrain_resumed_at_another_world_size(demo_catalog: Catalog) -> None:
    run = demo_catalog.run("demo-pretrain")
    spans = [(s.start_step, s.world_size) for s in run.world_size_history()]
    assert spans == [(0, 2), (run.total_steps // 2, 1)]
    losses = [loss for _, loss in run.ledger.series("loss", world_size_at=run.world_size_at)]
    assert len(losses) == run.total_steps
    assert sum(losses[-20:]) / 20 < sum(losses[:20]) / 20  # the model really learned


def test_broken_chat_samples_reach_the_pretraining_run(demo_catalog: Catalog) -> None:
    broken = load_changes(demo_catalog, "sft-chat").notes["broken"]
    broken_keys = {k for keys in broken.values() for k in keys}
    run = demo_catalog.run("demo-pretrain")
    consumed = {d.key for step in range(run.total_steps) for b in run.global_batch(step) for s in b.samples for d in s.documents}
    assert broken_keys & consumed


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_only_the_cli_imports_the_demo() -> None:
    """The demo generator is a package of its own on top of the library: the read path and the inspector never import it."""
    importers = sorted(
        str(path.relative_to(REPO))
        for top in ("loaders", "app")
        for path in (REPO / top).rglob("*.py")
        if any(name.split(".")[0] == "batchscope_demo" for name in _imports(path))
    )
    assert importers == ["app/cli/serve.py"]


@pytest.mark.parametrize(("name", "dataset"), [("demo-rl", "rl-rollouts"), ("demo-episodes", "episodes")])
def test_rl_runs_read_rollouts_and_episodes_and_log_every_samples_loss(demo_catalog: Catalog, name: str, dataset: str) -> None:
    run = demo_catalog.run(name)
    assert [s.dataset for s in run.sources] == [dataset]
    for step in (0, run.total_steps - 1):
        for rank in range(run.world_size_at(step)):
            logged = run.ledger.metrics(step, rank, run.world_size_at(step))["sample_loss"]
            assert len(logged) == len(run.batch(step, rank)) and all(isinstance(v, float) for v in logged)
