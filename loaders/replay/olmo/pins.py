"""Pinned files: the token, label-mask and metadata files a replayed run reads, checksummed once and checked on every read.

A file is cut into segments of :data:`SEGMENT` bytes; pinning hashes each one (the digest table is written beside the
replay's other derived files) and the file's checksum is the SHA-256 of that table. A read fetches the segments that
cover the asked range, checks their digests and returns the range from exactly the bytes it checked, so a file changed
after it was pinned is refused, naming it and the bytes that differ, and never shown as the run's data.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "t.npy").write_bytes(bytes(range(200)))
>>> pin = pin_file(str(folder / "t.npy"), role="tokens", store=str(folder / "pins"), segment=64)
>>> pin.size, len(PinnedReader(pin, store=str(folder / "pins")).read(60, 10))
(200, 10)
>>> _ = (folder / "t.npy").write_bytes(bytes(range(1, 201)))
>>> PinnedReader(pin, store=str(folder / "pins")).read(60, 10)
Traceback (most recent call last):
...
loaders.errors.ChecksumMismatch: token file ...t.npy changed after it was pinned: bytes 0-64 do not match their checksum
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import storage
from ...errors import CatalogCorrupt, ChecksumMismatch

#: Bytes per checked segment: small enough that checking the segments under one instance costs microseconds.
SEGMENT = 64 << 10
_DIGEST = 16
#: What each role of file is called in messages.
ROLES = {"tokens": "token file", "label_mask": "label mask file", "metadata": "document metadata file"}


@dataclass(frozen=True)
class PinnedFile:
    """One file a replay reads: where it is, its size, and the checksum of its segments (their table is the file
    ``digests`` of the replay's pin store)."""

    path: str
    role: str
    size: int
    segment: int
    checksum: str
    digests: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {self.role!r}")
        if self.size < 0 or self.segment <= 0:
            raise ValueError(f"size must be >= 0 and segment > 0, got size={self.size}, segment={self.segment}")

    @property
    def what(self) -> str:
        """How messages name this file: its role and path."""
        return f"{ROLES[self.role]} {self.path}"

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("path", "role", "size", "segment", "checksum", "digests")}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "PinnedFile":
        return cls(**{k: data[k] for k in ("path", "role", "size", "segment", "checksum", "digests")})


def _segment_digest(data: bytes | memoryview) -> bytes:
    return hashlib.sha256(data).digest()[:_DIGEST]


def pin_file(path: str, *, role: str, store: str, segment: int = SEGMENT) -> PinnedFile:
    """Hash ``path`` segment by segment, write its digest table under ``store`` and return its pin."""
    where = f"{ROLES[role]} {path}"
    info = storage.stat(path)
    if not info.exists:
        raise ChecksumMismatch(f"{where} is missing")
    table = bytearray()
    for start in range(0, info.size, segment):
        chunk = storage.read_range(path, start, min(segment, info.size - start), cache=False)
        if len(chunk) != min(segment, info.size - start):
            raise ChecksumMismatch(f"{where} changed while it was being pinned (it is shorter than {info.size} bytes)")
        table += _segment_digest(chunk)
    checksum = "sha256:" + hashlib.sha256(bytes(table)).hexdigest()
    digests = f"{checksum[7:39]}.digests"
    storage.write_bytes_atomic(storage.join(store, digests), bytes(table))
    return PinnedFile(path=path, role=role, size=info.size, segment=segment, checksum=checksum, digests=digests)


class PinnedReader:
    """Reads byte ranges of a pinned file, each checked against the digests of the segments it spans."""

    def __init__(self, pin: PinnedFile, *, store: str) -> None:
        self.pin = pin
        info = storage.stat(pin.path)
        if not info.exists:
            raise ChecksumMismatch(f"{pin.what} is missing (it was pinned with {pin.size} bytes)")
        if info.size != pin.size:
            raise ChecksumMismatch(f"{pin.what} is {info.size} bytes, it was pinned with {pin.size} bytes (changed after it was pinned)")
        digests = storage.join(store, pin.digests)
        table = storage.read_bytes(digests) if storage.stat(digests).exists else b""
        if "sha256:" + hashlib.sha256(table).hexdigest() != pin.checksum:
            raise CatalogCorrupt(f"the digest table {digests} of {pin.what} is missing or does not match its checksum")
        self._table = np.frombuffer(table, dtype=np.uint8).reshape(-1, _DIGEST) if table else np.zeros((0, _DIGEST), np.uint8)

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset``, from segments whose digests match the pin."""
        if offset < 0 or length < 0 or offset + length > self.pin.size:
            raise ValueError(f"bytes {offset}-{offset + length} are outside {self.pin.what} ({self.pin.size} bytes)")
        if length == 0:
            return b""
        segment = self.pin.segment
        first, last = offset // segment, (offset + length - 1) // segment
        start, end = first * segment, min((last + 1) * segment, self.pin.size)
        data = storage.read_range(self.pin.path, start, end - start)
        view = memoryview(data)
        for number in range(first, last + 1):
            lo = number * segment - start
            if len(data) < lo + min(segment, self.pin.size - number * segment) or _segment_digest(
                view[lo : lo + min(segment, self.pin.size - number * segment)]
            ) != bytes(self._table[number]):
                storage.evict(self.pin.path, start, end - start)
                raise ChecksumMismatch(
                    f"{self.pin.what} changed after it was pinned: bytes {number * segment}-"
                    f"{min((number + 1) * segment, self.pin.size)} do not match their checksum"
                )
        return bytes(view[offset - start : offset - start + length])
