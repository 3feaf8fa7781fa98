"""Checks over what a run read (``batchscope lint``): small documented rules, each with settable thresholds, judged on
every sample every rank read at every step, on each step's global batch, and over the whole run.

:func:`lint` runs them; :data:`CHECKS` lists them (``docs/lint.md`` has the table with each rule's measured
false-positive rate on clean data); :mod:`loaders.checks.trend` is the warm-up-aware outlier rule the run chart uses.

>>> from loaders.checks import CHECKS, LintOptions
>>> len(CHECKS), LintOptions.parse(checks=["duplicate"]).checks
(19, ('duplicate',))
"""

from .lint import lint, lint_part
from .options import LintOptions
from .registry import CHECK, CHECKS
from .result import EXIT_CANNOT_LINT, EXIT_CLEAN, EXIT_FINDINGS, LintResult
from .spec import SEVERITIES, Check, Finding, Param

__all__ = [
    "CHECK",
    "CHECKS",
    "EXIT_CANNOT_LINT",
    "EXIT_CLEAN",
    "EXIT_FINDINGS",
    "SEVERITIES",
    "Check",
    "Finding",
    "LintOptions",
    "LintResult",
    "Param",
    "lint",
    "lint_part",
]
