"""Rollout group views through the DOM: groups, sorts and filters checked against statistics computed here from the Parquet files."""

from __future__ import annotations

import hashlib
import math
import random
import statistics
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from app import urls
from app.factory import create_app
from app.settings import Settings
from loaders import Catalog
from tests.app.dom import soup
from tests.conftest import write_parquet
from tests.support.local_client import local_client

MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
ROLLOUT = pa.struct(
    [
        ("prompt", pa.string()),
        ("completion", pa.string()),
        ("prompt_ids", pa.list_(pa.int32())),
        ("completion_ids", pa.list_(pa.int32())),
        ("logprobs", pa.list_(pa.float32())),
        ("ref_logprobs", pa.list_(pa.float32())),
        ("reward", pa.float64()),
        ("advantage", pa.float64()),
        ("group_id", pa.string()),
        ("finish_reason", pa.string()),
        ("turns", pa.list_(MESSAGE)),
    ]
)
SCHEMA = pa.schema([("id", pa.string()), ("step", pa.int32()), ("rollout", ROLLOUT)])
SIZES = [3, 4, 2, 5, 3, 4, 2, 3]


def _advantages(rewards: list[float]) -> list[float]:
    finite = [r for r in rewards if math.isfinite(r)]
    mean = statistics.fmean(finite)
    std = statistics.pstdev(finite)
    return [(r - mean) / (std + 1e-6) if math.isfinite(r) else 0.0 for r in rewards]


def rollout_table(seed: int = 7) -> pa.Table:
    """8 groups: g0 and g2 flat, g5 with a NaN reward, g6 split between the first and the last rows, g4 multi-turn."""
    rng = random.Random(seed)
    groups: list[list[dict[str, Any]]] = []
    for g, size in enumerate(SIZES):
        rewards = [rng.choice([0.0, 0.5, 1.0]) for _ in range(size)]
        if g == 0:
            rewards = [1.0] * size
        if g == 2:
            rewards = [0.0] * size
        if g == 5:
            rewards = [1.0, float("nan"), 0.0, 0.5]
        prompt = f"What is {g} + {g}?"
        members = []
        for j, (reward, advantage) in enumerate(zip(rewards, _advantages(rewards))):
            length = rng.randint(3, 12)
            logprobs = [-rng.random() for _ in range(length)]
            members.append(
                {
                    "id": f"g{g}-{j}",
                    "step": g // 3,
                    "rollout": {
                        "prompt": prompt,
                        "completion": f"answer {j} " + "x " * length,
                        "prompt_ids": [1, 2, 3],
                        "completion_ids": list(range(100, 100 + length)),
                        "logprobs": logprobs,
                        "ref_logprobs": [lp - 0.05 * (k % 3) for k, lp in enumerate(logprobs)],
                        "reward": reward,
                        "advantage": advantage,
                        "group_id": f"g{g}",
                        "finish_reason": "length" if (g + j) % 4 == 0 else "stop",
                        "turns": [
                            {"role": "user", "content": prompt},
                            {"role": "assistant", "content": "calculator(2+2)"},
                            {"role": "tool", "content": "4"},
                            {"role": "assistant", "content": "The answer is 4."},
                        ]
                        if g == 4 and j == 0
                        else None,
                    },
                }
            )
        groups.append(members)
    rows = groups[6][:1] + [r for g in groups[:6] for r in g] + groups[7] + groups[6][1:]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def build_rl_catalog(root: Path) -> tuple[Catalog, list[str]]:
    catalog = Catalog(root / "catalog")
    paths = write_parquet(rollout_table(), root / "src" / "rollouts", shards=2)
    catalog.register("rollouts", paths, key="id", tag="v1")
    return catalog, paths


@pytest.fixture(scope="module")
def rl(tmp_path_factory: pytest.TempPathFactory) -> tuple[Catalog, list[str]]:
    return build_rl_catalog(tmp_path_factory.mktemp("rl"))


@pytest.fixture
def client(rl: tuple[Catalog, list[str]], tmp_path: Path) -> TestClient:
    catalog, _ = rl
    return local_client(
        create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "f.sqlite"), page_size=50)), follow_redirects=False
    )


