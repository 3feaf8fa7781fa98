"""Shard formats: how a version's files are described at registration and read, checked, row group by row group.

A dataset version is Parquet unless its manifest names another ``shard_format``. Every format gives the same two
things, so :class:`~loaders.catalog.version.DatasetVersion` reads any of them the same way (keys, pages, permalinks,
flags): ``scan(uri) -> (ShardInfo, schema)`` cuts a file into segments and hashes each once, and
``open(info, where=..., cache=...)`` returns a reader whose ``read_row_group(group, columns)`` fetches one segment,
checks it against its registered digest and decodes exactly those bytes; ``decoded_bytes(info, group)`` estimates
the memory one row group decodes to (the inspector's memory budget). A format is found by name in
:data:`FORMATS` and imported only when asked (a framework's replay can add the format its files are stored in).

>>> sorted(FORMATS)
['arrow-stream', 'parquet']
>>> shard_format("parquet").extensions
('.parquet',)
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

import pyarrow as pa

from ..errors import RegistrationError
from .shards import ShardInfo

#: format name → ``"module:OBJECT"`` (an object with ``name``, ``extensions``, ``scan`` and ``open``).
FORMATS: dict[str, str] = {
    "parquet": "loaders.storage.shards:PARQUET",
    "arrow-stream": "loaders.storage.arrow_stream:ARROW_STREAM",
}
#: The format of versions whose manifest names none.
DEFAULT = "parquet"


class ShardReader(Protocol):
    """One registered shard opened for reading; every fetch is checked against the manifest."""

    def read_row_group(self, row_group: int, columns: list[str] | None = None) -> pa.Table: ...


class ShardFormat(Protocol):
    """How files of one format are registered and read."""

    name: str
    extensions: tuple[str, ...]  # what a directory's files end with

    def scan(self, uri: str) -> tuple[ShardInfo, pa.Schema]: ...

    def open(self, shard: ShardInfo, *, where: str, cache: bool = True) -> Any: ...

    def decoded_bytes(self, shard: ShardInfo, row_group: int) -> int: ...  # memory one row group decodes to, estimated


_LOADED: dict[str, ShardFormat] = {}


def shard_format(name: str) -> ShardFormat:
    """The format called ``name`` (imported on first use)."""
    found = _LOADED.get(name)
    if found is None:
        if name not in FORMATS:
            raise RegistrationError(f"unknown shard format {name!r}; known formats: {', '.join(sorted(FORMATS))}")
        module, _, attribute = FORMATS[name].partition(":")
        found = _LOADED[name] = getattr(importlib.import_module(module), attribute)
    return found
