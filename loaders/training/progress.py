"""One rank's training progress: which batches it handed out, which the trainer finished, and their ledger records.

Shared by :class:`loaders.training.reader.Reader` and :class:`loaders.torch.Loader`. A batch counts as trained once the
trainer says so — ``log(step, ...)`` or ``mark_trained(step)``, each covering every earlier step handed out — so a
state saved while a framework has batches prefetched resumes with the first untrained one. With
``mark_on_handout=True`` a batch counts as trained when it is handed out (for loops that neither prefetch nor log).

A checkpoint is never ahead of the ledger: a mark is written to the ledger file as it is made (with every record
buffered before it), so a process killed after marking a step has its records of it on disk; ``state_dict()`` also
fsyncs them, so the state it returns is covered even through a crash of the machine.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Protocol

from .ledger import Ledger
from .ledger_writer import LedgerWriter
from .reader_state import StatefulRun, make_state, resume_step


class LoggedRun(StatefulRun, Protocol):
    """What progress needs of its run (a :class:`loaders.run.Run`): its ledger and world-size log."""

    @property
    def ledger(self) -> Ledger: ...

    def record_world_size(self, start_step: int, world_size: int) -> None: ...


class Progress:
    """Positions of rank ``rank`` of ``world_size``: ``trained`` (first step not finished) ≤ ``fetched`` (first step
    not handed out); writes ``batch``/``trained``/``metrics`` ledger records when ``ledger`` is true."""

    def __init__(
        self,
        run: LoggedRun,
        rank: int,
        world_size: int,
        *,
        start_step: int = 0,
        ledger: bool = True,
        flush_seconds: float = 2.0,
        mark_on_handout: bool = False,
        what: str = "reader",
    ) -> None:
        self.run = run
        self.rank = rank
        self.world_size = world_size
        self.trained = start_step
        self.fetched = start_step
        self.mark_on_handout = mark_on_handout
        self._ledger = ledger
        self._flush_seconds = flush_seconds
        self._what = what
        self._marked = False
        self._warned = False
        self.writer: LedgerWriter | None = None

    def open(self, *, record_world_size: bool = True) -> None:
        """Start the ledger (once): record the world size in force from here (rank 0) and open this rank's file."""
        if self.writer is not None or not self._ledger:
            return
        if record_world_size and self.rank == 0:
            self.run.record_world_size(self.trained, self.world_size)
        self.writer = self.run.ledger.writer(self.rank, self.world_size, flush_seconds=self._flush_seconds)

    def handed_out(self, step: int, summary: Callable[[], dict[str, Any]]) -> None:
        """The batch of ``step`` was just handed to the trainer (``summary`` gives its ledger record, when kept)."""
        if self.writer is not None:
            self.writer.record_summary(summary(), fetched=not self.mark_on_handout)
            if self.mark_on_handout:  # handed out means trained: on disk now, like any mark
                self.writer.flush()
        self.fetched = step + 1
        if self.mark_on_handout:
            self.trained = step + 1

    def mark_trained(self, step: int, *, strict: bool = True) -> None:
        """The trainer finished ``step`` and every step handed out before it.

        ``strict``: a step not handed out yet is an error (``log`` passes False: metrics of another step only log).
        """
        if step >= self.fetched:
            if strict:
                raise ValueError(f"step {step} cannot be marked trained: it was not handed out yet (next is {self.fetched})")
            return
        self._marked = True
        if self.mark_on_handout:
            return
        if self.writer is not None:
            for finished in range(self.trained, step + 1):
                self.writer.trained(finished)
            self.writer.flush()  # a mark is on disk before anything (another rank's checkpoint) can rely on it
        self.trained = max(self.trained, step + 1)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Record metrics for ``step`` and mark it trained if it was handed out."""
        self.open()
        if self.writer is not None and metrics:
            self.writer.log(step, **metrics)
        self.mark_trained(step, strict=False)

    def state_dict(self) -> dict[str, Any]:
        """The state to resume after the last trained step (see :mod:`loaders.training.reader_state`); writes and fsyncs
        the ledger first, so the state is never ahead of it."""
        self.flush(sync=True)
        if self.fetched > self.trained and not self._marked and not self.mark_on_handout and not self._warned:
            self._warned = True
            warnings.warn(
                f"batchscope {self._what} state: {self.fetched - self.trained} batch(es) were handed out but none was "
                f"marked trained, so this state resumes at step {self.trained} and delivers them again; call "
                f"log(step, ...) or mark_trained(step) after each step, or pass mark_on_handout=True",
                stacklevel=3,
            )
        return make_state(self.run, step=self.trained, fetched=self.fetched, world_size=self.world_size, rank=self.rank)

    def flush(self, *, sync: bool = False) -> None:
        """Write the ledger records buffered so far; ``sync``: and fsync them."""
        if self.writer is not None:
            self.writer.flush(sync=sync)

    def load_state_dict(self, state: dict[str, Any]) -> int:
        """Move both positions to where ``state`` resumes; returns that step."""
        step = resume_step(self.run, state, what=self._what)
        self.trained = self.fetched = step
        return step

    def close(self) -> None:
        """Stop the ledger's flush timer and write what is buffered."""
        if self.writer is not None:
            self.writer.close()
