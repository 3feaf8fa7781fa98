"""RL steps count right: a rollout's tokens (prompt + completion, the completion trained), its logged loss, and the
step's samples sorted by reward and by advantage (non-finite values last)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app import urls
from app.factory import create_app
from app.settings import Settings
from loaders import ReadPlan, Run, Source
from tests.app.dom import soup
from tests.app.test_rl_rollouts import build_rl_catalog
from tests.support.local_client import local_client


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A run over the rollouts whose trainer logged one loss per rollout: minus advantage times mean logprob."""
    catalog, _ = build_rl_catalog(tmp_path_factory.mktemp("rl-steps"))
    run = catalog.create_run("grpo", ReadPlan([Source("rollouts@v1")], seed=5, global_batch_size=8, steps=3, streams=2))
    for rank in range(2):
        with run.reader(rank, 2) as reader:
            for batch in reader:
                losses = [-s.record["rollout"]["advantage"] * sum(s.record["rollout"]["logprobs"]) / 10 for s in batch.samples]
                reader.log(batch.step, loss=sum(losses) / len(losses), sample_loss=losses)
    return run


@pytest.fixture
def client(trained: Run, tmp_path: Path) -> TestClient:
    return local_client(create_app(Settings(root=trained.catalog.root, flags_path=str(tmp_path / "f.sqlite"))))


def _expected(run: Run, step: int) -> dict[tuple[int, int], dict[str, Any]]:
    out = {}
    for batch in run.global_batch(step):
        logged = run.ledger.metrics(step, batch.rank, batch.world_size)["sample_loss"]
        for position, sample in enumerate(batch.samples):
            rollout = sample.record["rollout"]
            out[(batch.rank, position)] = {
                "tokens": len(rollout["prompt_ids"]) + len(rollout["completion_ids"]),
                "trained_tokens": len(rollout["completion_ids"]),
                "loss": logged[position],
                "reward": rollout["reward"],
                "advantage": rollout["advantage"],
            }
    return out


def _number(value: Any) -> float:
    return float(value) if not isinstance(value, str) else float("nan")  # "NaN" in JSON


def test_rollouts_count_prompt_and_completion_tokens_and_show_their_logged_loss(client: TestClient, trained: Run) -> None:
    expected = _expected(trained, 1)
    page = client.get(urls.api(urls.step("grpo", 1))).json()
    for sample in page["samples"]:
        want = expected[(sample["rank"], sample["position"])]
        assert {k: sample[k] for k in ("tokens", "trained_tokens")} == {k: want[k] for k in ("tokens", "trained_tokens")}
        assert sample["loss"] == pytest.approx(want["loss"])
        assert _number(sample["reward"]) == pytest.approx(want["reward"], nan_ok=True)
    for share in page["ranks"]:
        mine = [v for (rank, _), v in expected.items() if rank == share["rank"]]
        assert (share["tokens"], share["trained_tokens"]) == (sum(v["tokens"] for v in mine), sum(v["trained_tokens"] for v in mine))
    rows = soup(client.get(urls.step("grpo", 1))).select("tr.step-sample")
    assert all("not logged" not in row.get_text() for row in rows) and all(row.select_one(".sample-reward") for row in rows)
    facts = soup(client.get(urls.rank("grpo", 1, 0))).select_one("#sample-0 .sample-tokens").get_text()
    assert facts.startswith(f"{expected[(0, 0)]['tokens']} tokens · {expected[(0, 0)]['trained_tokens']} trained")


@pytest.mark.parametrize("order", ["reward", "advantage"])
def test_a_steps_rollouts_sort_by_reward_and_advantage(client: TestClient, trained: Run, order: str) -> None:
    expected = _expected(trained, 2)
    ranked = [(s["rank"], s["position"]) for s in client.get(urls.api(urls.step("grpo", 2)), params={"sort": order}).json()["samples"]]
    value = {key: v[order] for key, v in expected.items()}
    finite = sorted((k for k in value if math.isfinite(value[k])), key=lambda k: (-value[k], k))
    assert ranked == finite + sorted(k for k in value if not math.isfinite(value[k]))
    links = [a.get_text() for a in soup(client.get(urls.step("grpo", 2))).select("nav.sorts a")]
    assert "reward (highest first)" in links and "advantage (highest first)" in links
    mine = [s["position"] for s in client.get(urls.api(urls.rank("grpo", 2, 1)), params={"sort": order}).json()["samples"]]
    assert mine == [p for r, p in ranked if r == 1]
