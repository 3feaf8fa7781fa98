"""The seal of derived files: an HMAC under a key that lives outside the catalog, so only this installation's own
results are believed.

A digest stored beside derived data proves nothing: whoever can edit the file
can recompute it. The seal is ``HMAC-SHA256(key, what the file is, what it was
derived from, its layout, its content digest)``, and the key is kept outside the
catalog (``BATCHSCOPE_DERIVED_KEY_FILE``, default ``~/.cache/batchscope/derived.key``,
created on first use, mode 0600). Someone who can write the catalog but not read
that file cannot make a derived file this installation believes; a file sealed
under another key (another machine, a key removed since) is rebuilt, never
trusted. When the key file can be neither read nor created, each process uses a
random key of its own: derived files are then rebuilt once per process.

>>> use_key(b"k" * 32)
>>> what = Derivation("key-index", "0123456789abcdef0123456789abcdef", layout=2)
>>> seal = what.seal("content-digest")
>>> what.sealed("content-digest", seal), what.sealed("other-digest", seal)
(True, False)
>>> Derivation("key-index", "another source", layout=2).sealed("content-digest", seal)
False
>>> use_key(None)
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: Where the key is kept (a local file path); unset means ``~/.cache/batchscope/derived.key``.
KEY_FILE_ENV = "BATCHSCOPE_DERIVED_KEY_FILE"
_KEY_BYTES = 32
_lock = threading.Lock()
_key: bytes | None = None


def key_file() -> str:
    """The file holding the seal key (``$BATCHSCOPE_DERIVED_KEY_FILE``, else ``~/.cache/batchscope/derived.key``)."""
    return os.path.expanduser(os.environ.get(KEY_FILE_ENV) or os.path.join("~", ".cache", "batchscope", "derived.key"))


def _read_key(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(4 * _KEY_BYTES).strip()
        key = bytes.fromhex(raw.decode("ascii"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return key if len(key) == _KEY_BYTES else None


def _create_key(path: str) -> bytes | None:
    """A new key written to ``path`` unless another process wrote one first (then that one)."""
    key = secrets.token_bytes(_KEY_BYTES)
    directory = os.path.dirname(path) or "."
    tmp = os.path.join(directory, f".derived-key.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(key.hex().encode() + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)  # atomic and never replaces a key another process made meanwhile
        except FileExistsError:
            return _read_key(path)
        return key
    except OSError as exc:
        log.warning("cannot keep the derived-data key at %s (%s): derived files are rebuilt once per process", path, exc)
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def seal_key() -> bytes:
    """This installation's seal key: read from ``key_file()``, created there on first use, or random per process."""
    global _key
    with _lock:
        if _key is None:
            path = key_file()
            _key = _read_key(path) or _create_key(path) or secrets.token_bytes(_KEY_BYTES)
        return _key


def use_key(key: bytes | None) -> None:
    """Use ``key`` from now on in this process (``None``: read ``key_file()`` again on next use)."""
    global _key
    with _lock:
        _key = key


@dataclass(frozen=True)
class Derivation:
    """What a derived file is (``kind``), what exactly it was derived from (``source``: a version id, two ids and the
    parameters, a key naming every input) and the ``layout`` it is written in; the seal covers all three."""

    kind: str
    source: str
    layout: int = 1

    def __post_init__(self) -> None:
        if not self.kind or not isinstance(self.layout, int) or self.layout < 1:
            raise ValueError(f"a derivation needs a kind and a layout >= 1, got {self.kind!r} layout {self.layout!r}")

    def seal(self, digest: str) -> str:
        """The seal of content whose digest is ``digest`` derived this way."""
        message = json.dumps([self.kind, self.source, self.layout, digest], separators=(",", ":")).encode()
        return hmac.new(seal_key(), message, hashlib.sha256).hexdigest()

    def sealed(self, digest: str, seal: object) -> bool:
        """Whether ``seal`` is this installation's seal of ``digest`` derived this way."""
        return isinstance(seal, str) and hmac.compare_digest(seal, self.seal(digest))
