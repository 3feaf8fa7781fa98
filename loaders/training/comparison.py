"""One (step, rank) checked: the ledger's record of it compared with a recomputation of the read path.

A (step, rank) is ``verified`` when its ledger record matches the recomputed batch in every respect the ledger
keeps (batch digest, and per sample its global index, key and digest) and the trainer marked it trained;
``untrained`` when it matches but was only fetched; ``mismatch`` when anything differs; ``no-ledger`` when there
is no record. A whole run is checked by :mod:`loaders.training.verification`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..sampling.batch import Batch
from ..sampling.digests import DIGEST_FORMAT
from .ledger import Ledger, LedgerEntry
from .legacy import batch_digests_v1

#: Statuses of a check whose data agrees with what the run recorded: ``replayed`` is a replayed run's batch that
#: matches what the run logged (never called "verified": another framework read it).
MATCHING = ("verified", "untrained", "prefetched", "replayed")
#: Statuses that say nothing was recomputed to agree or differ: no record, or a recorded run's step (written down while
#: training, its rows still resolving).
UNCHECKED = ("no-ledger", "recorded")


@dataclass
class Verification:
    """The ledger compared with a recomputation of one (step, rank)."""

    status: str  # "verified", "untrained", "mismatch", "no-ledger", "replayed" or "recorded" (a run's report adds "prefetched")
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
        """Whether the run's record of this batch agrees with the recomputation (None: no record, or a recorded step,
        which nothing recomputes); a replayed run's batch agrees when it matches what the run logged (``replayed``)."""
        return None if self.status in UNCHECKED else self.status in MATCHING

    @property
    def trained(self) -> bool | None:
        """Whether the trainer marked the step trained (None: no record)."""
        return None if self.status == "no-ledger" else self.status not in ("untrained", "prefetched")

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
