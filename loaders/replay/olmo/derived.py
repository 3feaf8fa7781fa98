"""Derived arrays of a replay (global indices, their inverse, document boundaries), each trusted only with its stamp.

A derived array is a headerless file beside a ``.stamp`` naming its dtype, length and SHA-256. It is opened (as a
read-only memmap) only when the stamp is there and the bytes match it; otherwise it reads as absent and its caller
builds it again, so a torn, stale or edited file is never served.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> write_stamped(folder / "a.npy", np.arange(5, dtype=np.uint32))
>>> open_stamped(folder / "a.npy", np.uint32).tolist()
[0, 1, 2, 3, 4]
>>> _ = (folder / "a.npy").write_bytes(b"edited")
>>> open_stamped(folder / "a.npy", np.uint32) is None
True
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)
_CHUNK = 16 << 20


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".stamp")


def stamp(path: Path, dtype: type, *, sha256: str | None = None) -> None:
    """Write the stamp of the array file ``path`` as it is now (for files another library wrote; ``sha256`` when the
    caller hashed the bytes it wrote)."""
    size = path.stat().st_size
    digest = sha256 if sha256 is not None else _sha256_file(path)
    text = json.dumps({"dtype": np.dtype(dtype).str, "length": size // np.dtype(dtype).itemsize, "sha256": digest})
    tmp = _stamp_path(path).with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, _stamp_path(path))


def write_stamped(path: Path, array: np.ndarray) -> None:
    """Write ``array`` to ``path`` atomically (its raw bytes, no header), then its stamp, hashed from memory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    data = np.ascontiguousarray(array)
    data.tofile(tmp)
    os.replace(tmp, path)
    stamp(path, data.dtype.type, sha256=hashlib.sha256(memoryview(data).cast("B")).hexdigest())


def problem(path: Path, dtype: type) -> str | None:
    """Why the array file at ``path`` cannot be trusted (None when its stamp matches its bytes)."""
    if not path.is_file():
        return "it does not exist"
    try:
        stamped = json.loads(_stamp_path(path).read_text())
    except (OSError, ValueError):
        return "it has no readable stamp"
    size = path.stat().st_size
    if stamped.get("dtype") != np.dtype(dtype).str or stamped.get("length") * np.dtype(dtype).itemsize != size:
        return f"it is {size} bytes, its stamp says {stamped.get('length')} values of {stamped.get('dtype')}"
    if stamped.get("sha256") != _sha256_file(path):
        return "its bytes do not match its stamp"
    return None


def open_stamped(path: Path, dtype: type) -> np.ndarray | None:
    """The array at ``path`` as a read-only memmap when its stamp matches, else None (the reason is logged)."""
    reason = problem(path, dtype)
    if reason is not None:
        if path.exists():
            log.warning("derived file %s is not used: %s", path, reason)
        return None
    if path.stat().st_size == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")
