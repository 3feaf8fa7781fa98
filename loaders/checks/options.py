"""Which checks a lint runs and with which thresholds: a frozen, validated value (its digest names cached results).

>>> options = LintOptions.parse(checks=["repetition", "duplicate"], thresholds=["repetition.min_repeats=16"])
>>> options.param("repetition", "min_repeats"), options.selected("chat-mask")
(16.0, False)
>>> LintOptions.parse(checks=["no-such-check"])
Traceback (most recent call last):
...
loaders.errors.InvalidQuery: unknown check 'no-such-check'; checks: empty-document, no-trained-token, chat-mask, end-of-turn, repetition, duplicate, length-outlier, unknown-tokens, decode-failure, blank-image, frozen-video, silent-audio, rl-nonfinite, rl-logprob-positive, rl-reward-range, rl-zero-variance, mostly-padding, mix-off-plan, loss-spike
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..errors import InvalidQuery
from .registry import CHECK, CHECKS


def _unknown(name: str) -> InvalidQuery:
    return InvalidQuery(f"unknown check {name!r}; checks: {', '.join(c.name for c in CHECKS)}")


@dataclass(frozen=True)
class LintOptions:
    """The checks to run (all by default, in registry order) and the thresholds set away from their defaults."""

    checks: tuple[str, ...] = tuple(c.name for c in CHECKS)
    thresholds: tuple[tuple[str, str, float], ...] = ()
    _values: dict[tuple[str, str], Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in self.checks:
            if name not in CHECK:
                raise _unknown(name)
        values: dict[tuple[str, str], Any] = {(c.name, p.name): p.default for c in CHECKS for p in c.params}
        for check, name, value in self.thresholds:
            if check not in CHECK:
                raise _unknown(check)
            try:
                values[(check, name)] = CHECK[check].param(name).check(value, check=check)
            except ValueError as exc:
                raise InvalidQuery(str(exc)) from None
        object.__setattr__(self, "_values", values)

    @classmethod
    def parse(cls, *, checks: Iterable[str] | None = None, thresholds: Iterable[str] | Mapping[str, float] | None = None) -> "LintOptions":
        """Options from check names (``None``: all; comma-separated lists are split) and thresholds given as
        ``{"check.param": value}`` or ``["check.param=value", ...]``."""
        names: list[str] = []
        for item in checks or ():
            names += [n.strip() for n in item.split(",") if n.strip()]
        pairs: list[tuple[str, str, float]] = []
        items = (
            thresholds.items()
            if isinstance(thresholds, Mapping)
            else ((t.partition("=")[0], t.partition("=")[2]) for t in thresholds or ())
        )
        for target, raw in items:
            check, dot, param = str(target).strip().partition(".")
            if not dot or not param:
                raise InvalidQuery(f"threshold {target!r} is not CHECK.PARAM=VALUE")
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise InvalidQuery(f"threshold {target}={raw!r}: the value is not a number") from None
            pairs.append((check, param.strip(), value))
        ordered = tuple(c.name for c in CHECKS if c.name in names) if names else cls.checks
        for name in names:
            if name not in CHECK:
                raise _unknown(name)
        return cls(ordered, tuple(pairs))

    def selected(self, check: str) -> bool:
        return check in self.checks

    def param(self, check: str, name: str) -> Any:
        """The threshold ``name`` of ``check`` (set, else its default)."""
        return self._values[(check, name)]

    def to_json(self) -> dict[str, Any]:
        """The checks and every threshold of them (defaults included)."""
        return {"checks": list(self.checks), "thresholds": {f"{c}.{p}": v for (c, p), v in self._values.items() if c in self.checks}}

    def digest(self) -> str:
        """What names results computed with these options (cached results are kept per digest)."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]
