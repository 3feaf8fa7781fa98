"""The in-process cache of made media (thumbnails, decoded frames, model inputs): a byte budget and single flight.

Values live in the app's ``ByteLRU`` (sized by the ``media_cache_bytes``
setting). Concurrent requests for the same key make the value once: the
first one makes it, the others wait for it, so sixty-four thumbnails asked
for at once by a grid never decode one image twice. Decode failures of
immutable media are remembered too (a broken image stays broken), so a page
of broken samples costs one attempt each.

>>> from loaders.storage.cache import ByteLRU
>>> cache = MediaCache(ByteLRU(budget=100, size_of=len))
>>> cache.get_or_make(("thumb", "v1", "k"), lambda: b"webp bytes")
b'webp bytes'
>>> cache.get_or_make(("thumb", "v1", "k"), lambda: b"never made")
b'webp bytes'
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Hashable, TypeVar

from fastapi import Request

from loaders.errors import DecodeError
from loaders.storage.cache import ByteLRU

T = TypeVar("T")


@dataclass(frozen=True)
class _Failure:
    """A remembered decode failure (small: the message only)."""

    error: DecodeError

    @property
    def nbytes(self) -> int:
        return 200 + len(self.error.message)


class _Flight:
    """One value being made; the requests that wait for it."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class MediaCache:
    """Single-flight ``get_or_make`` over a byte-bounded LRU (values larger than the budget are made, not kept)."""

    def __init__(self, lru: ByteLRU[Any]) -> None:
        self.lru = lru
        self._flights: dict[Hashable, _Flight] = {}
        self._lock = threading.Lock()

    def get_or_make(self, key: Hashable, make: Callable[[], T], *, keep: bool = True) -> T:
        """The cached value of ``key``, else ``make()`` (once, however many requests ask at the same time).

        With ``keep=False`` the value is shared with concurrent callers but not
        stored (for values another cache already holds). A ``DecodeError`` is
        remembered and raised again for later calls.
        """
        if keep:
            cached = self.lru.get(key)
            if cached is not None:
                if isinstance(cached, _Failure):
                    raise cached.error
                return cached
        with self._lock:
            flight = self._flights.get(key)
            leader = flight is None
            if leader:
                flight = self._flights[key] = _Flight()
        assert flight is not None
        if not leader:
            flight.done.wait()
            if flight.error is not None:
                raise flight.error
            return flight.value
        try:
            flight.value = make()
            if keep:
                self.lru.put(key, flight.value)
            return flight.value
        except DecodeError as exc:
            flight.error = exc
            if keep:
                self.lru.put(key, _Failure(exc))
            raise
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            with self._lock:
                del self._flights[key]
            flight.done.set()

    @property
    def used(self) -> int:
        """Bytes held now (never above ``budget``)."""
        return self.lru.used

    @property
    def budget(self) -> int:
        return self.lru.budget


_BY_LRU: "weakref.WeakKeyDictionary[ByteLRU[Any], MediaCache]" = weakref.WeakKeyDictionary()
_BY_LRU_LOCK = threading.Lock()


def media_cache(request: Request) -> MediaCache:
    """The media cache of the app serving ``request`` (wrapping ``app.state.media_cache``)."""
    lru = request.app.state.media_cache
    with _BY_LRU_LOCK:
        found = _BY_LRU.get(lru)
        if found is None:
            found = _BY_LRU[lru] = MediaCache(lru)
    return found


async def media_cache_dependency(request: Request) -> MediaCache:
    """``media_cache`` as a request dependency (async, so resolving it needs no worker thread)."""
    return media_cache(request)
