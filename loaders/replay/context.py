"""What a framework's replay is given: random access to its documents, its pinned files, a store of derived arrays.

>>> context = Context([], {}, ArrayStore("/tmp/bs-arrays", recorded=None))       # doctest: +SKIP
>>> context.array("order", lambda: np.arange(3))                                 # doctest: +SKIP
memmap([0, 1, 2])
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable, Sequence

import numpy as np

from ..catalog.version import DatasetVersion
from ..errors import ReplayError
from .arrays import ArrayStore
from .pins import Pin


class Context:
    """The :class:`~loaders.replay.framework.ReplayContext` of one replay (pins already checked by its maker)."""

    def __init__(self, versions: Sequence[DatasetVersion], pins: dict[str, Pin], arrays: ArrayStore) -> None:
        self._versions = list(versions)
        self.pins = pins
        self.arrays = arrays

    @property
    def versions(self) -> Sequence[DatasetVersion]:
        return self._versions

    def pinned_path(self, path: str) -> str:
        absolute = os.path.abspath(path)
        if absolute not in self.pins:
            raise ReplayError(f"{absolute}: the replay reads a file it did not pin (a framework module must name it in its layout)")
        return absolute

    def array(self, name: str, build: Callable[[], np.ndarray], *, derived_from: tuple[str, ...] = ()) -> np.ndarray:
        return self.arrays.array(name, build, derived_from=derived_from)

    @property
    def work_dir(self) -> str:
        """``work/`` beside the replay's arrays: derived files a framework's own code writes and checks itself."""
        path = os.path.join(self.arrays.directory, "work")
        if not os.path.isdir(path):
            os.makedirs(path, exist_ok=True)
            self.arrays.written.append(path)
        return path

    def facts(self, name: str, build: Callable[[], Any]) -> Any:
        return self.arrays.facts(name, build)


#: The layout of the arrays replays build: a new one is built in a folder of its own (runs attached before keep theirs).
#: 2: batch indexes store positions and offsets as int32 where they fit.
ARRAYS_LAYOUT = 2


def arrays_key(framework: str, settings: dict[str, Any], versions: Sequence[DatasetVersion], pins: Sequence[Pin]) -> str:
    """The key of a replay's derived arrays: everything they are a function of (framework, settings, pinned content).

    >>> len(arrays_key("hf", {"seed": 1}, [], []))
    32
    """
    spec = {
        "layout": ARRAYS_LAYOUT,
        "framework": framework,
        "settings": settings,
        "versions": [[v.name, v.id] for v in versions],
        "pins": sorted(p.sha256 for p in pins),
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:32]
