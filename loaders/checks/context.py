"""What a check function may ask of the lint that calls it (the options, each source's facts, the plan's shares) and
what it is given for a whole step: a Protocol and a dataclass, so the check modules never import the scan above them.

>>> StepRead(3, 2).failed
False
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .reads import SampleRead, SourceFacts


class Context(Protocol):
    """What :class:`loaders.checks.scan.ReadContext` offers the check functions."""

    #: Source names and planned shares from the run manifest (``None`` when it names no weights).
    plan: tuple[list[str], list[float]] | None
    #: The rollouts of the last list of samples judged (the RL checks and the group log share them).
    rollouts_of: tuple[list[SampleRead], list[Any]] | None

    def selected(self, check: str) -> bool: ...

    def param(self, check: str, name: str) -> Any: ...

    def facts(self, source: int) -> SourceFacts: ...


@dataclass
class StepRead:
    """One step's global batch as read: every rank's samples (ranks whose batch failed are left out and ``failed``)."""

    step: int
    world_size: int
    ranks: list[tuple[int, list[SampleRead]]] = field(default_factory=list)
    failed: bool = False
