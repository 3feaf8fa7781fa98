"""Hostile RL data: mismatched per-token lists, NaN/inf rewards, missing group ids, missing frames. Clear inline warnings, no crash."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from app import urls
from app.factory import create_app
from app.settings import Settings
from loaders import Catalog
from tests.app.dom import soup
from tests.app.test_rl_episodes import SCHEMA as EPISODE_SCHEMA
from tests.app.test_rl_episodes import episode_row
from tests.app.test_rl_rollouts import SCHEMA as ROLLOUT_SCHEMA
from tests.conftest import write_parquet
from tests.support.local_client import local_client

NAN, INF = float("nan"), float("inf")


def rollout(
    group: str | None,
    reward: float,
    *,
    prompt: str = "P",
    ids: list[int] | None = None,
    logprobs: list[float] | None = None,
    ref: list[float] | None = None,
    advantage: float = 0.0,
    finish: str = "stop",
) -> dict[str, Any]:
    ids = [1, 2, 3] if ids is None else ids
    return {
        "prompt": prompt,
        "completion": "c",
        "prompt_ids": [9],
        "completion_ids": ids,
        "logprobs": [-0.5] * 3 if logprobs is None else logprobs,
        "ref_logprobs": [-0.4] * 3 if ref is None else ref,
        "reward": reward,
        "advantage": advantage,
        "group_id": group,
        "finish_reason": finish,
        "turns": None,
    }


#: key -> (rollout, the warnings its card must show)
HOSTILE: list[tuple[str, dict[str, Any] | None, list[str]]] = [
    ("b0", rollout("h1", 1.0, logprobs=[-0.1, -0.2]), ["logprobs has 2 entries for 3 completion tokens"]),
    ("b1", rollout("h1", NAN), ["reward is NaN"]),
    ("b2", rollout("h1", INF), ["reward is inf"]),
    ("b3", rollout(None, 0.0, prompt="Q"), ["no group id"]),
    ("b4", rollout("", 1.0, prompt="Q"), ["no group id"]),
    ("b5", rollout("h2", 1.0, prompt="R", advantage=-0.9), ["advantage -0.9 has the opposite sign of reward − group mean (+0.5)"]),
    (
        "b6",
        rollout("h2", 0.0, prompt="R-other", advantage=0.9),
        ["prompt differs from the group's prompt", "advantage 0.9 has the opposite sign"],
    ),
    ("b7", rollout("h3", 0.5, ids=None, ref=[-0.4] * 5) | {"completion_ids": None}, ["no completion_ids"]),
    ("b8", rollout("h3", 0.5, ref=[-0.4] * 5, advantage=-INF), ["ref_logprobs has 5 entries for 3 completion tokens", "advantage is -inf"]),
    ("b9", None, ["expected a rollout struct"]),
]


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> tuple[Catalog, str]:
    root = tmp_path_factory.mktemp("bad")
    catalog = Catalog(root / "catalog")
    rows = [{"id": key, "step": 0, "rollout": value} for key, value, _ in HOSTILE]
    catalog.register(
        "bad-rollouts", write_parquet(pa.Table.from_pylist(rows, schema=ROLLOUT_SCHEMA), root / "src" / "r"), key="id", tag="v1"
    )
    episodes = [episode_row(0, 4), episode_row(1, 5, drop_frame=True), episode_row(2, 4, nan_at=1)]
    episodes[0]["return"] = 9.5  # disagrees with the rewards
    catalog.register(
        "bad-episodes", write_parquet(pa.Table.from_pylist(episodes, schema=EPISODE_SCHEMA), root / "src" / "e"), key="id", tag="v1"
    )
    strings = pa.table({"id": ["s0"], "rollout": ['{"reward": 1}']})
    catalog.register("string-rollouts", write_parquet(strings, root / "src" / "s"), key="id", tag="v1", kinds={"rollout": "rollout"})
    return catalog, str(root)


@pytest.fixture
def client(bad: Any, tmp_path: Path) -> TestClient:
    return local_client(create_app(Settings(root=bad[0].root, flags_path=str(tmp_path / "f.sqlite"))), follow_redirects=False)


def test_every_inconsistency_is_named_with_where_it_is(client: TestClient, bad: Any) -> None:
    version = bad[0].resolve("bad-rollouts@v1")
    page = client.get(urls.rollout_groups("bad-rollouts", version.id))
    assert page.status_code == 200
    html = soup(page)
    cards = {c["data-key"]: c for c in html.select("article.rl-card")}
    assert sorted(cards) == [key for key, _, _ in HOSTILE]
    for row, (key, _, words) in enumerate(HOSTILE):
        warning = cards[key].select_one(".rl-warn[role=alert]")
        assert warning is not None, key
        assert (
            warning.select_one(".rl-where").get_text()
            == f"dataset bad-rollouts version {version.short_id} shard 0 (part-0.parquet) row {row}"
        )
        items = " | ".join(li.get_text() for li in warning.select("li"))
        assert all(w in items for w in words), (key, items)
        assert "inconsistent" in cards[key]["class"]
    # rows without a group id are grouped by their prompt, and say so
    q = next(s for s in html.select("section.rl-group") if {c["data-key"] for c in s.select("article.rl-card")} == {"b3", "b4"})
    assert "no group id: these rollouts are grouped by their prompt" in q.get_text()
    h2 = html.select_one('section.rl-group[data-group="h2"]')
    assert "2 different prompts among the 2 rollouts" in h2.get_text()


def test_non_finite_rewards_are_excluded_and_sort_last(client: TestClient, bad: Any) -> None:
    vid = bad[0].resolve("bad-rollouts@v1").id
    html = soup(client.get(urls.rollout_groups("bad-rollouts", vid)))
    h1 = html.select_one('section.rl-group[data-group="h1"]')
    assert h1.select_one("[data-stat=mean]").get_text() == "1"  # the NaN and the inf are left out
    assert "2 non-finite or missing reward(s) excluded from the statistics" in h1.get_text()
    finite = [v["reward"] for _, v, _ in HOSTILE if v is not None and math.isfinite(v["reward"])]
    assert html.select_one(".rl-summary [data-stat=mean_reward]").get_text() == f"{sum(finite) / len(finite):.4g}"
    for sort in ("reward", "-reward"):
        keys = [
            c["data-key"]
            for c in soup(client.get(urls.rollout_groups("bad-rollouts", vid, view="rollouts", sort=sort))).select("article.rl-card")
        ]
        assert set(keys[-3:]) == {"b1", "b2", "b9"}  # NaN, inf and no reward at all
    problems = soup(client.get(urls.rollout_groups("bad-rollouts", vid, view="rollouts", problems="1")))
    assert {c["data-key"] for c in problems.select("article.rl-card")} == {"b0", "b1", "b2", "b3", "b4", "b7", "b8", "b9"}


def test_hostile_rollouts_on_their_own_pages(client: TestClient, bad: Any) -> None:
    vid = bad[0].resolve("bad-rollouts@v1").id
    for key, value, words in HOSTILE:
        sample = client.get(urls.sample("bad-rollouts", vid, key))
        assert sample.status_code == 200
        tokens = client.get(urls.rollout("bad-rollouts", vid, key))
        assert tokens.status_code == 200, key
        local = [w for w in words if "opposite sign" not in w and "prompt differs" not in w]  # these need the group
        if value is not None and local:
            assert all(w in soup(sample).select_one(".rl-rollout .rl-warn").get_text() for w in local), key
    html = soup(client.get(urls.rollout("bad-rollouts", vid, "b7")))
    assert "no completion_ids: no token view" in html.get_text()
    listing = soup(client.get(urls.version("bad-rollouts", vid)))
    flagged = {
        tr.select_one("td.key a").get_text() for tr in listing.select("tr.sample") if tr.select("td")[-1].get_text().strip().startswith("⚠")
    }
    assert flagged == {"b0", "b1", "b2", "b3", "b4", "b7", "b8"}  # b5/b6 need their group; b9 is null


def test_a_rollout_column_that_is_not_a_struct(client: TestClient, bad: Any) -> None:
    vid = bad[0].resolve("string-rollouts@v1").id
    answer = client.get(urls.api(urls.rollout_groups("string-rollouts", vid)))
    assert answer.status_code == 422 and "not a struct" in answer.json()["error"]
    html = soup(client.get(urls.sample("string-rollouts", vid, "s0")))
    error = html.select_one(".field-error").get_text()
    assert (
        f"dataset string-rollouts version {vid[:12]} shard 0 (part-0.parquet) row 0 field 'rollout'" in error
        and "expected a rollout struct" in error
    )


def test_episode_with_a_missing_frame_and_bad_rewards(client: TestClient, bad: Any) -> None:
    version = bad[0].resolve("bad-episodes@v1")
    where = lambda row: f"dataset bad-episodes version {version.short_id} shard 0 (part-0.parquet) row {row}"  # noqa: E731
    html = soup(client.get(urls.episode("bad-episodes", version.id, "ep-1", t=4)))
    warning = html.select_one(".rl-warn[role=alert]")
    assert warning.select_one(".rl-where").get_text() == where(1)
    assert "frames has 4 entries for 5 steps (a frame is missing)" in warning.get_text()
    assert html.select_one("#rl-frame").has_attr("hidden") and not html.select_one("#rl-no-frame").has_attr("hidden")
    assert html.select_one('tr[data-t="4"]')["data-frame"] == "0"
    assert client.get(urls.episode_frame("bad-episodes", version.id, "ep-1", t=4)).status_code == 404
    nan = soup(client.get(urls.episode("bad-episodes", version.id, "ep-2", t=1)))
    assert "reward is NaN at step 1 (excluded from the return)" in nan.select_one(".rl-warn").get_text()
    assert nan.select_one("#rl-reward").get_text() == "NaN"
    assert nan.select_one('.rl-chart[data-chart="reward"] .chart-missing title').get_text() == "step 1: reward NaN"
    ret = soup(client.get(urls.sample("bad-episodes", version.id, "ep-0")))
    assert "the return column says 9.5, the rewards sum to" in ret.select_one(".rl-episode-field .rl-warn").get_text()
    table = soup(client.get(urls.episodes("bad-episodes", version.id, sort="-return")))
    assert [tr["data-key"] for tr in table.select("tbody tr")][-1] == "ep-2"  # a NaN reward sorts last
    texts = {tr["data-key"]: tr.select_one("td:last-child").get_text() for tr in table.select("tbody tr")}
    assert (
        "4 frames for 5 steps" in texts["ep-1"]
        and "1 non-finite reward(s) excluded" in texts["ep-2"]
        and "return column 9.5" in texts["ep-0"]
    )
