"""Storage: one place that turns URIs into files, reads byte ranges and writes atomically.

Local paths are read directly. ``s3://`` (configured by the AWS environment
variables, see :mod:`loaders.storage.s3`) and any other pyarrow filesystem URI
(``gs://``, ``hdfs://``...) go through ``pyarrow.fs``; ``http(s)://`` files
are read with HEAD and ``Range`` requests. Every remote call is retried on
transient errors (:mod:`loaders.storage.retry`), a remote read never returns fewer
bytes than asked, and remote byte ranges go through the local disk cache
(:mod:`loaders.storage.disk_cache`).
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import stat as stat_module
import threading
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import StorageError
from . import disk_cache
from .retry import ShortRead, is_transient, with_retries


def is_remote(uri: str) -> bool:
    """True when ``uri`` names an object store or another non-local filesystem."""
    return "://" in uri and not uri.startswith("file://")


def is_http(uri: str) -> bool:
    """True for ``http://`` and ``https://`` URIs (read-only, over range requests)."""
    return uri.startswith(("http://", "https://"))


#: What makes an absolute path differ from its pathlib form: doubled slashes, ``.`` segments, a trailing slash.
_UNCLEAN = re.compile(r"//|/\.(/|$)|/$")


def normalize(uri: str | os.PathLike[str]) -> str:
    """Return an absolute local path, or the URI unchanged when it is remote.

    >>> normalize("file:///tmp/x.parquet")
    '/tmp/x.parquet'
    """
    text = os.fspath(uri)
    if text.startswith("/") and not _UNCLEAN.search(text):  # already what pathlib would make of it (hot: every read)
        return text
    if text.startswith("file://"):
        return text[len("file://") :]
    if is_remote(text):
        return text.rstrip("/")
    return str(Path(text).expanduser().absolute())


def join(base: str, *parts: str) -> str:
    """Join path parts below ``base`` (a local path or a URI)."""
    if is_remote(base):
        return posixpath.join(base, *parts)
    return os.path.join(base, *parts)


def resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    """Return ``(filesystem, path)`` for a local path, a pyarrow filesystem URI or an http(s) URL.

    http(s) URLs get a read-only filesystem whose path is the URL itself.
    """
    uri = normalize(uri)
    if not is_remote(uri):
        return pafs.LocalFileSystem(), uri
    if uri.startswith("s3://"):
        from .s3 import s3_filesystem

        bucket_and_key = uri[len("s3://") :]
        return s3_filesystem(), bucket_and_key
    if is_http(uri):
        return _http_filesystem(), uri
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for unknown schemes
        raise StorageError(f"cannot open storage URI {uri!r}: {exc}") from exc
    return fs, path


@dataclass(frozen=True)
class FileStat:
    """Size of a stored file; ``exists`` is False when nothing is stored there."""

    exists: bool
    size: int


# Validators of remote files seen by stat(): they key the disk cache, so a file
# replaced in place (new size, mtime or ETag) is never answered from old entries.
_VALIDATORS: dict[str, str] = {}
_VALIDATORS_LOCK = threading.Lock()


def _remember(uri: str, validator: str | None) -> None:
    with _VALIDATORS_LOCK:
        if validator is None:
            _VALIDATORS.pop(uri, None)
        else:
            _VALIDATORS[uri] = validator


def _remote_stat(uri: str) -> tuple[FileStat, str | None]:
    if is_http(uri):
        return with_retries("stat", uri, lambda: _http_head(uri))
    fs, path = resolve(uri)
    info = with_retries("stat", uri, lambda: fs.get_file_info(path))
    if info.type == pafs.FileType.NotFound:
        return FileStat(False, 0), None
    size = int(info.size or 0)
    return FileStat(True, size), f"{size}:{info.mtime_ns or 0}"


