"""The read path's module paths before it was split into one sub-package per layer, kept importable.

``import loaders.reader`` (or ``from loaders.reader import Reader``) gives the module now at
``loaders.training.reader``: the same module object, so ``loaders.reader.Reader is loaders.training.reader.Reader``,
with a ``DeprecationWarning`` naming the new path. The four old modules whose names are now packages
(``loaders.storage``, ``loaders.catalog``, ``loaders.order``, ``loaders.run``) re-export their names instead.

>>> import warnings
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore", DeprecationWarning)
...     from loaders.reader import Reader
>>> from loaders.training.reader import Reader as Moved
>>> Reader is Moved
True
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

#: old module under ``loaders`` → its module now, under ``loaders``.
MOVED: dict[str, str] = {
    "s3": "storage.s3",
    "retry": "storage.retry",
    "disk_cache": "storage.disk_cache",
    "cache": "storage.cache",
    "pool": "storage.pool",
    "staging": "storage.staging",
    "derived": "storage.derived",
    "parquet_check": "storage.parquet_check",
    "thrift_compact": "storage.thrift_compact",
    "shards": "storage.shards",
    "catalog_files": "catalog.files",
    "manifest": "catalog.manifest",
    "version": "catalog.version",
    "keys": "catalog.keys",
    "kinds": "catalog.kinds",
    "records": "catalog.records",
    "media_files": "catalog.media_files",
    "exclude": "catalog.exclude",
    "chat": "transforms.chat",
    "permutation": "order.permutation",
    "lane_order": "order.lane_order",
    "mixture": "order.mixture",
    "step_mixture": "order.step_mixture",
    "packing": "order.packing",
    "plan": "sampling.plan",
    "world_sizes": "sampling.world_sizes",
    "token_index": "sampling.token_index",
    "sampler": "sampling.sampler",
    "documents": "sampling.documents",
    "concat_packing": "sampling.concat_packing",
    "packer": "sampling.packer",
    "assembler": "sampling.assembler",
    "where": "sampling.where",
    "batch": "sampling.batch",
    "digests": "sampling.digests",
    "collate": "sampling.collate",
    "ledger_writer": "training.ledger_writer",
    "ledger": "training.ledger",
    "legacy": "training.legacy",
    "reader_state": "training.reader_state",
    "progress": "training.progress",
    "reader": "training.reader",
    "verification": "training.verification",
    "verifier": "training.verifier",
    "run_manifest": "run.manifest",
    "run_catalog": "run.catalog",
    "realized_mixture": "forensics.realized_mixture",
}


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new path (the module itself, not a copy)."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{self.old} moved to {self.new}; import it from there", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(self.new)
        self._spec = module.__spec__  # the import system sets __spec__ to the alias's: put the module's own back
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Finds ``loaders.<old name>`` for every name in :data:`MOVED`."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.partition(".")
        if package != "loaders" or name not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(fullname, f"loaders.{MOVED[name]}"))


def install() -> None:
    """Make the old paths importable (idempotent; ``import loaders`` does it)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
