"""The RL indexes are derived files (``loaders.storage.derived``): sealed for their version, column and layout, and
rebuilt, never trusted, when a file is edited (even with its digest recomputed), torn, of another version or from an older
layout."""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loaders import Catalog, DatasetVersion
from loaders.rl import episode_table, version_index
from loaders.rl.store import MEMO, derivation, index_path
from loaders.storage import derived
from tests.loaders.test_rl import ROWS, register, register_episodes


@pytest.fixture(autouse=True)
def fresh_memo() -> None:
    MEMO.clear()


@pytest.fixture
def two_versions(tmp_path: Path) -> tuple[Catalog, DatasetVersion, DatasetVersion]:
    """Two versions of ``rollouts`` with different rewards and groups."""
    catalog = Catalog(tmp_path / "catalog")
    first = register(catalog, tmp_path / "v1", ROWS)
    second = register(catalog, tmp_path / "v2", [(k, "z" if g == "a" else g, 0.25, f, t, t) for k, g, _, f, t, _ in ROWS])
    return catalog, first, second


def rollout_files(catalog: Catalog, version: DatasetVersion) -> list[Path]:
    return [Path(index_path(catalog.root, version, "rollouts", "rollout", part)) for part in ("rows.arrow", "groups.arrow")]


def read_ipc(path: Path) -> pa.Table:
    return pa.ipc.open_file(pa.BufferReader(path.read_bytes())).read_all()


def write_ipc(path: Path, table: pa.Table) -> None:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    path.write_bytes(sink.getvalue().to_pybytes())


def test_the_index_files_carry_their_version_and_layout(two_versions: tuple[Catalog, DatasetVersion, DatasetVersion]) -> None:
    catalog, first, _ = two_versions
    version_index(catalog.root, first, "rollout")
    rows, groups = (read_ipc(path) for path in rollout_files(catalog, first))
    for table, kind in ((rows, "rollout rows"), (groups, "rollout groups")):
        assert derived.problem(table, derivation(first, kind, "rollout")) is None
        assert derived.problem(table, derivation(_, kind, "rollout")) is not None  # not the other version's
    assert rows.num_rows == first.rows and groups.column("group_id").to_pylist() == ["a", "b", "c"]


def _edited(table: pa.Table, version: DatasetVersion, column: str) -> pa.Table:
    """``column`` forged to 99 everywhere, the stamp left alone."""
    return table.set_column(table.column_names.index(column), column, pa.array([99.0] * len(table), pa.float64()))


def _unstamped(table: pa.Table, version: DatasetVersion, column: str) -> pa.Table:
    """As layout 3 wrote it: no stamp (its checksum was a file beside it), ``column`` forged."""
    meta = table.schema.metadata or {}
    return _edited(table, version, column).replace_schema_metadata({k: v for k, v in meta.items() if not k.startswith(b"batchscope.")})


def _older_layout(table: pa.Table, version: DatasetVersion, column: str) -> pa.Table:
    """A seal of this version, but of layout 3, and ``column`` forged."""
    older = dataclasses.replace(derivation(version, "rollout rows", "rollout"), layout=3)
    return derived.stamp(_edited(table, version, column), older)


def _restamped(table: pa.Table, version: DatasetVersion, column: str) -> pa.Table:
    """``column`` forged with its row count and digest recomputed, and the seal of the honest file kept."""
    forged = _edited(table, version, column)
    meta = dict(table.schema.metadata)
    meta[derived.DIGEST] = derived.table_digest(forged.replace_schema_metadata(None)).encode()
    return forged.replace_schema_metadata(meta)


@pytest.mark.parametrize(
    "forge", [_edited, _unstamped, _older_layout, _restamped], ids=["edited", "unstamped", "older-layout", "digest-recomputed"]
)
def test_a_stale_rollout_index_is_rebuilt(
    two_versions: tuple[Catalog, DatasetVersion, DatasetVersion], forge: Callable, caplog: pytest.LogCaptureFixture
) -> None:
    catalog, first, _ = two_versions
    expected = version_index(catalog.root, first, "rollout").reward.copy()
    rows_file, _ = rollout_files(catalog, first)
    write_ipc(rows_file, forge(read_ipc(rows_file), first, "reward"))
    MEMO.clear()  # what a new server process starts with
    with caplog.at_level(logging.WARNING, logger="loaders.storage.derived"):
        rebuilt = version_index(catalog.root, first, "rollout").reward
    assert np.array_equal(rebuilt, expected, equal_nan=True) and 99.0 not in rebuilt
    assert f"rebuilding the rollout rows of {first.id}" in caplog.text
    assert derived.problem(read_ipc(rows_file), derivation(first, "rollout rows", "rollout")) is None  # rewritten, sealed


def test_another_versions_index_or_garbage_is_rebuilt(
    two_versions: tuple[Catalog, DatasetVersion, DatasetVersion], caplog: pytest.LogCaptureFixture
) -> None:
    catalog, first, second = two_versions
    version_index(catalog.root, first, "rollout")
    expected = version_index(catalog.root, second, "rollout")
    assert expected.group_ids.to_pylist() == ["z", "b", "c"]
    for source, target in zip(rollout_files(catalog, first), rollout_files(catalog, second)):
        shutil.copy(source, target)  # a foreign index under the second version's name
    MEMO.clear()
    with caplog.at_level(logging.WARNING, logger="loaders.storage.derived"):
        assert version_index(catalog.root, second, "rollout").group_ids.to_pylist() == ["z", "b", "c"]
    assert "not sealed by this installation" in caplog.text
    for path in rollout_files(catalog, second):
        path.write_bytes(b"not an arrow file")
        MEMO.clear()
        assert version_index(catalog.root, second, "rollout").reward.tolist() == expected.reward.tolist()
    assert "it cannot be read" in caplog.text


def test_files_of_the_older_layout_are_left_aside_and_a_new_index_is_built(
    two_versions: tuple[Catalog, DatasetVersion, DatasetVersion],
) -> None:
    catalog, first, _ = two_versions
    folder = Path(catalog.root) / "indexes" / first.name
    folder.mkdir(parents=True, exist_ok=True)
    old = folder / f"{first.id}.rollouts.rollout.v3.rows.arrow"  # how layout 3 named its files
    old.write_bytes(b"layout 3 bytes")
    (folder / f"{old.name}.sha256").write_bytes(b"0" * 64)
    assert version_index(catalog.root, first, "rollout").sizes.tolist() == [3, 2, 2]
    assert old.read_bytes() == b"layout 3 bytes"


@pytest.mark.parametrize("forge", [_unstamped, _older_layout, _restamped], ids=["unstamped", "older-layout", "digest-recomputed"])
def test_a_stale_episode_index_is_rebuilt(tmp_path: Path, forge: Callable) -> None:
    catalog = Catalog(tmp_path / "catalog")
    version = register_episodes(catalog, tmp_path / "src")
    expected = episode_table(catalog.root, version, "episode").column("ret").to_pylist()
    path = Path(index_path(catalog.root, version, "episodes", "episode", "parquet"))
    pq.write_table(forge(pq.read_table(path), version, "ret"), path)
    MEMO.clear()
    assert episode_table(catalog.root, version, "episode").column("ret").to_pylist() == expected
