"""What a replayed run logged about its batches (``--batches FILE``), and a replayed batch compared with it.

A run that never read through batchscope has no ledger of digests; it may have logged, per step and rank, the
indices its sampler drew (what ``dataset[i]`` was asked for). One JSON object per line::

    {"step": 12, "rank": 1, "indices": [4031, 77, 912, 5]}

Steps and ranks count as the replay does (step 0 is the first batch). The lines are checked when the run is
attached (steps in range, ranks below the world size, integers) and kept in ``runs/<run>/logged.jsonl``; a replayed
batch whose indices equal the logged ones is ``replayed`` (it matches what the run logged), else ``mismatch``, naming
the positions; without a line, ``no-ledger``.

>>> parse_logged(['{"step": 0, "rank": 1, "indices": [3, 1]}'], where="log.jsonl", steps=4, world_size=2)
{(0, 1): [3, 1]}
"""

from __future__ import annotations

import json
from typing import Iterable

from ..errors import ReplayError
from ..sampling.batch import Batch
from ..training.verification import Verification

#: The status of a replayed batch that matches what its run logged.
MATCHES = "replayed"


def parse_logged(lines: Iterable[str], *, where: str, steps: int, world_size: int) -> dict[tuple[int, int], list[int]]:
    """``(step, rank) → indices`` from logged lines (the last line for a step and rank wins); one line naming a bad
    line's file and number otherwise."""
    found: dict[tuple[int, int], list[int]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError:
            raise ReplayError(f"{where}:{number}: not JSON: {line[:60]!r}") from None
        step, rank, indices = (data.get(k) for k in ("step", "rank", "indices")) if isinstance(data, dict) else (None, None, None)
        if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < steps:
            raise ReplayError(f"{where}:{number}: 'step' is {step!r}, not a step of the run (0 to {steps - 1})")
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < world_size:
            raise ReplayError(f"{where}:{number}: 'rank' is {rank!r}, not a rank of the run's {world_size}")
        if not isinstance(indices, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
            raise ReplayError(f"{where}:{number}: 'indices' is not a list of integers")
        found[(step, rank)] = indices
    return found


def logged_lines(logged: dict[tuple[int, int], list[int]]) -> str:
    """The stored form: one line per (step, rank), in order."""
    return "".join(json.dumps({"step": s, "rank": r, "indices": logged[(s, r)]}) + "\n" for s, r in sorted(logged))


def compare_logged(logged: list[int] | None, batch: Batch) -> Verification:
    """A replayed ``batch`` against the indices its run logged for that step and rank."""
    where = (batch.step, batch.rank, batch.world_size)
    if logged is None:
        return Verification("no-ledger", *where, batch.digest, None, [])
    computed = batch.indices
    differ = [i for i in range(max(len(logged), len(computed))) if i >= len(logged) or i >= len(computed) or logged[i] != computed[i]]
    if not differ:
        return Verification(MATCHES, *where, batch.digest, None, [])
    shown = ", ".join(
        f"#{i}: {logged[i] if i < len(logged) else None!r} logged, {computed[i] if i < len(computed) else None!r} replayed"
        for i in differ[:3]
    )
    reason = f"sampler indices differ at {len(differ)} position(s) ({shown}{', ...' if len(differ) > 3 else ''})"
    return Verification("mismatch", *where, batch.digest, None, [computed[i] for i in differ if i < len(computed)] or computed, [reason])
