"""The catalog with runs: the catalog store plus creating, opening and listing runs (``loaders.Catalog``).

:class:`~loaders.catalog.CatalogStore` (datasets, versions, tags, tokenizers) sits below the read order and the
runs; this subclass is where they meet, so nothing below the run layer needs to know about runs.

>>> catalog = Catalog("/tmp/bs-doc")                                  # doctest: +SKIP
>>> run = catalog.create_run("demo", plan)                            # doctest: +SKIP
>>> catalog.runs(), catalog.run("demo").total_steps                    # doctest: +SKIP
(['demo'], 100)
"""

from __future__ import annotations

from ..catalog.store import CatalogStore
from ..errors import CatalogCorrupt, InvalidPlan
from ..sampling.plan import ReadPlan
from .facade import Run
from .kinds import RunLike, open_run
from .manifest import create_manifest, load_manifest, manifest_path, run_names


class Catalog(CatalogStore):
    """A catalog root holding datasets, tags, tokenizers, runs and ledgers.

    >>> catalog = Catalog("/tmp/bs-doc")                       # doctest: +SKIP
    >>> v1 = catalog.register("web-text", ["shard-0.parquet"], tag="v1")  # doctest: +SKIP
    >>> catalog.resolve("web-text@v1").id == v1.id             # doctest: +SKIP
    True
    """

    def create_run(self, name: str, plan: ReadPlan, *, exist_ok: bool = False) -> Run:
        """Resolve every tag in ``plan`` to a version id and write the run manifest."""
        return Run(self, create_manifest(self, name, plan, exist_ok=exist_ok))

    def run(self, name: str) -> Run | RunLike:
        """Open an existing run of any kind (native, replayed or recorded: :mod:`loaders.run.kinds`);
        ``CatalogCorrupt``, naming its manifest, when that is not a run's."""
        manifest = load_manifest(self, name)
        try:
            return open_run(self, manifest)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError, InvalidPlan) as exc:  # a stored plan's fault
            raise CatalogCorrupt(
                f"{manifest_path(self, name)}: run manifest is malformed ({type(exc).__name__}: {exc}); restore the file or remove the run"
            ) from exc

    def runs(self) -> list[str]:
        """Names of all runs, sorted."""
        return run_names(self)
