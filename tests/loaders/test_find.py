"""Which steps trained on rows matching X: exactly the reads a forward scan of every step finds, for unpacked and packed
runs across a world-size change, through nothing but the run interface (so any kind of run that answers ``where`` fits)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from loaders import Catalog, ReadPlan, Source
from loaders.errors import InvalidQuery, SqlRefused
from loaders.query import QueryLimits, SqlSession
from loaders.query.find import StepRange, find_reads, matching_rows, step_histogram
from tests.support.readpath import forward_reads

ALPHA = "text LIKE 'alpha%'"


def _expected(run: Any, predicate: Any, steps: StepRange = StepRange()) -> set[tuple[int, int, int, str, int]]:
    """``(step, rank, position, key, epoch)`` of every read of a matching row, by reading every step."""
    version = run.version(0)
    out = set()
    for (source, record), reads in forward_reads(run).items():
        row = version.record(record)
        if predicate(row):
            out |= {(step, rank, sample, row["id"], epoch) for epoch, step, rank, _, sample in reads if step in steps}
    return out


def _found(found: Any) -> set[tuple[int, int, int, str, int]]:
    return {(m.step, m.rank, m.position, m.key, m.epoch) for m in found.matches}


@pytest.mark.parametrize("name", ["plain", "pretrain"])
def test_find_lists_exactly_the_reads_a_forward_scan_finds(runs_catalog: Catalog, name: str) -> None:
    run = runs_catalog.run(name)
    session = SqlSession(runs_catalog)
    found = find_reads(run, ALPHA, session=session)
    expected = _expected(run, lambda row: row["text"].startswith("alpha"))
    assert expected and _found(found) == expected
    assert [(m.step, m.rank, m.position) for m in found.matches] == sorted((m.step, m.rank, m.position) for m in found.matches)
    assert found.packed == (name == "pretrain") and not found.truncated
    assert found.sources[0].rows == 10 and found.sources[0].source == "docs@v1"
    for match in found.matches:  # rank and position at the world size in force at that step
        assert match.world_size == run.world_size_at(match.step)
        sample = run.batch(match.step, match.rank).samples[match.position]
        assert match.key in [d.key for d in sample.documents] and match.index == sample.index
    window = StepRange(4, 9)
    assert _found(find_reads(run, ALPHA, session=session, steps=window)) == _expected(
        run, lambda row: row["text"].startswith("alpha"), window
    )
    histogram = found.histogram()
    assert sum(n for _, _, n in histogram) == len(found.matches) and histogram[0][0] == 0 and histogram[-1][1] == run.total_steps


def test_a_predicate_can_use_any_sql_and_other_versions(runs_catalog: Catalog) -> None:
    run = runs_catalog.run("plain")
    session = SqlSession(runs_catalog)
    found = find_reads(run, "id IN (SELECT id FROM \"docs@v2\" WHERE length(text) > 30) AND regexp_matches(text, 'w1\\d')", session=session)
    v2 = {r["id"] for r in session.query('SELECT id FROM "docs@v2" WHERE length(text) > 30').rows()}
    import re

    assert _found(found) == _expected(run, lambda row: row["id"] in v2 and re.search(r"w1\d", row["text"]) is not None)


def test_a_scan_engine_can_ship_each_source_to_a_worker(runs_catalog: Catalog) -> None:
    import pickle

    shipped = []

    def engine(fn, queries):  # type: ignore[no-untyped-def]  # what a process or Ray engine does: pickle both ways
        shipped.extend(queries)
        return [pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(fn))(pickle.loads(pickle.dumps(q))))) for q in queries]

    run = runs_catalog.run("plain")
    here = find_reads(run, ALPHA, session=SqlSession(runs_catalog))
    there = find_reads(run, ALPHA, session=SqlSession(runs_catalog), scan=engine)
    assert _found(there) == _found(here) and [(q.dataset, q.version) for q in shipped] == [("docs", run.version(0).id)]
    with pytest.raises(SqlRefused, match="not a boolean"):
        find_reads(run, "length(text)", session=SqlSession(runs_catalog), scan=engine)


class OnlyTheInterface:
    """A run seen only through what find needs (what a replayed run provides): no plan, no sampler, no batches."""

    def __init__(self, run: Any) -> None:
        self._run = run
        self.name, self.kind, self.sources = run.name, "replayed", run.sources

    @property
    def total_steps(self) -> int:
        return self._run.total_steps

    def version(self, source: int) -> Any:
        return self._run.version(source)

    def where(self, source: int, record: int, *, first_epoch: int = 0, epochs: int | None = None) -> Any:
        return self._run.where(source, record, first_epoch=first_epoch, epochs=epochs)


class CannotInvert(OnlyTheInterface):
    def where(self, source: int, record: int, *, first_epoch: int = 0, epochs: int | None = None) -> Any:
        raise InvalidQuery(f"run {self.name} reads through a shuffle buffer: its order cannot be inverted")


def test_any_run_that_answers_where_plugs_in_and_one_that_cannot_says_why(runs_catalog: Catalog) -> None:
    session = SqlSession(runs_catalog)
    native = runs_catalog.run("pretrain")
    plugged = find_reads(OnlyTheInterface(native), ALPHA, session=session)
    assert _found(plugged) == _found(find_reads(native, ALPHA, session=session)) and plugged.kind == "replayed"
    with pytest.raises(InvalidQuery, match="^run pretrain reads through a shuffle buffer: its order cannot be inverted$"):
        find_reads(CannotInvert(native), ALPHA, session=session)

    class NoWhere:
        name, kind, sources, total_steps = "live", "recorded", native.sources, None

    with pytest.raises(InvalidQuery, match=r"^run live \(recorded\) cannot say where it read a row"):
        find_reads(NoWhere(), ALPHA, session=session)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "predicate, message",
    [
        ("length(text)", "the predicate is BIGINT, not a boolean: 'length(text)'"),
        ("text", "the predicate is VARCHAR, not a boolean: 'text'"),
        ("nope = 1", 'Binder Error: Referenced column "nope" not found in FROM clause!'),
        ("text LIKE", "Parser Error: syntax error at the end of the predicate"),
        ("text = = 'a'", 'Parser Error: syntax error at or near "=" (line 1, column 8)'),
        ("1) FROM x; DROP TABLE y; SELECT (1", "give one query, not 3 statements"),
        ('id IN (SELECT id FROM "docs@v9")', 'unknown table "docs@v9"'),
        ("x" * 100_001, "predicate refused: 100,001 characters is more than the limit of 100,000"),
    ],
)
def test_a_bad_predicate_is_one_line(runs_catalog: Catalog, predicate: str, message: str) -> None:
    with pytest.raises(SqlRefused) as refused:
        find_reads(runs_catalog.run("plain"), predicate, session=SqlSession(runs_catalog))
    assert refused.value.message.startswith(message) and "\n" not in refused.value.message


def test_a_predicate_that_applies_to_some_sources_only_notes_the_others(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import write_parquet

    catalog = Catalog(tmp_path / "catalog")
    catalog.register(
        "a", write_parquet(pa.table({"id": ["a0", "a1", "a2", "a3"], "lang": ["en", "fr", "en", "de"]}), tmp_path / "a"), key="id", tag="v1"
    )
    catalog.register("b", write_parquet(pa.table({"id": ["b0", "b1", "b2", "b3"]}), tmp_path / "b"), key="id", tag="v1")
    run = catalog.create_run(
        "mix", ReadPlan([Source("a@v1", weight=0.5), Source("b@v1", weight=0.5)], seed=3, global_batch_size=2, steps=4)
    )
    found = find_reads(run, "lang = 'en'", session=SqlSession(catalog))
    assert {m.key for m in found.matches} == {"a0", "a2"} and {m.source for m in found.matches} == {"a@v1"}
    assert found.sources[1].error.startswith('Binder Error: Referenced column "lang" not found')
    assert found.notes == [f"source b@v1: the predicate does not apply ({found.sources[1].error})"]


def test_caps_cut_and_say_so(runs_catalog: Catalog) -> None:
    version = runs_catalog.resolve("docs@v1")
    session = SqlSession(runs_catalog, QueryLimits(max_rows=3))
    rows = matching_rows(session, version, ALPHA)
    assert rows.truncated and rows.records == [0, 4, 8] and rows.keys == ["doc-0", "doc-4", "doc-8"]
    found = find_reads(runs_catalog.run("pretrain"), ALPHA, session=session)
    assert found.truncated and len(found.matches) == 3


def test_step_ranges_and_histograms() -> None:
    assert StepRange.parse("3:7") == StepRange(3, 7) and 6 in StepRange(3, 7) and 7 not in StepRange(3, 7)
    for bad in ("7:3", "a:b", "3", "-1:4"):
        with pytest.raises(InvalidQuery, match="is not A:B"):
            StepRange.parse(bad)
    assert step_histogram([0, 99, 100], 0, 101, bins=50)[-1] == (99, 101, 2)
    assert step_histogram([], 5, 6) == [(5, 6, 0)]
