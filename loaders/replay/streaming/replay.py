"""Replay a run that read through MosaicML Streaming: the samples every rank consumed at every step, recomputed by
Streaming's own code from the run's settings over its own (pinned) shard files, with their provenance, their fields
read by Streaming's own shard reader, and back from a sample to the steps that read it.

>>> import tempfile
>>> from loaders.replay.streaming import Launch, StreamSpec, demo_streams
>>> folder = demo_streams(tempfile.mkdtemp())  # two small MDS streams written by Streaming's MDSWriter
>>> replay = StreamingReplay(StreamingSettings(
...     streams=(StreamSpec(f"{folder}/web", proportion=0.75), StreamSpec(f"{folder}/code", proportion=0.25)),
...     launches=(Launch(batch_size=4, ranks_per_node=2, workers=2),), epochs=2, shuffle=True, num_canonical_nodes=2))
>>> replay.total_steps, replay.global_batch_size
(10, 8)
>>> [sample.position for sample in replay.batch(3, rank=1)]
[0, 1, 2, 3]
>>> first = replay.batch(3, rank=1)[0]
>>> "text" in replay.record(first)
True
>>> any(p.step == 3 and p.rank == 1 and p.position == 0 for p in replay.where(first.sample_id, epoch=first.epoch))
True
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ...errors import InvalidPlan, RankOutOfRange
from .cache import TableCache
from .library import Streaming, installed_version, streaming
from .order import epoch_table
from .records import renderable
from .schedule import Schedule, Segment
from .settings import StreamingSettings
from .source import DatasetView, PinnedFile, StreamSet, pin_file

#: Bumped when the layout of a cached epoch table changes.
_TABLE_LAYOUT = 1

STEP_MEANING = (
    "step s is the s-th batch every rank's DataLoader yielded, counting on across epochs (one pass over the "
    "DataLoader per epoch) and across launches (a launch resumed from a Streaming state dict starts at the step where "
    "its sample_in_epoch was reached); rank r is the global rank (node × ranks_per_node + local rank), and a rank's "
    "samples are listed in the order its DataLoader yielded them"
)


@dataclass(frozen=True)
class ReplayedSample:
    """One sample a rank consumed: where in the run (step, rank, position in the rank's batch, epoch, the
    ``DataLoader`` worker that produced it) and where it lives (Streaming's global sample id, stream, shard of the
    stream, the shard's file, and the sample's index within that shard)."""

    step: int
    rank: int
    position: int
    epoch: int
    worker: int
    sample_id: int
    stream: int
    shard: int
    shard_file: str
    row: int


@dataclass(frozen=True)
class SamplePosition:
    """Where a sample was read: step, rank, position in the rank's batch, and epoch."""

    step: int
    rank: int
    position: int
    epoch: int


@dataclass(frozen=True)
class LaunchSpan:
    """The steps one launch of the job ran (``start_step`` up to, not including, ``end_step``) and its world."""

    launch: int
    start_step: int
    end_step: int
    nodes: int
    ranks_per_node: int
    workers: int
    batch_size: int
    first_epoch: int
    resumed_at_sample: int

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def global_batch_size(self) -> int:
        return self.world_size * self.batch_size