# -- what the page must show, computed from the Parquet files directly -----------------------
def parquet_rows(paths: list[str]) -> list[dict[str, Any]]:
    return pa.concat_tables([pq.read_table(p) for p in paths]).to_pylist()


def expected_groups(paths: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for index, row in enumerate(parquet_rows(paths)):
        r = row["rollout"]
        g = out.setdefault(r["group_id"], {"rows": [], "rewards": [], "finish": [], "steps": set(), "lengths": []})
        g["rows"].append(index)
        g["rewards"].append(r["reward"])
        g["finish"].append(r["finish_reason"])
        g["steps"].add(row["step"])
        g["lengths"].append(len(r["completion_ids"]))
    for g in out.values():
        finite = [x for x in g["rewards"] if math.isfinite(x)]
        g["first"] = min(g["rows"])
        g["mean"] = statistics.fmean(finite) if finite else math.nan
        g["std"] = statistics.pstdev(finite) if finite else math.nan
        g["zero"] = bool(finite) and max(finite) == min(finite)
    return out


def fmt(x: float) -> str:
    return "NaN" if math.isnan(x) else f"{x:.4g}"


def version_id(rl: tuple[Catalog, list[str]]) -> str:
    return rl[0].resolve("rollouts@v1").id


def shown_groups(html: Any) -> list[str]:
    return [s["data-group"] for s in html.select("section.rl-group")]


# -- groups --------------------------------------------------------------------------------
def test_default_view_lists_groups_in_dataset_order_with_their_statistics(client: TestClient, rl: Any) -> None:
    _, paths = rl
    expected = expected_groups(paths)
    page = client.get(urls.rollout_groups("rollouts", version_id(rl)))
    assert page.status_code == 200 and page.headers["vary"] == "HX-Request"
    html = soup(page)
    assert shown_groups(html) == sorted(expected, key=lambda g: expected[g]["first"])
    for section in html.select("section.rl-group"):
        g = expected[section["data-group"]]
        assert section.select_one("[data-stat=mean]").get_text() == fmt(g["mean"])
        assert section.select_one("[data-stat=std]").get_text() == fmt(0.0 if g["zero"] else g["std"])
        assert [c["data-key"] for c in section.select("article.rl-card")] == [f"{section['data-group']}-{j}" for j in range(len(g["rows"]))]
        assert ("zero-variance" in section["class"]) == g["zero"]
        assert (
            section.select_one(".rl-prompt .text-body").get_text() == f"What is {section['data-group'][1:]} + {section['data-group'][1:]}?"
        )
    # the split group g6 (first and last rows of the dataset) is shown whole
    assert len(html.select('section.rl-group[data-group="g6"] article.rl-card')) == 2


def test_summary_excludes_the_nan_reward_and_says_so(client: TestClient, rl: Any) -> None:
    _, paths = rl
    rows = parquet_rows(paths)
    rewards = [r["rollout"]["reward"] for r in rows]
    finite = [x for x in rewards if math.isfinite(x)]
    groups = expected_groups(paths)
    html = soup(client.get(urls.rollout_groups("rollouts", version_id(rl))))
    stat = lambda name: html.select_one(f".rl-summary [data-stat={name}]").get_text()  # noqa: E731
    assert stat("rollouts") == str(len(rows)) and stat("groups") == str(len(groups))
    assert stat("mean_reward") == fmt(statistics.fmean(finite))
    assert stat("std_reward") == fmt(statistics.pstdev(finite))
    assert stat("zero_variance_share") == f"{100 * sum(g['zero'] for g in groups.values()) / len(groups):.1f}%"
    truncated = sum(r["rollout"]["finish_reason"] == "length" for r in rows)
    assert stat("truncation_rate") == f"{100 * truncated / len(rows):.1f}%"
    assert "1 non-finite or missing reward(s) excluded from the statistics" in html.select_one(".rl-note").get_text()
    g5 = html.select_one('section.rl-group[data-group="g5"]')
    assert "excluded from the statistics" in g5.select_one(".rl-group-warning").get_text()


@pytest.mark.parametrize("sort", ["reward", "-reward", "length", "-length", "std", "-size"])
def test_sorting_groups(client: TestClient, rl: Any, sort: str) -> None:
    _, paths = rl
    groups = expected_groups(paths)
    key = sort.lstrip("-")

    def value(g: dict[str, Any]) -> float:
        return {"reward": g["mean"], "length": statistics.fmean(g["lengths"]), "std": g["std"], "size": float(len(g["rows"]))}[key]

    descending = sort.startswith("-")
    order = sorted(
        groups,
        key=lambda n: (not math.isfinite(value(groups[n])), -value(groups[n]) if descending else value(groups[n]), groups[n]["first"]),
    )
    html = soup(client.get(urls.rollout_groups("rollouts", version_id(rl), sort=sort)))
    assert shown_groups(html) == order
    selected = html.select_one("form.rl-controls select[name=sort] option[selected]")
    assert selected["value"] == sort


@pytest.mark.parametrize(
    "query, keep",
    [
        ({"zero_variance": "1"}, lambda g: g["zero"]),
        ({"zero_variance": "0"}, lambda g: not g["zero"]),
        ({"finish": "length"}, lambda g: "length" in g["finish"]),
        ({"step": 1}, lambda g: 1 in g["steps"]),
        ({"zero_variance": "0", "finish": "stop"}, lambda g: not g["zero"] and "stop" in g["finish"]),
    ],
)
def test_filtering_groups(client: TestClient, rl: Any, query: dict[str, Any], keep: Any) -> None:
    _, paths = rl
    groups = expected_groups(paths)
    wanted = sorted((n for n, g in groups.items() if keep(g)), key=lambda n: groups[n]["first"])
    page = client.get(urls.rollout_groups("rollouts", version_id(rl), **query))
    html = soup(page)
    assert shown_groups(html) == wanted and wanted
    assert html.select_one("#rl-groups")["data-total"] == str(len(wanted))
    if "finish" in query:  # members with another finish reason are dimmed, not hidden
        for card in html.select("article.rl-card"):
            assert ("dim" in card["class"]) == (card.select_one(".rl-finish").get_text() != query["finish"])
    data = client.get(urls.api(urls.rollout_groups("rollouts", version_id(rl), **query))).json()
    assert [g["group_id"] for g in data["block"]["groups"]] == wanted


def test_rollouts_view_sorts_single_rollouts_with_nan_last(client: TestClient, rl: Any) -> None:
    _, paths = rl
    rows = parquet_rows(paths)
    for sort in ("-reward", "reward"):
        html = soup(client.get(urls.rollout_groups("rollouts", version_id(rl), view="rollouts", sort=sort)))
        keys = [c["data-key"] for c in html.select("article.rl-card")]
        sign = -1 if sort.startswith("-") else 1
        order = sorted(
            range(len(rows)),
            key=lambda i: (
                math.isnan(rows[i]["rollout"]["reward"]),
                sign * (rows[i]["rollout"]["reward"] if not math.isnan(rows[i]["rollout"]["reward"]) else 0),
                i,
            ),
        )
        assert keys == [rows[i]["id"] for i in order]
        assert keys[-1] == "g5-1"  # the NaN reward sorts last either way
        assert html.select("article.rl-card .rl-reward")[-1].get_text() == "NaN"
    html = soup(client.get(urls.rollout_groups("rollouts", version_id(rl), view="rollouts", sort="-length", finish="length")))
    picked = [i for i, r in enumerate(rows) if r["rollout"]["finish_reason"] == "length"]
    picked.sort(key=lambda i: (-len(rows[i]["rollout"]["completion_ids"]), i))
    assert [c["data-key"] for c in html.select("article.rl-card")] == [rows[i]["id"] for i in picked]
    assert [c.get_text() for c in html.select("article.rl-card .rl-length")] == [
        str(len(rows[i]["rollout"]["completion_ids"])) for i in picked
    ]


def test_paging_is_a_cursor_in_the_url(rl: Any, tmp_path: Path) -> None:
    catalog, paths = rl
    small = local_client(
        create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "f.sqlite"), page_size=3)), follow_redirects=False
    )
    groups = expected_groups(paths)
    order = sorted(groups, key=lambda n: (-groups[n]["mean"] if math.isfinite(groups[n]["mean"]) else math.inf, groups[n]["first"]))
    seen: list[str] = []
    url: str | None = urls.rollout_groups("rollouts", version_id(rl), sort="-reward")
    while url:
        html = soup(small.get(url))
        seen.extend(shown_groups(html))
        link = html.select_one(".rl-pager a[rel=next]")
        url = link["href"] if link else None
        assert not url or "sort=-reward" in url
    assert seen == order
    fragment = small.get(urls.rollout_groups("rollouts", version_id(rl), sort="-reward", start=3), headers={"HX-Request": "true"})
    assert fragment.text.lstrip().startswith('<section id="rl-groups"') and shown_groups(soup(fragment)) == order[3:6]


