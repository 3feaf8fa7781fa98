"""Import JSON Lines files (plain, .gz, .bz2, .xz or .zst) as a dataset version.

Two streaming passes: the first infers one Arrow schema for all files
(columns in order of first appearance; ints and floats in one column become
float64; a column that is missing or null in some lines is nullable); the
second converts batches of lines with that schema and writes shards. A column
holding different kinds of values (a number in one line, text in another) is
an error naming the file, line and column, unless it is listed in
``json_columns``: those columns are stored as JSON text.
"""

from __future__ import annotations

import base64
import bz2
import contextlib
import gzip
import io
import json
import lzma
import os
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import pyarrow as pa

from ..catalog.store import CatalogStore
from ..catalog.version import DatasetVersion
from ..errors import RegistrationError
from .resume import Position
from .writer import CountingReader, Progress, input_files, staged_import

if TYPE_CHECKING:
    from ..engine import Engine

SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz", ".jsonl.bz2", ".jsonl.xz", ".jsonl.zst", ".jsonl.zstd")
_BATCH = 1000
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError, UnicodeError)


@contextlib.contextmanager
def _open(path: str, raw: CountingReader) -> Iterator[IO[bytes]]:
    lowered = path.lower()
    if lowered.endswith(".gz"):
        yield gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[arg-type]
    elif lowered.endswith(".bz2"):
        yield bz2.BZ2File(raw)  # type: ignore[arg-type]
    elif lowered.endswith(".xz"):
        yield lzma.LZMAFile(raw)  # type: ignore[arg-type]
    elif lowered.endswith((".zst", ".zstd")):
        yield io.BufferedReader(pa.CompressedInputStream(pa.PythonFile(raw, mode="r"), "zstd"))  # type: ignore[arg-type]
    else:
        yield raw  # type: ignore[misc]


