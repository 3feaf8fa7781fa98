"""The parts behind the Run façade, each on its own: errors shared by Run and Reader."""

from __future__ import annotations

import pytest

from loaders import Catalog, RankOutOfRange, ReadPlan, Source
from tests.support.readpath import write_text_dataset


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    catalog = Catalog(tmp_path_factory.mktemp("parts") / "catalog")
    write_text_dataset(catalog, "alpha", 41, row_group=3, shards=2)
    write_text_dataset(catalog, "beta", 13, row_group=2, shards=1)
    return catalog


def test_a_bad_rank_is_the_same_error_from_run_and_reader(catalog):
    run = catalog.create_run("ranks", ReadPlan([Source("alpha@v1")], seed=0, global_batch_size=4, steps=3, streams=4))
    for call in (lambda: run.batch(0, 2, world_size=2), lambda: run.reader(rank=2, world_size=2)):
        with pytest.raises(RankOutOfRange) as raised:
            call()
        assert isinstance(raised.value, ValueError)  # callers catching ValueError still do
