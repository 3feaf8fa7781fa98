"""User transforms: any importable ``module:function`` taking ``(record, rng)`` and returning new fields."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidPlan
from .base import Context, Transform, TransformFn


def load_function(spec: str) -> TransformFn:
    """Import ``module:function``; errors name the spec and what went wrong."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InvalidPlan(f"user transform {spec!r} must look like 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidPlan(f"user transform {spec!r}: cannot import {module_name!r} ({exc})") from exc
    function = getattr(module, attr, None)
    if not callable(function):
        raise InvalidPlan(f"user transform {spec!r}: {module_name} has no callable {attr!r}")
    return function


@dataclass(frozen=True)
class UserFunction(Transform):
    """Call ``function(inputs, rng)``; a returned dict is merged into the inputs (it may also mutate them)."""

    type = "user"
    thread_safe = False  # arbitrary code: applied one sample at a time

    function: str = ""

    def __post_init__(self) -> None:
        load_function(self.function)

    def apply(self, inputs: dict[str, Any], ctx: Context) -> None:
        result = load_function(self.function)(inputs, ctx.rng)
        if isinstance(result, dict):
            inputs.update(result)
        elif result is not None:
            raise InvalidPlan(f"{ctx.where}: user transform {self.function} returned {type(result).__name__}, expected dict or None")
