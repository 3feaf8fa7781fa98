"""Retries for remote storage: exponential backoff with full jitter, a budget, then a clear StorageError.

Transient failures (timeouts, dropped connections, HTTP 5xx, 408/429,
S3 ``SlowDown`` and throttling, short reads) are retried; everything else
(404, access denied, bad requests) is raised at once. The budget is a number
of attempts and a number of seconds, from ``BATCHSCOPE_RETRY_ATTEMPTS`` and
``BATCHSCOPE_RETRY_SECONDS``; when it is spent the last error is wrapped in a
:class:`~loaders.errors.StorageError` naming the operation, the URI and the
attempts made.

>>> with_retries("read", "s3://bucket/x", lambda: b"data")
b'data'
"""

from __future__ import annotations

import logging
import os
import random
import re
import socket
import sys
import time
import urllib.error
from dataclasses import dataclass
from typing import Callable, Mapping, TypeVar

from ..errors import StorageError

T = TypeVar("T")

log = logging.getLogger("batchscope.storage")

#: HTTP statuses worth another try besides every 5xx.
TRANSIENT_HTTP_STATUSES = frozenset({408, 425, 429})

# pyarrow reports S3 failures as OSError whose message carries the AWS error
# name, the HTTP status and, for network failures, curl's code.
_AWS_TRANSIENT = re.compile(r"AWS Error (NETWORK_CONNECTION|SLOW_DOWN|THROTTLING|SERVICE_UNAVAILABLE|INTERNAL_FAILURE|REQUEST_TIMEOUT)\b")
_AWS_PERMANENT = re.compile(
    r"AWS Error (ACCESS_DENIED|INVALID_ACCESS_KEY_ID|SIGNATURE_DOES_NOT_MATCH|NO_SUCH_BUCKET|NO_SUCH_KEY|RESOURCE_NOT_FOUND)\b"
)
_HTTP_STATUS = re.compile(r"HTTP (?:status|response code)[: ]+(\d{3})", re.IGNORECASE)
# curl: 6/7 resolve/connect, 18 partial file, 28 timeout, 52 empty reply, 55/56 send/recv failure.
_CURL_TRANSIENT = re.compile(r"curlCode: (6|7|18|28|52|55|56)\b")
_TRANSIENT_WORDS = re.compile(
    r"SlowDown|Throttl|Too Many Requests|Service Unavailable|Internal ?Server ?Error|InternalError|"
    r"timed? ?out|Connection reset|Broken pipe|Empty reply|Temporary failure",
    re.IGNORECASE,
)


class ShortRead(OSError):
    """A remote read returned fewer bytes than asked for (typically a dropped connection); retried."""


def _env_number(env: Mapping[str, str], name: str, default: float, *, integer: bool) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        kind = "a whole number" if integer else "a number of seconds"
        raise ValueError(f"{name}={raw!r} is not {kind}") from None
    if value < (1 if integer else 0) or value != value:
        raise ValueError(f"{name}={raw!r} is out of range: use {'>= 1' if integer else '>= 0'}")
    return value


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: at most ``attempts`` tries within ``seconds``, sleeping with full jitter between them.

    The sleep before try ``n + 1`` is uniform in ``[0, min(max_delay, base_delay * 2**(n - 1))]``.

    >>> RetryPolicy(attempts=3, seconds=10).attempts
    3
    """

    attempts: int = 10
    seconds: float = 120.0
    base_delay: float = 0.05
    max_delay: float = 5.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"retry attempts must be >= 1, got {self.attempts}")
        if not self.seconds >= 0:
            raise ValueError(f"retry seconds must be >= 0, got {self.seconds}")
        if not 0 <= self.base_delay <= self.max_delay:
            raise ValueError(f"need 0 <= base_delay <= max_delay, got {self.base_delay} and {self.max_delay}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "RetryPolicy":
        """The policy set by ``BATCHSCOPE_RETRY_ATTEMPTS`` and ``BATCHSCOPE_RETRY_SECONDS`` (defaults otherwise)."""
        env = os.environ if env is None else env
        return cls(
            attempts=int(_env_number(env, "BATCHSCOPE_RETRY_ATTEMPTS", cls.attempts, integer=True)),
            seconds=_env_number(env, "BATCHSCOPE_RETRY_SECONDS", cls.seconds, integer=False),
        )

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Seconds to sleep after failed try number ``attempt`` (1-based): full jitter over the exponential cap."""
        cap = min(self.max_delay, self.base_delay * (2.0 ** min(attempt - 1, 62)))
        return rng.uniform(0.0, cap)


def _transient_status(status: int) -> bool:
    return status >= 500 or status in TRANSIENT_HTTP_STATUSES


def is_transient(exc: BaseException) -> bool:
    """True when ``exc`` is worth another try: timeouts, resets, 5xx, 408/429, throttling, short reads.

    >>> is_transient(TimeoutError("read timed out"))
    True
    >>> is_transient(FileNotFoundError("no such key"))
    False
    """
    if isinstance(exc, ShortRead):
        return True
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False
    if isinstance(exc, urllib.error.HTTPError):
        return _transient_status(exc.code)
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        if isinstance(reason, socket.gaierror):
            return reason.errno == socket.EAI_AGAIN
        if isinstance(reason, BaseException):
            return is_transient(reason)
        return bool(_TRANSIENT_WORDS.search(str(reason)))
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    client = sys.modules.get("http.client")  # not imported for it (slow to import): without it, no HTTPException exists
    if client is not None and isinstance(exc, client.HTTPException):
        return True
    if isinstance(exc, OSError):
        text = str(exc)
        if _AWS_PERMANENT.search(text):
            return False
        status = _HTTP_STATUS.search(text)
        if status:
            return _transient_status(int(status.group(1)))
        return bool(_AWS_TRANSIENT.search(text) or _CURL_TRANSIENT.search(text) or _TRANSIENT_WORDS.search(text))
    return False


def with_retries(operation: str, uri: str, call: Callable[[], T], *, policy: RetryPolicy | None = None) -> T:
    """Run ``call`` until it succeeds, retrying transient errors within the budget.

    Non-transient errors propagate unchanged after one try. When the budget
    is spent, raise :class:`StorageError` naming ``operation``, ``uri``, the
    attempts made and the last error.
    """
    policy = policy or RetryPolicy.from_env()
    rng = random.Random()
    start = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            return call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            elapsed = time.monotonic() - start
            delay = policy.delay(attempt, rng)
            if attempt >= policy.attempts or elapsed + delay > policy.seconds:
                raise StorageError(
                    f"{operation} {uri} failed after {attempt} attempt{'s' if attempt != 1 else ''} in {elapsed:.1f} s "
                    f"(retry budget: {policy.attempts} attempts, {policy.seconds:g} s); "
                    f"last error: {type(exc).__name__}: {exc}"
                ) from exc
            log.info("%s %s: attempt %d failed (%s: %s); retrying in %.2f s", operation, uri, attempt, type(exc).__name__, exc, delay)
            time.sleep(delay)
