"""The reader state dict: what a checkpoint stores to resume a rank, and the checks before resuming from one.

A state is a small plain dict::

    {"format": "batchscope.reader/2", "run": "llm-7", "fingerprint": "...", "read_format": 2,
     "step": 1235, "fetched": 1237, "world_size": 8, "rank": 3}

``step`` is where a resume continues: the first step the trainer has not finished (``step - 1`` is the last batch
it marked trained). ``fetched`` is the first step not yet handed out; the batches in ``[step, fetched)`` were
prefetched but not trained and are delivered again after a resume. It is informational only.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..errors import StateMismatch

STATE_FORMAT = "batchscope.reader/2"
#: States saved before "trained" existed: ``step`` was the next step to hand out. Still loaded (the fingerprint
#: pins the run, and with it its read format), and resumed at that step as before.
LEGACY_STATE_FORMAT = "batchscope.reader/1"


class StatefulRun(Protocol):
    """What a reader state names of its run (a :class:`loaders.run.Run`)."""

    name: str
    fingerprint: str
    read_format: int

    @property
    def total_steps(self) -> int: ...


def make_state(run: StatefulRun, *, step: int, fetched: int, world_size: int, rank: int) -> dict[str, Any]:
    """The state of rank ``rank`` of ``world_size`` that has trained every step before ``step``.

    >>> make_state(run, step=12, fetched=13, world_size=2, rank=0)["step"]   # doctest: +SKIP
    12
    """
    return {
        "format": STATE_FORMAT,
        "run": run.name,
        "fingerprint": run.fingerprint,
        "read_format": run.read_format,
        "step": step,
        "fetched": fetched,
        "world_size": world_size,
        "rank": rank,
    }


def resume_step(run: StatefulRun, state: dict[str, Any], *, what: str = "reader") -> int:
    """The step a reader of ``run`` resumes at from ``state``; :class:`StateMismatch` when the state is not ``run``'s.

    Refuses, each with a message naming both sides: a dict that is no reader state, a state saved under another
    read format, and a state of another run or plan.
    """
    fmt = state.get("format") if isinstance(state, dict) else None
    if fmt not in (STATE_FORMAT, LEGACY_STATE_FORMAT):
        raise StateMismatch(f"not a batchscope {what} state (format {fmt!r}; expected {STATE_FORMAT!r})")
    if fmt == STATE_FORMAT and state.get("read_format") != run.read_format:
        raise StateMismatch(
            f"{what} state was saved under read format {state.get('read_format')!r}, but run {run.name!r} "
            f"reads format {run.read_format}: the same step means other samples, so it cannot resume from it"
        )
    if state.get("run") != run.name or state.get("fingerprint") != run.fingerprint:
        raise StateMismatch(
            f"{what} state belongs to run {state.get('run')!r} (plan {str(state.get('fingerprint'))[:12]}), "
            f"not run {run.name!r} (plan {run.fingerprint[:12]})"
        )
    step = state.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= run.total_steps:
        raise StateMismatch(f"{what} state has step {step!r}, outside run {run.name!r} (0 to {run.total_steps})")
    return step