class StreamingReplay:
    """A Streaming run, replayed: see the module docstring.

    ``pins`` (path → :class:`PinnedFile`, from :meth:`pin` when the run was attached) make every changed file a
    refusal naming it; ``cache_dir`` keeps each epoch's order (and its inverse) as memory-mapped files so that each is
    computed once, not once per process.
    """

    def __init__(self, settings: StreamingSettings, *, pins: Mapping[str, PinnedFile] | None = None, cache_dir: str | None = None) -> None:
        if not isinstance(settings, StreamingSettings):
            raise InvalidPlan(f"settings must be StreamingSettings, not {type(settings).__name__}")
        if settings.streaming_version is not None and installed_version() not in (None, settings.streaming_version):
            raise InvalidPlan(
                f"the run trained with mosaicml-streaming {settings.streaming_version} but {installed_version()} is installed; its order is "
                f"that version's code: pip install mosaicml-streaming=={settings.streaming_version}"
            )
        self.settings = settings
        self.lib: Streaming = streaming()
        for name, known in (
            ("shuffle_algo", self.lib.shuffle_algos),
            ("partition_algo", self.lib.partition_algos),
            ("batching_method", self.lib.batching_methods),
            ("sampling_method", ("balanced", "fixed")),
        ):
            if getattr(settings, name) not in known:
                raise InvalidPlan(
                    f"{name}={getattr(settings, name)!r} is not one of mosaicml-streaming {self.lib.version}'s: {', '.join(known)}"
                )
        self.data = StreamSet(settings, self.lib, pins=pins)
        self._cache = TableCache(cache_dir)
        self._lock = threading.RLock()
        self._views: dict[tuple[int, int], DatasetView] = {}
        key = {"settings": settings.to_json(), "streaming": self.lib.version, "index": self.data.fingerprint()}
        for launch in key["settings"]["launches"]:
            launch.pop("step")
        for name in ("epochs", "max_steps", "streaming_version"):
            key["settings"].pop(name)
        self._key = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
        self.schedule = Schedule(settings, self._table)
        self.fingerprint = hashlib.sha256(f"{self._key}:{self.schedule.total_steps}".encode()).hexdigest()

    # -- what the run is ------------------------------------------------------------------------------
    @property
    def total_steps(self) -> int:
        """Steps of the run (every launch's, in order)."""
        return self.schedule.total_steps

    @property
    def global_batch_size(self) -> int:
        """Samples of one full step across ranks on the first launch (a launch's own is in :meth:`launches`)."""
        first = self.settings.launches[0]
        return first.world_size * first.batch_size

    @property
    def step_meaning(self) -> str:
        """What a step, a rank and the order of a rank's samples mean here."""
        return STEP_MEANING

    @property
    def epoch_size(self) -> int:
        """Samples per epoch after Streaming's weighting of the streams (before its padding to the world)."""
        return int(self.data.epoch_size)

    def launches(self) -> list[LaunchSpan]:
        """Every launch with the steps it ran and its world."""
        out = []
        for index, segment in enumerate(self.schedule.segments):
            launch = self.settings.launches[segment.launch]
            end = self.schedule.segment_end(index)
            out.append(
                LaunchSpan(
                    segment.launch, segment.start_step, end, launch.nodes, launch.ranks_per_node, launch.workers,
                    launch.batch_size, segment.first_epoch, segment.drop_first,
                )
            )  # fmt: skip
        return out

    def world_size_at(self, step: int) -> int:
        """Ranks in force at ``step``."""
        self.schedule.check_step(step)
        return self.settings.launches[self.schedule.segments[self.schedule.segment_of(step)].launch].world_size

    def world_size_history(self) -> list[tuple[int, int]]:
        """``(start_step, world_size)`` for each launch."""
        return [(span.start_step, span.world_size) for span in self.launches()]

    def check_step(self, step: int) -> None:
        """Refuse a step outside the run, in one line (:class:`~loaders.errors.StepOutOfRange`)."""
        self.schedule.check_step(step)

    def epoch_at(self, step: int) -> int:
        """The epoch ``step`` belongs to."""
        return self.schedule.locate(step)[1]

    def files(self) -> list[str]:
        """Every file the run reads (each stream's ``index.json`` and shards): the files to pin."""
        return self.data.files()

    def pin(self) -> dict[str, PinnedFile]:
        """Pins of every file the run reads, as they are now (store them; pass them back as ``pins``)."""
        return {path: pin_file(path) for path in self.files()}

    def columns(self) -> list[dict[str, str]]:
        """Each stream's columns: name → MDS encoding."""
        return self.data.columns()

    # -- batches --------------------------------------------------------------------------------------
    def batch(self, step: int, rank: int = 0, *, world_size: int | None = None) -> list[ReplayedSample]:
        """The samples ``rank`` consumed at ``step``, in the order its ``DataLoader`` yielded them (``world_size``, when
        given, must be the one the step ran on: a replayed run has no other)."""
        index, epoch, row = self.schedule.locate(step)
        launch = self.settings.launches[self.schedule.segments[index].launch]
        if world_size is not None and world_size != launch.world_size:
            raise InvalidPlan(
                f"step {step} ran on {launch.world_size} rank(s), not {world_size}: a replayed run has only the worlds it ran on"
            )
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < launch.world_size:
            raise RankOutOfRange(
                f"rank {rank} is not in step {step}'s world: it ran on {launch.world_size} rank(s) (0..{launch.world_size - 1})"
            )
        entry = np.asarray(self._rows(index, epoch)[rank, row])
        ids = entry[1:][entry[1:] >= 0].astype(np.int64)
        shards = self.data.locate(ids)
        out = []
        for position, (sample_id, shard) in enumerate(zip(ids.tolist(), shards.tolist())):
            ref = self.data.shards[shard]
            out.append(
                ReplayedSample(
                    int(step), int(rank), position, epoch, int(entry[0]), sample_id, ref.stream, ref.shard, ref.path,
                    sample_id - ref.first_sample,
                )
            )  # fmt: skip
        return out

    def global_batch(self, step: int) -> list[list[ReplayedSample]]:
        """Every rank's batch at ``step``, by rank."""
        return [self.batch(step, rank) for rank in range(self.world_size_at(step))]

    # -- records --------------------------------------------------------------------------------------
    def decoded(self, sample: ReplayedSample | int) -> dict[str, Any]:
        """A sample's fields exactly as Streaming's shard reader decodes them (what ``StreamingDataset`` yielded)."""
        return self.data.read(sample.sample_id if isinstance(sample, ReplayedSample) else int(sample))

    def record(self, sample: ReplayedSample | int) -> dict[str, Any]:
        """A sample's fields as plain values a page renders: arrays as lists, images as ``{bytes, path}`` PNGs of the
        decoded pixels, JSON as its objects."""
        return {name: renderable(value) for name, value in self.decoded(sample).items()}

    # -- back from a sample ----------------------------------------------------------------------------
    def where(self, sample_id: int, *, epoch: int | None = None) -> list[SamplePosition]:
        """Every (step, rank, position) at which Streaming sample ``sample_id`` was read (in ``epoch``, or in any
        epoch), in step order; one epoch's inverse is computed once (O(N log N)), then each lookup is O(log N)."""
        if isinstance(sample_id, bool) or not isinstance(sample_id, (int, np.integer)) or not 0 <= sample_id < self.data.num_samples:
            raise InvalidPlan(f"sample id {sample_id} is out of range: the streams hold {self.data.num_samples} samples")
        out: list[SamplePosition] = []
        for index, segment in enumerate(self.schedule.segments):
            start, end = segment.start_step, self.schedule.segment_end(index)
            for each in self.schedule.epochs_of(index) if epoch is None else [epoch]:
                if each not in self.schedule.epochs_of(index):
                    continue
                table = self._rows(index, each)
                inverse = self._inverse(index, each, table)
                low, high = np.searchsorted(inverse[0], [sample_id, sample_id + 1])
                if low == high:
                    continue
                ranks, steps, width = table.shape
                rank, row, column = np.unravel_index(np.asarray(inverse[1, low:high]), (ranks, steps, width - 1))
                base = self.schedule.epoch_start(index, each)
                for r, b, c in zip(rank.tolist(), row.tolist(), column.tolist()):
                    if start <= base + b < end:
                        out.append(SamplePosition(base + b, r, c, each))
        return sorted(out, key=lambda p: (p.step, p.rank, p.position))

    # -- epoch tables ------------------------------------------------------------------------------------
    def _view(self, segment: Segment) -> DatasetView:
        launch = self.settings.launches[segment.launch]
        key = (segment.launch, segment.num_canonical_nodes)
        if key not in self._views:
            self._views[key] = DatasetView(
                self.data, self.settings, self.lib, num_canonical_nodes=segment.num_canonical_nodes,
                batch_size=launch.batch_size, initial_physical_nodes=segment.initial_physical_nodes,
            )  # fmt: skip
        return self._views[key]

    def _table_key(self, segment: Segment, epoch: int, what: str) -> str:
        drop = segment.drop_first if epoch == segment.first_epoch else 0
        return f"streaming-{self._key[:24]}-l{segment.launch}-e{epoch}-d{drop}-{what}{_TABLE_LAYOUT}"

    def _table(self, segment: Segment, epoch: int) -> np.ndarray:
        """Epoch ``epoch`` of ``segment`` (see :mod:`.order`), computed once."""
        drop = segment.drop_first if epoch == segment.first_epoch else 0

        def build() -> np.ndarray:
            with self._lock:
                launch = self.settings.launches[segment.launch]
                return epoch_table(self.lib, self._view(segment), launch, epoch=epoch, drop_first=drop, drop_last=self.settings.drop_last)

        return self._cache.get(self._table_key(segment, epoch, "order"), build)

    def _rows(self, index: int, epoch: int) -> np.ndarray:
        table = self._table(self.schedule.segments[index], epoch)
        self.schedule.check_epoch(index, epoch, table)
        return table

    def _inverse(self, index: int, epoch: int, table: np.ndarray) -> np.ndarray:
        """``[sorted sample ids, their flat positions in the epoch's id columns]`` of one epoch."""

        def build() -> np.ndarray:
            ids = np.asarray(table[:, :, 1:]).reshape(-1)
            order = np.argsort(ids, kind="stable")
            keep = order[ids[order] >= 0]
            return np.stack([ids[keep].astype(np.int64), keep.astype(np.int64)])

        return self._cache.get(self._table_key(self.schedule.segments[index], epoch, "inverse"), build)