def test_group_links_and_permalinks(client: TestClient, rl: Any) -> None:
    vid = version_id(rl)
    html = soup(client.get(urls.rollout_groups("rollouts", vid, group="g3")))
    assert shown_groups(html) == ["g3"]
    card = html.select_one("article.rl-card")
    assert card.select_one("a.key")["href"] == urls.sample("rollouts", vid, "g3-0")
    lazy = card.select_one(".rl-lazy")
    assert lazy["hx-get"] == urls.rollout("rollouts", vid, "g3-0", column=None) and lazy["hx-trigger"] == "revealed"
    assert client.get(lazy.select_one("a")["href"]).status_code == 200
    redirect = client.get(urls.rollout_groups("rollouts", "v1", sort="-reward"))
    assert redirect.status_code == 307 and redirect.headers["location"] == urls.rollout_groups("rollouts", vid, sort="-reward")


def test_token_layers_of_a_completion(client: TestClient, rl: Any) -> None:
    _, paths = rl
    row = next(r for r in parquet_rows(paths) if r["id"] == "g1-2")["rollout"]
    fragment = client.get(urls.rollout("rollouts", version_id(rl), "g1-2"), headers={"HX-Request": "true"})
    html = soup(fragment)
    completion = html.select(".rl-tokens > .tokens .tok")
    assert len(completion) == len(row["completion_ids"])
    assert all(any(c.startswith("heat") for c in t["class"]) for t in completion)
    diffs = [abs(a - b) for a, b in zip(row["logprobs"], row["ref_logprobs"])]
    levels = [next(int(c[3:]) for c in t["class"] if c.startswith("alt")) for t in completion]
    assert levels == [min(7, int(d / max(diffs) * 8)) for d in diffs]
    assert html.select_one("button[data-rl-layer]") is not None
    assert len(html.select(".rl-prompt-tokens .tok")) == 3
    data = client.get(urls.api(urls.rollout("rollouts", version_id(rl), "g1-2"))).json()
    assert data["completion_ids"] == row["completion_ids"] and data["warnings"] == []


