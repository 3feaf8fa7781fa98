"""Shard formats: how a version's files are described at registration and read, checked, row group by row group.

A dataset version is Parquet unless its manifest names another ``shard_format``. Every format gives the same two
things, so :class:`~loaders.catalog.version.DatasetVersion` reads any of them the same way (keys, pages, permalinks,
flags): ``scan(uri) -> (ShardInfo, schema)`` cuts a file into segments and hashes each once, and
``open(info, where=..., cache=...)`` returns a reader whose ``read_row_group(group, columns)`` fetches one segment,
checks it against its registered digest and decodes exactly those bytes; ``decoded_bytes(info, group)`` estimates
the memory one row group decodes to (the inspector's memory budget). A format is found by name in
:data:`FORMATS` and imported only when asked (a framework's replay can add the format its files are stored in).

A format whose files do not describe themselves takes options, written after its name like a query string
(``numpy-tokens?dtype=uint16&eos=0``): the whole name is what a version's manifest records, so the options are part
of the version's identity, and :func:`format_name` writes them in one canonical order.

>>> sorted(FORMATS)
['arrow-stream', 'mds', 'megatron-indexed', 'numpy-tokens', 'parquet']
>>> shard_format("parquet").extensions
('.parquet',)
>>> format_name("numpy-tokens", eos=0, dtype="uint16")
'numpy-tokens?dtype=uint16&eos=0'
"""

from __future__ import annotations

import importlib
import urllib.parse
from typing import Any, Protocol

import pyarrow as pa

from ..errors import RegistrationError
from .shards import ShardInfo

#: format name → ``"module:OBJECT"`` (an object with ``name``, ``extensions``, ``scan`` and ``open``).
FORMATS: dict[str, str] = {
    "parquet": "loaders.storage.shard_scan:PARQUET",
    "arrow-stream": "loaders.storage.arrow_stream:ARROW_STREAM",
    "megatron-indexed": "loaders.storage.megatron_indexed:MEGATRON_INDEXED",
    "numpy-tokens": "loaders.storage.numpy_tokens:NUMPY_TOKENS",
    "mds": "loaders.storage.mds:MDS",
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


def format_name(name: str, **options: Any) -> str:
    """The name of format ``name`` with ``options`` (their canonical spelling: sorted, ``None`` left out)."""
    given = {key: str(value) for key, value in sorted(options.items()) if value is not None}
    return f"{name}?{urllib.parse.urlencode(given)}" if given else name


def shard_format(name: str) -> ShardFormat:
    """The format called ``name``, with the options its name carries (imported on first use)."""
    found = _LOADED.get(name)
    if found is None:
        base, _, query = name.partition("?")
        if base not in FORMATS:
            raise RegistrationError(f"unknown shard format {base!r}; known formats: {', '.join(sorted(FORMATS))}")
        module, _, attribute = FORMATS[base].partition(":")
        found = getattr(importlib.import_module(module), attribute)
        if query:
            configure = getattr(found, "configured", None)
            if configure is None:
                raise RegistrationError(f"shard format {base!r} takes no options (given {query!r})")
            try:
                options = dict(urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=True))
            except ValueError as exc:
                raise RegistrationError(f"shard format {name!r}: options must be NAME=VALUE pairs joined by '&' ({exc})") from None
            found = configure(options)
        _LOADED[name] = found
    return found
