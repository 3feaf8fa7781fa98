"""Which samples of the train dataset each (iteration, data-parallel rank, micro-batch) reads, and back.

Megatron-LM's pretraining sampler (``MegatronPretrainingSampler``, ``dataloader_type="single"``) walks the train
dataset in order from the consumed-sample count: each draw of ``micro_batch_size × data_parallel_size`` consecutive
indices gives rank r the r-th run of ``micro_batch_size``. Each iteration draws ``global batch ÷ (micro batch × data
parallel)`` micro-batches, where the global batch comes from megatron-core's micro-batch calculator (constant, or
ramping up with the consumed samples under ``--rampup-batch-size``). An iteration of ``--iterations-to-skip`` still
draws its micro-batches (Megatron-LM fast-forwards the data iterator), it only does not train on them.

So iteration s starts at ``consumed(s)``: the ramp-up iterations (few: bounded by the ramp-up samples) are tabulated
once with megatron-core's own calculator, every later iteration is ``consumed(R) + (s − R) × global batch``. A lookup
is O(log R), the inverse (sample → iteration, rank, micro-batch, position) too.

>>> s = Schedule(global_batch_size=8, micro_batch_size=2, data_parallel_size=2, train_samples=100)
>>> s.total_iterations, list(s.samples(3, rank=1, microbatch=1))
(12, [30, 31])
>>> s.locate(31)
Position(iteration=3, rank=1, microbatch=1, row=1)
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from ...errors import InvalidPlan, RankOutOfRange, StepOutOfRange

if TYPE_CHECKING:
    from .args import MegatronArgs


class Position(NamedTuple):
    """Where a sample was read: the iteration, the data-parallel rank, its micro-batch and its row in it."""

    iteration: int
    rank: int
    microbatch: int
    row: int


@dataclass(frozen=True)
class Schedule:
    """The sampler and batch-size arithmetic of a Megatron-LM run (see the module docstring)."""

    global_batch_size: int
    micro_batch_size: int
    data_parallel_size: int
    train_iters: int | None = None
    train_samples: int | None = None
    rampup_batch_size: tuple[int, int, int] | None = None
    iterations_to_skip: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        per_draw = self.micro_batch_size * self.data_parallel_size
        if self.global_batch_size % per_draw:
            raise InvalidPlan(
                f"data-parallel size {self.data_parallel_size} cannot produce global batch size {self.global_batch_size}: "
                f"it is not a multiple of micro batch size {self.micro_batch_size} × data-parallel size {self.data_parallel_size}"
            )
        starts, sizes = _ramp(self) if self.rampup_batch_size else ((), ())
        object.__setattr__(self, "_ramp_starts", starts)  # consumed samples at each ramp-up iteration
        object.__setattr__(self, "_ramp_sizes", sizes)  # its global batch size
        object.__setattr__(self, "_total", self._total_iterations())
        object.__setattr__(self, "_skips", frozenset(self.iterations_to_skip))

    @classmethod
    def of(cls, args: "MegatronArgs") -> Schedule:
        """The schedule of a run's arguments."""
        return cls(
            global_batch_size=args.global_batch_size,
            micro_batch_size=args.micro_batch_size,
            data_parallel_size=args.data_parallel_size,
            train_iters=args.train_iters,
            train_samples=args.train_samples,
            rampup_batch_size=args.rampup_batch_size,
            iterations_to_skip=args.iterations_to_skip,
        )

    # -- forward -----------------------------------------------------------------------------------------------------
    @property
    def total_iterations(self) -> int:
        """Iterations of the run: ``--train-iters``, or Megatron-LM's count for ``--train-samples`` (ramp-up included)."""
        return self._total

    @property
    def samples_per_draw(self) -> int:
        return self.micro_batch_size * self.data_parallel_size

    def check(self, iteration: int, rank: int | None = None) -> None:
        """Raise :class:`StepOutOfRange` / :class:`RankOutOfRange` naming the run's range."""
        if not 0 <= iteration < self._total:
            raise StepOutOfRange(f"iteration {iteration} is beyond the run: it has iterations 0..{self._total - 1}")
        if rank is not None and not 0 <= rank < self.data_parallel_size:
            raise RankOutOfRange(f"data-parallel rank {rank} does not exist: the run has ranks 0..{self.data_parallel_size - 1}")

    def consumed(self, iteration: int) -> int:
        """Samples consumed before ``iteration`` (Megatron-LM's ``args.consumed_train_samples`` at its start)."""
        ramp = len(self._ramp_starts)
        if iteration < ramp:
            return self._ramp_starts[iteration]
        base = self._ramp_starts[-1] + self._ramp_sizes[-1] if ramp else 0
        return base + (iteration - ramp) * self.global_batch_size

    def global_batch_size_at(self, iteration: int) -> int:
        return self._ramp_sizes[iteration] if iteration < len(self._ramp_sizes) else self.global_batch_size

    def microbatches_at(self, iteration: int) -> int:
        """Micro-batches each rank draws at ``iteration`` (megatron-core's ``get_num_microbatches()`` then)."""
        return self.global_batch_size_at(iteration) // self.samples_per_draw

    def skipped(self, iteration: int) -> bool:
        """Whether Megatron-LM skipped this iteration (``--iterations-to-skip``): its data was drawn, not trained on."""
        return iteration in self._skips

    def samples(self, iteration: int, *, rank: int, microbatch: int) -> range:
        """The train-dataset indices rank ``rank`` read in micro-batch ``microbatch`` of ``iteration``."""
        self.check(iteration, rank)
        if not 0 <= microbatch < self.microbatches_at(iteration):
            raise StepOutOfRange(f"iteration {iteration} has micro-batches 0..{self.microbatches_at(iteration) - 1}, not {microbatch}")
        start = self.consumed(iteration) + microbatch * self.samples_per_draw + rank * self.micro_batch_size
        return range(start, start + self.micro_batch_size)

    @property
    def consumed_total(self) -> int:
        """Samples the whole run consumed (read by some rank); indices at or past it were never read."""
        return self.consumed(self._total)

    # -- inverse -----------------------------------------------------------------------------------------------------
    def locate(self, sample: int) -> Position | None:
        """Where train-dataset index ``sample`` was read, or None when the run never reached it."""
        if not 0 <= sample < self.consumed_total:
            return None
        ramp = len(self._ramp_starts)
        if ramp and sample < self.consumed(ramp):
            iteration = bisect.bisect_right(self._ramp_starts, sample) - 1
        else:
            iteration = ramp + (sample - self.consumed(ramp)) // self.global_batch_size
        offset = sample - self.consumed(iteration)
        microbatch, within = divmod(offset, self.samples_per_draw)
        rank, row = divmod(within, self.micro_batch_size)
        return Position(iteration, rank, microbatch, row)

    # -- helpers -----------------------------------------------------------------------------------------------------
    def _total_iterations(self) -> int:
        if self.train_iters is not None:
            return self.train_iters
        if not self.rampup_batch_size:
            return self.train_samples // self.global_batch_size
        # Megatron-LM's update_train_iters: ramp-up iterations one by one, then whole global batches.
        iterations = consumed = 0
        ramp_samples = int(self.rampup_batch_size[2])
        while consumed <= ramp_samples and consumed <= self.train_samples:
            consumed += self.global_batch_size_at(iterations)
            iterations += 1
        if self.train_samples > consumed:
            iterations += (self.train_samples - consumed) // self.global_batch_size
        return iterations