def test_multi_turn_rollout_shows_chat_turns(client: TestClient, rl: Any) -> None:
    html = soup(client.get(urls.rollout_groups("rollouts", version_id(rl), group="g4")))
    card = html.select_one('article.rl-card[data-key="g4-0"]')
    assert [t["data-role"] for t in card.select(".turn")] == ["user", "assistant", "tool", "assistant"]
    sample = soup(client.get(urls.sample("rollouts", version_id(rl), "g4-0")))
    assert [t["data-role"] for t in sample.select(".rl-rollout .turn")] == ["user", "assistant", "tool", "assistant"]


def test_sample_page_and_listing_cells(client: TestClient, rl: Any) -> None:
    _, paths = rl
    row = next(r for r in parquet_rows(paths) if r["id"] == "g1-0")["rollout"]
    html = soup(client.get(urls.sample("rollouts", version_id(rl), "g1-0")))
    facts = {dd["data-fact"]: dd.get_text() for dd in html.select(".rl-rollout dd[data-fact]")}
    assert facts["reward"] == fmt(row["reward"]) and facts["group"] == "g1" and facts["finish"] == row["finish_reason"]
    assert html.select_one(f'.rl-rollout a[href="{urls.rollout_groups("rollouts", version_id(rl), group="g1")}"]') is not None
    listing = soup(client.get(urls.version("rollouts", version_id(rl))))
    assert any(cell.get_text().startswith(f"reward {fmt(row['reward'])}") for cell in listing.select("tr.sample span.cell"))


