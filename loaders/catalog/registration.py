"""Registration's scan: every file's footer, checksums and key column, read once, in parallel on an engine, resumable.

One task per file reads its footer — and, for a file up to one task's worth of
bytes (64 MB, 8 MB on remote stores), the whole file at once, so it is
checked, hashed and keyed by that one task. Larger files are then cut into
ranges of row groups of that size, one task each, that read those bytes
once, walk their page headers, hash them and decode the key column from the
same bytes. Results are put together in file order, so every engine gives
the same manifest. Each finished file's result is kept in the scan's staging
area (:class:`loaders.engine.Checkpoints`) with the file's identity (size,
modification time...), so a registration interrupted at 90 % resumes there
without reading those files again; a file whose identity moved while it was
read is refused by name.

>>> file_task("s3://bucket/a.parquet", key="id").whole_bytes == REMOTE_TASK_BYTES
True
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Callable, Sequence

import pyarrow as pa

from .. import storage
from ..engine import Checkpoints, Engine, ordered
from ..errors import RegistrationError
from ..storage.shard_scan import SegmentScan, ShardLayout, layout_ranges, read_layout, scan_segments, shard_info
from ..storage.shards import ShardInfo, file_buffer

#: Bytes of row groups one task reads (at least one row group): locally, and from remote stores (where that many
#: requests are in flight at once, each holding its bytes). Files up to that size are read whole by one task.
TASK_BYTES = 64 << 20
REMOTE_TASK_BYTES = 16 << 20
#: Object stores that replace an object whole: a file read in one request there cannot change while it is read.
_ATOMIC_OBJECTS = ("s3://", "gs://")
#: ``progress(done, total)`` in bytes.
Progress = Callable[[int, "int | None"], None]


@dataclass(frozen=True)
class FileScan:
    """What registration learns from one file: its manifest entry, schema, key column (as text) and identity."""

    shard: ShardInfo
    schema: pa.Schema
    keys: pa.Array | None
    identity: str


@dataclass(frozen=True)
class FileTask:
    """Read one file's footer, and the whole file when it holds at most ``whole_bytes``."""

    uri: str
    key: str | None
    whole_bytes: int


@dataclass(frozen=True)
class _Footer:
    uri: str
    identity: str
    layout: ShardLayout
    #: The whole file's scan, when the task read it whole.
    scan: SegmentScan | None = None


@dataclass(frozen=True)
class _Range:
    layout: ShardLayout
    first: int
    last: int
    key: str | None
    identity: str


def _size_of(identity: str) -> int:
    return int(identity.split(":", 1)[0])


def file_task(uri: str, *, key: str | None) -> FileTask:
    """The first task of registering ``uri``."""
    return FileTask(uri, key, REMOTE_TASK_BYTES if storage.is_remote(uri) else TASK_BYTES)


def read_footer(task: FileTask) -> _Footer:
    """Task: one file's identity and layout, and (small files) its whole scan; RegistrationError names a broken file."""
    identity = storage.identity(task.uri)
    if not identity:
        raise RegistrationError(f"{task.uri}: no such file")
    size = _size_of(identity)
    if size > task.whole_bytes:
        return _Footer(task.uri, identity, read_layout(task.uri, size))
    _, view = file_buffer(size)
    whole = view[:size]
    try:
        got = storage.read_range_into(task.uri, 0, whole, cache=False)
        if got != size:
            raise RegistrationError(f"{task.uri}: file ended at byte {got}, expected {size}")
        layout = read_layout(task.uri, size, whole=whole)
        scan = None
        if task.key is None or task.key in layout.schema().names:  # (a missing key column is refused by name later)
            scan = scan_segments(layout, 0, layout.segments, key=task.key, whole=whole)
    except (RegistrationError, OSError) as exc:  # what a file rewritten under us looks like, first
        _refuse_if_changed(task.uri, identity, exc)
        raise
    if not task.uri.startswith(_ATOMIC_OBJECTS):  # (one GET of an object reads one version of it, whole)
        _refuse_if_changed(task.uri, identity, None)
    return _Footer(task.uri, identity, layout, scan)


