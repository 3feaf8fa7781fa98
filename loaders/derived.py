"""Derived files in the catalog (indexes built from a version): stored with a checksum, rebuilt when it does not match.

Derived data can always be computed again from the verified read path, so a
derived file is trusted only when its bytes hash to the digest written beside
it (``<file>.sha256``); a file without one (written by an older version), torn,
or edited reads as absent and its caller rebuilds it.

>>> digest_line(b"abc")[:16]
b'ba7816bf8f01cfea'
"""

from __future__ import annotations

import hashlib

from . import storage

SUFFIX = ".sha256"


def digest_line(data: bytes) -> bytes:
    """What the checksum file beside ``data`` holds: its sha256 in hex."""
    return hashlib.sha256(data).hexdigest().encode()


def write_derived(path: str, data: bytes) -> None:
    """Store ``data`` at ``path`` and its checksum beside it (each atomically; the checksum last)."""
    storage.write_bytes_atomic(path, data)
    storage.write_bytes_atomic(path + SUFFIX, digest_line(data))


def read_derived(path: str) -> bytes | None:
    """The bytes stored at ``path`` when they match their checksum, else None (absent, older, torn or edited)."""
    if not storage.stat(path).exists or not storage.stat(path + SUFFIX).exists:
        return None
    try:
        data = storage.read_bytes(path)
        expected = storage.read_bytes(path + SUFFIX).strip()
    except (FileNotFoundError, IsADirectoryError):
        return None
    return data if digest_line(data) == expected else None
