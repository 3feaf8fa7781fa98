"""Derived arrays of replays (epoch orders, inverse indexes): built once, kept in the catalog, checked when read.

A replay's arrays are a pure function of its framework, settings and pinned files, so they are stored under
``indexes/replay/{key}/`` where ``key`` hashes all three: attaching another run with the same settings over the same
files finds them and builds nothing. Each ``{name}.npy`` has a ``{name}.json`` beside it with its SHA-256; a run
records the digests of its arrays in its manifest when it is attached, and a reader checks each file against that
digest once per process before memory-mapping it. A missing or wrong file is rebuilt (never served); a rebuild that
gives other bytes than the run recorded is refused, naming the array (the framework's code changed what it computes).

Arrays computed later from recorded ones (an inverse index, the first time ``where`` asks: ``derived_from``) are
trusted by a seal instead (:mod:`loaders.storage.seal`: an HMAC under this installation's key over the digests of the
arrays they come from and their own), so an edited file or sidecar is rebuilt, never served.

>>> import tempfile
>>> store = ArrayStore(tempfile.mkdtemp(), recorded=None)
>>> store.array("order", lambda: np.arange(5)).tolist()
[0, 1, 2, 3, 4]
>>> (store.built, sorted(store.digests))
(['order'], ['order'])
>>> store.facts("pins", lambda: {"a.npy": "sha256:01"})
{'a.npy': 'sha256:01'}
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import threading
from typing import Any, Callable

import numpy as np

from .. import storage
from ..errors import ReplayError
from ..storage.seal import Derivation

log = logging.getLogger("batchscope.loaders")
_HASH_CHUNK = 8 << 20
#: Files checked in this process: (path, size, mtime, digest).
_CHECKED: set[tuple[str, int, float, str]] = set()
_LOCK = threading.Lock()


def _encode(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def file_digest(path: str) -> str:
    """SHA-256 of a local file, streamed."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