def scan_range(task: _Range) -> SegmentScan:
    """Task: scan a range of a file's segments, refusing the file if it changed since its footer was read."""
    try:
        scan = scan_segments(task.layout, task.first, task.last, key=task.key)
    except (RegistrationError, OSError) as exc:
        _refuse_if_changed(task.layout.uri, task.identity, exc)
        raise
    _refuse_if_changed(task.layout.uri, task.identity, None)
    return scan


def _refuse_if_changed(uri: str, identity: str, cause: BaseException | None) -> None:
    if storage.identity(uri) != identity:
        raise RegistrationError(
            f"{uri}: the file changed while it was being registered (its size or modification time moved); "
            "nothing was registered — register it again once it is written"
        ) from cause


def _encode(scan: FileScan) -> bytes:
    header = {
        "shard": scan.shard.to_json(),
        "schema": base64.b64encode(scan.schema.serialize().to_pybytes()).decode(),
        "keys": scan.keys is not None,
    }
    body = b""
    if scan.keys is not None:
        sink = pa.BufferOutputStream()
        table = pa.table({"key": scan.keys})
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        body = sink.getvalue().to_pybytes()
    return json.dumps(header).encode() + b"\n" + body


def _decode(payload: bytes, identity: str) -> FileScan | None:
    try:
        line, _, body = payload.partition(b"\n")
        header = json.loads(line)
        schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(header["schema"])))
        keys = pa.ipc.open_stream(pa.py_buffer(body)).read_all().column("key").combine_chunks() if header["keys"] else None
        return FileScan(ShardInfo.from_json(header["shard"]), schema, keys, identity)
    except (ValueError, KeyError, TypeError, pa.ArrowException):
        return None


def job_name(name: str, files: Sequence[str], key: str | None) -> str:
    """The staging job of registering ``files`` as ``name`` (the same command resumes the same job)."""
    text = json.dumps({"name": name, "files": list(files), "key": key})
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _kept(checkpoints: Checkpoints | None, uri: str, identity: str, key: str | None) -> FileScan | None:
    """The result the staging area keeps for ``uri`` at ``identity`` (with a key column when one is asked for)."""
    payload = checkpoints.get(uri, identity) if checkpoints is not None else None
    scan = _decode(payload, identity) if payload is not None else None
    return scan if scan is not None and (scan.keys is not None) == (key is not None) else None


class _Tally:
    """Bytes done of bytes to do, for ``progress``: exact for local files, extrapolated for remote ones until every
    file's size is known."""

    def __init__(self, files: Sequence[str], progress: Progress | None) -> None:
        self.progress = progress
        self.count = len(files)
        self.sizes: dict[int, int] = {}
        self.done = 0
        self.exact: int | None = None
        if not any(storage.is_remote(uri) for uri in files):
            try:
                self.exact = sum(os.path.getsize(uri) for uri in files)
            except OSError:
                self.exact = None  # a missing file: its task says so

    def known(self, position: int, size: int) -> None:
        self.sizes[position] = size

    def add(self, size: int) -> None:
        self.done += size
        self.report()

    def report(self) -> None:
        if self.progress is None:
            return
        if self.exact is not None or len(self.sizes) == self.count:
            total = self.exact if self.exact is not None else sum(self.sizes.values())
        elif self.sizes:
            total = round(sum(self.sizes.values()) / len(self.sizes) * self.count)
        else:
            total = None
        self.progress(self.done, total if total is None else max(total, self.done))


