"""The production reader: prefetching iterator of Batches for one rank, resumable in O(1), writing the ledger."""

from __future__ import annotations

import collections
import concurrent.futures as cf
from typing import Any, Iterator, Protocol

from ..errors import RankOutOfRange
from ..sampling.batch import Batch
from ..sampling.collate import collate_numpy
from ..sampling.plan import ReadPlan
from .ledger_writer import batch_summary
from .progress import LoggedRun, Progress
from .reader_state import STATE_FORMAT

__all__ = ["STATE_FORMAT", "ReadableRun", "Reader", "default_prefetch", "default_steps_per_task", "default_threads"]


#: Samples per background task for plans whose samples are plain records (larger tasks amortize the order
#: arithmetic and keep the decoder busy); plans with transforms or packing compute 8 steps per task.
TASK_SAMPLES = 16384


class ReadableRun(LoggedRun, Protocol):
    """What a reader needs of its run (a :class:`loaders.run.Run`, whose :meth:`~loaders.run.Run.reader` makes one)."""

    plan: ReadPlan

    @property
    def global_batch_size(self) -> int: ...

    def check_world_size(self, world_size: int) -> None: ...

    def batches(self, steps: range, rank: int = 0, *, world_size: int) -> list[Batch]: ...

    def prefetch(self, steps: range, rank: int = 0, *, world_size: int) -> None: ...


def _plain_records(run: ReadableRun) -> bool:
    """Whether the plan's samples are records as stored (no transforms, no packing)."""
    plan = run.plan
    return plan.pack is None and not plan.document_transforms and not any(s.transforms for s in plan.sources)