def stat(uri: str) -> FileStat:
    """Return whether ``uri`` exists and its size in bytes."""
    uri = normalize(uri)
    if is_remote(uri):
        result, validator = _remote_stat(uri)
        _remember(uri, validator)
        return result
    try:  # a local path (normalized): the system call itself, ~100x cheaper than a pyarrow filesystem round trip
        info = os.stat(uri)
    except (FileNotFoundError, NotADirectoryError):
        return FileStat(False, 0)
    return FileStat(True, info.st_size if stat_module.S_ISREG(info.st_mode) else 0)


def identity(uri: str) -> str:
    """What changes when a file is rewritten: its size and modification time (and inode locally; the validator remote
    stores give: size and modification time, or an HTTP ``ETag``); ``""`` when nothing is stored there.

    Scans compare it before and after reading a file, so a file rewritten while it is read is refused.

    >>> identity("/nonexistent/batchscope-file")
    ''
    """
    uri = normalize(uri)
    if is_remote(uri):
        result, validator = _remote_stat(uri)
        _remember(uri, validator)
        return f"{result.size}:{validator}" if result.exists else ""
    try:
        info = os.stat(uri)
    except FileNotFoundError:
        return ""
    return f"{info.st_size}:{info.st_mtime_ns}:{info.st_ino}"


def read_bytes(uri: str) -> bytes:
    """Read a whole (small) file such as a manifest; never cached, since tags and refs move."""
    uri = normalize(uri)
    if not is_remote(uri):
        with open(uri, "rb") as handle:
            return handle.read()
    if is_http(uri):
        return with_retries("read", uri, lambda: _http_get(uri)[1])
    fs, path = resolve(uri)

    def read_all() -> bytes:
        with fs.open_input_file(path) as handle:
            size = handle.size()
            data = handle.read()
        if len(data) != size:
            raise ShortRead(f"{uri}: read {len(data)} of {size} bytes")
        return data

    return with_retries("read", uri, read_all)


def read_range(uri: str, offset: int, length: int, *, cache: bool = True) -> bytes:
    """Read ``length`` bytes at ``offset`` without reading the rest of the file.

    Remote reads are retried, return exactly ``length`` bytes or raise, and
    go through the disk cache unless ``cache=False`` (use that for one-off
    streaming such as checksumming a whole file at registration).
    """
    uri = normalize(uri)
    if not is_remote(uri):
        fs, path = resolve(uri)
        with fs.open_input_file(path) as handle:
            return handle.read_at(length, offset)
    if length <= 0:
        return b""
    store = disk_cache.default_cache() if cache else None
    if store is None:
        return _fetch_range(uri, offset, length)
    return store.get_or_fetch(uri, offset, length, validator=_validator(uri), fetch=lambda: _fetch_range(uri, offset, length))


def read_range_into(uri: str, offset: int, target: memoryview, *, cache: bool = True) -> int:
    """Fill ``target`` with the bytes at ``offset`` (like :func:`read_range`, without an intermediate copy).

    Returns how many bytes were read: fewer than ``len(target)`` only when the
    file ends first. Remote files go through :func:`read_range` and (unless
    ``cache`` is False) its cache.
    """
    uri = normalize(uri)
    if is_remote(uri):
        data = read_range(uri, offset, len(target), cache=cache)
        target[: len(data)] = data
        return len(data)
    fd = os.open(uri, os.O_RDONLY)  # normalized: a local absolute path
    try:
        done = 0
        while done < len(target):
            got = os.preadv(fd, [target[done:]], offset + done)
            if got == 0:
                break
            done += got
        return done
    finally:
        os.close(fd)


def evict(uri: str, offset: int, length: int) -> bool:
    """Forget a cached range, e.g. when its bytes failed their checksum, so the next read fetches it again."""
    uri = normalize(uri)
    return is_remote(uri) and disk_cache.evict(uri, offset, length)


