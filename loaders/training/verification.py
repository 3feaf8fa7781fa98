"""Verification of a run: every (step, rank) its ledger says was trained, recomputed and compared with the record.

Training is synchronous: a step one rank trained, every rank in force trained. So a run's **trained range** is
steps 0 through the last step any rank marked trained (under the world size in force then), and each (step, rank)
of a window is, after :func:`~loaders.training.comparison.compare_with_ledger`:

- in the trained range: ``verified`` (its record matches and says trained), ``mismatch``, ``no-ledger`` (no record:
  it cannot be checked) or ``untrained`` (fetched and never marked trained, though later steps were: a gap);
- after it: ``prefetched`` (fetched after the last trained step — trainers read ahead — and never trained; its
  data is still compared) or *not reached* (no record: the job stopped before it, as a ``max_steps`` job does).

``batchscope verify`` exits 0 when every trained batch matches, 1 on a mismatch, 2 when something in the trained
range cannot be checked (or nothing was trained), 3 for a gap. Lines of the ledger that cannot be read are reported
too (:class:`~loaders.training.ledger.LedgerProblem`).

Other kinds of run (``loaders.run.kinds``) answer in their own words: a replayed run's (step, rank) is
``replayed`` when it matches the indices the run logged; a recorded run (``batchscope.record``) cannot be recomputed,
so its (step, rank) is ``recorded`` when every sample it wrote down still resolves to the row it names, ``mismatch``
when one does not. Both say how far they logged (``logged_through``), which is their trained range.
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass
from typing import Iterator, Protocol

from ..sampling.batch import Batch
from ..sampling.world_sizes import WorldSizeSpan
from .comparison import MATCHING, UNCHECKED, Verification, compare_with_ledger
from .ledger import Ledger, LedgerEntry, LedgerProblem

__all__ = [
    "EXIT_CANNOT_CHECK",
    "EXIT_MISMATCH",
    "EXIT_UNTRAINED",
    "EXIT_VERIFIED",
    "MATCHING",
    "PASSING",
    "RunVerification",
    "UNCHECKED",
    "Verification",
    "compare_with_ledger",
    "step_ranges",
    "trained_through",
    "verify_run",
]

#: ``batchscope verify`` exit codes.
EXIT_VERIFIED = 0  # every trained (step, rank) checked matches its ledger record
EXIT_MISMATCH = 1  # some ledger record differs from what the plan reads
EXIT_CANNOT_CHECK = 2  # in the trained range: records missing, ledger lines unreadable, the recomputation failed; or nothing trained
EXIT_UNTRAINED = 3  # a gap: a step fetched and never marked trained, though later steps were
#: Statuses ``batchscope verify`` passes, one per kind of run (what each may be called: ``loaders.run.kinds``).
PASSING = ("verified", "replayed", "recorded")


@dataclass
class RunVerification:
    """A window of (step, rank)s checked: how many had each status (``verified``, ``mismatch``, ``no-ledger``,
    ``untrained``, ``prefetched``, ``not-reached``), the checks that were not verified, and the ledger lines that
    could not be read (kept small: verified checks are only counted)."""

    run: str
    steps: range
    trained_through: int | None  # the last step any rank marked trained (None: none)
    counts: dict[str, int]
    failures: list[Verification]
    problems: list[LedgerProblem]

    def count(self, status: str) -> int:
        return self.counts.get(status, 0)

    def with_status(self, status: str) -> list[Verification]:
        """The checks with ``status`` (any status but the passing ones, :data:`PASSING`, and ``not-reached``)."""
        return [c for c in self.failures if c.status == status]

    @property
    def trained_steps(self) -> range:
        """The steps of the window in the trained range (checked as trained)."""
        last = -1 if self.trained_through is None else self.trained_through
        return range(self.steps.start, max(self.steps.start, min(self.steps.stop, last + 1)))

    @property
    def exit_code(self) -> int:
        """0 verified (or replayed, recorded: :data:`PASSING`), 1 mismatch, 2 cannot check (or nothing trained in the
        window), 3 a gap."""
        if self.count("mismatch"):
            return EXIT_MISMATCH
        if self.count("no-ledger") or any(p.fatal for p in self.problems) or not self.trained_steps:
            return EXIT_CANNOT_CHECK
        if self.count("untrained"):
            return EXIT_UNTRAINED
        return EXIT_VERIFIED


class CheckedRun(Protocol):
    """What :func:`verify_run` needs of a run (a :class:`loaders.run.Run`, or a run of another kind)."""

    name: str

    @property
    def total_steps(self) -> int | None: ...

    @property
    def ledger(self) -> Ledger: ...

    def world_size_at(self, step: int) -> int: ...

    def world_size_history(self) -> list[WorldSizeSpan]: ...

    def batch(self, step: int, rank: int = 0, *, world_size: int | None = None) -> Batch: ...

    def global_batch(self, step: int) -> Iterator[Batch]: ...

    def compare(self, batch: Batch) -> Verification: ...


def _in_force(run: CheckedRun, entries: list[LedgerEntry]) -> list[LedgerEntry]:
    """The entries recorded under the world size in force at their step (others belong to superseded attempts)."""
    history = run.world_size_history()  # read once: a run may have millions of entries
    starts = [span.start_step for span in history]

    def in_force(step: int) -> int:
        span = bisect.bisect_right(starts, step) - 1
        return history[span].world_size if span >= 0 else 1

    return [e for e in entries if e.world_size == in_force(e.step)]


def trained_through(run: CheckedRun) -> int | None:
    """The last step any rank marked trained under the world size in force then (None: no step was).

    >>> trained_through(run)   # doctest: +SKIP
    11
    """
    trained = [e.step for e in _in_force(run, run.ledger.entries()) if e.trained]
    return max(trained) if trained else None


def verify_run(run: CheckedRun, steps: range | None = None) -> RunVerification:
    """Check the (step, rank)s of ``steps`` (default: the whole run) under the world size in force at each step:
    recompute and compare every one in the trained range and every prefetched one; count those not reached.

    >>> verify_run(run).exit_code   # doctest: +SKIP
    0
    """
    entries = _in_force(run, run.ledger.entries())
    trained = [e.step for e in entries if e.trained]
    last = max(trained) if trained else None
    logged_through = getattr(run, "logged_through", None)  # runs that log batches elsewhere (replayed runs) say how far
    if logged_through is not None:
        last = logged_through()
    if steps is None:
        end = run.total_steps if run.total_steps is not None else max((e.step + 1 for e in entries), default=0)
        steps = range(end)
    report = RunVerification(run.name, steps, last, {}, [], run.ledger.problems())
    for step in report.trained_steps:
        for batch in run.global_batch(step):
            _count(report, run.compare(batch))
    beyond = max(report.trained_steps.stop, steps.start)
    prefetched = 0
    for entry in entries:
        if entry.step in steps and entry.step >= beyond:
            check = run.compare(run.batch(entry.step, entry.rank, world_size=entry.world_size))
            _count(report, dataclasses.replace(check, status="prefetched") if check.status == "untrained" else check)
            prefetched += 1
    report.counts["not-reached"] = _pairs(run, range(beyond, max(beyond, steps.stop))) - prefetched
    return report


def _count(report: RunVerification, check: Verification) -> None:
    report.counts[check.status] = report.counts.get(check.status, 0) + 1
    if check.status not in PASSING:
        report.failures.append(check)


def _pairs(run: CheckedRun, steps: range) -> int:
    """How many (step, rank) pairs ``steps`` hold under the world sizes in force (arithmetic over the spans)."""
    history = run.world_size_history()
    total = 0
    for i, span in enumerate(history):
        end = history[i + 1].start_step if i + 1 < len(history) else steps.stop
        lo, hi = max(span.start_step, steps.start), min(end, steps.stop)
        total += max(0, hi - lo) * span.world_size
    return total


def step_ranges(checks: list[Verification]) -> Iterator[tuple[int, int, range]]:
    """``(rank, world_size, steps)`` runs of consecutive steps among ``checks`` (to report thousands in a few lines)."""
    by_rank: dict[tuple[int, int], list[int]] = {}
    for check in checks:
        by_rank.setdefault((check.rank, check.world_size), []).append(check.step)
    for (rank, world_size), found in sorted(by_rank.items()):
        found.sort()
        start = previous = found[0]
        for step in found[1:] + [None]:  # type: ignore[list-item]
            if step is not None and step == previous + 1:
                previous = step
                continue
            yield rank, world_size, range(start, previous + 1)
            if step is not None:
                start = previous = step
