"""Steps of a Streaming run across epochs and launches: which launch, epoch and batch of the epoch a step is.

A step is one batch of every rank's ``DataLoader``: the run iterates the ``DataLoader`` once per epoch, so the steps
of epoch ``e`` follow those of epoch ``e - 1``. A launch that resumed from a state dict starts at the step where the
previous launch's ``sample_in_epoch`` was reached (what the previous launch did after that checkpoint is not part of
the run), replays the rest of that epoch on its own world, then the following epochs.

Every epoch of a launch that starts at the epoch's beginning has the same number of steps (Streaming pads and drops
by the shape of its partition, which no epoch's shuffle changes); the replay checks that on every epoch it computes.

>>> default_canonical_nodes("py1e", nodes=2), default_canonical_nodes("py1s", nodes=2)
(2, 128)
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...errors import InvalidPlan, StepOutOfRange
from .settings import StreamingSettings


def default_canonical_nodes(shuffle_algo: str, *, nodes: int) -> int:
    """``num_canonical_nodes`` when none is given, as ``StreamingDataset`` resolves it on the run's first launch."""
    return 64 * nodes if shuffle_algo in ("py1s", "py2s") else nodes


@dataclass(frozen=True)
class Segment:
    """The steps one launch contributed: from ``start_step``, from sample ``drop_first`` of epoch ``first_epoch`` on."""

    launch: int
    start_step: int
    first_epoch: int
    drop_first: int
    num_canonical_nodes: int
    initial_physical_nodes: int | None


