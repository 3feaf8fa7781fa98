"""Where the RL indexes of a version live in the catalog, and the small in-process memory of the loaded ones.

Each is a derived table (``loaders.storage.derived``) at
``{root}/indexes/{dataset}/{version id}.{kind}.{column}.{part}``, sealed for its
version, column and layout beside the key index; one that fails its check or
cannot be decoded is rebuilt. Registered files are never touched.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from typing import Any, Callable

from .. import storage
from ..catalog.version import DatasetVersion
from ..storage import derived

#: Layout of the RL index files. 3 named the layout in the file name and kept a sha256 file beside each; since 4 the
#: layout is in the stamp (since 5 under a seal), so files of any other layout (or none) are rebuilt where they are found.
LAYOUT = 5


def derivation(version: DatasetVersion, kind: str, column: str) -> derived.Derivation:
    """What the ``kind`` index of ``column`` of ``version`` is, for its seal.

    >>> from types import SimpleNamespace
    >>> derivation(SimpleNamespace(id="0f3a"), "rollout rows", "rollout").source
    '0f3a column "rollout"'
    """
    return derived.Derivation(kind, f"{version.id} column {json.dumps(column)}", layout=LAYOUT)


def index_path(root: str, version: DatasetVersion, kind: str, column: str, part: str) -> str:
    """Where part ``part`` (``rows.arrow``, ``parquet``...) of the ``kind`` index of ``column`` of ``version`` is kept.

    >>> from types import SimpleNamespace
    >>> index_path("/c", SimpleNamespace(name="rl", id="0f3a"), "rollouts", "rollout", "rows.arrow")
    '/c/indexes/rl/0f3a.rollouts.rollout.rows.arrow'
    """
    slug = column if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", column) else hashlib.sha256(column.encode()).hexdigest()[:16]
    return storage.join(root, "indexes", version.name, f"{version.id}.{kind}.{slug}.{part}")


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def lock(path: str) -> threading.Lock:
    """The lock that serializes building the index at ``path`` in this process."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(path, threading.Lock())


class Memo:
    """A small LRU of loaded indexes, keyed by (root, version id, kind, column)."""

    def __init__(self, size: int = 6) -> None:
        self.size = size
        self.items: OrderedDict[tuple[str, ...], Any] = OrderedDict()
        self.lock = threading.Lock()

    def peek(self, key: tuple[str, ...]) -> Any:
        with self.lock:
            return self.items.get(key)

    def get(self, key: tuple[str, ...], make: Callable[[], Any]) -> Any:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        value = make()
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        return value

    def forget(self, key: tuple[str, ...]) -> None:
        """Forget one loaded index."""
        with self.lock:
            self.items.pop(key, None)

    def clear(self) -> None:
        """Forget every loaded index (what a new process starts with)."""
        with self.lock:
            self.items.clear()


MEMO = Memo()
