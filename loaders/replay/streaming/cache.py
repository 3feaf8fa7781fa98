"""Epoch tables computed once: kept in memory (the few most recent), and on disk as memory-mapped ``.npy`` files
when a cache folder is given.

A cached file is derived data, never trusted as such: its sidecar ``.json`` names the key it was computed for (a
digest of everything the table depends on), its shape, dtype and the SHA-256 of the file; the first use in a process
checks all of them, and a file that fails is recomputed (with a warning naming it and why), never served.

>>> cache = TableCache(None)
>>> cache.get("k", lambda: np.arange(3)).tolist()
[0, 1, 2]
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from typing import Callable

import numpy as np

from .source import file_sha256

log = logging.getLogger(__name__)
_KEPT = 4


class TableCache:
    """Arrays by key: built once per key with ``build()``, kept in memory, and in ``directory`` when given."""

    def __init__(self, directory: str | None) -> None:
        self.directory = directory
        self._memory: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.RLock()

    def get(self, key: str, build: Callable[[], np.ndarray]) -> np.ndarray:
        """The array of ``key``: from memory, else from a checked file, else ``build()`` (and stored)."""
        with self._lock:
            if key in self._memory:
                self._memory.move_to_end(key)
                return self._memory[key]
            table = self._load(key) if self.directory else None
            if table is None:
                table = build()
                if self.directory:
                    table = self._store(key, table)
            self._memory[key] = table
            while len(self._memory) > _KEPT:
                self._memory.popitem(last=False)
            return table

    def _paths(self, key: str) -> tuple[str, str]:
        assert self.directory is not None
        return os.path.join(self.directory, f"{key}.npy"), os.path.join(self.directory, f"{key}.json")

    def _load(self, key: str) -> np.ndarray | None:
        data_path, meta_path = self._paths(key)
        if not os.path.exists(meta_path) and not os.path.exists(data_path):
            return None
        try:
            with open(meta_path, encoding="utf-8") as handle:
                meta = json.load(handle)
            table = np.load(data_path, mmap_mode="r", allow_pickle=False)
            problem = None
            if meta.get("key") != key:
                problem = "it names another key"
            elif list(table.shape) != meta.get("shape") or str(table.dtype) != meta.get("dtype"):
                problem = f"it holds {table.dtype}{list(table.shape)}, its stamp says {meta.get('dtype')}{meta.get('shape')}"
            elif file_sha256(data_path) != meta.get("sha256"):
                problem = "its content does not match its digest"
        except (OSError, ValueError) as exc:
            problem = f"it cannot be read ({exc})"
        if problem is None:
            return table
        log.warning("%s: recomputing the cached epoch order: %s", data_path, problem)
        return None

    def _store(self, key: str, table: np.ndarray) -> np.ndarray:
        assert self.directory is not None
        os.makedirs(self.directory, exist_ok=True)
        data_path, meta_path = self._paths(key)
        handle, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".npy")
        try:
            with os.fdopen(handle, "wb") as out:
                np.save(out, np.ascontiguousarray(table), allow_pickle=False)
            meta = {"key": key, "shape": list(table.shape), "dtype": str(table.dtype), "sha256": file_sha256(tmp)}
            os.replace(tmp, data_path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        handle, tmp_meta = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(meta, out)
        os.replace(tmp_meta, meta_path)
        return np.load(data_path, mmap_mode="r", allow_pickle=False)
