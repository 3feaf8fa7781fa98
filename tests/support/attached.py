"""What every attached replayed run must do, whichever framework read it: the ``batchscope`` command on it, and every
page of the inspector (parsed as DOM) saying "replayed", with its loss curve, ranking, tokens, permalinks and flags."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from app import urls
from app.cli import app as cli_app
from app.factory import create_app
from app.settings import Settings
from loaders import Catalog
from tests.app.dom import soup
from tests.support.local_client import local_client

#: What the rank page of a step whose logged indices match says.
MATCHES = "✓ replayed · matches the indices the run logged"


def cli(*args: Any) -> tuple[int, str]:
    """``batchscope ARGS`` in process: its exit code and output."""
    result = CliRunner().invoke(cli_app, [str(a) for a in args])
    return result.exit_code, result.output


def client(root: str | os.PathLike[str], tmp_path: Path) -> Any:
    """An in-process client of an inspector serving catalog ``root``."""
    return local_client(create_app(Settings(root=str(root), flags_path=str(tmp_path / "flags.sqlite"))), follow_redirects=False)


def metrics(path: Path, *, steps: int, step_base: int, spike: int, batch: dict[int, int]) -> str:
    """A JSON-lines loss curve numbered from ``step_base``, spiking at ``spike``, whose spike step logs a
    ``sample_loss`` for every rank's ``batch[rank]`` samples (rank ``r``'s ``i``-th: ``10 r + i``)."""
    lines = [{"step": s + step_base, "loss": 9.0 if s == spike else 2.0 + 0.01 * (s % 3)} for s in range(steps)]
    lines += [{"step": spike + step_base, "rank": r, "sample_loss": [float(10 * r + i) for i in range(n)]} for r, n in batch.items()]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def batches(path: Path, logged: dict[tuple[int, int], list[int]]) -> str:
    """The ``--batches`` file of what a run logged its samplers drew: ``(step, rank) → indices``."""
    path.write_text("".join(json.dumps({"step": s, "rank": r, "indices": logged[(s, r)]}) + "\n" for s, r in sorted(logged)))
    return str(path)


def _text(response: Any) -> str:
    return " ".join(soup(response).get_text(" ").split())


def assert_pages(http: Any, catalog: Catalog, name: str, *, title: str, framework: str, spike: int) -> None:
    """Every page of replayed run ``name`` (attached with :func:`metrics` spiking at ``spike`` and :func:`batches`)."""
    run = catalog.run(name)
    page = http.get(urls.run(name))
    assert page.status_code == 200, page.text[:500]
    dom = soup(page)
    assert dom.select_one(".run-kind").get_text(" ", strip=True) == f"replayed · {title}"
    lines = {tr.th.get_text(strip=True) for tr in dom.select(".replay-lines tr")}
    assert "step" in lines, lines
    outlier = dom.select_one(f'figure[data-metric="loss"] tr.outlier[data-step="{spike}"]')
    assert outlier["data-kind"] == "spike" and outlier.a["href"] == urls.step(name, spike)
    assert "verified" not in _text(page)
    twin = http.get(urls.api(urls.run(name))).json()
    assert (twin["kind"], twin["label"], twin["replay"]["framework"]) == ("replayed", "replayed", framework)

    top = run.world_size_at(spike) - 1
    batch = run.batch(spike, top)
    ranked = [
        (tr.select("a")[0]["href"], float(tr.select_one("td.num").get_text()))
        for tr in soup(http.get(urls.step(name, spike))).select("table.step-samples tbody tr")
    ]
    assert ranked[0] == (urls.rank(name, spike, top) + urls.sample_anchor(len(batch) - 1), float(10 * top + len(batch) - 1))

    page = soup(http.get(urls.rank(name, spike, top)))
    assert page.select_one(".verify").get_text(strip=True) == MATCHES
    sample = batch.samples[0]
    ids = sample.inputs.get("input_ids")
    if ids is not None:
        tokens = page.find(id="sample-0").select(".tokens .tok[title]")
        assert [int(t["title"].split(" · ")[1].removeprefix("id ")) for t in tokens] == list(ids)
        mask = sample.inputs.get("loss_mask")
        if mask is not None:
            assert ["masked" in t.get("class", []) for t in tokens] == [not m for m in mask]
        starts = {s["start"] for s in sample.inputs.get("doc_spans", []) if 0 < s["start"] < len(ids)}
        assert [i for i, t in enumerate(tokens) if "doc-start" in t.get("class", [])] == sorted(starts)
    twin = http.get(urls.api(urls.rank(name, spike, top))).json()
    assert [s["index"] for s in twin["samples"]] == batch.indices and twin["kind"] == "replayed"

    entry = twin["samples"][0]
    assert http.get(entry["url"]).status_code == 200
    where = http.get(urls.api(entry["url"])).json()["where"]
    reads = {(r["step"], r["rank"], r["sample"]) for w in where if w["run"] == name for r in w["reads"]}
    assert (spike, top, 0) in reads

    form = page.find(id="sample-0").select_one("form.flag-form")
    fields = {i["name"]: i.get("value", "") for i in form.select("input[type=hidden]")}
    posted = http.post(form["action"], data={**fields, "note": "spike", "tags": "spike"})
    assert posted.status_code == 303
    flag = http.get(urls.api(posted.headers["location"])).json()["flag"]
    assert flag["context_url"] == urls.rank(name, spike, top) + "#sample-0"
    assert flag["context_url"] in {a["href"] for a in soup(http.get(urls.flags())).select("a")}


def assert_commands(root: str, name: str, *, step: int, rank: int, logged: int) -> None:
    """``show``, ``where`` and ``verify`` on replayed run ``name`` (its batches logged for ``logged`` (step, rank)s)."""
    run = Catalog(root).run(name)
    sample = run.batch(step, rank).samples[0]
    code, output = cli("show", name, "--step", step, "--rank", rank, "--root", root)
    assert code == 0 and MATCHES in " ".join(output.split()) and "verified" not in output, output
    if "input_ids" in sample.inputs:
        assert str(sample.inputs["input_ids"][1]) in output
    code, output = cli("where", f"{sample.address.dataset}@{sample.address.version}", sample.key, "--run", name, "--json", "--root", root)
    assert code == 0, output
    assert (step, rank, 0) in {(r["step"], r["rank"], r["sample"]) for r in json.loads(output)[0]["reads"]}
    code, output = cli("verify", name, "--root", root)
    assert code == 0 and f"{name}: {logged} replayed and matching what the run logged, 0 mismatched" in output, output


def assert_refused(root: Path, args: list[str], message: str) -> None:
    """``batchscope attach ARGS`` refused in one line containing ``message``, exit 2, nothing left in the catalog."""
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".lock" not in p.name) if root.exists() else []
    code, output = cli("attach", *args, "--root", root)
    assert code == 2 and output.startswith("error: ") and len(output.strip().splitlines()) == 1, output
    assert message in output, output
    after = sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".lock" not in p.name) if root.exists() else []
    assert after == before, sorted(set(after) - set(before))
