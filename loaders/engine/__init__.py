"""Scans of whole datasets, written once against one engine interface: ``local`` (every core here) or ``ray`` (a cluster).

Registration, imports and diffs (and every scan added later) split their work
into tasks — one per file, row-group range or key bucket — and hand them to an
engine; results are assembled in task order, so both engines give
byte-identical results. The engine is chosen with ``engine=`` in Python,
``--engine`` on the command line, or ``$BATCHSCOPE_ENGINE`` (default ``local``).

>>> from loaders.engine import ordered, resolve_engine
>>> ordered(resolve_engine("local"), len, ["ab", "c"], labels=["first", "second"])
[2, 1]
"""

from .base import DEFAULT_ENGINE, ENGINE_ENV, ENGINES, WORK_KINDS, Engine, Work, chosen_name, engine_names, ordered, resolve_engine
from .checkpoints import Checkpoints

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "ENGINE_ENV",
    "WORK_KINDS",
    "Checkpoints",
    "Engine",
    "Work",
    "chosen_name",
    "engine_names",
    "ordered",
    "resolve_engine",
]