def scan_files(
    files: Sequence[str],
    *,
    key: str | None,
    engine: Engine,
    checkpoints: Checkpoints | None = None,
    progress: Progress | None = None,
) -> list[FileScan]:
    """Scan every file once on ``engine``; reuse the results ``checkpoints`` keeps for files that did not change."""
    work = "io" if any(storage.is_remote(uri) for uri in files) else "cpu"
    tally = _Tally(files, progress)
    found: dict[int, FileScan] = {}
    staged = [p for p, uri in enumerate(files) if checkpoints is not None and checkpoints.identity(uri) is not None]
    if staged:  # files an interrupted run finished: taken when they still have the identity they were read with
        identities = ordered(engine, storage.identity, [files[p] for p in staged], labels=[files[p] for p in staged], work=work)
        for position, identity in zip(staged, identities):
            kept = _kept(checkpoints, files[position], identity, key)
            if kept is not None:
                found[position] = kept
                tally.known(position, kept.shard.size)
                tally.done += kept.shard.size
    tally.report()

    def finished(position: int, scan: FileScan, *, counted: int = 0) -> None:
        found[position] = scan
        if checkpoints is not None:
            checkpoints.put(files[position], scan.identity, _encode(scan))
        tally.add(scan.shard.size - counted)

    rest = [p for p in range(len(files)) if p not in found]
    footers: dict[int, _Footer] = {}
    for index, footer in engine.run(read_footer, [file_task(files[p], key=key) for p in rest], labels=[files[p] for p in rest], work=work):
        position = rest[index]
        footers[position] = footer
        tally.known(position, footer.layout.size)
        if footer.scan is not None:  # a small file, read whole by its first task
            finished(position, _assemble(footer, [footer.scan], key))
    schemas = [found[p].schema if p in found else footers[p].layout.schema() for p in range(len(files))]
    _check_schemas(files, schemas, key)  # before any large file's data is read
    tasks: list[_Range] = []
    owners: list[int] = []
    for position, footer in footers.items():
        if position in found:
            continue
        layout = footer.layout
        target = REMOTE_TASK_BYTES if storage.is_remote(footer.uri) else TASK_BYTES
        for lo, hi in layout_ranges(segment_sizes=layout.segment_sizes(), target=target):
            tasks.append(_Range(layout, lo, hi, key, footer.identity))
            owners.append(position)
    waiting = {position: owners.count(position) for position in set(owners)}
    scans: dict[int, list[SegmentScan]] = {position: [] for position in waiting}
    counted: dict[int, int] = {}  # bytes of each file already reported to progress
    for index, result in engine.run(scan_range, tasks, labels=[files[p] for p in owners], work=work):
        position, task = owners[index], tasks[index]
        scans[position].append(result)
        waiting[position] -= 1
        if waiting[position] == 0:
            finished(position, _assemble(footers[position], scans.pop(position), key), counted=counted.get(position, 0))
        else:
            span = task.layout.boundaries[task.last] - task.layout.boundaries[task.first]
            counted[position] = counted.get(position, 0) + span
            tally.add(span)
    return [found[position] for position in range(len(files))]


def _check_schemas(files: Sequence[str], schemas: Sequence[pa.Schema], key: str | None) -> None:
    """Every file has the first one's columns and types, and the key column: RegistrationError naming the file."""
    first = schemas[0]
    for uri, schema in zip(files, schemas):
        if [(f.name, str(f.type)) for f in schema] != [(f.name, str(f.type)) for f in first]:
            raise RegistrationError(
                f"{uri}: schema differs from {files[0]}: "
                f"{', '.join(f'{f.name}: {f.type}' for f in schema)} vs "
                f"{', '.join(f'{f.name}: {f.type}' for f in first)}"
            )
    if key is not None and key not in first.names:
        raise RegistrationError(f"key column {key!r} is not in the schema of {files[0]} (columns: {', '.join(first.names)})")


def _assemble(footer: _Footer, scans: list[SegmentScan], key: str | None) -> FileScan:
    layout = footer.layout
    in_order = sorted(scans, key=lambda s: s.first)
    keys = None
    if key is not None:
        parts = [s.keys for s in in_order if s.keys is not None]
        keys = pa.concat_arrays(parts) if parts else pa.array([], pa.string())
    return FileScan(shard_info(layout, in_order), layout.schema(), keys, footer.identity)


def staging_area(root: str, name: str) -> str:
    """Where registrations of dataset ``name`` in catalog ``root`` keep finished files: below the local cache directory
    (``$BATCHSCOPE_CACHE_DIR``, default ``~/.cache/batchscope``), so a refused or interrupted registration leaves the
    catalog as it was."""
    from ..storage.disk_cache import settings

    digest = hashlib.sha256(root.encode()).hexdigest()[:16]
    return os.path.join(str(settings()[0]), "scans", digest, name)
