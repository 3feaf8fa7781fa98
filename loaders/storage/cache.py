"""A thread-safe LRU cache bounded by bytes, used for decoded row groups, thumbnails and frames."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


class ByteLRU(Generic[V]):
    """Least-recently-used cache whose budget is the sum of the values' sizes in bytes.

    >>> cache = ByteLRU[bytes](budget=10, size_of=len)
    >>> cache.get_or_make("a", lambda: b"12345")
    b'12345'
    >>> cache.used
    5
    """

    def __init__(self, budget: int, size_of: Callable[[V], int]) -> None:
        self.budget = budget
        self._size_of = size_of
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._making: dict[Hashable, threading.Lock] = {}
        self.used = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def put(self, key: Hashable, value: V) -> None:
        size = self._size_of(value)
        with self._lock:
            if key in self._items:
                self.used -= self._items.pop(key)[1]
            if size > self.budget:
                return
            self._items[key] = (value, size)
            self.used += size
            while self.used > self.budget and self._items:
                _, (_, evicted) = self._items.popitem(last=False)
                self.used -= evicted

    def get_or_make(self, key: Hashable, make: Callable[[], V]) -> V:
        """Return the cached value, or make, store and return it.

        Concurrent misses on one key make the value once: later callers wait
        for the first (so two prefetch threads never decode the same row group).
        """
        value = self.get(key)
        if value is not None:
            return value
        with self._lock:
            pending = self._making.get(key)
            if pending is None:
                pending = self._making[key] = threading.Lock()
                owner = True
                pending.acquire()
            else:
                owner = False
        if not owner:
            with pending:  # wait for the maker, then read what it stored
                pass
            value = self.get(key)
            return value if value is not None else make()
        try:
            value = make()
            self.put(key, value)
            return value
        finally:
            with self._lock:
                del self._making[key]
            pending.release()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        """Whether ``key`` is cached or being made (without counting a hit or a miss or refreshing it)."""
        with self._lock:
            return key in self._items or key in self._making

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.used = 0