def _lines(path: str, on_bytes: Callable[[int], None]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of ``path``."""
    with CountingReader(path) as raw, _open(path, raw) as stream:
        reader = io.BufferedReader(stream) if isinstance(stream, CountingReader) else stream  # type: ignore[arg-type]
        number = 0
        try:
            for number, line in enumerate(reader, start=1):
                if number % 256 == 0:
                    on_bytes(raw.count)
                if not line.strip():
                    continue
                try:
                    value = json.loads(line.decode("utf-8-sig" if number == 1 else "utf-8"))
                except UnicodeDecodeError as exc:
                    raise RegistrationError(f"{path}:{number}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
                except json.JSONDecodeError as exc:
                    raise RegistrationError(f"{path}:{number}: invalid JSON: {exc.msg} (column {exc.colno})") from exc
                if not isinstance(value, dict):
                    raise RegistrationError(f"{path}:{number}: expected a JSON object, got {type(value).__name__}")
                yield number, value
        except (OSError, EOFError, lzma.LZMAError, pa.ArrowException) as exc:
            raise RegistrationError(f"{path}: cannot read past line {number}: {exc}") from exc
        on_bytes(raw.count)


#: ``(file index, its first record's index in the file, path, [line numbers], [objects])``.
Batch = tuple[int, int, str, list[int], list[dict[str, Any]]]


def _batches(
    files: list[str], json_columns: frozenset[str], progress: Progress | None, offset: int, total: int, start: Position = Position()
) -> Iterator[Batch]:
    """Batches of records, JSON columns already turned into text; from record ``start.row`` of file ``start.file`` on
    (earlier files are not opened)."""
    done = 0

    for index, path in enumerate(files):
        if index < start.file:
            done += os.path.getsize(path)
            continue

        def tick(count: int, base: int = done) -> None:
            if progress is not None:
                progress(offset + base + count, total)

        skip = start.row if index == start.file else 0
        record = 0
        numbers: list[int] = []
        rows: list[dict[str, Any]] = []
        for number, value in _lines(path, tick):
            record += 1
            if record <= skip:
                continue
            for column in json_columns & value.keys():
                if value[column] is not None:
                    value[column] = json.dumps(value[column], ensure_ascii=False, sort_keys=True)
            numbers.append(number)
            rows.append(value)
            if len(rows) == _BATCH:
                yield index, record - len(rows), path, numbers, rows
                numbers, rows = [], []
        if rows:
            yield index, record - len(rows), path, numbers, rows
        done += os.path.getsize(path)


def _unify(schemas: Sequence[pa.Schema]) -> pa.Schema:
    return pa.unify_schemas(list(schemas), promote_options="permissive")


def _infer(rows: list[dict[str, Any]]) -> pa.Schema:
    """The Arrow schema of ``rows``: every key of every row (``Table.from_pylist`` only looks at the first)."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    columns = {}
    for name in names:
        values = [row.get(name) for row in rows]
        column = pa.array(values)
        if pa.types.is_floating(column.type) and any(isinstance(v, bool) for v in values):
            raise pa.ArrowTypeError(f"column {name!r} mixes booleans and numbers")  # Arrow would read true as 1.0
        columns[name] = column
    return pa.table(columns).schema


def _conflict(path: str, number: int, row: dict[str, Any], schema: pa.Schema | None, exc: Exception) -> RegistrationError:
    """The clearest error for a line that does not fit the columns seen so far."""
    hint = "make the column's values one kind, or import it as JSON text (json_columns / --json-column)"
    try:
        own = _infer([row])
    except _ARROW_ERRORS as inner:
        return RegistrationError(
            f"{path}:{number}: cannot be stored as Arrow columns ({inner}); "
            "a column of such values can be imported as JSON text (json_columns / --json-column)"
        )
    for field in own:
        if schema is not None and field.name in schema.names:
            before = schema.field(field.name)
            try:
                _unify([pa.schema([before]), pa.schema([field])])
            except _ARROW_ERRORS:
                return RegistrationError(
                    f"{path}:{number}: column {field.name!r} holds {field.type} here but {before.type} in earlier lines; {hint}"
                )
    return RegistrationError(f"{path}:{number}: {exc}; {hint}")


def _batch_schema(path: str, numbers: list[int], rows: list[dict[str, Any]], schema: pa.Schema | None) -> pa.Schema:
    try:
        batch = _infer(rows)
        return batch if schema is None else _unify([schema, batch])
    except _ARROW_ERRORS:
        pass
    for number, row in zip(numbers, rows):  # find the first line that does not fit
        try:
            own = _infer([row])
            schema = own if schema is None else _unify([schema, own])
        except _ARROW_ERRORS as exc:
            raise _conflict(path, number, row, schema, exc) from exc
    assert schema is not None
    return schema


def _convert(path: str, numbers: list[int], rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except _ARROW_ERRORS as exc:
        for number, row in zip(numbers, rows):
            try:
                pa.Table.from_pylist([row], schema=schema)
            except _ARROW_ERRORS as inner:
                raise _conflict(path, number, row, schema, inner) from inner
        raise RegistrationError(f"{path}:{numbers[0]}-{numbers[-1]}: cannot be stored as Arrow columns ({exc})") from exc


def _check_storable(schema: pa.Schema, files: list[str]) -> None:
    def empty_struct(type_: pa.DataType) -> bool:
        if pa.types.is_struct(type_):
            return type_.num_fields == 0 or any(empty_struct(type_.field(i).type) for i in range(type_.num_fields))
        if pa.types.is_list(type_) or pa.types.is_large_list(type_):
            return empty_struct(type_.value_type)
        return False

    for field in schema:
        if empty_struct(field.type):
            raise RegistrationError(
                f"column {field.name!r} of {files[0]} is always an empty object, which Parquet cannot store; "
                "import it as JSON text (json_columns / --json-column)"
            )


def _schema(files: list[str], wanted: frozenset[str], progress: Progress | None, total: int) -> pa.Schema:
    """The first pass: one Arrow schema for every line of every file (``wanted`` columns as JSON text)."""
    schema: pa.Schema | None = None
    for _, _, path, numbers, rows in _batches(files, wanted, progress, 0, total):
        schema = _batch_schema(path, numbers, rows, schema)
    if schema is None:
        raise RegistrationError(f"no JSON records found in {', '.join(files)}")
    missing = sorted(wanted - set(schema.names))
    if missing:
        raise RegistrationError(
            f"json_columns names {', '.join(map(repr, missing))}, not found in {files[0]} (columns: {', '.join(schema.names)})"
        )
    schema = pa.schema([pa.field(f.name, pa.string()) if f.name in wanted else f for f in schema])
    _check_storable(schema, files)
    return schema


def import_jsonl(
    catalog: CatalogStore,
    name: str,
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    tag: str | None = None,
    key: str | None = None,
    rows_per_shard: int | None = None,
    row_group_size: int | None = None,
    json_columns: Sequence[str] = (),
    kinds: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    engine: "str | Engine | None" = None,
) -> DatasetVersion:
    """Import JSON Lines files (or directories of them) as a new version of ``name``.

    Each line is one JSON object; blank lines are skipped. A bad line raises
    ``RegistrationError`` naming ``file:line``, and nothing is registered.

    >>> version = import_jsonl(catalog, "notes", ["a.jsonl", "b.jsonl.gz"], key="id", tag="v1")  # doctest: +SKIP
    >>> version.sample("n-1")["text"]                                                            # doctest: +SKIP
    'first note'
    """
    files = input_files(source, suffixes=SUFFIXES, what="JSON Lines")
    total = 2 * sum(os.path.getsize(f) for f in files)
    wanted = frozenset(json_columns)
    shape = {"key": key, "rows_per_shard": rows_per_shard, "row_group_size": row_group_size, "json_columns": sorted(wanted)}
    with staged_import(catalog, name, "jsonl", engine=engine, inputs=files, options=shape) as staging:
        resumed = staging.resume
        if resumed is not None and "schema" in resumed.state:  # interrupted after its first shard: the schema is known
            schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(resumed.state["schema"])))
        else:
            schema = _schema(files, wanted, progress, total)
        state = {"schema": base64.b64encode(schema.serialize().to_pybytes()).decode()}
        writer = staging.writer(schema, rows_per_shard=rows_per_shard, row_group_size=row_group_size, key=key, state=state)
        start = resumed.position if resumed is not None else Position()
        for index, first, path, numbers, rows in _batches(files, wanted, progress, total // 2, total, start):
            writer.write(_convert(path, numbers, rows, schema), where=[f"{path}:{n}" for n in numbers], at=(index, first))
        column_kinds = {column: "json" for column in wanted}
        column_kinds.update(kinds or {})
        return staging.publish(source=", ".join(files), key=key, tag=tag, kinds=column_kinds or None)
