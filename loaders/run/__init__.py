"""Runs: the run manifest (a plan resolved against the catalog, written once), the ``Run`` façade over the sampling
and training parts, and ``Catalog``, the catalog store with runs.

``Run``, ``Verification`` and ``WorldSizeSpan`` are :mod:`loaders.run.facade`'s, re-exported.
"""

from .facade import Run, Verification, WorldSizeSpan

__all__ = ["Run", "Verification", "WorldSizeSpan"]
