"""Explicit registries: a written list of entries (renderers, routers, batch views), each one named once.

>>> unique([("a", 1), ("b", 2)], name=lambda e: e[0], what="entry")
{'a': ('a', 1), 'b': ('b', 2)}
>>> unique([("a", 1), ("a", 2)], name=lambda e: e[0], what="entry")
Traceback (most recent call last):
...
app.registries.DuplicateEntry: entry 'a' is listed twice
"""

from __future__ import annotations

from typing import Callable, Iterable, TypeVar

T = TypeVar("T")


class DuplicateEntry(ValueError):
    """A registry lists the same name twice (raised when its module is imported)."""


def unique(entries: Iterable[T], *, name: Callable[[T], str], what: str) -> dict[str, T]:
    """``entries`` by name, in their order; a name listed twice is an error naming it."""
    found: dict[str, T] = {}
    for entry in entries:
        key = name(entry)
        if key in found:
            raise DuplicateEntry(f"{what} {key!r} is listed twice")
        found[key] = entry
    return found
