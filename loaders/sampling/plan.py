"""Read plans: frozen, validated, serializable descriptions of what a run reads and how (and their sources once
resolved to versions)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import InvalidPlan
from ..transforms import Pack, Transform, transform_from_json


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise InvalidPlan(f"{name}={value!r} is out of range: must be an integer {allowed}")


@dataclass(frozen=True)
class Source:
    """One input of a mixture: ``name@tag-or-version``, a weight, and document transforms for it.

    >>> Source("web-text@v1", weight=0.7).name
    'web-text'
    """

    ref: str
    weight: float | None = None
    transforms: tuple[Transform, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.ref, str) or not self.ref.split("@")[0]:
            raise InvalidPlan(f"source ref {self.ref!r} must look like 'dataset@tag-or-version'")
        if self.weight is not None and (
            isinstance(self.weight, bool) or not isinstance(self.weight, (int, float)) or not math.isfinite(self.weight) or self.weight <= 0
        ):
            raise InvalidPlan(f"source {self.ref} weight={self.weight!r} is out of range: must be a finite number > 0")
        object.__setattr__(self, "transforms", tuple(self.transforms))
        for t in self.transforms:
            if isinstance(t, Pack):
                raise InvalidPlan(f"source {self.ref}: pack is a plan-level transform, not a source transform")

    @property
    def name(self) -> str:
        return self.ref.split("@")[0]

    def to_json(self) -> dict[str, Any]:
        return {"ref": self.ref, "weight": self.weight, "transforms": [t.to_json() for t in self.transforms]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Source":
        return cls(data["ref"], data.get("weight"), tuple(transform_from_json(t) for t in data.get("transforms", [])))


@dataclass(frozen=True)
class Shuffle:
    """Shuffle settings: chunks of consecutive records are permuted globally, records within windows of chunks.

    ``chunk_row_groups`` sets the chunk size as a multiple of the source's
    median row group (larger: better locality; smaller: finer shuffle);
    ``chunk_size`` sets it in records instead. ``window_chunks`` is the
    shuffle window per stream, in chunks.
    """

    enabled: bool = True
    chunk_row_groups: int = 8
    chunk_size: int | None = None
    window_chunks: int = 2

    def __post_init__(self) -> None:
        _check_int("shuffle.chunk_row_groups", self.chunk_row_groups, 1)
        _check_int("shuffle.window_chunks", self.window_chunks, 1)
        if self.chunk_size is not None:
            _check_int("shuffle.chunk_size", self.chunk_size, 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "chunk_row_groups": self.chunk_row_groups,
            "chunk_size": self.chunk_size,
            "window_chunks": self.window_chunks,
        }


@dataclass(frozen=True)
class ReadPlan:
    """Everything that decides what a run reads: sources, seed, batch size, length, shuffle, streams, transforms.

    ``streams`` is the number of canonical streams: every world size the run
    may use must divide it, and it must divide ``global_batch_size``.

    >>> plan = ReadPlan([Source("web-text@v1")], seed=0, global_batch_size=8, steps=100)
    >>> plan.streams
    8
    """

    sources: Sequence[Source]
    seed: int
    global_batch_size: int
    epochs: float | None = None
    steps: int | None = None
    shuffle: Shuffle = field(default_factory=Shuffle)
    streams: int | None = None
    mixture_block: int = 1024
    transforms: Sequence[Transform] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", tuple(self.sources))
        object.__setattr__(self, "transforms", tuple(self.transforms))
        if not self.sources:
            raise InvalidPlan("a read plan needs at least one source")
        if not all(isinstance(s, Source) for s in self.sources):
            raise InvalidPlan("sources must be Source(...) objects")
        names = [s.ref for s in self.sources]
        if len(set(names)) != len(names):
            raise InvalidPlan(f"sources repeat: {names}")
        _check_int("seed", self.seed, 0, 2**63 - 1)
        _check_int("global_batch_size", self.global_batch_size, 1)
        if (self.epochs is None) == (self.steps is None):
            raise InvalidPlan("give exactly one of epochs or steps")
        if self.steps is not None:
            _check_int("steps", self.steps, 1)
        if self.epochs is not None and (
            isinstance(self.epochs, bool) or not isinstance(self.epochs, (int, float)) or not math.isfinite(self.epochs) or self.epochs <= 0
        ):
            raise InvalidPlan(f"epochs={self.epochs!r} is out of range: must be a finite number > 0")
        if self.streams is None:
            object.__setattr__(self, "streams", math.gcd(self.global_batch_size, 64))
        _check_int("streams", self.streams, 1, self.global_batch_size)
        if self.global_batch_size % self.streams:
            raise InvalidPlan(f"streams={self.streams} is out of range: must divide global_batch_size={self.global_batch_size}")
        _check_int("mixture_block", self.mixture_block, len(self.sources), 1_000_000)
        weights = [s.weight for s in self.sources]
        if any(w is None for w in weights) and any(w is not None for w in weights):
            raise InvalidPlan("give a weight to every source or to none (none: proportional to their sizes)")
        packs = [t for t in self.transforms if isinstance(t, Pack)]
        if len(packs) > 1:
            raise InvalidPlan("a plan can pack at most once")

    # -- derived ----------------------------------------------------------------
    @property
    def pack(self) -> Pack | None:
        """The plan's pack transform, if any."""
        return next((t for t in self.transforms if isinstance(t, Pack)), None)

    @property
    def seq_len(self) -> int | None:
        return self.pack.seq_len if self.pack else None

    @property
    def decodes_media(self) -> bool:
        """Whether any transform of the plan decodes images or video (its batches cost memory as large as the media)."""
        return any(t.decodes_media for t in (*self.transforms, *(t for s in self.sources for t in s.transforms)))

    @property
    def document_transforms(self) -> tuple[Transform, ...]:
        """Plan transforms applied to every document (before packing)."""
        if self.pack is None:
            return tuple(self.transforms)
        return tuple(self.transforms[: list(self.transforms).index(self.pack)])

    @property
    def sequence_transforms(self) -> tuple[Transform, ...]:
        """Plan transforms applied to each packed sequence (after packing)."""
        if self.pack is None:
            return ()
        return tuple(self.transforms[list(self.transforms).index(self.pack) + 1 :])

    def allowed_world_sizes(self) -> list[int]:
        """World sizes this plan can run on: the divisors of ``streams``."""
        assert self.streams is not None
        return [w for w in range(1, self.streams + 1) if self.streams % w == 0]

    # -- serialization --------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "sources": [s.to_json() for s in self.sources],
            "seed": self.seed,
            "global_batch_size": self.global_batch_size,
            "epochs": self.epochs,
            "steps": self.steps,
            "shuffle": self.shuffle.to_json(),
            "streams": self.streams,
            "mixture_block": self.mixture_block,
            "transforms": [t.to_json() for t in self.transforms],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ReadPlan":
        return cls(
            sources=[Source.from_json(s) for s in data["sources"]],
            seed=data["seed"],
            global_batch_size=data["global_batch_size"],
            epochs=data.get("epochs"),
            steps=data.get("steps"),
            shuffle=Shuffle(**data.get("shuffle", {})),
            streams=data.get("streams"),
            mixture_block=data.get("mixture_block", 1024),
            transforms=[transform_from_json(t) for t in data.get("transforms", [])],
        )

    @property
    def hash(self) -> str:
        """A stable hash of the plan as written (tags unresolved)."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ResolvedSource:
    """A plan source pinned to one version, with the numbers the order needs (as a run manifest stores it)."""

    ref: str
    dataset: str
    version: str
    rows: int
    weight: float
    chunk: int

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def packs_losslessly(plan: ReadPlan, read_format: int) -> bool:
    """Whether a run of ``plan`` in ``read_format`` packs with lossless concat-and-chunk (read formats 3–4's default).

    >>> packs_losslessly(ReadPlan([Source("web-text@v1")], seed=0, global_batch_size=8, steps=1), 3)
    False
    """
    pack = plan.pack
    return pack is not None and read_format >= 3 and pack.strategy == "concat"
