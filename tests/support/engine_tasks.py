"""Task functions for the engine tests: module-level, so both engines can ship them to workers."""

from __future__ import annotations

import os

from loaders.errors import RegistrationError


def square(x: int) -> int:
    return x * x


def where_run(x: int) -> tuple[int, int]:
    """``(x, pid)``: which process ran the task (a busy pure-Python loop first, so tasks overlap)."""
    total = 0
    for i in range(20_000):
        total += i % 7
    return x, os.getpid()


def refuse(name: str) -> str:
    raise RegistrationError(f"{name}: refused on purpose")


def die_once(marker: str) -> int:
    """Kill the worker running it the first time (while ``marker`` exists), succeed when tried again."""
    if os.path.exists(marker):
        os.remove(marker)
        os._exit(17)
    return os.getpid()


def die_always(_: str) -> int:
    os._exit(17)
