"""The run page for spikes, on a real server: outlier steps by the robust rule, zoom and pan through the URL,
smoothing, an overlaid run, click bands at least 8 px wide, and a chart that works without JavaScript."""

from __future__ import annotations

from typing import Iterator

import httpx
import pytest
from bs4 import BeautifulSoup

from app import urls
from app.pages.spikes import ema, outliers, rolling_median, thin
from loaders import Catalog
from tests.browser.conftest import serving
from tests.conftest import word_tokenizer, write_parquet
from tests.support.forensics import DIP, SPIKE, STEPS, build_forensics_catalog


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    catalog: Catalog = build_forensics_catalog(tmp_path_factory.mktemp("chart"), write_parquet, word_tokenizer)
    logs = tmp_path_factory.mktemp("chart-server")
    with serving(catalog.root, logs, flags_path=str(logs / "flags.sqlite")) as base:
        with httpx.Client(base_url=base, timeout=60) as client:
            yield client


def dom(response: httpx.Response) -> BeautifulSoup:
    assert response.status_code == 200, response.text
    return BeautifulSoup(response.text, "html.parser")


def test_outlier_rule_finds_spikes_and_dips_against_the_rolling_median() -> None:
    noise = [0.01 * ((s * 3) % 4 - 1.5) for s in range(60)]
    series = [(s, 2.0 + noise[s]) for s in range(60)]
    series[10] = (10, 2.5)
    series[11] = (11, 2.6)  # two bad steps in a row: the median still sees both
    series[40] = (40, 1.0)
    found = outliers(series)
    assert [(o.step, o.kind) for o in found] == [(10, "spike"), (11, "spike"), (40, "dip")]
    assert all(abs(o.median - 2.0) < 0.02 and abs(o.score) > 6 for o in found)
    assert outliers([(s, 1.0) for s in range(30)]) == []  # no spread at all: nothing stands out
    assert outliers([(0, 1.0), (1, float("nan")), (2, 50.0)]) == []  # too few finite values to judge
    trend = [(s, 10.0 - 0.1 * s + noise[s]) for s in range(60)]
    assert outliers(trend) == []  # a steady decline is not a spike, not even at the ends


def test_warm_up_is_not_a_spike_but_a_spike_after_it_is() -> None:
    """The demo's first steps were its only "spikes" (pretraining step 0, the multimodal run's steps 0-4): a fast initial
    descent, or a plateau before the curve drops, is warm-up; a spike after it is still found."""
    noise = [0.01 * ((s * 3) % 4 - 1.5) for s in range(120)]
    descent = [(s, 3.0 * 0.8**s + 2.0 + noise[s]) for s in range(120)]
    plateau = [(s, (0.3 if s < 5 else 0.02) + noise[s] / 10) for s in range(80)]
    assert outliers(descent) == [] and outliers(plateau) == []
    descent[70] = (70, 2.5)
    plateau[50] = (50, 0.1)
    assert [(o.step, o.kind) for o in outliers(descent)] == [(70, "spike")]
    assert [(o.step, o.kind) for o in outliers(plateau)] == [(50, "spike")]


def test_smoothing_rolling_median_and_thinning() -> None:
    assert [v for _, v in ema([(0, 2.0), (1, 2.0), (2, 2.0)], 0.9)] == pytest.approx([2.0, 2.0, 2.0])  # debiased: no ramp from 0
    assert ema([(0, 1.0), (5, 3.0)], 0.0) == [(0, 1.0), (5, 3.0)]
    assert rolling_median([5.0, 1.0, 9.0], 3) == [3.0, 5.0, 5.0]
    series = [(s, 1.0 + (50.0 if s == 1234 else 0.0) - (9.0 if s == 4321 else 0.0)) for s in range(10_000)]
    thinned = thin(series, 600)
    assert len(thinned) <= 602 and (1234, 51.0) in thinned and (4321, -8.0) in thinned
    assert thinned[0] == (0, 1.0) and thinned[-1] == (9999, 1.0)


