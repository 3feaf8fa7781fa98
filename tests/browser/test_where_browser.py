"""Where was this read, in real Chromium: flag a sample, find it in /flags, read where every run read it, follow a read."""

from __future__ import annotations

import re

import pytest

from app import urls
from loaders import Catalog
from tests.browser.conftest import open_tab
from tests.support.readpath import forward_reads

pytestmark = pytest.mark.browser


def test_a_flagged_sample_lists_where_it_was_read_and_a_read_opens_its_rank_page(browser, runs_server: str, runs_catalog: Catalog) -> None:
    version = runs_catalog.resolve("docs@v1")
    expected = {
        (name, step, rank, sample)
        for name in ("plain", "pretrain")
        for _, step, rank, _, sample in forward_reads(runs_catalog.run(name)).get((0, 7), set())
    }
    assert any(run == "pretrain" for run, *_ in expected)
    with open_tab(browser, runs_server) as tab:
        tab.goto(urls.sample("docs", version, "doc-7"))
        form = tab.locator("form.flag-form")
        form.locator("input[name=note]").fill("garbled text")
        form.get_by_role("button", name="flag").click()
        form.locator("[role=status]").wait_for()
        # The flags page names the steps that consumed it and counts them per run.
        tab.goto(urls.flags())
        row = tab.locator("tr.flag-row", has_text="garbled text")
        listed = set(row.locator("a.flag-read").all_inner_texts())
        assert listed == {f"{run} step {step} rank {rank} #{sample}" for run, step, rank, sample in expected}
        for run in ("plain", "pretrain"):
            steps = {step for name, step, _, _ in expected if name == run}
            if steps:
                assert tab.locator(f"tr.flagged-run[data-run={run}] .steps-touched").inner_text() == str(len(steps))
        # Its sample page lists the same reads, each a link to the rank page's anchor.
        row.locator("a.sample-link").click()
        tab.wait_for_url(re.compile(r"/samples/doc-7$"))
        panel = tab.locator("section#where-read")
        rows = set()
        for tr in panel.locator("tr.where-row").all():
            cells = tr.locator("td").all_inner_texts()
            rows.add((cells[0], int(cells[3]), int(cells[4].split()[0]), int(cells[5].rsplit("#", 1)[1])))
        assert rows == expected
        run, step, rank, sample = max(r for r in expected if r[0] == "pretrain")
        panel.locator(f".where-run[data-run={run}] a.where-link", has_text=f"step {step} rank {rank} #{sample}").click()
        tab.wait_for_url(re.compile(rf"/runs/{run}/steps/{step}/ranks/{rank}#sample-{sample}$"))
        article = tab.locator(f"article#sample-{sample}")
        assert "doc-7" in article.inner_text()
        assert tab.errors == []