def _ramp(schedule: Schedule) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Consumed samples and global batch size of each ramp-up iteration, from megatron-core's own calculator."""
    from ._extra import megatron_module

    calculators = megatron_module("megatron.core.num_microbatches_calculator")
    start, increment, ramp_samples = schedule.rampup_batch_size
    try:
        calculator = calculators.RampupBatchsizeNumMicroBatchesCalculator(
            schedule.global_batch_size,
            schedule.micro_batch_size,
            schedule.data_parallel_size,
            False,  # decrease_batch_size_if_needed
            1,  # rank: not 0, so the calculator logs nothing
            start,
            increment,
            ramp_samples,
        )
        starts, sizes, consumed = [], [], 0
        while True:
            calculator.update(consumed, consistency_check=True)  # what Megatron-LM's loop calls before each iteration
            size = calculator.get_current_global_batch_size()
            if size == schedule.global_batch_size and consumed > ramp_samples:
                break
            starts.append(consumed)
            sizes.append(size)
            consumed += schedule.samples_per_draw * calculator.get()
    except (AssertionError, ZeroDivisionError) as exc:
        raise InvalidPlan(
            f"--rampup-batch-size {start} {increment} {ramp_samples} with data-parallel size {schedule.data_parallel_size} "
            f"and micro batch size {schedule.micro_batch_size}: megatron-core refuses it ({exc or 'division by zero'})"
        ) from None
    return tuple(starts), tuple(sizes)
