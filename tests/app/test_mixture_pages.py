"""The realized mixture on the run page (chart, table, JSON twin) and a step's own mix on the step page."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from app import urls
from app.factory import create_app
from app.settings import Settings
from app.templating import count
from loaders import Catalog, Pack, ReadPlan, Source, Tokenize
from loaders.forensics.realized_mixture import measured_steps
from loaders.run.facade import Run
from loaders.run.manifest import create_manifest
from tests.app.dom import soup
from tests.browser.conftest import serving
from tests.support.local_client import local_client
from tests.support.mixture import NAMES, STEPS, build_mixture_catalog


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return build_mixture_catalog(tmp_path_factory.mktemp("mixture"))


@pytest.fixture
def client(catalog: Catalog, tmp_path: Path) -> TestClient:
    return local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "flags.sqlite"))), follow_redirects=False)


def _forward(catalog: Catalog, name: str) -> np.ndarray:
    run = catalog.run(name)
    counts = np.zeros((STEPS, len(NAMES)), dtype=np.int64)
    for step in range(STEPS):
        for sample in run.batch(step, 0, world_size=1).samples:
            counts[step, sample.documents[0].source] += 1
    return counts


@pytest.mark.parametrize("name", ["mixed", "mixed-packed"])
def test_run_json_twin_carries_the_realized_mixture_per_window(client: TestClient, catalog: Catalog, name: str) -> None:
    forward = _forward(catalog, name)
    data = client.get(urls.api(urls.run(name)), params={"window": 7}).json()
    assert {"metrics", "sources", "packing", "chart", "plan"} <= set(data)  # existing fields stay
    mix = data["mixture"]
    assert mix["window"] == 7 and mix["unit"] == ("sequences" if name == "mixed-packed" else "samples")
    assert [s["planned"] for s in mix["sources"]] == pytest.approx([5 / 8, 2 / 8, 1 / 8])
    assert [s["samples"] for s in mix["sources"]] == forward.sum(axis=0).tolist()
    total = forward.sum()
    assert [s["samples_share"] for s in mix["sources"]] == pytest.approx((forward.sum(axis=0) / total).tolist())
    assert [s["samples_deviation"] for s in mix["sources"]] == pytest.approx((forward.sum(axis=0) / total - [5 / 8, 2 / 8, 1 / 8]).tolist())
    assert [(w["start"], w["end"]) for w in mix["windows"]] == [(0, 7), (7, 14), (14, 21), (21, 28), (28, 30)]
    for w in mix["windows"]:
        assert w["url"] == urls.step(name, w["start"])
        assert w["samples"] == forward[w["start"] : w["end"]].sum(axis=0).tolist()
    assert mix["tokens_exact"] == (name == "mixed-packed")
    assert mix["measured_steps"] == ([] if name == "mixed-packed" else list(measured_steps(STEPS)))
    assert len(mix["measured_steps"]) == (0 if name == "mixed-packed" else 16)
    assert all(s["tokens"] > 0 for s in mix["sources"])


def test_run_page_draws_the_mixture_chart_with_windows_linking_to_steps(client: TestClient) -> None:
    response = client.get(urls.run("mixed"), params={"window": 10})
    page = soup(response)
    section = page.select_one("section#mixture")
    rows = section.select("tr.mixture-source")
    assert [r["data-source"] for r in rows] == [f"{n}@v1" for n in NAMES]
    assert rows[0].select("td")[1].get_text() == "62.5%"
    assert "measured on the global batches of 16 of 30 steps" in section.select_one(".mixture-note").get_text()
    links = [a["href"] for a in section.select("figure.mixture-samples svg a")]
    assert links == [urls.step("mixed", s) for s in (0, 10, 20)]
    assert section.select("figure.mixture-tokens svg a")  # tokens of the measured windows are charted too
    dashed = section.select("figure.mixture-samples svg path.chart-planned")
    assert len(dashed) == 3
    assert section.select_one("input[name=window]")["value"] == "10"
    zoomed = soup(client.get(urls.run("mixed"), params={"window": 10, "from": 4, "to": 20, "smooth": 0.9})).select_one("#mixture form")
    kept = {i["name"]: i["value"] for i in zoomed.select("input[type=hidden]")}
    assert kept == {"from": "4", "to": "20", "smooth": "0.9"}  # redrawing the mixture keeps the metrics' view
    assert client.get(urls.api(urls.run("mixed")), params={"window": 0}).status_code == 422


def test_step_page_shows_the_steps_own_mix(client: TestClient, catalog: Catalog) -> None:
    run = catalog.run("mixed-packed")
    batch = run.batch(5, 0, world_size=1)
    counted = Counter(s.documents[0].source for s in batch.samples)
    tokens = Counter()
    for s in batch.samples:
        tokens[s.documents[0].source] += len(s.inputs["input_ids"]) - s.inputs["padding"]
    data = client.get(urls.api(urls.step("mixed-packed", 5))).json()
    assert {"ranks", "samples", "tokens", "padding"} <= set(data)
    rows = data["mix"]["rows"]
    assert data["mix"]["unit"] == "sequences"
    assert [r["samples"] for r in rows] == [counted[i] for i in range(3)]
    assert [r["tokens"] for r in rows] == [tokens[i] for i in range(3)]
    assert [r["expected"] for r in rows] == pytest.approx([6 * 5 / 8, 6 * 2 / 8, 6 / 8])
    page = soup(client.get(urls.step("mixed-packed", 5)))
    cells = [[td.get_text() for td in tr.select("td")] for tr in page.select("table.step-mix tr.step-mix-source")]
    assert [c[0] for c in cells] == [f"{n}@v1" for n in NAMES]
    assert [c[2] for c in cells] == [str(counted[i]) for i in range(3)]
    assert cells[0][1] == "62.5%"


def test_a_shard_that_cannot_be_read_shows_in_the_mixture_panel_not_as_a_broken_run_page(tmp_path: Path) -> None:
    catalog = build_mixture_catalog(tmp_path / "broken")
    for shard in (Path(catalog.root) / "src" / "gamma").rglob("*.parquet"):
        shard.write_bytes(b"\0" * shard.stat().st_size)  # same size, other bytes: the registered checksum no longer matches
    with serving(catalog.root, tmp_path / "logs", flags_path=str(tmp_path / "flags.sqlite")) as base:  # a fresh process
        with httpx.Client(base_url=base, timeout=60) as client:
            response = client.get(urls.run("mixed"))
            assert response.status_code == 200
            message = soup(response).select_one("#mixture .mixture-error").get_text()
            assert "gamma" in message
            data = client.get(urls.api(urls.run("mixed"))).json()
            assert data["mixture"] is None and data["mixture_error"] == message
            assert data["sources"] and data["total_steps"] == STEPS  # the rest of the run page is there


def test_run_page_shows_repeated_tokens_and_the_padding_after_each_streams_epochs(tmp_path: Path) -> None:
    catalog = build_mixture_catalog(tmp_path)
    tokenize = [Tokenize("text", tokenizer="words")]
    sources = [Source(f"{n}@v1", weight=w, transforms=tokenize) for n, w in zip(NAMES, (5, 2, 1))]
    plan = ReadPlan(sources, seed=2, global_batch_size=4, epochs=1, streams=2, transforms=[Pack(seq_len=9)])
    runs = {fmt: Run(catalog, create_manifest(catalog, f"epochs-{fmt}", plan, as_format=fmt)) for fmt in (3, 4)}
    client = local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "flags.sqlite"))))
    for fmt, run in runs.items():
        waste = run.packing_waste()
        panel = soup(client.get(urls.run(run.name))).select_one("p.packing")
        assert panel.select_one(".repeated").get_text() == count(waste.repeated_tokens, "repeated token")
        packing = client.get(urls.api(urls.run(run.name))).json()["packing"]
        assert (packing["repeated_tokens"], packing["after_epochs"]) == (waste.repeated_tokens, waste.after_epochs)
        if fmt == 3:  # the run ended with its slowest stream: the others had started their second epoch
            assert waste.repeated_tokens > 0 and panel.select_one(".after-epochs") is None
        else:  # each token once; the streams that finished first padded the last steps, and the page says so
            assert waste.repeated_tokens == 0 and waste.after_epochs > 0
            shown = panel.select_one(".after-epochs").get_text()
            assert shown == count(waste.after_epochs, "all-padding sequence") + " after their stream's epochs"
            last = run.total_steps - 1  # the last step holds such sequences: its pages show them as padding
            assert any(s.inputs["padding"] == 9 for s in run.batch(last, 0, world_size=1).samples)
            assert client.get(urls.step(run.name, last)).status_code == 200
            assert client.get(urls.rank(run.name, last, 0)).status_code == 200
