"""Lint a run: split its steps into ranges, lint each (in this process or a pool of worker processes), merge, and add
the run-wide checks.

>>> result = lint(catalog.run("demo-pretrain"), catalog=catalog)            # doctest: +SKIP
>>> result.counts()["chat-mask"]                                             # doctest: +SKIP
7
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import CatalogCorrupt, ChecksumMismatch, StepOutOfRange
from .options import LintOptions
from .part import LintPart
from .result import LintResult
from .runwide import names_of, run_wide
from .scan import DATA_CHANGED, ReadContext, lint_steps

if TYPE_CHECKING:
    from ..run.catalog import Catalog
    from ..run.kinds import RunLike

#: Samples below which a lint runs in this process (starting worker processes costs more than it saves).
POOL_MIN_SAMPLES = 20_000
#: Ranges of steps per worker process (small enough to balance uneven steps, large enough to share reads).
RANGES_PER_WORKER = 4


def run_steps(run: "RunLike") -> int:
    """How many steps a run has now: its total, else (a run still recording) one past the last step its ledger holds."""
    total = run.total_steps
    if total is not None:
        return total
    logged = run.ledger.steps()
    return logged[-1] + 1 if logged else 0


def check_steps(run: "RunLike", steps: range) -> None:
    """Refuse a range of steps outside the run, in one line naming it."""
    last = run_steps(run)
    if last == 0:
        raise StepOutOfRange(f"run {run.name} has no steps to lint yet")
    if steps.start < 0 or steps.stop > last or steps.start >= steps.stop:
        raise StepOutOfRange(f"steps {steps.start}:{steps.stop} are outside run {run.name} (steps 0 to {last - 1}; A:B takes B exclusive)")


def split(steps: range, ranges: int) -> list[range]:
    """``steps`` cut into at most ``ranges`` consecutive ranges of nearly equal size.

    >>> split(range(0, 10), 3)
    [range(0, 3), range(3, 6), range(6, 10)]
    """
    count = max(1, min(ranges, len(steps)))
    bounds = [steps.start + (len(steps) * i) // count for i in range(count + 1)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def stopped(run: "RunLike", exc: Exception) -> Exception:
    """The error a lint stops with when the bytes a run reads changed: the change, and that nothing else was linted."""
    message = f"run {run.name}: its data changed since it was registered, so the lint stopped and judged nothing it read: {exc}"
    return CatalogCorrupt(message) if isinstance(exc, CatalogCorrupt) else ChecksumMismatch(message)


_OPEN: dict[tuple[str, str], tuple[Any, Any]] = {}


def _lint_range(root: str, name: str, start: int, stop: int, options: LintOptions) -> LintPart:
    """A worker process's task: open the catalog and run once per process, lint steps ``start..stop``."""
    from ..run.catalog import Catalog

    opened = _OPEN.get((root, name))
    if opened is None:
        catalog = Catalog(root)
        opened = _OPEN[(root, name)] = (catalog, catalog.run(name))
    catalog, run = opened
    return lint_steps(run, range(start, stop), options, tokenizer=catalog.tokenizer)


def lint_part(run: "RunLike", steps: range, options: LintOptions, *, catalog: "Catalog", workers: int | None = None) -> LintPart:
    """Every read and step check over ``steps``, with ``workers`` processes (``None``: every core when the range holds at
    least :data:`POOL_MIN_SAMPLES` samples, else this process)."""
    if workers is None:
        workers = (os.cpu_count() or 1) if len(steps) * run.global_batch_size >= POOL_MIN_SAMPLES else 1
    try:
        if workers <= 1 or len(steps) < 2:
            return lint_steps(run, steps, options, context=ReadContext(run, options, tokenizer=catalog.tokenizer))
        ranges = split(steps, workers * RANGES_PER_WORKER)
        context = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(max_workers=min(workers, len(ranges)), mp_context=context) as pool:
            futures = [pool.submit(_lint_range, str(catalog.root), run.name, r.start, r.stop, options) for r in ranges]
            return LintPart.merge([f.result() for f in futures])
    except DATA_CHANGED as exc:
        raise stopped(run, exc) from exc


def finish(run: "RunLike", part: LintPart, options: LintOptions, *, complete: bool = True) -> LintResult:
    """The result of ``part``: its findings plus the run-wide checks', in step order."""
    sources: Sequence[Any] = run.manifest.get("resolved", {}).get("sources", []) if isinstance(run.manifest.get("resolved"), dict) else []
    wide = run_wide(
        part.reads, part.groups, options, part.steps, source_names=names_of(sources), ledger=run.ledger, world_size_at=run.world_size_at
    )
    findings = tuple(sorted([*part.findings, *wide], key=lambda f: f.sort_key()))
    return LintResult(
        run.name,
        run.kind,
        part.steps,
        options,
        findings,
        samples=part.samples,
        documents=part.documents,
        failed_batches=part.failed_batches,
        complete=complete,
        total_steps=run.total_steps,
    )


def lint(
    run: "RunLike", *, catalog: "Catalog", steps: range | None = None, options: LintOptions | None = None, workers: int | None = None
) -> LintResult:
    """Lint ``steps`` of ``run`` (all of them by default) with ``options`` (every check at its default thresholds).

    A range outside the run is refused (:class:`~loaders.errors.StepOutOfRange`); bytes that changed since registration
    stop the lint (:class:`~loaders.errors.ChecksumMismatch` or :class:`~loaders.errors.CatalogCorrupt`, saying so).
    """
    options = options or LintOptions()
    window = range(0, run_steps(run)) if steps is None else steps
    check_steps(run, window)
    return finish(run, lint_part(run, window, options, catalog=catalog, workers=workers), options)
