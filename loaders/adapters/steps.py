"""What a trainer's step is in batchscope steps, and refusing a trainer configuration the run cannot feed.

A batchscope step is one batch of every rank. A framework's optimizer step trains ``accumulate`` of them (its
gradient accumulation), so a job of ``max_steps`` optimizer steps reads ``max_steps × accumulate`` batchscope steps.

>>> batches_needed(10, 2)
20
"""

from __future__ import annotations

from typing import Protocol

from ..errors import InvalidPlan


class SizedRun(Protocol):
    """What the check needs of a run (a :class:`loaders.run.Run`)."""

    name: str

    @property
    def total_steps(self) -> int: ...


def batches_needed(max_steps: int, accumulate: int) -> int:
    """Batchscope steps (batches per rank) that ``max_steps`` optimizer steps of ``accumulate`` batches read."""
    return max_steps * max(1, int(accumulate))


def check_optimizer_steps(run: SizedRun, max_steps: int, accumulate: int, *, arguments: str) -> None:
    """Refuse ``max_steps`` optimizer steps of ``accumulate`` batches each when ``run`` has fewer steps, naming both
    numbers and the largest ``max_steps`` that fits; ``arguments`` names the setting as the framework spells it.

    >>> check_optimizer_steps(run, 10, 2, arguments="Trainer(max_steps=10, accumulate_grad_batches=2)")   # doctest: +SKIP
    Traceback (most recent call last):
    loaders.errors.InvalidPlan: Trainer(max_steps=10, accumulate_grad_batches=2) needs 20 batches per rank, but run lm has 12 steps: ...
    """
    needed = batches_needed(max_steps, accumulate)
    if needed > run.total_steps:
        raise InvalidPlan(
            f"{arguments} needs {needed} batches per rank, but run {run.name} has {run.total_steps} steps: set max_steps "
            f"to at most {run.total_steps // max(1, int(accumulate))}, or create a run with more steps"
        )