def test_the_index_is_derived_data_beside_the_catalog(client: TestClient, rl: Any) -> None:
    catalog, paths = rl
    before = {p: hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths}
    assert client.get(urls.rollout_groups("rollouts", version_id(rl), sort="-reward")).status_code == 200
    indexes = sorted(
        p.name.split(".")[-2] for p in (Path(catalog.root) / "indexes" / "rollouts").glob(f"{version_id(rl)}.rollouts.*.arrow")
    )
    assert indexes == ["groups", "rows"]
    rows = next((Path(catalog.root) / "indexes" / "rollouts").glob("*.rows.arrow"))
    assert pa.ipc.open_file(pa.BufferReader(rows.read_bytes())).read_all().num_rows == sum(SIZES)
    assert {p: hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths} == before


def test_a_keyless_version_reads_whole_records_for_its_keys(rl: Any, tmp_path: Path) -> None:
    catalog, paths = rl
    version = catalog.register("rollouts-keyless", paths)
    client = local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "f.sqlite"))), follow_redirects=False)
    html = soup(client.get(urls.rollout_groups("rollouts-keyless", version.id, group="g1")))
    keys = [c["data-key"] for c in html.select("article.rl-card")]
    assert len(keys) == SIZES[1] and all(len(k) >= 16 for k in keys)  # content hashes
    sample = client.get(html.select_one("article.rl-card a.key")["href"])
    assert sample.status_code == 200 and soup(sample).select_one(".rl-rollout dd[data-fact=group]").get_text() == "g1"


@pytest.mark.parametrize(
    "query, words",
    [
        ({"sort": "colour"}, ["sort 'colour' is not one of", "reward"]),
        ({"view": "rollouts", "sort": "std"}, ["sort 'std'", "view 'rollouts'"]),
        ({"zero_variance": "maybe"}, ["zero_variance"]),
        ({"column": "id"}, ["'id'", "not a rollout column", "rollout"]),
    ],
)
def test_bad_parameters_are_clear_errors(client: TestClient, rl: Any, query: dict[str, str], words: list[str]) -> None:
    answer = client.get(urls.api(urls.rollout_groups("rollouts", version_id(rl), **query)))
    assert answer.status_code == 422 and answer.json()["ok"] is False
    assert all(w in answer.json()["error"] for w in words), answer.json()


# -- a step's batch -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rl_run(rl: tuple[Catalog, list[str]]) -> Any:
    from loaders.sampling.plan import ReadPlan, Source

    catalog, _ = rl
    return catalog.create_run("rl-run", ReadPlan([Source("rollouts@v1")], seed=3, global_batch_size=8, steps=3, streams=2), exist_ok=True)


