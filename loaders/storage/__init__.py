"""Storage: URIs to files, byte ranges and atomic writes (local, S3, HTTP), with retries, caches, thread pools,
the checks of Parquet bytes (footers, page headers, shards) and derived files with their seals.

``loaders.storage`` itself is the file API every layer above uses (``storage.read_range(uri, offset, length)``,
``storage.write_bytes_atomic``...); it is :mod:`loaders.storage.files`, re-exported.

>>> from loaders import storage
>>> storage.join("s3://bucket/prefix", "a.parquet")
's3://bucket/prefix/a.parquet'
"""

from .files import (
    FileStat,
    append_line,
    evict,
    identity,
    is_http,
    is_remote,
    join,
    list_names,
    normalize,
    prefetch,
    read_bytes,
    read_range,
    read_range_into,
    resolve,
    stat,
    write_bytes_atomic,
    write_if_absent,
)

__all__ = [
    "FileStat",
    "append_line",
    "evict",
    "identity",
    "is_http",
    "is_remote",
    "join",
    "list_names",
    "normalize",
    "prefetch",
    "read_bytes",
    "read_range",
    "read_range_into",
    "resolve",
    "stat",
    "write_bytes_atomic",
    "write_if_absent",
]
