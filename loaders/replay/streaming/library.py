"""mosaicml-streaming's own code, imported only when a Streaming run is replayed (the ``batchscope[streaming]`` extra).

The replay calls batching (which calls the partitioning and shuffling functions), ``StreamingDataset.resample_streams``,
``Stream`` (weights, index), the ``World`` and the shard readers. Streaming's package is imported whole when it can be;
its ``__init__`` also imports its vision datasets, and so torchvision, whose PyPI wheels are built for CUDA torch and
cannot load beside a CPU-only torch: then the package is registered without running its ``__init__`` and the parts
above import on their own (none of them needs torchvision).

>>> missing_line("mosaicml-streaming")
"mosaicml-streaming is not installed: install the extra with pip install 'batchscope[streaming]'"
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import sys
import threading
import types
from dataclasses import dataclass
from typing import Any

from ...errors import BatchscopeError

DISTRIBUTION = "mosaicml-streaming"
EXTRA = "streaming"
_LOCK = threading.Lock()


class StreamingUnavailable(BatchscopeError, ImportError):
    """mosaicml-streaming is not installed (or not importable): the message names the extra to install."""

    status = 501


def missing_line(distribution: str) -> str:
    """The one line that says which extra provides a missing distribution."""
    return f"{distribution} is not installed: install the extra with pip install 'batchscope[{EXTRA}]'"


def installed_version() -> str | None:
    """The installed mosaicml-streaming version, or None."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def _bare_package(name: str, path: str) -> None:
    """Register package ``name`` (at ``path``) without running its ``__init__``, so its submodules import alone."""
    parent, _, child = name.rpartition(".")
    if name in sys.modules:
        if parent:
            setattr(sys.modules[parent], child, sys.modules[name])
        return
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = [path]
    module = types.ModuleType(name)
    module.__path__ = [path]
    module.__spec__ = spec
    sys.modules[name] = module
    if parent:
        setattr(sys.modules[parent], child, module)


def import_streaming() -> None:
    """Make ``streaming.base.*`` importable: import Streaming's package whole, or, when its ``__init__`` cannot run
    here, register ``streaming`` and ``streaming.base`` without running theirs.

    A package already imported (by the training script itself, say) is left as it is.
    """
    with _LOCK:
        if sys.modules.get("streaming") is None:  # not imported yet, or blocked (None)
            try:
                spec = importlib.util.find_spec("streaming")
            except (ImportError, ValueError):
                spec = None
            if spec is None or not spec.submodule_search_locations or installed_version() is None:
                raise StreamingUnavailable(missing_line(DISTRIBUTION))
            try:
                if importlib.util.find_spec("torchvision") is None:
                    raise ImportError("no torchvision")  # its __init__ would fail on its vision datasets
                importlib.import_module("streaming")
            except Exception:  # noqa: BLE001 - its vision datasets (torchvision) cannot load beside this torch
                sys.modules.pop("streaming", None)
                _bare_package("streaming", list(spec.submodule_search_locations)[0])
        root = list(sys.modules["streaming"].__path__)[0]
        _bare_package("streaming.base", os.path.join(root, "base"))


@dataclass(frozen=True)
class Streaming:
    """The functions and classes of mosaicml-streaming the replay calls, and its version."""

    version: str
    generate_work: Any
    batching_methods: tuple[str, ...]
    partition_algos: tuple[str, ...]
    shuffle_algos: tuple[str, ...]
    resample_streams: Any
    set_shuffle_block_size: Any
    Stream: Any
    World: Any


_LOADED: Streaming | None = None


def streaming() -> Streaming:
    """mosaicml-streaming's parts, imported once; :class:`StreamingUnavailable` (naming the extra) when missing."""
    global _LOADED
    if _LOADED is not None:
        return _LOADED
    import_streaming()
    try:
        batching = importlib.import_module("streaming.base.batching")
        partition = importlib.import_module("streaming.base.partition")
        shuffle = importlib.import_module("streaming.base.shuffle")
        dataset = importlib.import_module("streaming.base.dataset")
        stream = importlib.import_module("streaming.base.stream")
        world = importlib.import_module("streaming.base.world")
    except ImportError as exc:
        raise StreamingUnavailable(
            f"{DISTRIBUTION} {installed_version()} cannot be imported ({exc}): reinstall the extra with pip install 'batchscope[{EXTRA}]'"
        ) from exc
    _LOADED = Streaming(
        version=installed_version() or "unknown",
        generate_work=batching.generate_work,
        batching_methods=tuple(batching.batching_methods),
        partition_algos=tuple(partition.algos),
        shuffle_algos=tuple(shuffle.algos),
        resample_streams=dataset.StreamingDataset.resample_streams,
        set_shuffle_block_size=dataset.StreamingDataset._set_shuffle_block_size,
        Stream=stream.Stream,
        World=world.World,
    )
    return _LOADED
