"""In real Chromium: a flag is edited in place and deleted from its page; a verification failure looks stronger than a
success (a solid red, bold ✗), on the step/rank page and as the run's status on the home page."""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
from typer.testing import CliRunner

from app import urls
from app.cli import app as cli
from loaders import Catalog
from tests.browser.conftest import open_tab, serving

pytestmark = pytest.mark.browser


def _post_json(base: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def test_a_flag_is_edited_in_place_and_deleted_from_its_page(browser: Any, server: str) -> None:
    flag = _post_json(
        server, urls.api(urls.flags()), {"dataset": "docs", "version": "v1", "key": "doc-9", "note": "typo", "tags": ["spam"]}
    )
    with open_tab(browser, server) as tab:
        tab.goto(urls.flag(flag["id"]))
        tab.evaluate("window.__same_document = true")
        form = tab.locator("form.flag-edit")
        assert form.locator("input[name=note]").input_value() == "typo" and form.locator("input[name=tags]").input_value() == "spam"
        form.locator("input[name=note]").fill("the mask is shifted by one")
        form.locator("input[name=tags]").fill("bad-mask, review")
        form.get_by_role("button", name="save").click()
        tab.locator("#flag-panel [role=status]").wait_for()
        assert tab.evaluate("window.__same_document") is True  # swapped in by htmx, no reload
        assert tab.locator("#flag-panel dd.note").inner_text() == "the mask is shifted by one"
        assert tab.locator("#flag-panel dd.flag-tags a").all_inner_texts() == ["bad-mask", "review"]
        tab.reload()
        assert tab.locator("dd.note").inner_text() == "the mask is shifted by one" and tab.locator("dd.flag-updated").count() == 1
        # A refused edit says why in place and keeps the flag as it was.
        tab.locator("form.flag-edit input[name=tags]").fill("not a tag!")
        tab.locator("form.flag-edit").get_by_role("button", name="save").click()
        tab.locator("#flag-panel [role=alert]").wait_for()
        assert "invalid tag" in tab.locator("#flag-panel [role=alert]").inner_text()
        assert tab.locator("#flag-panel dd.flag-tags a").all_inner_texts() == ["bad-mask", "review"]
        # Delete: the browser asks first, then the flag list opens without it.
        asked: list[str] = []
        tab.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
        tab.locator("form.flag-delete").get_by_role("button", name="delete flag").click()
        tab.wait_for_url(server + urls.flags())
        assert asked == [f"Delete flag #{flag['id']}?"]
        assert tab.locator(f"a[href='{urls.flag(flag['id'])}']").count() == 0
        assert tab.goto(urls.flag(flag["id"])).status == 404
        # The refused edit (htmx logs its 422) and the deleted flag's page, answered as such; nothing else.
        expected = ("status of 422", "Error Code 422", "status of 404")
        assert [e for e in tab.errors if not any(status in e for status in expected)] == []


@pytest.fixture(scope="module")
def broken_server(runs_catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A copy of the runs catalog whose ledger has a sample of step 4 rank 0 edited, checked by `batchscope verify`."""
    root = tmp_path_factory.mktemp("broken") / "catalog"
    shutil.copytree(runs_catalog.root, root, ignore=shutil.ignore_patterns("server.json"))
    ledger = root / "runs" / "pretrain" / "ledger" / "w2-r0.jsonl"
    lines = []
    for line in ledger.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("t") == "batch" and entry["step"] == 4:
            entry["samples"][1] = "0" * 16
        lines.append(json.dumps(entry))
    ledger.write_text("\n".join(lines) + "\n")
    assert CliRunner().invoke(cli, ["verify", "pretrain", "--root", str(root)]).exit_code == 1
    with serving(str(root), Path(root.parent) / "logs", flags_path=str(root.parent / "flags.sqlite")) as url:
        yield url


def _badge(tab: Any, selector: str) -> dict[str, str]:
    return tab.evaluate(
        "(s) => { const e = document.querySelector(s); const c = getComputedStyle(e);"
        " return {background: c.backgroundColor, color: c.color, weight: c.fontWeight, border: c.borderTopWidth}; }",
        selector,
    )


def test_a_mismatch_looks_stronger_than_a_verified_step(browser: Any, broken_server: str) -> None:
    with open_tab(browser, broken_server) as tab:
        tab.set_default_timeout(60_000)  # a step/rank page recomputes its batch on first view
        tab.goto(urls.rank("pretrain", 3, 0))
        verified = _badge(tab, ".verify[data-verified=true]")
        tab.goto(urls.rank("pretrain", 4, 0))
        failed = _badge(tab, ".verify[data-verified=false]")
        assert tab.locator(".verify[data-verified=false]").inner_text().startswith("✗ 1 sample differs from the ledger")
        assert failed["background"] == "rgb(180, 35, 24)" and failed["color"] == "rgb(255, 255, 255)"
        assert int(failed["weight"]) >= 700 > int(verified["weight"]) and failed["border"] != "0px" == verified["border"]
        assert verified["background"] == "rgb(227, 245, 234)"  # the success stays a quiet light green
        tab.goto(urls.home())
        status = _badge(tab, "tr.run-row[data-status=mismatch] .run-status")
        assert status == failed  # the run's status on the home page is the same strong badge
        assert tab.locator("tr.run-row[data-status=mismatch] .run-status").inner_text() == "mismatch"
        tab.locator("tr.run-row[data-status=mismatch] .run-verification a").click()
        tab.wait_for_url(broken_server + urls.rank("pretrain", 4, 0))
        assert tab.errors == []
