"""The settings of a run that read through MosaicML Streaming: its streams, the ``StreamingDataset`` arguments that fix
the order, and each launch of the job (its physical world, per-device batch size, and the state it resumed from).

Everything is a frozen dataclass that validates its values and round-trips through JSON, so a run's settings can be
stored beside it and replayed later.

>>> settings = StreamingSettings(
...     streams=(StreamSpec("data/web", proportion=0.7), StreamSpec("data/code", proportion=0.3)),
...     launches=(Launch(batch_size=4, ranks_per_node=2, workers=1),),
...     epochs=2, shuffle=True, num_canonical_nodes=4)
>>> StreamingSettings.from_json(settings.to_json()) == settings
True
>>> settings.launches[0].world_size
2
"""

from __future__ import annotations

import math
import os
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, Mapping

from ...errors import InvalidPlan


def _int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidPlan(f"{name}={value!r} is out of range: must be an integer >= {low}")


def _optional_int(name: str, value: Any, low: int) -> None:
    if value is not None:
        _int(name, value, low)


def _known(what: str, data: Mapping[str, Any], cls: type) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise InvalidPlan(f"{what} must be a JSON object, not {type(data).__name__}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise InvalidPlan(f"{what} has unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
    missing = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING and f.name not in data]
    if missing:
        raise InvalidPlan(f"{what} lacks the setting(s) {', '.join(missing)}")
    return dict(data)


@dataclass(frozen=True)
class StreamSpec:
    """One ``streaming.Stream``: the local folder holding its ``index.json`` and shards (``local``/``split`` as given to
    Streaming; ``local`` is made absolute, so stored settings do not depend on the working directory), and at most one
    of ``proportion``, ``repeat`` or ``choose``.

    >>> StreamSpec("/data/web", repeat=2.0).repeat
    2.0
    """

    local: str
    split: str = ""
    proportion: float | None = None
    repeat: float | None = None
    choose: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.local, str) or not self.local:
            raise InvalidPlan(f"stream local={self.local!r} must name the folder that holds the stream's index.json")
        object.__setattr__(self, "local", os.path.abspath(self.local))
        if not isinstance(self.split, str):
            raise InvalidPlan(f"stream {self.local}: split={self.split!r} must be a string")
        given = [name for name in ("proportion", "repeat", "choose") if getattr(self, name) is not None]
        if len(given) > 1:
            raise InvalidPlan(f"stream {self.local}: at most one of proportion, repeat, choose may be given (got {', '.join(given)})")
        for name in ("proportion", "repeat"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0
            ):
                raise InvalidPlan(f"stream {self.local}: {name}={value!r} is out of range: must be a finite number >= 0")
        _optional_int(f"stream {self.local}: choose", self.choose, 0)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StreamSpec:
        return cls(**_known("a stream", data, cls))


@dataclass(frozen=True)
class ResumeState:
    """The ``StreamingDataset`` state a launch resumed from: what ``state_dict()`` returned when the previous launch
    saved its checkpoint (``epoch``, ``sample_in_epoch``, and the ``num_canonical_nodes``, ``shuffle_seed`` and
    ``initial_physical_nodes`` it records).

    >>> ResumeState.from_state_dict({"epoch": 0, "sample_in_epoch": 96, "num_canonical_nodes": 4,
    ...                              "shuffle_seed": 9176, "initial_physical_nodes": 1}).sample_in_epoch
    96
    """

    epoch: int
    sample_in_epoch: int
    num_canonical_nodes: int | None = None
    shuffle_seed: int | None = None
    initial_physical_nodes: int | None = None

    def __post_init__(self) -> None:
        _int("resume state epoch", self.epoch, 0)
        _int("resume state sample_in_epoch", self.sample_in_epoch, 0)
        _optional_int("resume state num_canonical_nodes", self.num_canonical_nodes, 1)
        _optional_int("resume state shuffle_seed", self.shuffle_seed, 0)
        _optional_int("resume state initial_physical_nodes", self.initial_physical_nodes, 1)

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> ResumeState:
        """The state as ``StreamingDataset.state_dict()`` (or ``StreamingDataLoader.state_dict()``) wrote it."""
        return cls(**_known("a Streaming state dict", state, cls))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Launch:
    """One start of the training job: its physical world (``nodes`` × ``ranks_per_node`` ranks, each with a
    ``DataLoader`` of ``workers`` worker processes), the per-device ``batch_size`` given to both ``StreamingDataset``
    and the ``DataLoader``, and, for every launch after the first, the state it resumed from.

    ``step`` is the run's step at which the launch started; when None it is derived from ``resume`` (the step of the
    previous launch at which Streaming's ``sample_in_epoch`` was reached), and when given it is checked against that.

    >>> Launch(batch_size=8, ranks_per_node=2, nodes=2).world_size
    4
    """

    batch_size: int
    ranks_per_node: int = 1
    nodes: int = 1
    workers: int = 0
    resume: ResumeState | None = None
    step: int | None = None

    def __post_init__(self) -> None:
        _int("launch batch_size", self.batch_size, 1)
        _int("launch ranks_per_node", self.ranks_per_node, 1)
        _int("launch nodes", self.nodes, 1)
        _int("launch workers", self.workers, 0)
        _optional_int("launch step", self.step, 0)
        if self.resume is not None and not isinstance(self.resume, ResumeState):
            raise InvalidPlan(f"launch resume={self.resume!r} must be a ResumeState")

    @property
    def world_size(self) -> int:
        """Ranks of this launch (``nodes`` × ``ranks_per_node``)."""
        return self.nodes * self.ranks_per_node

    @property
    def workers_per_rank(self) -> int:
        """Worker partitions per rank as Streaming counts them (a ``DataLoader`` without workers is one)."""
        return max(1, self.workers)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["resume"] = None if self.resume is None else self.resume.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Launch:
        data = _known("a launch", data, cls)
        if data.get("resume") is not None:
            data["resume"] = ResumeState.from_state_dict(data["resume"])
        return cls(**data)


