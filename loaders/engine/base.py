"""The engine interface every scan is written against, and the table of engines, found by name and imported when asked.

A scan is a list of independent tasks (one per file, row-group range or key
bucket): a module-level function and one picklable item per task. An engine
runs them wherever it runs things — threads and processes of this machine
(``local``), tasks of a Ray cluster (``ray``) — and hands back each task's
result with the task's position. The caller assembles results in task order,
so the outcome never depends on which engine ran them or in which order they
finished: both engines give byte-identical results.

>>> engine = resolve_engine("local")
>>> ordered(engine, abs, [-3, 2, -1], labels=["a", "b", "c"])
[3, 2, 1]
"""

from __future__ import annotations

import importlib
import os
import threading
from typing import Callable, Iterator, Literal, Protocol, Sequence, TypeVar

from ..errors import EngineError

T = TypeVar("T")
R = TypeVar("R")

#: How a task spends its time, which decides where the local engine runs it:
#: ``cpu`` releases the GIL (reading files, hashing, Arrow, numpy: threads, one per core), ``io`` mostly waits on
#: the network (many threads, so many requests are in flight), ``python`` holds the GIL (processes, one per core).
Work = Literal["cpu", "io", "python"]
WORK_KINDS: tuple[str, ...] = ("cpu", "io", "python")

#: The environment variable naming the engine when neither ``--engine`` nor ``engine=`` does.
ENGINE_ENV = "BATCHSCOPE_ENGINE"
DEFAULT_ENGINE = "local"
#: Engine name → ``"module:Class"``, imported only when that engine is asked for (like fsspec's implementations).
ENGINES: dict[str, str] = {
    "local": "loaders.engine.local:LocalEngine",
    "ray": "loaders.engine.ray_engine:RayEngine",
}


class Engine(Protocol):
    """What a scan needs from an engine."""

    #: ``"local"``, ``"ray"``...
    name: str

    def workers(self, work: Work = "cpu") -> int:
        """How many tasks of this kind run at once."""
        ...

    def run(self, fn: Callable[[T], R], items: Sequence[T], *, labels: Sequence[str], work: Work = "cpu") -> Iterator[tuple[int, R]]:
        """Run ``fn(item)`` for every item; yield ``(position, result)`` as tasks finish (any order).

        ``fn`` is a module-level function and every item picklable (they may
        run in another process or machine). ``labels[i]`` names item ``i`` in
        errors (a file, a shard pair). A task's :class:`~loaders.errors.BatchscopeError`
        is raised as it is; a task that cannot run (its worker died every time it
        was tried) is an :class:`~loaders.errors.EngineError` naming its label.
        Tasks still running are cancelled when the caller stops early.
        """
        ...


def engine_names() -> list[str]:
    """The engines one can ask for, sorted."""
    return sorted(ENGINES)


def chosen_name(engine: str | None = None) -> str:
    """The engine name in force: ``engine``, else ``$BATCHSCOPE_ENGINE``, else ``local``; an unknown name is an EngineError.

    >>> chosen_name("ray"), chosen_name(None) in ENGINES
    ('ray', True)
    """
    name = engine if engine is not None else (os.environ.get(ENGINE_ENV) or DEFAULT_ENGINE)
    if name not in ENGINES:
        source = "" if engine is not None else f" (from ${ENGINE_ENV})"
        raise EngineError(f"unknown engine {name!r}{source}; use one of {', '.join(engine_names())}")
    return name


_ENGINES: dict[str, Engine] = {}
_LOCK = threading.Lock()


def resolve_engine(engine: str | Engine | None = None) -> Engine:
    """The engine to run a scan on: an :class:`Engine` as given, or the one named (see :func:`chosen_name`), made once per process.

    >>> resolve_engine("local").name
    'local'
    """
    if engine is not None and not isinstance(engine, str):
        return engine
    name = chosen_name(engine)
    with _LOCK:
        made = _ENGINES.get(name)
        if made is None:
            module_name, _, class_name = ENGINES[name].partition(":")
            made = getattr(importlib.import_module(module_name), class_name)()
            _ENGINES[name] = made
    return made


def ordered(
    engine: Engine,
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    labels: Sequence[str],
    work: Work = "cpu",
    done: Callable[[int, R], None] | None = None,
) -> list[R]:
    """Every task's result, in task order; ``done(position, result)`` is called as each one finishes.

    >>> ordered(resolve_engine("local"), str.upper, ["a", "b"], labels=["first", "second"])
    ['A', 'B']
    """
    results: list[R | None] = [None] * len(items)
    for position, result in engine.run(fn, items, labels=labels, work=work):
        results[position] = result
        if done is not None:
            done(position, result)
    return results  # type: ignore[return-value]
