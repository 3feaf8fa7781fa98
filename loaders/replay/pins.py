"""Files a replayed run reads, pinned by checksum when it is attached and checked again when it is opened.

Documents (the data itself) are catalog versions: every record batch or row group is checked against its digest
whenever it is read. Every other file a replay reads (a dataset's ``state.json``, a saved configuration, a cached
index) is pinned here by size and SHA-256, checked whole when the run is opened (they are small), and refused,
named, when it is missing, moved or changed.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "state.json")
>>> _ = open(path, "w").write("{}")
>>> pin = pin_file(path, role="config")
>>> (pin.size, pin.sha256[:12])
(2, '44136fa355b3')
>>> check_pin(pin, run="r") == path
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..errors import PinnedFileChanged
from .arrays import file_digest


@dataclass(frozen=True)
class Pin:
    """A file the run read: its absolute path, size, SHA-256 and what it is to the replay."""

    path: str
    size: int
    sha256: str
    role: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256, "role": self.role}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Pin":
        return cls(str(data["path"]), int(data["size"]), str(data["sha256"]), str(data["role"]))


def pin_file(path: str, *, role: str) -> Pin:
    """Checksum ``path`` (a file the replay reads) as it is now."""
    absolute = os.path.abspath(path)
    if not os.path.isfile(absolute):
        raise PinnedFileChanged(f"{absolute}: no such file ({role} file of the replay)")
    return Pin(absolute, os.path.getsize(absolute), file_digest(absolute), role)


def check_pin(pin: Pin, *, run: str) -> str:
    """``pin.path`` once the file there is still the one pinned (else one line naming it and what changed)."""
    if not os.path.isfile(pin.path):
        raise PinnedFileChanged(f"{pin.path}: pinned by replayed run {run} ({pin.role} file) is missing or was moved")
    size = os.path.getsize(pin.path)
    if size != pin.size:
        raise PinnedFileChanged(
            f"{pin.path}: pinned by replayed run {run} at {pin.size} bytes, now {size} bytes (changed since it was attached)"
        )
    if file_digest(pin.path) != pin.sha256:
        raise PinnedFileChanged(f"{pin.path}: pinned by replayed run {run}, its content changed since it was attached")
    return pin.path
