"""What a check is (a named rule with a severity and settable thresholds) and what it finds.

>>> rule = Check("empty-document", "tokens", "warning", "read", "a document with no tokens", (Param("min_tokens", 1, "fewest tokens"),))
>>> rule.defaults()
{'min_tokens': 1}
>>> Finding("empty-document", "warning", 3, rank=0, position=2, key="doc-7", detail="0 tokens").to_json()["step"]
3
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Severities, least severe first: ``--fail-on`` fails on a finding at or above the level it names.
SEVERITIES: tuple[str, ...] = ("info", "warning", "error")
#: Families of checks, in the order pages list them.
FAMILIES: tuple[str, ...] = ("tokens", "media", "rl", "steps")
#: What one finding of a check is about: a document or sample read (``read``), a step, or something judged over the whole
#: run and reported per read (``run``).
SCOPES: tuple[str, ...] = ("read", "step", "run")


def severity_rank(severity: str) -> int:
    """The place of ``severity`` in :data:`SEVERITIES` (0 for info); an unknown one is a ``ValueError`` naming the allowed.

    >>> severity_rank("warning")
    1
    """
    if severity not in SEVERITIES:
        raise ValueError(f"severity {severity!r} is not one of {', '.join(SEVERITIES)}")
    return SEVERITIES.index(severity)


@dataclass(frozen=True)
class Param:
    """One settable threshold of a check: its name, default (``None``: not declared, the check then does not run) and meaning."""

    name: str
    default: float | int | None
    doc: str
    minimum: float | None = None
    maximum: float | None = None

    def check(self, value: float, *, check: str) -> float:
        """``value`` when it is within the parameter's range; a ``ValueError`` naming the check, parameter and range otherwise."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise ValueError(f"threshold {check}.{self.name} must be a number, got {value!r}")
        if (self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum):
            low = "-inf" if self.minimum is None else f"{self.minimum:g}"
            high = "inf" if self.maximum is None else f"{self.maximum:g}"
            raise ValueError(f"threshold {check}.{self.name} = {value:g} is outside [{low}, {high}]")
        return value


@dataclass(frozen=True)
class Check:
    """A check: its name, family, severity, scope, the rule in one sentence, and its thresholds."""

    name: str
    family: str
    severity: str
    scope: str
    rule: str
    params: tuple[Param, ...] = ()
    #: The largest share of clean reads (steps, for step checks) it may flag: ``docs/lint.md`` gives the rate measured
    #: on clean data, and a test keeps the measured rate below this bound.
    false_positives: float = 0.001

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"check {self.name!r} has family {self.family!r}; families: {', '.join(FAMILIES)}")
        if self.scope not in SCOPES:
            raise ValueError(f"check {self.name!r} has scope {self.scope!r}; scopes: {', '.join(SCOPES)}")
        severity_rank(self.severity)

    def defaults(self) -> dict[str, float | int | None]:
        """Every threshold of the check at its default."""
        return {p.name: p.default for p in self.params}

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.params) or "none"
        raise ValueError(f"check {self.name} has no threshold {name!r} (its thresholds: {known})")


@dataclass(frozen=True, slots=True)
class Finding:
    """One bad thing a check found: at a step, and for a read, the rank, the sample's position in the rank's batch and the key
    of the document it is about (``None`` for a finding about a whole step or a whole rank's batch)."""

    check: str
    severity: str
    step: int
    rank: int | None = None
    position: int | None = None
    key: str | None = None
    detail: str = ""

    def sort_key(self) -> tuple[int, int, int, str, str]:
        return (
            self.step,
            -1 if self.rank is None else self.rank,
            -1 if self.position is None else self.position,
            self.check,
            self.key or "",
        )

    def to_json(self) -> dict[str, Any]:
        """``check``, ``severity``, ``step``, ``rank``, ``position``, ``key`` and ``detail`` (links are added by who shows it)."""
        return {
            "check": self.check,
            "severity": self.severity,
            "step": self.step,
            "rank": self.rank,
            "position": self.position,
            "key": self.key,
            "detail": self.detail,
        }