def batch_stats(records: list[dict[str, Any]], dataset: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What a step page must show: statistics over the batch's rollouts, zero variance of each whole group (its dataset's)."""
    groups: dict[str, list[float]] = {}
    for record in records:
        groups.setdefault(record["rollout"]["group_id"], []).append(record["rollout"]["reward"])
    rewards = [r for g in groups.values() for r in g if math.isfinite(r)]
    flat = [g for g in groups if dataset[g]["zero"]]
    truncated = sum(r["rollout"]["finish_reason"] == "length" for r in records)
    return {
        "groups": groups,
        "mean_reward": fmt(statistics.fmean(rewards)),
        "std_reward": fmt(statistics.pstdev(rewards)),
        "zero_variance_share": f"{100 * len(flat) / sum(1 for g in groups.values() if any(math.isfinite(r) for r in g)):.1f}%",
        "truncation_rate": f"{100 * truncated / len(records):.1f}%",
    }


def test_rank_page_shows_the_batch_grouped_with_statistics(client: TestClient, rl: Any, rl_run: Any) -> None:
    batch = rl_run.batch(1, 0)
    records = [s.record for s in batch.samples]
    dataset = expected_groups(rl[1])
    expected = batch_stats(records, dataset)
    page = client.get(urls.rank("rl-run", 1, 0))
    assert page.status_code == 200
    view = soup(page).select_one("section.rl-batch")
    assert view is not None
    for name in ("mean_reward", "std_reward", "zero_variance_share", "truncation_rate"):
        assert view.select_one(f".rl-summary [data-stat={name}]").get_text() == expected[name], name
    first_seen = list(dict.fromkeys(r["rollout"]["group_id"] for r in records))
    assert [s["data-group"] for s in view.select("section.rl-group")] == first_seen
    for section in view.select("section.rl-group"):
        keys = [c["data-key"] for c in section.select("article.rl-card")]
        assert keys == [s.key for s in batch.samples if s.record["rollout"]["group_id"] == section["data-group"]]
        whole = len(dataset[section["data-group"]]["rows"])
        size = section.select_one("[data-stat=size]").get_text()
        assert size == (
            f"{len(keys)} rollout{'s' if len(keys) > 1 else ''}" + (f" of {whole} in its dataset" if whole != len(keys) else "")
        )
        assert ("zero-variance" in section["class"]) == dataset[section["data-group"]]["zero"]
    # advantages are judged against whole groups, so partial groups raise no false alarm
    assert not [w for w in view.select(".rl-warn li") if "opposite sign" in w.get_text() or "every reward" in w.get_text()]
    if any(
        len(dataset[g]["rows"]) > records_in
        for g, records_in in ((g, sum(r["rollout"]["group_id"] == g for r in records)) for g in first_seen)
    ):
        assert "only partly in this batch" in view.select_one(".rl-note").get_text()
    positions = {s.key: i for i, s in enumerate(batch.samples)}
    for card in view.select("article.rl-card"):
        assert card.select_one('a[href*="#sample-"]')["href"] == urls.rank("rl-run", 1, 0) + urls.sample_anchor(positions[card["data-key"]])
    form = view.select_one("form.rl-controls")
    assert form["action"] == urls.rank_rollouts("rl-run", 1, 0) and form["hx-target"] == "#rl-groups"


def test_sorting_and_filtering_within_a_step(client: TestClient, rl: Any, rl_run: Any) -> None:
    records = [s.record for b in rl_run.global_batch(2) for s in b.samples]
    dataset = expected_groups(rl[1])
    groups = batch_stats(records, dataset)["groups"]
    means = {g: statistics.fmean([r for r in v if math.isfinite(r)]) for g, v in groups.items()}
    first = {g: i for i, g in reversed(list(enumerate(r["rollout"]["group_id"] for r in records)))}
    html = soup(client.get(urls.step_rollouts("rl-run", 2, sort="-reward")))
    assert [s["data-group"] for s in html.select("section.rl-group")] == sorted(groups, key=lambda g: (-means[g], first[g]))
    flat = soup(client.get(urls.step_rollouts("rl-run", 2, zero_variance="1")))
    assert {s["data-group"] for s in flat.select("section.rl-group")} == {g for g in groups if dataset[g]["zero"]}
    assert client.get(urls.api(urls.rank_rollouts("rl-run", 2, 5))).status_code == 404


def test_a_step_of_a_large_source_without_an_index_is_judged_on_the_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import app.pages.rollouts as pages
    from loaders.sampling.plan import ReadPlan, Source

    monkeypatch.setattr(pages, "REFERENCE_BUILD_ROWS", 0)  # every source counts as too large to index from a step page
    catalog, _ = build_rl_catalog(tmp_path)
    catalog.create_run("big", ReadPlan([Source("rollouts@v1")], seed=1, global_batch_size=8, steps=2))
    client = local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "f.sqlite"))), follow_redirects=False)
    view = soup(client.get(urls.rank("big", 0, 0))).select_one("section.rl-batch")
    notes = " ".join(note.get_text() for note in view.select(".rl-note"))
    assert "could not be matched with their dataset's group index" in notes
    assert not list((Path(catalog.root) / "indexes").glob("**/*.arrow"))  # nothing was scanned