def default_steps_per_task(run: ReadableRun, world_size: int) -> int:
    """How many consecutive steps one task computes, by default."""
    if _plain_records(run):
        return max(1, min(256, TASK_SAMPLES * world_size // run.global_batch_size))
    return 8


def default_prefetch(run: ReadableRun) -> int:
    """How many tasks are computed ahead on background threads, by default.

    For plain records the heavy work (reading, verifying, decoding and
    converting row groups) already runs ahead on the decoder pool, and
    assembling a batch is a few vectorized operations: doing that in the
    calling thread avoids a second Python thread contending for the GIL.
    Transforms (tokenizing, packing, cropping) run on background threads.
    """
    return 0 if _plain_records(run) else 2


def default_threads(run: ReadableRun) -> int:
    """How many background threads compute those tasks, by default: two for plans with transforms or packing, so one
    packs and digests (Python, holding the GIL) while the other waits on the tokenizer (which releases it and runs on
    every core); one otherwise."""
    return 1 if _plain_records(run) else 2


class Reader:
    """Iterate the batches rank ``rank`` of ``world_size`` reads, from ``start_step`` on.

    Batches are computed in tasks of ``steps_per_task`` consecutive steps
    with the same function as :meth:`Run.batch`; while a task is assembled, a
    decoder pool already reads, verifies, decodes and converts the row groups
    of the next one. With ``prefetch`` > 0, up to that many tasks are computed
    ahead on ``threads`` background threads (the default for plans with
    transforms, two of them: :func:`default_threads`; plain-record plans
    assemble in the calling thread, see :func:`default_prefetch`). ``state_dict()`` is tiny and
    ``load_state_dict()`` resumes in O(1) at any world size the plan allows;
    the first tasks after a start or resume are short (1, 2, 4... steps), so
    the first batch comes quickly.

    **State means trained.** ``state_dict()`` resumes after the last batch the
    trainer *finished*: ``log(step, ...)`` or ``mark_trained(step)`` (each
    covering every earlier step) moves it, so batches a framework prefetched
    but never trained are delivered again after a resume. The ledger records
    each batch as ``fetched`` when handed out and ``trained`` when marked. A
    loop that never logs nor marks would resume at its start (``state_dict``
    warns); pass ``mark_on_handout=True`` to count a batch as trained when it
    is handed out (only right for loops that do not prefetch).

    Training loops that only need the records or collated arrays should use
    ``batch.records`` / ``batch.inputs`` / :meth:`numpy`: ``batch.samples``
    makes one ``Sample`` object per sample on first access.

    >>> with run.reader(rank=0, world_size=2) as reader:   # doctest: +SKIP
    ...     for batch in reader:
    ...         loss = train_step(batch)
    ...         reader.log(batch.step, loss=loss)
    """

    def __init__(
        self,
        run: ReadableRun,
        rank: int,
        world_size: int,
        *,
        start_step: int = 0,
        end_step: int | None = None,
        prefetch: int | None = None,
        threads: int | None = None,
        steps_per_task: int | None = None,
        ledger: bool = True,
        worker: int = 0,
        num_workers: int = 1,
        flush_seconds: float = 2.0,
        mark_on_handout: bool = False,
    ) -> None:
        run.check_world_size(world_size)
        if not 0 <= rank < world_size:
            raise RankOutOfRange(f"rank {rank} is out of range: must be in [0, {world_size})")
        if not 0 <= worker < num_workers:
            raise ValueError(f"worker {worker} is out of range: must be in [0, {num_workers})")
        self.run = run
        self.rank = rank
        self.world_size = world_size
        self.next_step = start_step
        self.end_step = run.total_steps if end_step is None else min(end_step, run.total_steps)
        self.prefetch = max(0, prefetch if prefetch is not None else default_prefetch(run))
        self.worker = worker
        self.num_workers = num_workers
        self._threads = max(1, threads if threads is not None else default_threads(run))
        self.steps_per_task = max(1, steps_per_task if steps_per_task is not None else default_steps_per_task(run, world_size))
        self._pool: cf.ThreadPoolExecutor | None = None
        self._pending: collections.deque[tuple[int, cf.Future[Batch]]] = collections.deque()
        self.progress = Progress(
            run, rank, world_size, start_step=start_step, ledger=ledger, flush_seconds=flush_seconds, mark_on_handout=mark_on_handout
        )
        self._started = False

    # -- state ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Where a resume continues: after the last trained step (see :mod:`loaders.training.reader_state` for the fields).

        Also flushes the ledger, so everything before a saved state is on disk.
        """
        return self.progress.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at ``state["step"]``; refuses a state saved under another run, plan or read format."""
        step = self.progress.load_state_dict(state)
        if self._started:
            self._drain()
        self.next_step = step

    def mark_trained(self, step: int) -> None:
        """The trainer finished ``step`` (and every step handed out before it): a state saved now resumes after it."""
        self.progress.mark_trained(step)

    # -- iteration ----------------------------------------------------------------------
    def _my_tasks(self) -> Iterator[range]:
        """This worker's steps from ``next_step`` on, in runs of up to ``steps_per_task`` consecutive steps.

        Worker ``w`` of ``n`` takes steps ``s`` with ``(s // steps_per_task) % n == w``
        (aligned blocks), so workers together deliver every step exactly once.
        """
        size = self.steps_per_task
        if self.num_workers == 1:  # ramp up: the first batch after a start or resume comes from a one-step task
            step, ramp = self.next_step, 1
            while step < self.end_step:
                stop = min(step + ramp, self.end_step)
                yield range(step, stop)
                step, ramp = stop, min(ramp * 2, size)
            return
        block = self.next_step // size
        while block * size < self.end_step:
            if block % self.num_workers == self.worker:
                start = max(block * size, self.next_step)
                stop = min((block + 1) * size, self.end_step)
                if start < stop:
                    yield range(start, stop)
            block += 1

    def _tasks_and_next(self) -> Iterator[tuple[range, range | None]]:
        """Each of :meth:`_my_tasks` with the task after it (None for the last), whose row groups it stages."""
        tasks = self._my_tasks()
        steps = next(tasks, None)
        while steps is not None:
            ahead = next(tasks, None)
            yield steps, ahead
            steps = ahead

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        self.progress.open(record_world_size=self.worker == 0)
        if self.prefetch:
            self._pool = cf.ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="batchscope-read")

    def _compute(self, steps: range, ahead: range | None = None) -> list[Batch]:
        if ahead is not None:  # let the decoder start on the next task's row groups while this one is assembled
            self.run.prefetch(ahead, self.rank, world_size=self.world_size)
        return self.run.batches(steps, self.rank, world_size=self.world_size)

    def _drain(self) -> None:
        while self._pending:
            _, future = self._pending.popleft()
            future.cancel()

    def __iter__(self) -> Iterator[Batch]:
        self._start()
        if self._pool is None:
            for steps, ahead in self._tasks_and_next():
                for batch in self._compute(steps, ahead):
                    yield self._deliver(batch)
            return
        for steps, ahead in self._tasks_and_next():
            self._pending.append((steps.start, self._pool.submit(self._compute, steps, ahead)))
            if len(self._pending) > self.prefetch:
                for batch in self._pending.popleft()[1].result():
                    yield self._deliver(batch)
        while self._pending:
            for batch in self._pending.popleft()[1].result():
                yield self._deliver(batch)

    def _deliver(self, batch: Batch) -> Batch:
        self.progress.handed_out(batch.step, lambda: batch_summary(batch))
        self.next_step = batch.step + 1
        return batch

    def numpy(self) -> Iterator[dict[str, Any]]:
        """The same batches collated to numpy arrays (for JAX and plain numpy trainers)."""
        for batch in self:
            yield collate_numpy(batch)

    def log(self, step: int, **metrics: Any) -> None:
        """Record metrics (loss, per-sample loss...) for ``step`` in the ledger and mark it trained."""
        self.progress.log(step, metrics)

    def close(self) -> None:
        """Flush the ledger and stop the prefetch threads."""
        self._drain()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self.progress.close()

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