@dataclass(frozen=True)
class StreamingSettings:
    """What fixes a Streaming run's order: its streams, the ``StreamingDataset`` arguments (same names, same defaults
    as Streaming's), the ``DataLoader``'s ``drop_last``, how long the run went (``epochs``, optionally capped at
    ``max_steps``), and its launches in order.

    ``streaming_version`` is the mosaicml-streaming version the run trained with; when given, a replay refuses to run
    under another version (the order is that version's code).
    """

    streams: tuple[StreamSpec, ...]
    launches: tuple[Launch, ...]
    epochs: int
    max_steps: int | None = None
    shuffle: bool = False
    shuffle_algo: str = "py1e"
    shuffle_seed: int = 9176
    shuffle_block_size: int | None = None
    num_canonical_nodes: int | None = None
    partition_algo: str = "relaxed"
    batching_method: str = "random"
    sampling_method: str = "balanced"
    sampling_granularity: int = 1
    epoch_size: int | None = None
    drop_last: bool = False
    streaming_version: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "streams", tuple(self.streams))
        object.__setattr__(self, "launches", tuple(self.launches))
        if not self.streams or not all(isinstance(s, StreamSpec) for s in self.streams):
            raise InvalidPlan("streams must be one or more StreamSpec")
        if not self.launches or not all(isinstance(launch, Launch) for launch in self.launches):
            raise InvalidPlan("launches must be one or more Launch (the first start of the job, then each resumption)")
        if self.launches[0].resume is not None:
            raise InvalidPlan("the first launch starts the run: it has no resume state")
        for number, launch in enumerate(self.launches[1:], start=1):
            if launch.resume is None:
                raise InvalidPlan(f"launch {number} has no resume state: every launch after the first resumed from one")
        _int("epochs", self.epochs, 1)
        _optional_int("max_steps", self.max_steps, 1)
        _int("shuffle_seed", self.shuffle_seed, 0)
        _optional_int("shuffle_block_size", self.shuffle_block_size, 1)
        _optional_int("num_canonical_nodes", self.num_canonical_nodes, 1)
        _int("sampling_granularity", self.sampling_granularity, 1)
        _optional_int("epoch_size", self.epoch_size, 1)
        for name in ("shuffle", "drop_last"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidPlan(f"{name}={getattr(self, name)!r} must be true or false")
        for name in ("shuffle_algo", "partition_algo", "batching_method", "sampling_method"):
            if not isinstance(getattr(self, name), str):
                raise InvalidPlan(f"{name}={getattr(self, name)!r} must be a name")

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["streams"] = [s.to_json() for s in self.streams]
        data["launches"] = [launch.to_json() for launch in self.launches]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StreamingSettings:
        data = _known("the Streaming settings", data, cls)
        data["streams"] = tuple(StreamSpec.from_json(s) for s in data.get("streams") or ())
        data["launches"] = tuple(Launch.from_json(launch) for launch in data.get("launches") or ())
        return cls(**data)