class Schedule:
    """Steps ↔ (launch, epoch, batch of the epoch).

    ``table(segment, epoch)`` is the epoch's table (see :mod:`.order`); only the epochs needed to place the launches
    and count the run's steps are computed here: each launch's first epoch, and one full epoch per launch.
    """

    def __init__(self, settings: StreamingSettings, table: Callable[[Segment, int], np.ndarray]) -> None:
        self.settings = settings
        self._table = table
        first = settings.launches[0]
        canonical = settings.num_canonical_nodes or default_canonical_nodes(settings.shuffle_algo, nodes=first.nodes)
        self.segments: list[Segment] = [Segment(0, 0, 0, 0, canonical, None)]
        self._full_steps: dict[int, int] = {}
        for number, launch in enumerate(settings.launches[1:], start=1):
            state = launch.resume
            assert state is not None  # settings validate it
            if settings.num_canonical_nodes is None and launch.nodes != first.nodes:
                raise InvalidPlan(
                    f"launch {number} runs on {launch.nodes} node(s), launch 0 on {first.nodes}, and num_canonical_nodes is not given: "
                    "Streaming then takes it from the state dict or from the new node count, depending on which its dataset "
                    f"saw last, which the settings cannot say; give num_canonical_nodes (the state dict records it: {state.num_canonical_nodes})"
                )
            for name, value, expected in (
                ("num_canonical_nodes", state.num_canonical_nodes, canonical),
                ("shuffle_seed", state.shuffle_seed, settings.shuffle_seed),
                ("initial_physical_nodes", state.initial_physical_nodes, first.nodes),
            ):
                if value is not None and value != expected:
                    raise InvalidPlan(f"launch {number} resumed from a state with {name}={value}, but the run's is {expected}")
            if state.epoch >= settings.epochs:
                raise InvalidPlan(f"launch {number} resumed in epoch {state.epoch}, but the run has {settings.epochs} epoch(s)")
            segment = Segment(number, 0, state.epoch, state.sample_in_epoch, canonical, first.nodes)
            start = self._resume_step(segment, state.sample_in_epoch)
            if launch.step is not None and launch.step != start:
                raise InvalidPlan(
                    f"launch {number} is said to start at step {launch.step}, but its state (epoch {state.epoch}, "
                    f"sample_in_epoch {state.sample_in_epoch}) is where step {start} starts"
                )
            self.segments.append(Segment(number, start, state.epoch, state.sample_in_epoch, canonical, first.nodes))
        self._starts = [segment.start_step for segment in self.segments]
        last = self.segments[-1]
        end = self.epoch_start(len(self.segments) - 1, settings.epochs)
        self.total_steps = end if settings.max_steps is None else min(end, settings.max_steps)
        for number, segment in enumerate(self.segments[1:], start=1):
            if segment.start_step >= self.total_steps and segment is not last:
                raise InvalidPlan(
                    f"launch {number} starts at step {segment.start_step}, after the run's last step ({self.total_steps - 1})"
                )

    # -- counting --------------------------------------------------------------------------------------
    def epoch_steps(self, index: int, epoch: int) -> int:
        """How many steps segment ``index`` has in ``epoch`` (its first epoch may be a resumed, shorter one)."""
        segment = self.segments[index]
        if epoch == segment.first_epoch and segment.drop_first:
            return int(self._table(segment, epoch).shape[1])
        if index not in self._full_steps:
            self._full_steps[index] = int(self._table(segment, segment.first_epoch + (1 if segment.drop_first else 0)).shape[1])
        return self._full_steps[index]

    def check_epoch(self, index: int, epoch: int, table: np.ndarray) -> None:
        """Refuse an epoch whose step count differs from the one the run's steps were counted with."""
        counted = self.epoch_steps(index, epoch)
        found = int(table.shape[1])
        if found != counted:
            raise InvalidPlan(
                f"Streaming gives launch {self.segments[index].launch} {found} steps in epoch {epoch}, not {counted} like its other epochs"
            )

    def epoch_start(self, index: int, epoch: int) -> int:
        """The step at which segment ``index`` starts ``epoch`` (``epoch`` may be one past the last)."""
        segment = self.segments[index]
        if epoch <= segment.first_epoch:
            return segment.start_step
        first = self.epoch_steps(index, segment.first_epoch)
        full = epoch - segment.first_epoch - 1  # full epochs after the first (none: no other epoch is computed)
        return segment.start_step + first + (full * self.epoch_steps(index, segment.first_epoch + 1) if full else 0)

    def _resume_step(self, segment: Segment, sample_in_epoch: int) -> int:
        """The step of the previous segment at which ``sample_in_epoch`` samples of ``segment.first_epoch`` were done."""
        previous_index = len(self.segments) - 1
        previous = self.segments[previous_index]
        epoch = segment.first_epoch
        if epoch < previous.first_epoch:
            raise InvalidPlan(
                f"launch {segment.launch} resumed in epoch {epoch}, before launch {previous.launch} started (epoch {previous.first_epoch})"
            )
        table = self._table(previous, epoch)
        world = self.settings.launches[previous.launch].world_size
        offset = previous.drop_first if epoch == previous.first_epoch else 0
        sizes = (table[0, :, 1:] >= 0).sum(axis=1) if table.size else np.zeros(0, np.int64)
        done = offset + world * np.concatenate([[0], np.cumsum(sizes)])
        found = np.flatnonzero(done == sample_in_epoch)
        if not len(found):
            raise InvalidPlan(
                f"launch {segment.launch} resumed at sample_in_epoch {sample_in_epoch} of epoch {epoch}, where no step of launch "
                f"{previous.launch} ends (its steps end at samples {', '.join(map(str, done[:6].tolist()))}…)"
            )
        return self.epoch_start(previous_index, epoch) + int(found[0])

    # -- looking up ------------------------------------------------------------------------------------
    def check_step(self, step: int) -> None:
        """Refuse a step outside the run, in one line."""
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or not 0 <= step < self.total_steps:
            raise StepOutOfRange(f"step {step} is not in this run: it has steps 0..{self.total_steps - 1}")

    def segment_of(self, step: int) -> int:
        """The index of the segment that ran ``step``."""
        return bisect.bisect_right(self._starts, step) - 1

    def segment_end(self, index: int) -> int:
        """One past the last step of segment ``index``."""
        return self.segments[index + 1].start_step if index + 1 < len(self.segments) else self.total_steps

    def locate(self, step: int) -> tuple[int, int, int]:
        """``(segment index, epoch, batch of the epoch)`` of ``step``."""
        self.check_step(step)
        index = self.segment_of(step)
        segment = self.segments[index]
        into = step - segment.start_step
        first = self.epoch_steps(index, segment.first_epoch)
        if into < first:
            return index, segment.first_epoch, into
        per_epoch = max(1, self.epoch_steps(index, segment.first_epoch + 1))  # check_step leaves no step in empty epochs
        epochs, batch = divmod(into - first, per_epoch)
        return index, segment.first_epoch + 1 + epochs, batch

    def epochs_of(self, index: int) -> range:
        """The epochs segment ``index`` ran (some of them, or all)."""
        segment = self.segments[index]
        end = self.segment_end(index)
        if end <= segment.start_step:
            return range(segment.first_epoch, segment.first_epoch)
        return range(segment.first_epoch, self.locate(end - 1)[1] + 1)
