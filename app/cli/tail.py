"""CLI: ``batchscope tail RUN``: follow a training run, one line per step as its ranks log it — the loss and the worst
sample (highest ``sample_loss``) with the URL of its anchor on the step/rank page. Any kind of run."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any, Optional

import typer

from app import urls
from loaders.run.kinds import claims, logged_steps

from .common import RootOption, console, friendly_errors, open_catalog

#: Seconds between looks at the ledger (it is read incrementally, so a look costs what was appended).
POLL_SECONDS = 0.25
#: Steps shown from before ``tail`` started, without ``--from``.
BACKLOG = 10


def install(app: typer.Typer) -> None:
    app.command("tail")(tail)


@dataclass(frozen=True)
class StepLine:
    """One step as ``tail`` prints it."""

    step: int
    loss: float | None
    worst: tuple[int, int, float, str] | None  # rank, position, sample loss, key
    ranks: int

    def text(self, run: str, base: str) -> str:
        loss = f"loss {self.loss:.4f}" if self.loss is not None else "loss not logged"
        line = f"step {self.step}  {loss}"
        if self.worst is not None:
            rank, position, value, key = self.worst
            anchor = base + urls.rank(run, self.step, rank) + urls.sample_anchor(position)
            line += f"  worst: rank {rank} #{position} sample_loss {value:.4f} key {key}  {anchor}"
        return line


def step_line(run: Any, step: int) -> StepLine:
    """The loss (mean over the ranks that logged it) and the worst sample of ``step`` from the run's ledger (the keys of
    a kind whose ledger holds no batches, a replayed run, come from its batch)."""
    world_size = run.world_size_at(step)
    losses, worst = [], None
    for rank in range(world_size):
        metrics = run.ledger.metrics(step, rank, world_size)
        if isinstance(metrics.get("loss"), (int, float)):
            losses.append(float(metrics["loss"]))
        per_sample = metrics.get("sample_loss")
        if not isinstance(per_sample, list):
            continue
        entry = run.ledger.entry(step, rank, world_size)
        keys = entry.keys if entry is not None else None
        if keys is None and not claims(run.kind).ledger_of_batches:
            keys = run.batch(step, rank).keys
        if keys is not None and len(per_sample) == len(keys):
            for position, value in enumerate(per_sample):
                if isinstance(value, (int, float)) and (worst is None or value > worst[2]):
                    worst = (rank, position, float(value), keys[position])
    return StepLine(step, sum(losses) / len(losses) if losses else None, worst, world_size)


def ready(run: Any, step: int, newest: int) -> bool:
    """Whether ``step`` is done: every rank in force logged its loss, or the ledger has moved two steps past it (or the
    run's ledger is not written while it trains: a replayed run's metrics were imported whole)."""
    if newest >= step + 2 or not claims(run.kind).ledger_of_batches:
        return True
    world_size = run.world_size_at(step)
    return all("loss" in run.ledger.metrics(step, rank, world_size) for rank in range(world_size))


def tail(
    run_name: Annotated[str, typer.Argument(metavar="RUN", help="Run name.")],
    start: Annotated[
        Optional[int], typer.Option("--from", min=0, help=f"First step printed (default: the last {BACKLOG} in the ledger).")
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Print the steps in the ledger now and exit.")] = False,
    idle: Annotated[
        Optional[float],
        typer.Option("--idle", min=0, help="Exit after this many seconds without a new step (default: follow until the run completes)."),
    ] = None,
    root: RootOption = None,
) -> None:
    """Follow RUN as it trains: each new step's loss and worst sample (highest sample_loss) as it arrives.

    Works on every kind of run (native, replayed, recorded). Exits when the run completes, after --idle seconds
    without a new step, or on Ctrl-C.
    """
    from app.settings import Settings

    base = Settings.from_env().url.rstrip("/")
    with friendly_errors():
        run = open_catalog(root).run(run_name)
        steps = logged_steps(run)
        following = start if start is not None else (steps[-BACKLOG] if len(steps) >= BACKLOG else 0)
    last_new = time.monotonic()
    try:
        while True:
            steps = logged_steps(run)
            newest = steps[-1] if steps else -1
            printed = False
            while following <= newest and (once or ready(run, following, newest)):
                if run.ledger.entry(following, 0, run.world_size_at(following)) is not None or following in steps:
                    console.print(step_line(run, following).text(run.name, base), highlight=False, soft_wrap=True)
                following += 1
                printed = True
            total = run.total_steps
            if once or not claims(run.kind).ledger_of_batches or (total is not None and following >= total):
                return  # a replayed run's ledger does not grow: what it imported is all there is
            now = time.monotonic()
            if printed:
                last_new = now
            elif idle is not None and now - last_new > idle:
                return
            time.sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        return
