"""Links between pages, on a real server: the home page's runs with steps, last loss and status, and the RL views
(rollout groups, episodes) linked from dataset and version pages."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import httpx
import pyarrow as pa
import pytest
from bs4 import BeautifulSoup

from app import urls
from app.pages.home import RUNNING_SECONDS, run_summary
from loaders import Catalog
from tests.browser.conftest import serving
from tests.conftest import word_tokenizer, write_parquet
from tests.support.forensics import STEPS, build_forensics_catalog, spiky_loss


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    root = tmp_path_factory.mktemp("links")
    catalog = build_forensics_catalog(root, write_parquet, word_tokenizer)
    rollout = [{"prompt": "p", "completion": "c", "reward": r, "advantage": r - 0.5, "group_id": "g0"} for r in (0.0, 1.0)]
    rollouts = pa.table({"id": ["r0", "r1"], "rollout": rollout})
    catalog.register("rollouts", write_parquet(rollouts, root / "src" / "rollouts"), key="id", tag="v1", kinds={"rollout": "rollout"})
    episodes = pa.table({"id": ["e0"], "episode": [[{"observation": 0, "action": 1, "reward": 1.0, "done": True}]]})
    catalog.register("episodes", write_parquet(episodes, root / "src" / "episodes"), key="id", tag="v1", kinds={"episode": "episode"})
    return catalog


@pytest.fixture(scope="module")
def http(catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    logs = tmp_path_factory.mktemp("links-server")
    with serving(catalog.root, logs, flags_path=str(logs / "flags.sqlite")) as base:
        with httpx.Client(base_url=base, timeout=60, follow_redirects=True) as client:
            yield client


def dom(response: httpx.Response) -> BeautifulSoup:
    assert response.status_code == 200, response.text
    return BeautifulSoup(response.text, "html.parser")


def test_home_lists_runs_with_steps_last_loss_and_status(http: httpx.Client) -> None:
    rows = {r.select_one("a").get_text(): r for r in dom(http.get(urls.home())).select("tr.run-row")}
    assert sorted(rows) == ["calm", "spiky"]
    cells = [td.get_text(strip=True) for td in rows["spiky"].select("td")]
    assert cells == [
        "spiky",
        str(STEPS),
        str(STEPS - 1),
        f"{spiky_loss(STEPS - 1):.4f}",
        "complete",
        "not verified: batchscope verify has not checked this ledger",
    ]
    assert rows["spiky"].select("a")[1]["href"] == urls.step("spiky", STEPS - 1)
    data = {r["name"]: r for r in http.get(urls.api(urls.home())).json()["runs"]}
    assert (data["calm"]["status"], data["calm"]["logged_steps"], data["calm"]["steps"]) == ("complete", STEPS, STEPS)


def test_run_status_from_the_ledger(tmp_path: Path) -> None:
    catalog = build_forensics_catalog(tmp_path, write_parquet, word_tokenizer)
    run = catalog.create_run("half", catalog.run("calm").plan)
    assert run_summary(run).status == "not started"
    with run.reader(0, 1, end_step=5, flush_seconds=0) as reader:
        for batch in reader:
            reader.log(batch.step, loss=1.0)
    written = max(e.time for e in run.ledger.entries())
    assert run_summary(run, now=written + 1).status == "running"
    stopped = run_summary(run, now=written + RUNNING_SECONDS + 1)
    assert (stopped.status, stopped.last_step, stopped.logged_steps, stopped.last_loss) == ("stopped", 4, 5, 1.0)


def test_rl_views_are_linked_from_dataset_and_version_pages(http: httpx.Client, catalog: Catalog) -> None:
    rollouts, episodes = catalog.resolve("rollouts@v1"), catalog.resolve("episodes@v1")
    cases = [
        ("rollouts", rollouts, [("rollout groups", urls.rollout_groups("rollouts", rollouts))]),
        ("episodes", episodes, [("episodes", urls.episodes("episodes", episodes))]),
        ("docs", catalog.resolve("docs@v1"), []),
    ]
    for name, version, expected in cases:
        on_dataset = dom(http.get(urls.dataset(name))).select(".rl-views a")
        on_version = dom(http.get(urls.version(name, version))).select("nav.rl-views a")
        assert [(a.get_text(), a["href"]) for a in on_dataset] == expected
        assert [(a.get_text(), a["href"]) for a in on_version] == expected
        for _, url in expected:
            assert http.get(url).status_code == 200
