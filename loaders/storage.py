"""Storage: one place that turns URIs into pyarrow filesystems, reads byte ranges and writes atomically."""

from __future__ import annotations

import os
import posixpath
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pyarrow.fs as pafs

from .errors import StorageError


def is_remote(uri: str) -> bool:
    """True when ``uri`` names an object store or another non-local filesystem."""
    return "://" in uri and not uri.startswith("file://")


def normalize(uri: str | os.PathLike[str]) -> str:
    """Return an absolute local path, or the URI unchanged when it is remote.

    >>> normalize("file:///tmp/x.parquet")
    '/tmp/x.parquet'
    """
    text = os.fspath(uri)
    if text.startswith("file://"):
        return text[len("file://"):]
    if is_remote(text):
        return text.rstrip("/")
    return str(Path(text).expanduser().absolute())


def join(base: str, *parts: str) -> str:
    """Join path parts below ``base`` (a local path or a URI)."""
    if is_remote(base):
        return posixpath.join(base, *parts)
    return os.path.join(base, *parts)


@lru_cache(maxsize=32)
def _filesystem_for(scheme_and_authority: str) -> pafs.FileSystem:
    fs, _ = pafs.FileSystem.from_uri(scheme_and_authority)
    return fs


def resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    """Return ``(filesystem, path)`` for a local path or a pyarrow filesystem URI."""
    uri = normalize(uri)
    if not is_remote(uri):
        return pafs.LocalFileSystem(), uri
    if uri.startswith("s3://"):
        from .s3 import s3_filesystem

        bucket_and_key = uri[len("s3://"):]
        return s3_filesystem(), bucket_and_key
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


def stat(uri: str) -> FileStat:
    """Return whether ``uri`` exists and its size in bytes."""
    fs, path = resolve(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return FileStat(False, 0)
    return FileStat(True, int(info.size or 0))


def read_bytes(uri: str) -> bytes:
    """Read a whole (small) file such as a manifest."""
    fs, path = resolve(uri)
    with fs.open_input_stream(path) as stream:
        return stream.read()


def read_range(uri: str, offset: int, length: int) -> bytes:
    """Read ``length`` bytes at ``offset`` without reading the rest of the file."""
    fs, path = resolve(uri)
    with fs.open_input_file(path) as handle:
        return handle.read_at(length, offset)


def write_bytes_atomic(uri: str, data: bytes) -> None:
    """Write ``data`` so that readers see the old content or the new, never a torn file.

    Locally: write a temporary sibling, fsync, rename over the target. Object
    stores publish a PUT atomically, so a single write is enough there.
    """
    fs, path = resolve(uri)
    if is_remote(normalize(uri)):
        with fs.open_output_stream(path) as out:
            out.write(data)
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
    return sorted(posixpath.basename(info.path.rstrip("/")) for info in fs.get_file_info(selector))


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