def prefetch(uri: str, ranges: Iterable[tuple[int, int]]) -> list[Future[None]]:
    """Warm the disk cache with ``(offset, length)`` ranges of ``uri`` on a bounded background pool.

    Advisory: local files, a disabled or unwritable cache, and ranges beyond
    the queue bound are skipped; errors surface later, when the range is read.
    The returned futures finish when their range is cached (or failed).

    >>> prefetch("s3://bucket/part-0.parquet", [(4, 1000), (1004, 900)])  # doctest: +SKIP
    """
    uri = normalize(uri)
    store = disk_cache.default_cache()
    if not is_remote(uri) or store is None or not store.writable:
        return []
    return disk_cache.background(lambda o=offset, n=length: read_range(uri, o, n) for offset, length in ranges)


def _validator(uri: str) -> str:
    with _VALIDATORS_LOCK:
        known = _VALIDATORS.get(uri)
    if known is not None:
        return known
    result, validator = _remote_stat(uri)
    if not result.exists or validator is None:
        raise FileNotFoundError(errno.ENOENT, "no such file", uri)
    _remember(uri, validator)
    return validator


def _fetch_range(uri: str, offset: int, length: int) -> bytes:
    operation = f"read of bytes {offset}-{offset + length - 1} of"

    def attempt() -> bytes:
        if is_http(uri):
            data, total = _http_range(uri, offset, length)
        else:
            fs, path = resolve(uri)
            with fs.open_input_file(path) as handle:
                data, total = handle.read_at(length, offset), handle.size()
        if len(data) == length:
            return data
        if total is not None and total < offset + length:
            raise StorageError(f"{operation} {uri}: the file is {total} bytes, the range ends past it (changed while reading?)")
        raise ShortRead(f"{uri}: got {len(data)} of {length} bytes at offset {offset}")

    return with_retries(operation, uri, attempt)


def write_bytes_atomic(uri: str, data: bytes) -> None:
    """Write ``data`` so that readers see the old content or the new, never a torn file.

    Locally: write a temporary sibling, fsync, rename over the target. Object
    stores publish a PUT atomically, so a single (retried) write is enough there.
    """
    fs, path = resolve(uri)
    if is_remote(normalize(uri)):
        _refuse_http(uri, "written")

        def put() -> None:
            with fs.open_output_stream(path) as out:
                out.write(data)

        with_retries("write", normalize(uri), put)
        return
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_if_absent(uri: str, data: bytes) -> bool:
    """Write ``data`` atomically unless the file exists; return True when written."""
    if stat(uri).exists:
        return False
    write_bytes_atomic(uri, data)
    return True


def list_names(uri: str) -> list[str]:
    """Names directly below a directory (empty when it does not exist), sorted."""
    fs, path = resolve(uri)
    selector = pafs.FileSelector(path, allow_not_found=True, recursive=False)
    if is_remote(normalize(uri)):
        _refuse_http(uri, "listed")
        infos = with_retries("list", normalize(uri), lambda: fs.get_file_info(selector))
    else:
        infos = fs.get_file_info(selector)
    return sorted(posixpath.basename(info.path.rstrip("/")) for info in infos)


def append_line(uri: str, line: str) -> None:
    """Append one line to a local log file (ledgers and history files), flushing it."""
    path = normalize(uri)
    if is_remote(path):
        existing = read_bytes(path) if stat(path).exists else b""
        write_bytes_atomic(path, existing + line.encode() + b"\n")
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")


def _refuse_http(uri: str, action: str) -> None:
    if is_http(normalize(uri)):
        raise StorageError(f"{normalize(uri)}: http(s) storage is read-only and cannot be {action}; use s3:// or a local path")


# -- http(s): HEAD for size, Range requests for bytes ----------------------
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def _timeout() -> float:
    return float(os.environ.get("BATCHSCOPE_REQUEST_TIMEOUT") or 30)


