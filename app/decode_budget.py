"""The memory one request may decode into, and how many large decodes run at once.

Before pixels are decoded, the memory they need is estimated from the header
(width x height x bytes per pixel, at the scale the decoder will use, plus
the copies a conversion or rotation makes). A decode that would need more
than the ``request_memory_bytes`` setting is refused with 413 and a message
saying how much it needed; a decode above an eighth of it counts as large,
and at most ``decode_concurrency`` large decodes run at once in a process
(the others wait; in the server, for a costly slot of its ``app.fair``
gate, holding no request slot meanwhile), so a page of huge images costs a
bounded amount of memory however many requests ask at the same time.

>>> budget = DecodeBudget(limit=100 << 20, concurrency=2)
>>> budget.check(50 << 20, "a test image")
>>> budget.check(200 << 20, "a test image")
Traceback (most recent call last):
...
app.decode_budget.OverBudget: a test image needs about 200.0 MB to decode, over the 100.0 MB one request may use (request_memory_bytes)
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import threading
from typing import Callable, Iterator

from fastapi import Request

from loaders.errors import BatchscopeError

from .fair import CURRENT, costly_work
from .templating import human_bytes

#: Display modes (what ``to_display_mode`` makes) that need no converted copy.
_DISPLAYABLE = ("RGB", "RGBA", "L", "LA")
#: JPEG decoders shrink by these factors while decoding (``Image.draft``), largest first.
_JPEG_REDUCTIONS = (8, 4, 2)


class OverBudget(BatchscopeError):
    """Decoding what a request asks for would need more memory than one request may use."""

    status = 413


def pixel_bytes(mode: str) -> int:
    """Bytes Pillow keeps per pixel of ``mode`` (multi-band 8-bit images are stored as 4 bytes a pixel).

    >>> pixel_bytes("L"), pixel_bytes("RGB"), pixel_bytes("I;16"), pixel_bytes("F")
    (1, 4, 2, 4)
    """
    if mode in ("1", "L", "P"):
        return 1
    if mode.startswith("I;16"):
        return 2
    return 4


def jpeg_reduction(width: int, height: int, side: int | None) -> int:
    """The factor a JPEG is decoded smaller by for a thumbnail of longest side ``side`` (1: full size).

    >>> jpeg_reduction(4000, 3000, 256), jpeg_reduction(4000, 3000, None), jpeg_reduction(300, 200, 256)
    (8, 1, 1)
    """
    if side is None:
        return 1
    longest = max(width, height)
    return next((r for r in _JPEG_REDUCTIONS if longest / r >= side), 1)


def image_decode_bytes(width: int, height: int, mode: str, *, reduction: int = 1, rotated: bool = False) -> int:
    """Memory decoding an image needs: its pixels, plus a converted copy for modes browsers cannot show, plus a rotated copy.

    >>> image_decode_bytes(1000, 1000, "RGB")
    4000000
    >>> image_decode_bytes(1000, 1000, "CMYK", rotated=True)
    12000000
    """
    pixels = math.ceil(width / reduction) * math.ceil(height / reduction)
    needed = pixels * pixel_bytes(mode)
    if mode not in _DISPLAYABLE:
        needed += pixels * 4
    if rotated:
        needed += pixels * pixel_bytes(mode)
    return needed


def frame_decode_bytes(width: int, height: int) -> int:
    """Memory decoding one video frame needs: the decoder's YUV planes and the RGB frame, twice over for scaling.

    >>> frame_decode_bytes(1920, 1080)
    18662400
    """
    return width * height * 9


class DecodeBudget:
    """One process's decode budget: a per-request byte limit and a semaphore for large decodes."""

    def __init__(self, *, limit: int, concurrency: int) -> None:
        self.limit = limit
        self.large = limit // 8
        self.concurrency = concurrency
        self._slots = threading.BoundedSemaphore(concurrency)

    def check(self, needed: int, what: str) -> None:
        """Raise ``OverBudget`` (413) when ``needed`` bytes are more than one request may decode into."""
        if needed > self.limit:
            raise OverBudget(
                f"{what} needs about {human_bytes(needed)} to decode, over the {human_bytes(self.limit)} one request may use "
                "(request_memory_bytes)"
            )

    @contextlib.contextmanager
    def decoding(self, needed: int, what: str) -> Iterator[None]:
        """Check ``needed`` against the limit, then hold one of the large-decode slots while decoding (when it is large)."""
        self.check(needed, what)
        if needed <= self.large:
            yield
            return
        # Through the server's gate, a costly slot (given up front, or taken now without holding a request slot while
        # waiting); elsewhere (tests, scripts) this budget's own semaphore.
        with costly_work() if CURRENT.get() is not None else self._slots:
            try:
                yield
            finally:
                release_freed_memory()


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` from the running process, or ``None`` where the C library has none."""
    try:
        return ctypes.CDLL(None).malloc_trim  # type: ignore[no-any-return]
    except (AttributeError, OSError):
        return None


def release_freed_memory() -> None:
    """Give the memory a large decode freed back to the system (glibc keeps it in its arenas otherwise)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def decode_budget(request: Request) -> DecodeBudget:
    """The decode budget of the app serving ``request``."""
    return request.app.state.decode_budget


async def decode_budget_dependency(request: Request) -> DecodeBudget:
    """``decode_budget`` as a request dependency (async, so resolving it needs no worker thread)."""
    return decode_budget(request)