class ArrayStore:
    """The derived arrays of one replay, in ``directory``.

    ``recorded`` maps each array's name to the digest its run recorded at attach (``None`` while attaching: arrays
    found are used when their own ``.json`` vouches for them, the rest are built, and :attr:`digests` collects what to
    record). :attr:`built` lists what this store had to build.
    """

    def __init__(self, directory: str, *, recorded: dict[str, str] | None) -> None:
        self.directory = directory
        self.recorded = recorded
        self.digests: dict[str, str] = {}
        self.built: list[str] = []
        self.written: list[str] = []  # files this store created (removed again if an attach fails)
        self._open: dict[str, np.ndarray] = {}

    def _paths(self, name: str) -> tuple[str, str]:
        if not name.replace("-", "").replace(".", "").replace("_", "").isalnum():
            raise ReplayError(f"array name {name!r}: use letters, digits, '.', '_' or '-'")
        return os.path.join(self.directory, f"{name}.npy"), os.path.join(self.directory, f"{name}.json")

    def array(self, name: str, build: Callable[[], np.ndarray], *, derived_from: tuple[str, ...] = ()) -> np.ndarray:
        """Array ``name``: the stored file when it checks out, else ``build()`` stored; memory-mapped read-only.

        ``derived_from`` names arrays (opened already) that ``build`` computes this one from, after the run was
        attached: it is then trusted by its seal over their digests (see the module docstring), not by the run's record.
        """
        found = self._open.get(name)
        if found is not None:
            return found
        path, sidecar = self._paths(name)
        if derived_from:
            return self._derived(name, path, sidecar, build, derived_from)
        expected = self.recorded.get(name) if self.recorded is not None else self._vouched(sidecar)
        if self.recorded is not None and expected is None:
            raise ReplayError(f"the run recorded no array {name!r} when it was attached; attach it again")
        digest = self._checked(path, expected) if expected is not None else None
        if digest is None:
            digest = self._build(name, path, sidecar, build)
            if expected is not None and self.recorded is not None and digest != expected:
                raise ReplayError(
                    f"{path}: rebuilt index {name!r} differs from the one recorded when the run was attached "
                    "(the framework's code now orders the data differently); attach the run again to replay it as it reads now"
                )
        self.digests[name] = digest
        found = np.load(path, mmap_mode="r", allow_pickle=False)
        self._open[name] = found
        return found

    def _derived(self, name: str, path: str, sidecar: str, build: Callable[[], np.ndarray], inputs: tuple[str, ...]) -> np.ndarray:
        what = Derivation("replay-array", json.dumps([name, [self.digests[i] for i in inputs]]))
        try:
            with open(sidecar, encoding="utf-8") as f:
                stamp = json.load(f)
            digest, seal = stamp["sha256"], stamp.get("seal")
        except (OSError, ValueError, KeyError, TypeError):
            digest, seal = None, None
        trusted = isinstance(digest, str) and what.sealed(digest, seal) and self._checked(path, digest) is not None
        if not trusted:
            data = _encode(np.asarray(build()))
            digest = hashlib.sha256(data).hexdigest()
            storage.write_bytes_atomic(path, data)
            storage.write_bytes_atomic(sidecar, json.dumps({"sha256": digest, "seal": what.seal(digest)}).encode())
            self.built.append(name)
        self.digests[name] = digest
        found = np.load(path, mmap_mode="r", allow_pickle=False)
        self._open[name] = found
        return found

    def facts(self, name: str, build: Callable[[], Any]) -> Any:
        """JSON facts ``name`` a replay established when its run was attached (the checksums its framework's own code
        pins files by, say): built at every attach (never reused from another run), then read back and checked
        against the digest the run recorded; missing or changed, they are refused (attach the run again)."""
        path = os.path.join(self.directory, f"{name}.facts.json")
        self._paths(name)
        if self.recorded is None:
            data = json.dumps(build(), sort_keys=True).encode()
            existed = os.path.exists(path)
            storage.write_bytes_atomic(path, data)
            if not existed:
                self.written.append(path)
            self.digests[f"{name}.facts"] = hashlib.sha256(data).hexdigest()
            return json.loads(data)
        expected = self.recorded.get(f"{name}.facts")
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            data = None
        if expected is None or data is None or hashlib.sha256(data).hexdigest() != expected:
            raise ReplayError(f"{path}: what the replay established when the run was attached is missing or changed; attach the run again")
        self.digests[f"{name}.facts"] = expected
        return json.loads(data)

    def _vouched(self, sidecar: str) -> str | None:
        try:
            with open(sidecar, encoding="utf-8") as f:
                value = json.load(f).get("sha256")
        except (OSError, ValueError, AttributeError):
            return None
        return value if isinstance(value, str) else None

    def _checked(self, path: str, expected: str) -> str | None:
        """``expected`` when the file at ``path`` has that digest (checked once per process), else None."""
        try:
            stat = os.stat(path)
        except OSError:
            return None
        seen = (path, stat.st_size, stat.st_mtime, expected)
        with _LOCK:
            if seen in _CHECKED:
                return expected
        if file_digest(path) != expected:
            log.warning("%s: rebuilding a replay index: its content does not match its digest", path)
            return None
        with _LOCK:
            _CHECKED.add(seen)
        return expected

    def _build(self, name: str, path: str, sidecar: str, build: Callable[[], np.ndarray]) -> str:
        data = _encode(np.asarray(build()))
        digest = hashlib.sha256(data).hexdigest()
        existed = os.path.exists(path)
        storage.write_bytes_atomic(path, data)
        storage.write_bytes_atomic(sidecar, json.dumps({"sha256": digest}).encode())
        if not existed:
            self.written += [path, sidecar]
        self.built.append(name)
        return digest

    def discard_written(self) -> None:
        """Remove the files this store created (an attach that failed leaves nothing it wrote)."""
        for path in self.written:
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)  # a work folder this attach created
                continue
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        try:
            os.rmdir(self.directory)
        except OSError:
            pass