def _http(url: str, *, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request; 404/410 become FileNotFoundError and 401/403 PermissionError (not retried)."""
    import urllib.request  # only here: it costs a tenth of a second to import, and most catalogs never speak HTTP

    request = urllib.request.Request(url, method=method, headers={"User-Agent": "batchscope", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=_timeout()) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code in (404, 410):
            raise FileNotFoundError(errno.ENOENT, f"HTTP {exc.code} {exc.reason}", url) from None
        if exc.code in (401, 403):
            raise PermissionError(errno.EACCES, f"HTTP {exc.code} {exc.reason}", url) from None
        if not is_transient(exc):
            raise StorageError(f"{method} {url}: HTTP {exc.code} {exc.reason}") from None
        raise


def _http_head(url: str) -> tuple[FileStat, str | None]:
    try:
        _, headers, _ = _http(url, method="HEAD")
    except FileNotFoundError:
        return FileStat(False, 0), None
    if "content-length" not in headers:
        raise StorageError(f"{url}: the server gives no Content-Length, so the file's size is unknown")
    size = int(headers["content-length"])
    return FileStat(True, size), f"{size}:{headers.get('etag') or headers.get('last-modified') or ''}"


def _http_get(url: str) -> tuple[int, bytes]:
    _, headers, body = _http(url)
    expected = int(headers.get("content-length", len(body)))
    if len(body) != expected:
        raise ShortRead(f"{url}: got {len(body)} of {expected} bytes")
    return expected, body


def _http_range(url: str, offset: int, length: int) -> tuple[bytes, int | None]:
    """``length`` bytes at ``offset`` (or fewer, the caller checks) and the file size when the server says it."""
    status, headers, body = _http(url, headers={"Range": f"bytes={offset}-{offset + length - 1}"})
    if status == 200:
        if offset == 0 and len(body) >= length:
            return body[:length], len(body)
        raise StorageError(f"{url}: the server ignores Range requests (answered 200 for bytes {offset}-{offset + length - 1})")
    match = _CONTENT_RANGE.fullmatch(headers.get("content-range", "").strip())
    if status != 206 or match is None or int(match.group(1)) != offset:
        raise StorageError(f"{url}: unexpected answer to a range request: HTTP {status}, Content-Range {headers.get('content-range')!r}")
    return body, None if match.group(3) == "*" else int(match.group(3))


class _HttpReader:
    """A seekable, read-only file over range requests (uncached, retried), for pyarrow."""

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.position, self.closed = url, size, 0, False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = 0) -> int:
        self.position = (0, self.position, self.size)[whence] + offset
        return self.position

    def read(self, length: int = -1) -> bytes:
        end = self.size if length is None or length < 0 else min(self.size, self.position + length)
        data = read_range(self.url, self.position, end - self.position, cache=False) if end > self.position else b""
        self.position += len(data)
        return data

    def close(self) -> None:
        self.closed = True


class _HttpHandler(pafs.FileSystemHandler):
    """Read-only pyarrow filesystem over http(s), so code holding ``resolve()``'s filesystem can read URLs."""

    def get_type_name(self) -> str:
        return "batchscope-http"

    def equals(self, other: object) -> bool:
        return isinstance(other, _HttpHandler)

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        out = []
        for path in paths:
            found = stat(path)
            kind = pafs.FileType.File if found.exists else pafs.FileType.NotFound
            out.append(pafs.FileInfo(path, kind, size=found.size if found.exists else None))
        return out

    def open_input_file(self, path: str) -> pa.NativeFile:
        found = stat(path)
        if not found.exists:
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        return pa.PythonFile(_HttpReader(path, found.size), mode="r")

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.open_input_file(path)

    def _read_only(self, *args: object, **kwargs: object) -> object:
        raise StorageError(f"http(s) storage is read-only ({args[0] if args else ''})")

    get_file_info_selector = create_dir = delete_dir = delete_dir_contents = _read_only
    delete_root_dir_contents = delete_file = move = copy_file = _read_only
    open_output_stream = open_append_stream = _read_only


@lru_cache(maxsize=1)
def _http_filesystem() -> pafs.FileSystem:
    return pafs.PyFileSystem(_HttpHandler())
