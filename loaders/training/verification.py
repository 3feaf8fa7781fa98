"""Verification: the ledger compared with a recomputation of the read path, one (step, rank) or a whole window.

A (step, rank) is ``verified`` when its ledger record matches the recomputed batch in every respect the ledger
keeps (batch digest, and per sample its global index, key and digest) and the trainer marked it trained;
``untrained`` when it matches but was only fetched; ``mismatch`` when anything differs; ``no-ledger`` when there
is no record. :func:`verify_run` adds what cannot be attributed to a step: unreadable ledger lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol

from ..sampling.batch import Batch
from ..sampling.digests import DIGEST_FORMAT
from .ledger import Ledger, LedgerEntry, LedgerProblem
from .legacy import batch_digests_v1

#: ``batchscope verify`` exit codes.
EXIT_VERIFIED = 0  # every (step, rank) checked was verified and trained
EXIT_MISMATCH = 1  # some ledger record differs from what the plan reads
EXIT_CANNOT_CHECK = 2  # records missing, ledger lines unreadable, or the recomputation failed
EXIT_UNTRAINED = 3  # the data matches, but some steps were fetched and never marked trained


@dataclass
class Verification:
    """The ledger compared with a recomputation of one (step, rank)."""

    status: str  # "verified", "untrained", "mismatch" or "no-ledger"
    step: int
    rank: int
    world_size: int
    computed_digest: str
    ledger_digest: str | None
    #: Global indices of the samples whose own record differs (index, key or sample digest); empty when only the
    #: batch digest does (the samples all match: the ledger's batch record itself is damaged).
    differing: list[int]
    reasons: list[str] = field(default_factory=list)  # what differs, in words

    @property
    def verified(self) -> bool | None:
        """Whether the ledger's data agrees with the recomputation (None: no record)."""
        return None if self.status == "no-ledger" else self.status in ("verified", "untrained")

    @property
    def trained(self) -> bool | None:
        """Whether the trainer marked the step trained (None: no record)."""
        return None if self.status == "no-ledger" else self.status != "untrained"

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "verified": self.verified, "trained": self.trained}


def _positions(ledger: list[Any], computed: list[Any]) -> list[int]:
    return [i for i in range(max(len(ledger), len(computed))) if i >= len(ledger) or i >= len(computed) or ledger[i] != computed[i]]


def compare_with_ledger(ledger: Ledger, batch: Batch) -> Verification:
    """Compare an already computed batch with the ``ledger`` record for its step, rank and world size.

    >>> compare_with_ledger(run.ledger, run.batch(3, 0, world_size=2)).status   # doctest: +SKIP
    'verified'
    """
    entry = ledger.entry(batch.step, batch.rank, batch.world_size)
    where = (batch.step, batch.rank, batch.world_size)
    if entry is None:
        return Verification("no-ledger", *where, batch.digest, None, [])
    computed, samples = batch.digest, batch.sample_digests
    if entry.digest_format != DIGEST_FORMAT:  # a ledger written by an earlier version of the digests
        computed, samples = batch_digests_v1(batch)
    reasons, positions = _differences(entry, computed, batch.indices, batch.keys, samples)
    if reasons:
        indices = batch.indices
        differing = [indices[i] for i in sorted(positions) if i < len(indices)]
        if not positions:
            reasons.append(
                "every sample's own index, key and digest match, so no sample is blamed: the ledger's batch digest is wrong"
                if entry.samples
                else "this ledger keeps no sample digests, so which samples differ cannot be told"
            )
        return Verification("mismatch", *where, computed, entry.digest, differing, reasons)
    return Verification("verified" if entry.trained else "untrained", *where, computed, entry.digest, [])


def _differences(entry: LedgerEntry, digest: str, indices: list[int], keys: list[str], samples: list[str]) -> tuple[list[str], set[int]]:
    """What differs between a ledger record and the recomputed batch: reasons, and sample positions."""
    reasons: list[str] = []
    positions: set[int] = set()
    if entry.digest != digest:
        reasons.append(f"batch digest {entry.digest} in the ledger, {digest} recomputed")
    for label, ledger, computed in (
        ("global indices", entry.indices, indices),
        ("keys", entry.keys, keys),
        ("sample digests", entry.samples, samples),
    ):
        if label == "sample digests" and not ledger:
            continue  # ledgers written before sample digests were kept
        differ = _positions(ledger, computed)
        if differ:
            shown = ", ".join(f"#{i}: {_at(ledger, i)!r} in the ledger, {_at(computed, i)!r} recomputed" for i in differ[:3])
            reasons.append(f"{label} differ at {len(differ)} position(s) ({shown}{', ...' if len(differ) > 3 else ''})")
            positions.update(differ)
    return reasons, positions


def _at(values: list[Any], i: int) -> Any:
    return values[i] if i < len(values) else None


@dataclass
class RunVerification:
    """A window of (step, rank)s checked: how many had each status, the ones not verified, and the ledger lines that
    could not be read (kept small: verified checks are only counted)."""

    run: str
    steps: range
    counts: dict[str, int]
    failures: list[Verification]
    problems: list[LedgerProblem]

    def count(self, status: str) -> int:
        return self.counts.get(status, 0)

    def with_status(self, status: str) -> list[Verification]:
        """The checks with ``status`` (any status but ``verified``)."""
        return [c for c in self.failures if c.status == status]

    @property
    def exit_code(self) -> int:
        """0 verified, 1 mismatch, 2 cannot check (missing records, unreadable lines), 3 fetched but not trained."""
        if self.count("mismatch"):
            return EXIT_MISMATCH
        if self.count("no-ledger") or any(p.fatal for p in self.problems) or not sum(self.counts.values()):
            return EXIT_CANNOT_CHECK
        if self.count("untrained"):
            return EXIT_UNTRAINED
        return EXIT_VERIFIED


class CheckedRun(Protocol):
    """What :func:`verify_run` needs of a run (a :class:`loaders.run.Run`)."""

    name: str

    @property
    def ledger(self) -> Ledger: ...

    def global_batch(self, step: int) -> Iterator[Batch]: ...

    def compare(self, batch: Batch) -> Verification: ...


def verify_run(run: CheckedRun, steps: range) -> RunVerification:
    """Check every (step, rank) of ``steps`` under the world size in force at each step.

    >>> verify_run(run, range(100)).exit_code   # doctest: +SKIP
    0
    """
    counts: dict[str, int] = {}
    failures = []
    for step in steps:
        for batch in run.global_batch(step):
            check = run.compare(batch)
            counts[check.status] = counts.get(check.status, 0) + 1
            if check.status != "verified":
                failures.append(check)
    return RunVerification(run.name, steps, counts, failures, run.ledger.problems())


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
