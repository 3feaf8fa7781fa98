"""The verifier: a run's ledger, and recomputed batches compared with what it recorded (:mod:`loaders.training.comparison`).

>>> verifier = Verifier(storage.join(run.directory, "ledger"), recompute)   # doctest: +SKIP
>>> verifier.verify(3, rank=0).status                                      # doctest: +SKIP
'verified'
"""

from __future__ import annotations

from typing import Callable

from ..sampling.batch import Batch
from .comparison import Verification, compare_with_ledger
from .ledger import Ledger


class Verifier:
    """The ledger in ``directory`` (opened on first use), checked against ``recompute(step, rank)``: the batch of
    ``rank`` at ``step`` under the world size in force then."""

    def __init__(self, directory: str, recompute: Callable[[int, int], Batch]) -> None:
        self.directory = directory
        self.recompute = recompute
        self._ledger: Ledger | None = None

    @property
    def ledger(self) -> Ledger:
        """What the trainer's readers recorded, per rank and step."""
        if self._ledger is None:
            self._ledger = Ledger(self.directory)
        return self._ledger

    def verify(self, step: int, rank: int = 0) -> Verification:
        """Recompute ``(step, rank)`` and compare with what the ledger recorded."""
        return self.compare(self.recompute(step, rank))

    def compare(self, batch: Batch) -> Verification:
        """Compare an already computed batch with the ledger record for its step, rank and world size."""
        return compare_with_ledger(self.ledger, batch)
