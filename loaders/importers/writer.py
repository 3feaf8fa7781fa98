"""Shared by every importer: stream Arrow batches into zstd Parquet shards, then publish and register them.

Shards are written into a staging directory under ``catalog.data_dir(name)``
and renamed to a directory named after their content (``<format>-<digest>``)
only when every shard is complete, so a failed import leaves no files behind
and importing the same input twice writes nothing new and returns the same
version.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence, TypedDict, Unpack

import pyarrow as pa
import pyarrow.parquet as pq

from .. import storage
from ..catalog.leftovers import STAGING_PREFIX, claim, remove_stale_staging, sweep
from ..catalog.store import CatalogStore, check_name
from ..catalog.version import DatasetVersion
from ..errors import BatchscopeError, RegistrationError
from .resume import JOURNAL, Journal, Position, job_name, journaled_keys, keep_only, read_journal, shard_entry, write_journal

if TYPE_CHECKING:
    from ..engine import Engine

#: ``progress(done, total)``: called as an import advances; ``total`` is None while unknown.
Progress = Callable[[int, "int | None"], None]


class ImportOptions(TypedDict, total=False):
    """The options every importer takes (keyword-only), besides its own."""

    #: Tag to move to the new version.
    tag: str | None
    #: Column whose values identify rows (unique).
    key: str | None
    rows_per_shard: int | None
    row_group_size: int | None
    #: Field kind overrides, column → kind.
    kinds: Mapping[str, str] | None
    progress: Progress | None
    #: Where the registration scan runs: ``"local"``, ``"ray"`` or an engine (default ``$BATCHSCOPE_ENGINE``, else local).
    engine: "str | Engine | None"


#: Row-group size limits: at most this many rows...
MAX_ROW_GROUP_ROWS = 1000
#: ...and about this many (uncompressed) bytes, whichever is smaller; media rows get fewer rows per group.
ROW_GROUP_BYTES = 2 << 20
#: Shards hold about this many uncompressed bytes unless ``rows_per_shard`` says otherwise.
SHARD_BYTES = 256 << 20


def _positive(name: str, value: int | None) -> int | None:
    if value is not None and (not isinstance(value, int) or value < 1):
        raise RegistrationError(f"{name} must be a positive integer, got {value!r}")
    return value


class ShardWriter:
    """Writes batches of one schema into ``part-NNNNN.parquet`` shards in ``directory``.

    Row groups hold ``row_group_size`` rows; when it is None the size is chosen
    from the first rows: at most ``MAX_ROW_GROUP_ROWS`` rows and about
    ``ROW_GROUP_BYTES`` bytes. At most one row group is buffered at a time.
    ``key`` names a column whose values must be unique across all shards.
    """

    def __init__(
        self,
        directory: str,
        schema: pa.Schema,
        *,
        rows_per_shard: int | None = None,
        row_group_size: int | None = None,
        key: str | None = None,
    ) -> None:
        self.directory = directory
        self.schema = schema
        self.rows_per_shard = _positive("rows_per_shard", rows_per_shard)
        self.row_group_size = _positive("row_group_size", row_group_size)
        if key is not None and key not in schema.names:
            raise RegistrationError(f"key column {key!r} is not among the imported columns ({', '.join(schema.names)})")
        self.key = key
        self.paths: list[str] = []
        self.rows = 0
        self._keys: dict[str, str] = {}
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._writer: pq.ParquetWriter | None = None
        self._shard_rows = 0
        #: ``(first row, input file, its row)`` of the rows given since the last finished shard (resumable imports).
        self._marks: list[tuple[int, int, int]] = []
        #: Called with each finished shard's path, its rows, and the input position after them.
        self.on_shard: Callable[[str, int, Position], None] | None = None

    def restore(self, journal: Journal, directory: str) -> None:
        """Continue after the shards a resumed import's journal lists (sizes, row counts and keys as they were)."""
        self.paths = [os.path.join(directory, entry["name"]) for entry in journal.shards]
        self.rows = journal.rows
        self.row_group_size = self.row_group_size or journal.row_group_size
        self.rows_per_shard = self.rows_per_shard or journal.rows_per_shard
        if self.key is not None:
            self._keys = journaled_keys(directory, journal, self.key)

    def write(self, batch: pa.Table | pa.RecordBatch, *, where: str | Sequence[str] = "", at: tuple[int, int] | None = None) -> None:
        """Append rows (already in ``schema``).

        ``where`` names their source in error messages: one text for the
        batch, or one per row (``file:line``, a tar member...). ``at`` is
        ``(input file, row of it)`` of the first row, for imports that resume.
        """
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        if len(table) == 0:
            return
        if at is not None:
            self._marks.append((self.rows + self._pending_rows, *at))
        if not table.schema.equals(self.schema, check_metadata=False):
            table = table.cast(self.schema)
        if self.key is not None:
            self._check_keys(table, where)
        self._pending.append(table)
        self._pending_rows += len(table)
        self._pending_bytes += table.nbytes
        self._flush(final=False)

    def _check_keys(self, table: pa.Table, where: str | Sequence[str]) -> None:
        assert self.key is not None
        for offset, value in enumerate(table.column(self.key).to_pylist()):
            here = where if isinstance(where, str) else where[offset]
            if not here:
                here = f"input row {self.rows + self._pending_rows + offset}"
            if value is None:
                raise RegistrationError(f"{here}: no value in key column {self.key!r}")
            text = str(value)
            if text in self._keys:
                raise RegistrationError(f"{here}: duplicate key {text!r} in column {self.key!r} (first at {self._keys[text]})")
            self._keys[text] = here

    def _choose_sizes(self) -> None:
        per_row = max(1, self._pending_bytes // max(1, self._pending_rows))
        if self.row_group_size is None:
            self.row_group_size = max(1, min(MAX_ROW_GROUP_ROWS, ROW_GROUP_BYTES // per_row))
        if self.rows_per_shard is None:
            groups = max(1, SHARD_BYTES // (per_row * self.row_group_size))
            self.rows_per_shard = groups * self.row_group_size

    def _flush(self, *, final: bool) -> None:
        if self.row_group_size is None or self.rows_per_shard is None:
            if not final and self._pending_rows < MAX_ROW_GROUP_ROWS and self._pending_bytes < ROW_GROUP_BYTES:
                return
            self._choose_sizes()
        assert self.row_group_size is not None and self.rows_per_shard is not None
        if not self._pending:
            return
        pending = pa.concat_tables(self._pending)
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        start = 0
        while start < len(pending):
            room = self.rows_per_shard - self._shard_rows
            take = min(self.row_group_size, room, len(pending) - start)
            if take < self.row_group_size and take < room and not final:
                break  # keep the tail for the next full row group
            self._write_group(pending.slice(start, take))
            start += take
        if start < len(pending):
            rest = pending.slice(start)
            self._pending, self._pending_rows, self._pending_bytes = [rest], len(rest), rest.nbytes

    def _write_group(self, group: pa.Table) -> None:
        assert self.rows_per_shard is not None
        if self._writer is None:
            path = os.path.join(self.directory, f"part-{len(self.paths):05d}.parquet")
            self._writer = pq.ParquetWriter(path, self.schema, compression="zstd", use_dictionary=False, write_statistics=True)
            self.paths.append(path)
        self._writer.write_table(group, row_group_size=len(group))
        self._shard_rows += len(group)
        self.rows += len(group)
        if self._shard_rows >= self.rows_per_shard:
            self._writer.close()
            self._writer = None
            if self.on_shard is not None and self._marks:
                self.on_shard(self.paths[-1], self._shard_rows, self._position())
            self._shard_rows = 0

    def _position(self) -> Position:
        """The input position right after the rows written so far (from the marks ``write`` was given)."""
        while len(self._marks) > 1 and self._marks[1][0] <= self.rows:
            self._marks.pop(0)
        first, file, row = self._marks[0]
        return Position(file, row + self.rows - first)

    def close(self) -> list[str]:
        """Write what is buffered, close the last shard and return every shard path."""
        self._flush(final=True)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        return list(self.paths)

    def abort(self) -> None:
        """Close the open shard without finishing (the staging directory is removed by ``staged_import``)."""
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
            self._writer = None


def _content_digest(paths: list[str]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(os.path.basename(path).encode() + b"\0")
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:16]


class Staging:
    """The staging area of one import: make ``writer(schema)`` then ``publish(...)``.

    With ``job`` (:func:`loaders.importers.resume.job_name` of its inputs and options) the folder is named after it,
    so the same import run again finds what a killed one finished (``resume``: its journal, or None).
    """

    def __init__(self, catalog: CatalogStore, name: str, fmt: str, *, engine: "str | Engine | None" = None, job: str | None = None) -> None:
        self.catalog = catalog
        self.name = name
        self.fmt = fmt
        self.engine = engine
        self.base = catalog.data_dir(name)
        self.directory = os.path.join(self.base, f"{STAGING_PREFIX}{fmt}-{job or uuid.uuid4().hex[:12]}")
        self.resumable = job is not None
        self.resume: Journal | None = None
        self.shards: ShardWriter | None = None
        self.published: str | None = None
        self._owner: int | None = None
        self._journal = Journal()

    def claim(self) -> None:
        """Hold the lock that marks the staging directory as in use (the kernel releases it if this process dies)."""
        os.makedirs(self.base, exist_ok=True)
        self._owner = claim(self.directory + ".lock")

    def release(self) -> None:
        """Drop the staging lock and its file."""
        if self._owner is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.directory + ".lock")
            os.close(self._owner)
            self._owner = None

    def writer(
        self,
        schema: pa.Schema,
        *,
        rows_per_shard: int | None,
        row_group_size: int | None,
        key: str | None,
        state: dict[str, Any] | None = None,
    ) -> ShardWriter:
        """The shard writer of this import (one per import), after the shards a resumed import finished.

        ``state`` is what the importer needs to resume (kept in the journal; a resumed import reads ``resume.state``).
        """
        os.makedirs(self.directory, exist_ok=True)
        self.shards = ShardWriter(self.directory, schema, rows_per_shard=rows_per_shard, row_group_size=row_group_size, key=key)
        if self.resume is not None:
            self.shards.restore(self.resume, self.directory)
            self._journal = self.resume
        if self.resumable:
            self._journal.state = dict(state or self._journal.state)
            self.shards.on_shard = self._finished_shard
        return self.shards

    def _finished_shard(self, path: str, rows: int, position: Position) -> None:
        """Journal a finished shard (a full disk only costs the resumption)."""
        assert self.shards is not None
        journal = self._journal
        try:
            journal.shards.append(shard_entry(path, rows))
            journal.rows = self.shards.rows
            journal.row_group_size, journal.rows_per_shard = self.shards.row_group_size, self.shards.rows_per_shard
            journal.position = position
            write_journal(self.directory, journal)
        except OSError:
            pass

    def publish(
        self,
        *,
        source: str,
        key: str | None,
        tag: str | None,
        kinds: Mapping[str, str] | None = None,
        notes: Mapping[str, Any] | None = None,
    ) -> DatasetVersion:
        """Close the shards, move them to their content-named directory and register them."""
        if self.shards is None:
            raise RegistrationError(f"no rows found in {source}")
        paths = self.shards.close()
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self.directory, JOURNAL))
        if not paths or self.shards.rows == 0:
            raise RegistrationError(f"no rows found in {source}")
        final = os.path.join(self.base, f"{self.fmt}-{_content_digest(paths)}")
        if os.path.isdir(final):
            shutil.rmtree(self.directory)
        else:
            os.replace(self.directory, final)
            self.published = final
        shard_paths = [os.path.join(final, os.path.basename(p)) for p in paths]
        version = self.catalog.register(
            self.name,
            shard_paths,
            key=key,
            tag=tag,
            kinds=kinds,
            notes={"imported_from": source, **dict(notes or {})},
            engine=self.engine,
        )
        self.published = None
        return version


@contextlib.contextmanager
def staged_import(
    catalog: CatalogStore,
    name: str,
    fmt: str,
    *,
    engine: "str | Engine | None" = None,
    inputs: Sequence[str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> Iterator[Staging]:
    """Stage an import of ``name``; on any error remove what it wrote, leaving the catalog unchanged.

    Importers write local files: a catalog on an object store is refused. ``engine`` runs the registration's scan.
    With ``inputs`` (and the ``options`` that shape the shards) the import is resumable: run again after it was
    killed or interrupted (Ctrl-C), it continues after the shards it finished (``staging.resume``).
    """
    check_name("dataset", name)
    if storage.is_remote(catalog.root):
        raise RegistrationError(f"importers write to local catalogs only; {catalog.root} is remote (import locally, then copy)")
    job = job_name(fmt, name, inputs, options or {}) if inputs is not None else None
    staging = Staging(catalog, name, fmt, engine=engine, job=job)
    # another import of this dataset killed before supersedes nothing of this one: removed (this one's own kept to
    # resume); then what killed imports and exclusions left everywhere else
    remove_stale_staging(catalog.data_dir(name), keep=os.path.basename(staging.directory))
    sweep(catalog.root)
    try:
        staging.claim()
        if staging.resumable:
            staging.resume = read_journal(staging.directory)
            keep_only(staging.directory, staging.resume)
        yield staging
    except BaseException as exc:
        if staging.shards is not None:
            staging.shards.abort()
        if staging.resumable and isinstance(exc, KeyboardInterrupt):
            staging.release()  # interrupted: what it finished stays for the next run
            raise
        shutil.rmtree(staging.directory, ignore_errors=True)
        if staging.published is not None:
            shutil.rmtree(staging.published, ignore_errors=True)
        staging.release()
        with contextlib.suppress(OSError):
            os.rmdir(staging.base)  # only when empty: nothing of this dataset existed before
        if isinstance(exc, (BatchscopeError, KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        if isinstance(exc, (OSError, pa.ArrowException, ValueError)):
            raise RegistrationError(f"importing {name} failed: {exc}") from exc
        raise
    finally:
        staging.release()


def write_files(
    catalog: CatalogStore,
    name: str,
    files: Sequence[str],
    *,
    fmt: str,
    schema: pa.Schema,
    read: Callable[[str], Iterable[pa.Table]],
    total: int | None,
    source: str,
    copy_media: bool = False,
    media_root: str | None = None,
    **options: Unpack[ImportOptions],
) -> DatasetVersion:
    """Write the tables ``read(path)`` yields for each file (already in ``schema``) as shards, and register them.

    Path-only media values are copied in or refused (``MediaFiles``); a read
    error names the file and the row it stopped at.
    """
    from .media_files import MediaFiles

    key, kinds, progress = options.get("key"), options.get("kinds"), options.get("progress")
    media = MediaFiles(schema, copy=copy_media, root=media_root, kinds=kinds)
    shape = {k: options.get(k) for k in ("key", "rows_per_shard", "row_group_size")}
    with staged_import(
        catalog,
        name,
        fmt,
        engine=options.get("engine"),
        inputs=files,
        options={**shape, "copy_media": copy_media, "media_root": media_root},
    ) as staging:
        writer = staging.writer(schema, rows_per_shard=options.get("rows_per_shard"), row_group_size=options.get("row_group_size"), key=key)
        start = staging.resume.position if staging.resume is not None else Position()
        done = staging.resume.rows if staging.resume is not None else 0
        for index, path in enumerate(files):
            if index < start.file:
                continue  # written before the import was interrupted: not read again
            row = 0
            skip = start.row if index == start.file else 0
            try:
                for table in read(path):
                    if skip:  # the rows of this file already in finished shards
                        dropped = min(skip, len(table))
                        table, skip, row = table.slice(dropped), skip - dropped, row + dropped
                        if not len(table):
                            continue
                    table = media.fill(table, where=path, first_row=row)
                    where = [f"{path} row {row + i}" for i in range(len(table))] if key is not None else path
                    writer.write(table, where=where, at=(index, row))
                    row += len(table)
                    done += len(table)
                    if progress is not None:
                        progress(done, total)
            except (pa.ArrowException, OSError) as exc:
                raise RegistrationError(f"{path}: cannot read row {row}: {exc}") from exc
        return staging.publish(source=source, key=key, tag=options.get("tag"), kinds=kinds)


def input_files(sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *, suffixes: tuple[str, ...], what: str) -> list[str]:
    """Files named directly, the matching files below directories (sorted) and glob matches.

    A directory contributes its files ending in one of ``suffixes`` (hidden
    files and names starting with ``_`` are skipped); a named file is taken
    whatever its name. A missing path is a ``RegistrationError``.
    """
    import glob

    items = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    found: list[str] = []
    for item in items:
        text = os.fspath(item)
        if os.path.isdir(text):
            matches = []
            for folder, dirs, files in os.walk(text):
                dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
                matches += [os.path.join(folder, f) for f in files if not f.startswith((".", "_")) and f.lower().endswith(suffixes)]
            if not matches:
                raise RegistrationError(f"{text}: directory holds no {what} files (looked for {', '.join(suffixes)})")
            found += sorted(matches)
        elif os.path.isfile(text):
            found.append(text)
        elif any(ch in text for ch in "*?["):
            matches = sorted(m for m in glob.glob(text, recursive=True) if os.path.isfile(m))
            if not matches:
                raise RegistrationError(f"{text}: pattern matches no files")
            found += matches
        else:
            raise RegistrationError(f"{text}: no such file or directory")
    if not found:
        raise RegistrationError(f"no {what} files given")
    return [os.path.abspath(path) for path in found]


class CountingReader:
    """A raw binary file that counts the bytes read from it, for progress on compressed inputs."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "rb")
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self._file.read(size)
        self.count += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        n = self._file.readinto(buffer)
        self.count += n or 0
        return n or 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.count

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "CountingReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
