"""The loss-spike story over SSH: `batchscope step` ranks every sample of every rank by loss, `batchscope show` prints
each sample's loss and token counts in 80 columns and sorts like the page, and every URL they print opens."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app import urls
from app.cli import app as cli
from app.factory import create_app
from app.listen import record_address
from app.settings import Settings
from loaders import Catalog
from tests.app.test_media_catalog import MediaCatalog, build_media_catalog
from tests.conftest import word_tokenizer, write_parquet
from tests.support.forensics import SPIKE, WORST, build_forensics_catalog, sample_loss
from tests.support.local_client import local_client

ENV = {"COLUMNS": "80", "BATCHSCOPE_HOST": "127.0.0.1", "BATCHSCOPE_PORT": "8123", "BATCHSCOPE_BASE_URL": ""}
BASE = "http://127.0.0.1:8123"
HEADER = re.compile(r"^#(\d+) · loss (\d+\.\d{4}) · (\d+) tokens: (\d+) trained, (\d+) masked(?:, (\d+) padding)?$")


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return build_forensics_catalog(tmp_path_factory.mktemp("forensics-cli"), write_parquet, word_tokenizer)


def run_cli(*args: str, **env: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, list(args), env={**ENV, **env})
    return result.exit_code, result.output.splitlines()


def test_show_prints_each_samples_loss_and_counts_in_80_columns(catalog: Catalog) -> None:
    code, lines = run_cli("show", "spiky", "--step", str(SPIKE), "--rank", "1", "--root", catalog.root)
    assert code == 0, lines
    page = local_client(create_app(Settings(root=catalog.root))).get(urls.api(urls.rank("spiky", SPIKE, 1))).json()
    headers = [HEADER.match(line) for line in lines if line.startswith("#")]
    assert len(headers) == len(page["samples"]) and all(headers)
    for match, sample in zip(headers, page["samples"]):
        position, loss, tokens, trained, masked = (match.group(i) for i in range(1, 6))
        assert (int(position), float(loss)) == (sample["position"], round(sample_loss(SPIKE, 1, sample["position"]), 4))
        assert (int(tokens), int(trained)) == (sample["tokens"], sample["trained_tokens"])
        assert int(masked) == sample["tokens"] - sample["trained_tokens"] - sample["padding"]
    assert all(len(line) <= 80 for line in lines if not line.startswith("http")), [line for line in lines if len(line) > 80]


@pytest.mark.parametrize("order", ["loss", "position", "length"])
def test_show_sorts_samples_like_the_page(catalog: Catalog, order: str) -> None:
    code, lines = run_cli("show", "spiky", "--step", "4", "--rank", "0", "--sort", order, "--root", catalog.root)
    assert code == 0, lines
    shown = [int(HEADER.match(line).group(1)) for line in lines if line.startswith("#")]
    page = local_client(create_app(Settings(root=catalog.root))).get(urls.api(urls.rank("spiky", 4, 0)), params={"sort": order})
    assert shown == [s["position"] for s in page.json()["samples"]]


def test_a_sort_the_pages_do_not_know_is_refused_in_one_line(catalog: Catalog) -> None:
    result = CliRunner().invoke(cli, ["show", "spiky", "--step", "4", "--sort", "size", "--root", catalog.root], env=ENV)
    assert result.exit_code == 2 and "--sort takes one of position, loss, length, source, reward, advantage, not 'size'" in result.output


def test_step_ranks_every_sample_of_every_rank_by_loss(catalog: Catalog) -> None:
    code, lines = run_cli("step", "spiky", "--step", str(SPIKE), "--root", catalog.root)
    assert code == 0, lines
    rows = [line.split() for line in lines if re.match(r"^\s+\d+\s+\d+\s+\d+\.\d{4}\s", line)]
    page = local_client(create_app(Settings(root=catalog.root))).get(urls.api(urls.step("spiky", SPIKE))).json()
    assert [(int(r[0]), int(r[1])) for r in rows] == [(s["rank"], s["position"]) for s in page["samples"]]
    assert (int(rows[0][0]), int(rows[0][1])) == WORST  # the worst sample of the spike first
    assert [float(r[2]) for r in rows] == sorted((float(r[2]) for r in rows), reverse=True)
    assert f"first: batchscope show spiky --step {SPIKE} --rank {WORST[0]} --sample {WORST[1]}" in lines
    assert BASE + urls.rank("spiky", SPIKE, WORST[0]) + urls.sample_anchor(WORST[1]) in lines
    assert all(len(line) <= 80 for line in lines if not line.startswith("http"))


def _printed_urls(lines: list[str], base: str) -> list[str]:
    return [line.strip()[len(base) :] for line in lines if line.strip().startswith(base)]


def test_every_url_show_prints_opens_frames_crops_and_stored_media_included(tmp_path: Path) -> None:
    media: MediaCatalog = build_media_catalog(tmp_path / "media")
    client: TestClient = local_client(create_app(Settings(root=media.catalog.root, flags_path=str(tmp_path / "f.sqlite"))))
    run = media.catalog.run(media.run)
    opened: set[str] = set()
    for step in range(run.total_steps):
        for rank in range(run.world_size_at(step)):
            code, lines = run_cli("show", media.run, "--step", str(step), "--rank", str(rank), "--root", media.catalog.root)
            assert code == 0, lines
            for path in _printed_urls(lines, BASE):
                answer = client.get(path.split("#")[0])
                assert answer.status_code == 200, (path, answer.text[:300])
                opened.add(re.sub(r"/\d+", "/N", path.split("?")[0].split("#")[0]))
    assert any(p.endswith("/view/frames") for p in opened) and any("/inputs/" in p for p in opened)


def test_printed_links_use_the_recorded_server_then_the_base_url_setting(catalog: Catalog) -> None:
    record_address(catalog.root, "http://127.0.0.1:9911")  # as `batchscope serve` does; this process is alive
    try:
        env: dict[str, Any] = {"BATCHSCOPE_PORT": ""}
        code, lines = run_cli("step", "spiky", "--step", "1", "--root", catalog.root, **env)
        assert code == 0 and "http://127.0.0.1:9911" + urls.step("spiky", 1) in lines
        code, lines = run_cli("step", "spiky", "--step", "1", "--root", catalog.root, BATCHSCOPE_BASE_URL="https://scope.example/t")
        assert code == 0 and "https://scope.example/t" + urls.step("spiky", 1) in lines
        code, lines = run_cli("where", "docs@v1", "doc-3", "--root", catalog.root)
        found = [url for line in lines for url in re.findall(r"https?://\S+", line)]
        assert code == 0 and found and all(url.startswith("http://127.0.0.1:9911/runs/") for url in found)
    finally:
        Path(catalog.root, "server.json").unlink()
