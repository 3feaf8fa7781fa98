"""RL data in the read path (``loaders.rl``): rollout facts, the group index of a version and of a batch, its queries,
and episode facts and ordering, on tiny real Parquet files with literal expected answers."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from loaders import Catalog, DatasetVersion, InvalidQuery
from loaders.rl import (
    RolloutIndex,
    RolloutQuery,
    episode_column,
    episode_facts,
    episode_order,
    episode_table,
    episode_warnings,
    facts_of,
    rollout_column,
    use_dataset_groups,
    version_index,
)
from loaders.rl.columns import light_columns, rollout_records
from loaders.rl.facts import BAD_REWARD, LOGPROBS_LENGTH, NO_GROUP
from loaders.rl.store import MEMO
from tests.conftest import write_parquet

ROLLOUT = pa.struct(
    [
        ("prompt", pa.string()),
        ("completion", pa.string()),
        ("completion_ids", pa.list_(pa.int32())),
        ("logprobs", pa.list_(pa.float32())),
        ("reward", pa.float64()),
        ("group_id", pa.string()),
        ("finish_reason", pa.string()),
    ]
)
#: (key, group, reward, finish, completion tokens, logprobs) in record order: group a is flat (1, 1, 1), b varies (0, 1),
#: c has a NaN reward beside 0.5 (zero variance over its finite rewards); b-1 has a logprob too few.
ROWS = [
    ("a-0", "a", 1.0, "stop", 3, 3),
    ("b-0", "b", 0.0, "length", 2, 2),
    ("a-1", "a", 1.0, "stop", 4, 4),
    ("c-0", "c", math.nan, "stop", 1, 1),
    ("b-1", "b", 1.0, "stop", 2, 1),
    ("c-1", "c", 0.5, "length", 5, 5),
    ("a-2", "a", 1.0, "stop", 2, 2),
]


def rollout_rows(rows: list[tuple[str, str, float, str, int, int]]) -> list[dict[str, Any]]:
    return [
        {
            "id": key,
            "step": number // 3,
            "rollout": {
                "prompt": f"prompt of {group}",
                "completion": f"completion {key}",
                "completion_ids": list(range(tokens)),
                "logprobs": [-0.5] * logprobs,
                "reward": reward,
                "group_id": group,
                "finish_reason": finish,
            },
        }
        for number, (key, group, reward, finish, tokens, logprobs) in enumerate(rows)
    ]


def register(
    catalog: Catalog, directory: Path, rows: list[tuple[str, str, float, str, int, int]], *, name: str = "rollouts"
) -> DatasetVersion:
    schema = pa.schema([("id", pa.string()), ("step", pa.int32()), ("rollout", ROLLOUT)])
    table = pa.Table.from_pylist(rollout_rows(rows), schema=schema)
    return catalog.register(name, write_parquet(table, directory, shards=2, row_group=2), key="id")


@pytest.fixture(autouse=True)
def fresh_memo() -> None:
    MEMO.clear()  # every test starts as a new process would


@pytest.fixture
def rollouts(tmp_path: Path) -> tuple[Catalog, DatasetVersion]:
    catalog = Catalog(tmp_path / "catalog")
    return catalog, register(catalog, tmp_path / "src", ROWS)


def groups(index: RolloutIndex, query: RolloutQuery) -> list[str | None]:
    return [index.group_id(g) for g in index.select_groups(query)]


# -- facts ------------------------------------------------------------------------------------
def test_facts_name_every_inconsistency() -> None:
    (facts,) = facts_of(rollout_rows([ROWS[4]]), "rollout")
    assert facts.problems == LOGPROBS_LENGTH and facts.warnings == ["logprobs has 1 entries for 2 completion tokens"]
    (nan,) = facts_of(rollout_rows([ROWS[3]]), "rollout")
    assert nan.problems == BAD_REWARD and nan.warnings == ["reward is NaN"]
    (unreadable,) = facts_of([{"rollout": "not a struct"}], "rollout")
    assert unreadable.problems == BAD_REWARD | NO_GROUP
    assert unreadable.warnings == ["expected a rollout struct (a mapping), got str", "no reward", "no group id"]


# -- a version's group index ----------------------------------------------------------------------
def test_groups_in_dataset_order_with_their_statistics(rollouts: tuple[Catalog, DatasetVersion]) -> None:
    catalog, version = rollouts
    index = version_index(catalog.root, version, "rollout")
    assert groups(index, RolloutQuery()) == ["a", "b", "c"]
    assert index.sizes.tolist() == [3, 2, 2] and index.finite.tolist() == [3, 2, 1]
    assert index.mean.tolist() == [1.0, 0.5, 0.5] and index.std.tolist() == [0.0, 0.5, 0.0]
    assert index.zero_variance.tolist() == [True, False, True]
    assert [index.row[index.starts[g] : index.starts[g] + index.sizes[g]].tolist() for g in range(3)] == [[0, 2, 6], [1, 4], [3, 5]]
    summary = index.summary()
    assert (summary.rollouts, summary.groups, summary.excluded, summary.zero_variance_groups) == (7, 3, 1, 2)
    assert (summary.truncated, summary.inconsistent, summary.mean_reward) == (2, 2, 4.5 / 6)
    assert index.finish_counts() == [("stop", 5), ("length", 2)]
    assert index.lengths(int(index.record_order[4])) == {"completion_ids": 2, "logprobs": 1, "ref_logprobs": None}


@pytest.mark.parametrize(
    "query, expected",
    [
        (RolloutQuery(zero_variance=True), ["a", "c"]),
        (RolloutQuery(zero_variance=False), ["b"]),
        (RolloutQuery(sort="-std"), ["b", "a", "c"]),
        (RolloutQuery(sort="reward"), ["b", "c", "a"]),
        (RolloutQuery(sort="-size"), ["a", "b", "c"]),
        (RolloutQuery(finish="length"), ["b", "c"]),
        (RolloutQuery(step=2), ["a"]),
        (RolloutQuery(problems=True), ["b", "c"]),
        (RolloutQuery(group="c"), ["c"]),
    ],
)
def test_group_queries(rollouts: tuple[Catalog, DatasetVersion], query: RolloutQuery, expected: list[str]) -> None:
    catalog, version = rollouts
    assert groups(version_index(catalog.root, version, "rollout"), query) == expected


def test_rollout_queries_sort_nan_last_and_keep_dataset_order_in_ties(rollouts: tuple[Catalog, DatasetVersion]) -> None:
    catalog, version = rollouts
    index = version_index(catalog.root, version, "rollout")
    assert index.row[index.select_rows(RolloutQuery(view="rollouts", sort="-reward"))].tolist() == [0, 2, 4, 6, 5, 1, 3]
    assert index.row[index.select_rows(RolloutQuery(view="rollouts", sort="reward"))].tolist() == [1, 5, 0, 2, 4, 6, 3]
    assert index.row[index.select_rows(RolloutQuery(view="rollouts", sort="-index", finish="length"))].tolist() == [5, 1]
    assert index.row[index.members(0, RolloutQuery(sort="-length"))].tolist() == [2, 0, 6]


def test_a_batch_index_answers_like_the_version_index(rollouts: tuple[Catalog, DatasetVersion]) -> None:
    catalog, version = rollouts
    stored = version_index(catalog.root, version, "rollout")
    records = version.read_many([version.locate(i) for i in range(version.rows)])
    batch = RolloutIndex.from_facts(facts_of(records, "rollout"), steps=[r["step"] for r in records])
    for query in (RolloutQuery(), RolloutQuery(sort="-std"), RolloutQuery(finish="length", sort="reward"), RolloutQuery(step=0)):
        assert groups(batch, query) == groups(stored, query)
    assert batch.summary() == stored.summary()


def test_bad_queries_and_columns_are_invalid_plans(rollouts: tuple[Catalog, DatasetVersion]) -> None:
    _, version = rollouts
    with pytest.raises(InvalidQuery, match="sort 'std' is not one of"):
        RolloutQuery(view="rollouts", sort="std")
    with pytest.raises(InvalidQuery, match="'id' of .* is not a rollout column"):
        rollout_column(version, "id")
    with pytest.raises(InvalidQuery, match="has no episode column"):
        episode_column(version, None)


def test_a_group_page_reads_only_the_small_fields(rollouts: tuple[Catalog, DatasetVersion]) -> None:
    _, version = rollouts
    columns = light_columns(version, "rollout")
    assert columns == ["id", "rollout.prompt", "rollout.completion", "rollout.reward", "rollout.group_id", "rollout.finish_reason"]
    (record,) = rollout_records(version, [version.locate(4)], columns)
    assert record == {
        "id": "b-1",
        "rollout": {"prompt": "prompt of b", "completion": "completion b-1", "reward": 1.0, "group_id": "b", "finish_reason": "stop"},
    }


# -- a batch judged by whole groups -------------------------------------------------------------------
def test_a_batch_takes_its_groups_statistics_from_their_dataset(rollouts: tuple[Catalog, DatasetVersion]) -> None:
    catalog, version = rollouts
    records = version.read_many([version.locate(i) for i in (1, 5)]) + [{"rollout": {"reward": 1.0, "group_id": "elsewhere"}}]
    batch = RolloutIndex.from_facts(facts_of(records, "rollout"))
    unknown = use_dataset_groups(batch, [(version, "rollout")] * 3, catalog.root, build_rows=100)
    assert unknown == 1 and [batch.group_id(g) for g in range(3)] == ["b", "c", "elsewhere"]
    assert batch.reference_size.tolist() == [2, 2, -1] and batch.zero_variance.tolist() == [False, True, True]
    assert batch.reference_mean[:2].tolist() == [0.5, 0.5]


def test_a_large_source_without_an_index_is_not_scanned_for_a_batch(rollouts: tuple[Catalog, DatasetVersion]) -> None:
    catalog, version = rollouts
    batch = RolloutIndex.from_facts(facts_of(version.read_many([version.locate(1)]), "rollout"))
    assert use_dataset_groups(batch, [(version, "rollout")], catalog.root, build_rows=0) == 1
    assert not list((Path(catalog.root) / "indexes").glob("**/*.arrow"))
    version_index(catalog.root, version, "rollout")  # built by the dataset's own page: now a step page uses it
    MEMO.clear()
    assert use_dataset_groups(batch, [(version, "rollout")], catalog.root, build_rows=0) == 0


# -- episodes ----------------------------------------------------------------------------------------
EPISODE = pa.struct(
    [
        ("frames", pa.list_(pa.binary())),
        ("actions", pa.list_(pa.int64())),
        ("rewards", pa.list_(pa.float64())),
        ("dones", pa.list_(pa.bool_())),
    ]
)


def register_episodes(catalog: Catalog, directory: Path) -> DatasetVersion:
    """Four episodes: ``e-1`` longest, ``e-2`` with a NaN reward and a missing frame, ``e-3`` whose return column is wrong."""
    episodes = [
        ("e-0", [0.0, 1.0], 1.0),
        ("e-1", [0.5, 0.5, 0.5, 0.5], 2.0),
        ("e-2", [0.0, math.nan, 3.0], None),
        ("e-3", [0.25], 9.0),
    ]
    rows = [
        {
            "id": key,
            "return": stored,
            "episode": {
                "frames": [b"frame"] * (len(rewards) - (key == "e-2")),
                "actions": list(range(len(rewards))),
                "rewards": rewards,
                "dones": [False] * (len(rewards) - 1) + [True],
            },
        }
        for key, rewards, stored in episodes
    ]
    schema = pa.schema([("id", pa.string()), ("return", pa.float64()), ("episode", EPISODE)])
    return catalog.register("episodes", write_parquet(pa.Table.from_pylist(rows, schema=schema), directory, row_group=2), key="id")


def test_episode_table_orders_and_warnings(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog")
    version = register_episodes(catalog, tmp_path / "src")
    table = episode_table(catalog.root, version, episode_column(version, None))
    keys = table.column("key").to_pylist()
    assert [keys[i] for i in episode_order(table, "-return")] == ["e-1", "e-0", "e-3", "e-2"]  # e-2's return excludes a NaN
    assert [keys[i] for i in episode_order(table, "length")] == ["e-3", "e-0", "e-2", "e-1"]
    assert [keys[i] for i in episode_order(table, "-index")] == ["e-3", "e-2", "e-1", "e-0"]
    assert [episode_warnings(table, i) for i in range(4)] == [
        [],
        [],
        ["2 frames for 3 steps", "1 non-finite reward(s) excluded from the return"],
        ["return column 9 ≠ sum of rewards 0.25"],
    ]
    with pytest.raises(InvalidQuery, match="sort 'colour' is not one of index, return, length"):
        episode_order(table, "colour")
    facts = episode_facts(version.sample("e-2")["episode"], record=version.sample("e-2"))
    assert (
        facts.total_return == 3.0 and facts.excluded == [1] and facts.warnings[0] == "frames has 2 entries for 3 steps (a frame is missing)"
    )
