"""Run kinds: a manifest names how its batches are known, and the catalog opens the class of that kind."""

from __future__ import annotations

import json

import pytest

from loaders import Catalog, CatalogCorrupt, ReadPlan, Run, Source
from loaders.run.kinds import RunLike, kind_of
from loaders.run.manifest import manifest_path
from tests.support.readpath import alpha_beta_catalog


@pytest.fixture()
def catalog(tmp_path) -> Catalog:
    return alpha_beta_catalog(tmp_path / "catalog")


def test_a_manifest_without_a_kind_opens_as_a_native_run(catalog):
    created = catalog.create_run("plain", ReadPlan([Source("alpha@v1")], seed=1, global_batch_size=4, steps=3))
    opened = catalog.run("plain")
    assert type(opened) is Run and opened.kind == "native" and isinstance(opened, RunLike)
    assert "kind" not in created.manifest and kind_of(created.manifest) == "native"
    assert [s.key for s in opened.batch(2).samples] == [s.key for s in created.batch(2).samples]


def test_an_unknown_kind_is_one_line_naming_the_run_and_the_known_kinds(catalog):
    catalog.create_run("odd", ReadPlan([Source("alpha@v1")], seed=1, global_batch_size=4, steps=3))
    path = manifest_path(catalog, "odd")
    with open(path) as f:
        manifest = json.load(f)
    with open(path, "w") as f:
        json.dump({**manifest, "kind": "telepathic"}, f)
    with pytest.raises(CatalogCorrupt, match=r"run 'odd' has kind 'telepathic'; known kinds: native, recorded, replayed"):
        catalog.run("odd")
