"""The lint benchmark's measurement runs and reports what it claims (no timing assertions)."""

from __future__ import annotations

import pytest

from bench import bench_lint
from loaders import Catalog


def test_measure_reports_reader_and_lint_rates_over_the_same_run(lint_catalog: Catalog) -> None:
    result = bench_lint.measure(Catalog(lint_catalog.root), "lint-texts", repeats=1)
    assert result["samples"] == 72 and result["steps"] == 9
    assert all(result[k] > 0 for k in ("reader_samples_per_s", "lint_samples_per_s", "lint_one_process_samples_per_s"))
    assert result["ratio"] == pytest.approx(result["lint_samples_per_s"] / result["reader_samples_per_s"], rel=0.01)
    assert set(result["findings"]) == {"empty-document", "repetition", "duplicate", "unknown-tokens", "length-outlier"}
