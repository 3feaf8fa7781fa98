"""Column statistics of a version: every figure equals one computed from the records the read path gives; kept in the
catalog as a stamped derived file, served from there, and rebuilt (never served) when the file was edited or torn."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loaders import Catalog
from loaders.query import SqlSession
from loaders.query import profile as profile_module
from loaders.query.profile import BINS, version_profile
from tests.conftest import write_parquet

ROWS = 30


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    from tests.support import peers

    root = tmp_path_factory.mktemp("profile")
    catalog = Catalog(root / "catalog")
    table = pa.table(
        {
            "id": [f"r{i}" for i in range(ROWS)],
            "text": [None if i % 7 == 3 else "word " * (i % 11) for i in range(ROWS)],
            "score": [None if i % 5 == 0 else (i * 0.37) % 4 for i in range(ROWS)],
            "count": [i % 40 for i in range(ROWS)],
            "lang": [["en", "fr", "de"][i % 3] if i % 4 else "en" for i in range(ROWS)],
            "flag": [i % 2 == 0 for i in range(ROWS)],
            "input_ids": pa.array([list(range(i % 9)) for i in range(ROWS)], pa.list_(pa.int32())),
            "blob": [bytes(i % 6) for i in range(ROWS)],
        }
    )
    catalog.register("mixed", write_parquet(table, root / "mixed", shards=2, row_group=4), key="id", tag="v1")
    pictures = root / "pets.parquet"
    peers.hf_dataset().to_parquet(str(pictures))
    catalog.register("pets", [str(pictures)], key="text", tag="v1")
    return catalog


def _records(version) -> list[dict]:  # type: ignore[no-untyped-def]
    return [r for shard, info in enumerate(version.shards) for r in version.read(shard, range(info.rows))]


def _measured(column: str, value) -> float | None:  # type: ignore[no-untyped-def]
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return float(len(value))
    if isinstance(value, bytes):
        return float(len(value))
    if isinstance(value, dict):
        return None if value.get("bytes") is None else float(len(value["bytes"]))
    return float(len(value))


def test_every_figure_equals_one_computed_from_the_records(catalog: Catalog) -> None:
    for ref in ("mixed@v1", "pets@v1"):
        version = catalog.resolve(ref)
        records = _records(version)
        profile = version_profile(SqlSession(catalog), version, rebuild=True)
        assert [c.name for c in profile.columns] == version.schema.names and profile.rows == len(records)
        for column in profile.columns:
            values = [r[column.name] for r in records]
            assert column.nulls == sum(v is None for v in values), column.name
            measured = [m for m in (_measured(column.name, v) for v in values) if m is not None and not math.isnan(m)]
            if column.measure:
                assert column.low == pytest.approx(min(measured)) and column.high == pytest.approx(max(measured)), column.name
                assert column.mean == pytest.approx(sum(measured) / len(measured)), column.name
                if column.name == version.key:  # the key's values only name rows: no histogram
                    assert column.histogram == []
                    continue
                assert sum(b.count for b in column.histogram) == len(measured), column.name
                assert 1 <= len(column.histogram) <= BINS
                for b in column.histogram if column.integral else column.histogram[:-1]:  # [low, high], or [low, high)
                    inside = [(b.low <= m <= b.high) if column.integral else (b.low <= m < b.high) for m in measured]
                    assert b.count == sum(inside), (column.name, b)
            if column.facets:
                counted = Counter(values)
                assert [(f.value, f.count) for f in column.facets] == sorted(
                    counted.items(), key=lambda item: (-item[1], item[0] is None, item[0])
                )[: len(column.facets)], column.name
    mixed = version_profile(SqlSession(catalog), catalog.resolve("mixed@v1"))
    assert mixed.column("id").facets == [] and mixed.column("score").measure == "value"  # unique keys are no facets
    assert {f.value for f in mixed.column("lang").facets} == {"en", "fr", "de"} and mixed.column("input_ids").measure == "items"
    pets = version_profile(SqlSession(catalog), catalog.resolve("pets@v1"))
    labels = pets.column("label")
    names = catalog.resolve("pets@v1").class_names["label"]
    assert labels.kind == "class_label" and {f.label for f in labels.facets} == {f"{f.value} · {names[f.value]}" for f in labels.facets}
    assert pets.column("picture").measure == "bytes"


def test_statistics_are_kept_in_the_catalog_and_a_tampered_copy_is_rebuilt(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog")
    version = catalog.register("small", write_parquet(pa.table({"id": ["a", "b", "c"], "n": [1, 2, 30]}), tmp_path / "src"), key="id")
    first = version_profile(SqlSession(catalog), version, rebuild=True)
    path = Path(profile_module.profile_path(version))
    assert path.exists() and not first.stored
    profile_module.forget()
    again = version_profile(SqlSession(catalog), version)
    assert again.stored and again.columns == first.columns  # a second look reads the kept file, computes nothing
    # Edited: the high of n claimed 999 under the old stamp (its digest no longer matches): rebuilt, never served.
    table = pq.read_table(path)
    edited = table.set_column(
        1, "profile", pa.array([text.replace('"high": 30.0', '"high": 999.0') for text in table.column("profile").to_pylist()])
    )
    assert edited.column("profile").to_pylist() != table.column("profile").to_pylist()
    pq.write_table(edited.replace_schema_metadata(table.schema.metadata), path)
    profile_module.forget()
    rebuilt = version_profile(SqlSession(catalog), version)
    assert not rebuilt.stored and rebuilt.column("n").high == 30.0
    path.write_bytes(b"not parquet at all")  # torn or garbage: rebuilt too
    profile_module.forget()
    assert version_profile(SqlSession(catalog), version).column("n").high == 30.0
    assert pq.read_table(path).num_rows == 2  # and written again