def test_run_page_lists_outliers_linking_to_their_steps(http: httpx.Client) -> None:
    page = dom(http.get(urls.run("spiky")))
    figure = page.select_one("figure.chart[data-metric=loss]")
    rows = figure.select("tr.outlier")
    assert {(int(r["data-step"]), r["data-kind"]) for r in rows} == {(SPIKE, "spike"), (DIP, "dip")}
    assert [r.select_one("a")["href"] for r in rows] == [urls.step("spiky", int(r["data-step"])) for r in rows]
    assert rows[0]["data-step"] == str(SPIKE)  # the largest deviation first
    # Each outlier is also ringed on the chart, a link to its step.
    assert {a["href"] for a in figure.select(".chart-marks a")} == {urls.step("spiky", SPIKE), urls.step("spiky", DIP)}
    data = http.get(urls.api(urls.run("spiky"))).json()
    loss = next(m for m in data["metrics"] if m["name"] == "loss")
    assert [(o["step"], o["kind"], o["value"]) for o in loss["outliers"]] == [(SPIKE, "spike", 9.0), (DIP, "dip", 0.0)]
    assert data["chart"] == {
        "start": None,
        "end": None,
        "smooth": 0.6,
        "overlay": None,
        "overlay_error": None,
        "outlier_window": 21,
        "outlier_k": 6.0,
        "outlier_warmup_k": 3.0,
    }


def test_every_step_has_a_click_band_at_least_8px_wide(http: httpx.Client) -> None:
    svg = dom(http.get(urls.run("spiky"))).select_one("figure.chart[data-metric=loss] svg")
    bands = svg.select("a[data-x] rect.chart-hit")
    assert min(float(b["width"]) for b in bands) >= 8
    assert sorted(int(a["data-x"]) for a in svg.select(".chart-links a")) == list(range(STEPS))  # 30 steps: one band each
    spike = svg.select_one(f'.chart-links a[data-x="{SPIKE}"]')
    assert spike["href"] == urls.step("spiky", SPIKE) and spike["data-label"].startswith(f"step {SPIKE}: loss 9 (smoothed ")


def test_zoom_smoothing_and_overlay_are_in_the_url(http: httpx.Client) -> None:
    page = dom(http.get(urls.run("spiky"), params={"from": 10, "to": 20, "smooth": 0, "overlay": "calm"}))
    svg = page.select_one("figure.chart[data-metric=loss] svg")
    assert (float(svg["data-x0"]), float(svg["data-x1"])) == (10.0, 20.0)
    assert sorted(int(a["data-x"]) for a in svg.select(".chart-links a")) == list(range(10, 21))
    assert svg.select(".chart-smooth") == [] and len(svg.select("path.chart-overlay")) == 1
    assert page.select_one("select[name=smooth] option[selected]")["value"] == "0.0"
    assert page.select_one("input[name=overlay]")["value"] == "calm"
    zoom = {a.get_text(): a["href"] for a in page.select(".zoom-links a")}
    assert zoom["zoom in"] == urls.run("spiky") + "?from=13&to=17&smooth=0.0&overlay=calm"
    assert zoom["whole run"] == urls.run("spiky") + "?smooth=0.0&overlay=calm"
    smoothed = dom(http.get(urls.run("spiky"), params={"smooth": 0.9})).select_one("figure.chart[data-metric=loss] svg")
    assert len(smoothed.select("path.chart-smooth")) == 1
    missing = dom(http.get(urls.run("spiky"), params={"overlay": "no-such-run"}))
    assert "no-such-run" in missing.select_one(".overlay-error").get_text()
    assert missing.select("figure.chart svg path.chart-overlay") == []


def test_the_metrics_block_is_a_fragment_for_the_chart_script(http: httpx.Client) -> None:
    response = http.get(urls.run("spiky"), params={"from": 5, "to": 25}, headers={"HX-Request": "true"})
    fragment = BeautifulSoup(response.text, "html.parser")
    assert [el.name for el in fragment.find_all(recursive=False)] == ["section"]
    section = fragment.select_one("section#metrics")
    assert (section["data-from"], section["data-to"], section["data-last"]) == ("5", "25", str(STEPS - 1))
    assert section["data-fragment"] == urls.run("spiky") + "?smooth=0.6"
    assert response.headers["vary"] == "HX-Request"


def test_chart_script_is_served_and_the_page_works_without_it(http: httpx.Client) -> None:
    page = dom(http.get(urls.run("spiky")))
    src = next(s["src"] for s in page.select("script[src]") if "chart.js" in s["src"])
    assert http.get(src).status_code == 200
    # Without JavaScript: every point and outlier is a plain link, and the controls are a plain GET form.
    form = page.select_one("form.chart-controls")
    assert form["method"] == "get" and form["action"] == urls.run("spiky")
    assert {i["name"] for i in form.select("input, select")} == {"from", "to", "smooth", "overlay"}
    assert all(a["href"].startswith(urls.step("spiky", 0)[:-1]) for a in page.select("figure.chart svg a"))
