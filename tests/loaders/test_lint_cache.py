"""A run's lint kept in the catalog: extended range by range as the run grows, equal to linting it at once, and never
believed when a stored range was torn, edited or belongs to another run or configuration."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq

from loaders import Catalog
from loaders.checks import LintOptions, lint
from loaders.checks.cache import LintCache
from loaders.checks.lint import finish
from tests.support.lint_catalog import RecordedBatches


def _stored(cache: LintCache) -> list[str]:
    return sorted(os.listdir(cache.directory), key=lambda n: int(n.split("-")[0]))


def test_advancing_range_by_range_gives_what_one_lint_gives(lint_catalog: Catalog, tmp_path: Path) -> None:
    catalog = Catalog(lint_catalog.root)
    run = catalog.run("lint-texts")
    cache = LintCache(catalog, run, chunk_samples=16)  # 2 steps of 8 samples per stored range
    cache.directory = str(tmp_path / "lint")  # this test's own place (the catalog is shared)
    seen = [cache.advance(budget_seconds=0).steps for _ in range(6)]
    assert seen == [range(0, 2), range(0, 4), range(0, 6), range(0, 8), range(0, 9), range(0, 9)]
    assert _stored(cache) == ["0-2.parquet", "2-4.parquet", "4-6.parquet", "6-8.parquet", "8-9.parquet"]
    whole = lint(run, catalog=catalog, workers=1)
    assert finish(run, cache.advance(budget_seconds=60), cache.options).findings == whole.findings
    assert finish(run, cache.stored(), cache.options).findings == whole.findings


def test_a_stored_range_that_does_not_check_is_linted_again(lint_catalog: Catalog, tmp_path: Path) -> None:
    catalog = Catalog(lint_catalog.root)
    run = catalog.run("lint-texts")
    cache = LintCache(catalog, run, chunk_samples=32)
    cache.directory = str(tmp_path / "lint")
    whole = finish(run, cache.advance(budget_seconds=60), cache.options).findings
    first, second = (Path(cache.directory) / name for name in _stored(cache)[:2])
    first.write_bytes(first.read_bytes()[:-40])  # torn
    table = pq.read_table(second)
    pq.write_table(table.slice(0, len(table) - 1).replace_schema_metadata(table.schema.metadata), second)  # edited, stamp kept
    assert cache.stored() is None  # the chain from step 0 is broken: nothing stored is used
    assert finish(run, cache.advance(budget_seconds=60), cache.options).findings == whole
    assert cache.stored() is not None and cache.stored().steps == range(0, run.total_steps)
    other = LintCache(catalog, run, LintOptions.parse(checks=["duplicate"]))
    assert other.identity != cache.identity  # other options: another stored lint


def test_a_recording_that_grows_is_extended_not_linted_again(lint_catalog: Catalog, tmp_path: Path) -> None:
    catalog = Catalog(lint_catalog.root)
    recording = RecordedBatches(catalog.run("lint-texts"), name="growing", steps=4)
    cache = LintCache(catalog, recording, chunk_samples=1000)
    cache.directory = str(tmp_path / "lint")
    assert cache.advance(budget_seconds=60).steps == range(0, 4)
    recording.steps = 9
    assert cache.advance(budget_seconds=60).steps == range(0, 9)
    assert _stored(cache) == ["0-4.parquet", "4-9.parquet"]


def test_a_stored_range_rewritten_with_its_digests_recomputed_is_not_believed(lint_catalog: Catalog, tmp_path: Path) -> None:
    """A forger who drops a finding and recomputes every digest the file carries still lacks the seal's key."""
    from loaders.storage import derived

    catalog = Catalog(lint_catalog.root)
    run = catalog.run("lint-texts")
    cache = LintCache(catalog, run, chunk_samples=1000)
    cache.directory = str(tmp_path / "lint")
    whole = finish(run, cache.advance(budget_seconds=60), cache.options).findings
    (only,) = (Path(cache.directory) / name for name in _stored(cache))
    table = pq.read_table(only)
    assert len(table) > 1
    forged = table.slice(1).replace_schema_metadata(None)
    meta = dict(table.schema.metadata or {})
    meta[derived.ROWS], meta[derived.DIGEST] = str(len(forged)).encode(), derived.table_digest(forged).encode()
    pq.write_table(forged.replace_schema_metadata(meta), only)
    assert cache.stored() is None
    assert finish(run, cache.advance(budget_seconds=60), cache.options).findings == whole
