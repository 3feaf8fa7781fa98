"""Registration's scan: every file's footer, checksums and key column, read once, in parallel on an engine, resumable.

Two rounds of tasks: one per file reads its footer (many requests in flight on
remote stores), then one per range of about 64 MB of row groups reads those
bytes once, walks their page headers, hashes them and decodes the key column
from the same bytes. Results are put together in file order, so every engine
gives the same manifest. Each finished file's result is kept in the scan's
staging area (:class:`loaders.engine.Checkpoints`) with the file's identity
(size, modification time...), so a registration interrupted at 90 % resumes
there; a file whose identity moved while it was read is refused by name.

>>> file_label(["a.parquet"], 0)
'a.parquet'
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
from ..storage.shards import ShardInfo

#: Bytes of row groups one task reads (at least one row group): locally, and from remote stores (where that many
#: requests are in flight at once, each holding its bytes).
TASK_BYTES = 64 << 20
REMOTE_TASK_BYTES = 8 << 20
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
class _Footer:
    uri: str
    identity: str
    layout: ShardLayout


@dataclass(frozen=True)
class _Range:
    layout: ShardLayout
    first: int
    last: int
    key: str | None
    identity: str


def file_label(files: Sequence[str], position: int) -> str:
    """How errors name a file of a registration."""
    return files[position]


def _size_of(identity: str) -> int:
    return int(identity.split(":", 1)[0])


def read_footer(uri: str) -> _Footer:
    """Task: the identity and layout of one file (RegistrationError names a missing or broken file)."""
    identity = storage.identity(uri)
    if not identity:
        raise RegistrationError(f"{uri}: no such file")
    return _Footer(uri, identity, read_layout(uri, _size_of(identity)))


def scan_range(task: _Range) -> SegmentScan:
    """Task: scan a range of a file's segments, refusing the file if it changed since its footer was read."""
    try:
        scan = scan_segments(task.layout, task.first, task.last, key=task.key)
    except (RegistrationError, OSError) as exc:  # what a file rewritten under us looks like, first
        _refuse_if_changed(task, exc)
        raise
    _refuse_if_changed(task, None)
    return scan


def _refuse_if_changed(task: _Range, cause: BaseException | None) -> None:
    if storage.identity(task.layout.uri) != task.identity:
        raise RegistrationError(
            f"{task.layout.uri}: the file changed while it was being registered (its size or modification time moved); "
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


def scan_files(
    files: Sequence[str],
    *,
    key: str | None,
    engine: Engine,
    checkpoints: Checkpoints | None = None,
    progress: Progress | None = None,
) -> list[FileScan]:
    """Scan every file once on ``engine``; reuse the results ``checkpoints`` holds for files that did not change."""
    remote = any(storage.is_remote(uri) for uri in files)
    labels = list(files)
    footers = ordered(engine, read_footer, list(files), labels=labels, work="io" if remote else "cpu")
    _check_schemas([f.uri for f in footers], [f.layout.schema() for f in footers], key)  # before any data is read
    total = sum(f.layout.size for f in footers)
    found: dict[int, FileScan] = {}
    for position, footer in enumerate(footers):
        payload = checkpoints.get(footer.uri, footer.identity) if checkpoints is not None else None
        scan = _decode(payload, footer.identity) if payload is not None else None
        if scan is not None and (scan.keys is not None) == (key is not None):
            found[position] = scan
    done = sum(footers[p].layout.size for p in found)
    if progress is not None:
        progress(done, total)
    tasks: list[_Range] = []
    owners: list[int] = []
    for position, footer in enumerate(footers):
        if position in found:
            continue
        target = REMOTE_TASK_BYTES if storage.is_remote(footer.uri) else TASK_BYTES
        for first, last in layout_ranges(segment_sizes=footer.layout.segment_sizes(), target=target):
            tasks.append(_Range(footer.layout, first, last, key, footer.identity))
            owners.append(position)
    waiting = {position: sum(1 for owner in owners if owner == position) for position in set(owners)}
    scans: dict[int, list[SegmentScan]] = {position: [] for position in waiting}
    work = "io" if remote else "cpu"
    for index, result in engine.run(scan_range, tasks, labels=[files[p] for p in owners], work=work):
        position = owners[index]
        scans[position].append(result)
        task = tasks[index]
        done += (
            task.layout.boundaries[task.last]
            - task.layout.boundaries[task.first]
            + (task.layout.size - task.layout.footer_start if task.last == task.layout.segments else 0)
        )
        waiting[position] -= 1
        if waiting[position] == 0:
            found[position] = _assemble(footers[position], scans.pop(position), key)
            if checkpoints is not None:
                checkpoints.put(footers[position].uri, footers[position].identity, _encode(found[position]))
        if progress is not None:
            progress(done, total)
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
    ordered_scans = sorted(scans, key=lambda s: s.first)
    keys = None
    if key is not None:
        parts = [s.keys for s in ordered_scans if s.keys is not None]
        keys = pa.concat_arrays(parts) if parts else pa.array([], pa.string())
    return FileScan(shard_info(footer.layout, ordered_scans), footer.layout.schema(), keys, footer.identity)


def staging_area(root: str, name: str) -> str:
    """Where registrations of dataset ``name`` in catalog ``root`` keep finished files: below the local cache directory
    (``$BATCHSCOPE_CACHE_DIR``, default ``~/.cache/batchscope``), so a refused or interrupted registration leaves the
    catalog as it was."""
    from ..storage.disk_cache import settings

    digest = hashlib.sha256(root.encode()).hexdigest()[:16]
    return os.path.join(str(settings()[0]), "scans", digest, name)
