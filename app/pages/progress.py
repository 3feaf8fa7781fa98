"""How far a run has got, for every kind of run: the steps its ledger holds, its last loss, whether it is still being
written — the "live" marker of the run, step and step/rank pages, the page ``/runs/{run}/live`` that their script
polls, and ``batchscope tail``.

A run's ledger grows while it trains; :attr:`RunProgress.version` changes whenever anything is appended (a hash of
the ledger files' names and sizes), so a page only asks for its live parts again when there is something new. A kind
whose ledger holds no batches (a replayed run: its metrics were imported when it was attached) counts the steps its
loss was logged for, and its status is its label.

>>> step_label(None, 41)
'step 41 (run length not known yet)'
>>> step_label(100, 41)
'step 41 of 100'
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from loaders import Run
from loaders.run.kinds import claims, logged_steps

from .. import urls
from ..jsonable import html_only
from .common import Link

#: A run whose ledger got a record within this many seconds (and that has steps left) is running.
RUNNING_SECONDS = 120
#: How often a live page asks whether the run moved on (milliseconds).
POLL_MS = 500


def step_label(total: int | None, step: int) -> str:
    """How far a run has got, in words."""
    return f"step {step} of {total}" if total is not None else f"step {step} (run length not known yet)"


@dataclass
class RunProgress:
    """Where a run's ledger is: ``status`` is ``complete``, ``running`` (written to within :data:`RUNNING_SECONDS`),
    ``stopped`` or ``not started`` (for a kind whose ledger holds no batches, its label: ``replayed``); ``version``
    changes whenever the ledger grows; ``final``: nothing will move it on (a page stops asking)."""

    run: str
    kind: str
    label: str
    total_steps: int | None
    logged_steps: int
    last_step: int | None
    last_step_url: str | None
    last_loss: float | None
    last_loss_step: int | None
    last_time: float | None
    seconds_since: float | None
    status: str
    version: str
    url: str
    poll_ms: int = POLL_MS
    text: str = html_only("")
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)

    @property
    def live(self) -> bool:
        return self.status == "running"

    @property
    def final(self) -> bool:
        return self.status not in ("running", "stopped", "not started")


def progress(run: Run, *, now: float | None = None) -> RunProgress:
    """How far ``run`` has got, from its ledger (``now`` is the clock, for tests)."""
    ledger, kind = run.ledger, claims(run.kind)
    signature = ledger.signature()
    losses = ledger.series("loss", world_size_at=run.world_size_at)
    steps = logged_steps(run)
    last = steps[-1] if steps else None
    times = [e.time for e in ledger.entries()[-64:]] if steps and kind.ledger_of_batches else []
    last_time = max(times) if times else None
    clock = time.time() if now is None else now
    total = run.total_steps
    if not kind.ledger_of_batches:
        status = kind.label
    elif last is None:
        status = "not started"
    elif total is not None and last >= total - 1:
        status = "complete"
    elif last_time is not None and clock - last_time <= RUNNING_SECONDS:
        status = "running"
    else:
        status = "stopped"
    version = hashlib.sha256(repr(signature).encode()).hexdigest()[:16]
    found = RunProgress(
        run=run.name,
        kind=run.kind,
        label=kind.label,
        total_steps=total,
        logged_steps=len(steps),
        last_step=last,
        last_step_url=urls.step(run.name, last) if last is not None else None,
        last_loss=losses[-1][1] if losses else None,
        last_loss_step=losses[-1][0] if losses else None,
        last_time=last_time,
        seconds_since=round(clock - last_time, 1) if last_time is not None else None,
        status=status,
        version=version,
        url=urls.run_live(run.name),
    )
    found.text = _text(found)
    found.title = f"{run.name} · live"
    found.crumbs = [Link("runs", urls.home()), Link(run.name, urls.run(run.name)), Link("live", found.url)]
    return found


def _text(p: RunProgress) -> str:
    if p.last_step is None:
        return "nothing in the ledger yet"
    text = step_label(p.total_steps, p.last_step)
    if p.last_loss is not None:
        text += f", loss {p.last_loss:.4g} at step {p.last_loss_step}"
    return text
