"""Flags: samples marked bad, with a note and tags, kept in an SQLite file in the catalog root.

Every operation opens its own connection (threads and processes alike), the
database runs in WAL mode with a generous busy timeout, and each write is one
``BEGIN IMMEDIATE`` transaction, so concurrent writers queue instead of losing
flags.

>>> store = FlagStore("/tmp/bs-doc/inspector.sqlite")          # doctest: +SKIP
>>> flag = store.add(dataset="web", version="ab12...", key="k7", note="spam", tags=["spam"])  # doctest: +SKIP
>>> [f.key for f in store.list(tag="spam")]                     # doctest: +SKIP
['k7']
>>> store.update(flag.id, note="spam, twice").note                # doctest: +SKIP
'spam, twice'
>>> store.delete(flag.id).id == flag.id                         # doctest: +SKIP
True
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import re
import sqlite3
from dataclasses import dataclass
from typing import Iterable, Iterator

from loaders import storage
from loaders.errors import InvalidName, NotFound, StorageError

from . import urls

DB_NAME = "inspector.sqlite"
MAX_NOTE = 10_000
MAX_TAGS = 20
_TAG = re.compile(r"^[\w.:/+-]{1,64}$")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS flags (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL,
    version TEXT NOT NULL,
    key TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    created TEXT NOT NULL,
    run TEXT,
    step INTEGER,
    rank INTEGER,
    sample_index INTEGER,
    position INTEGER
);
CREATE TABLE IF NOT EXISTS flag_tags (
    flag_id INTEGER NOT NULL REFERENCES flags(id),
    tag TEXT NOT NULL,
    PRIMARY KEY (flag_id, tag)
);
CREATE INDEX IF NOT EXISTS flags_by_dataset ON flags(dataset, id);
CREATE INDEX IF NOT EXISTS flags_by_sample ON flags(dataset, version, key);
CREATE INDEX IF NOT EXISTS flag_tags_by_tag ON flag_tags(tag, flag_id);
"""


class FlagNotFound(NotFound):
    """No flag has that id."""


@dataclass
class Flag:
    """One flagged sample, with the run context it was seen in (when it was flagged from a step page)."""

    id: int
    dataset: str
    version: str
    key: str
    note: str
    tags: list[str]
    created: str
    run: str | None = None
    step: int | None = None
    rank: int | None = None
    index: int | None = None
    #: The sample's position in the rank's batch: the ``#sample-{position}`` anchor of the step/rank page.
    position: int | None = None
    url: str = ""
    sample_url: str = ""
    context_url: str | None = None
    #: When the note or tags were last edited (``None``: never).
    updated: str | None = None


@dataclass
class FlagFilter:
    """Which flags to list: every field optional."""

    dataset: str | None = None
    version: str | None = None
    key: str | None = None
    tag: str | None = None
    run: str | None = None


def parse_tags(text: str | Iterable[str] | None) -> list[str]:
    """Tags from ``"bad-mask, spam"`` or a list: split on commas and spaces, checked, deduplicated in order.

    >>> parse_tags("spam, bad-mask spam")
    ['spam', 'bad-mask']
    """
    if text is None:
        return []
    items = re.split(r"[,\s]+", text) if isinstance(text, str) else [t for part in text for t in re.split(r"[,\s]+", part)]
    tags: list[str] = []
    for item in items:
        item = item.strip()
        if not item or item in tags:
            continue
        if not _TAG.match(item):
            raise InvalidName(f"invalid tag {item!r}: use 1-64 letters, digits or . _ : / + -")
        tags.append(item)
    if len(tags) > MAX_TAGS:
        raise InvalidName(f"{len(tags)} tags given; at most {MAX_TAGS} per flag")
    return tags


class FlagStore:
    """The flag database; safe to share between threads and processes."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._ready = False

    @classmethod
    def for_catalog(cls, root: str, path: str = "") -> "FlagStore":
        """The store at ``path``, else ``inspector.sqlite`` in a local catalog root (none for a remote root)."""
        if path:
            return cls(storage.normalize(path))
        if storage.is_remote(root):
            return cls(None)
        return cls(os.path.join(storage.normalize(root), DB_NAME))

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        if self.path is None:
            raise StorageError("flags need a local SQLite file but the catalog root is remote; set BATCHSCOPE_FLAGS_PATH")
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            connection = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        except (sqlite3.Error, OSError) as exc:
            raise StorageError(f"flags database {self.path} cannot be opened: {exc}") from exc
        try:
            connection.execute("PRAGMA busy_timeout = 60000")
            if not self._ready:
                connection.execute("PRAGMA journal_mode = WAL")
                connection.executescript(_SCHEMA)
                _migrate(connection)
                self._ready = True
            yield connection
        except (sqlite3.Error, OSError) as exc:  # disk full, unwritable or not a database: one clear error
            raise StorageError(f"flags database {self.path} failed: {exc}") from exc
        finally:
            connection.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    def add(
        self,
        *,
        dataset: str,
        version: str,
        key: str,
        note: str = "",
        tags: Iterable[str] | str | None = None,
        run: str | None = None,
        step: int | None = None,
        rank: int | None = None,
        index: int | None = None,
        position: int | None = None,
    ) -> Flag:
        """Store one flag and return it (``index`` is the sample's global index, ``position`` its place in the rank's batch)."""
        if len(note) > MAX_NOTE:
            raise InvalidName(f"note is {len(note):,} characters; at most {MAX_NOTE:,}")
        tag_list = parse_tags(tags)
        created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO flags (dataset, version, key, note, created, run, step, rank, sample_index, position)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (dataset, version, key, note, created, run, step, rank, index, position),
            )
            flag_id = int(cursor.lastrowid or 0)
            db.executemany("INSERT INTO flag_tags (flag_id, tag) VALUES (?, ?)", [(flag_id, t) for t in tag_list])
        return self.get(flag_id)

    def update(self, flag_id: int, *, note: str | None = None, tags: Iterable[str] | str | None = None) -> Flag:
        """Change a flag's note and/or tags (``None`` keeps them) and return it; its sample and context never change."""
        if note is not None and len(note) > MAX_NOTE:
            raise InvalidName(f"note is {len(note):,} characters; at most {MAX_NOTE:,}")
        tag_list = parse_tags(tags) if tags is not None else None
        updated = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        with self._write() as db:
            if db.execute("SELECT 1 FROM flags WHERE id = ?", (flag_id,)).fetchone() is None:
                raise self._missing(flag_id, db)
            if note is not None:
                db.execute("UPDATE flags SET note = ?, updated = ? WHERE id = ?", (note, updated, flag_id))
            if tag_list is not None:
                db.execute("DELETE FROM flag_tags WHERE flag_id = ?", (flag_id,))
                db.executemany("INSERT INTO flag_tags (flag_id, tag) VALUES (?, ?)", [(flag_id, t) for t in tag_list])
                db.execute("UPDATE flags SET updated = ? WHERE id = ?", (updated, flag_id))
        return self.get(flag_id)

    def delete(self, flag_id: int) -> Flag:
        """Remove a flag (and its tags); returns it as it was."""
        flag = self.get(flag_id)
        with self._write() as db:
            db.execute("DELETE FROM flag_tags WHERE flag_id = ?", (flag_id,))
            if db.execute("DELETE FROM flags WHERE id = ?", (flag_id,)).rowcount == 0:
                raise self._missing(flag_id, db)
        return flag

    def _missing(self, flag_id: int, db: sqlite3.Connection) -> FlagNotFound:
        count = int(db.execute("SELECT COUNT(*) FROM flags").fetchone()[0])
        return FlagNotFound(f"no flag {flag_id} in {self.path} ({count} flags stored)")

    def get(self, flag_id: int) -> Flag:
        """One flag by id."""
        found = self._select("WHERE f.id = ?", [flag_id], limit=1)
        if not found:
            raise FlagNotFound(f"no flag {flag_id} in {self.path} ({self.count()} flags stored)")
        return found[0]

    def list(self, where: FlagFilter | None = None, *, limit: int = 200, before: int | None = None) -> list[Flag]:
        """Flags matching ``where``, newest first; ``before`` is the id cursor of the next page."""
        clause, params = _where(where or FlagFilter(), before)
        return self._select(clause, params, limit=limit)

    def for_keys(self, dataset: str, version: str, keys: Iterable[str], *, limit: int = 20) -> dict[str, list[Flag]]:
        """The flags of each of ``keys`` of one dataset version, newest first and at most ``limit`` each.

        One query per 500 keys, where ``list`` would take one per key (a step page shows a whole batch).
        """
        wanted = list(dict.fromkeys(keys))
        found: dict[str, list[Flag]] = {key: [] for key in wanted}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            newest = (
                "WHERE f.id IN (SELECT id FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY key ORDER BY id DESC) AS n"
                f" FROM flags WHERE dataset = ? AND version = ? AND key IN ({marks})) WHERE n <= ?)"
            )
            for flag in self._select(newest, [dataset, version, *chunk, limit], limit=-1):
                found[flag.key].append(flag)
        return found

    def iter_all(self, where: FlagFilter | None = None, *, chunk: int = 500) -> Iterator[Flag]:
        """Every matching flag, newest first, fetched in chunks."""
        before: int | None = None
        while True:
            page = self.list(where, limit=chunk, before=before)
            yield from page
            if len(page) < chunk:
                return
            before = page[-1].id

    def keys(self, where: FlagFilter | None = None) -> list[str]:
        """Distinct flagged keys (sorted) for an exclude key file."""
        clause, params = _where(where or FlagFilter(), None)
        with self._connect() as db:
            rows = db.execute(f"SELECT DISTINCT f.key FROM flags f {clause} ORDER BY f.key", params).fetchall()
        return [r[0] for r in rows]

    def count(self, where: FlagFilter | None = None) -> int:
        clause, params = _where(where or FlagFilter(), None)
        with self._connect() as db:
            return int(db.execute(f"SELECT COUNT(*) FROM flags f {clause}", params).fetchone()[0])

    def tags(self, dataset: str | None = None) -> list[tuple[str, int]]:
        """Every tag in use with its number of flags (optionally within one dataset)."""
        sql = "SELECT t.tag, COUNT(*) FROM flag_tags t JOIN flags f ON f.id = t.flag_id"
        params: list[object] = []
        if dataset:
            sql += " WHERE f.dataset = ?"
            params.append(dataset)
        with self._connect() as db:
            return [(r[0], int(r[1])) for r in db.execute(sql + " GROUP BY t.tag ORDER BY t.tag", params)]

    def datasets(self) -> list[tuple[str, int]]:
        """Datasets that have flags, with their counts."""
        with self._connect() as db:
            return [(r[0], int(r[1])) for r in db.execute("SELECT dataset, COUNT(*) FROM flags GROUP BY dataset ORDER BY dataset")]

    def _select(self, clause: str, params: list[object], *, limit: int) -> list[Flag]:
        sql = (
            "SELECT f.id, f.dataset, f.version, f.key, f.note, f.created, f.run, f.step, f.rank, f.sample_index, f.position,"
            " f.updated,"
            " (SELECT json_group_array(tag) FROM (SELECT tag FROM flag_tags WHERE flag_id = f.id ORDER BY rowid))"
            f" FROM flags f {clause} ORDER BY f.id DESC LIMIT ?"
        )
        with self._connect() as db:
            rows = db.execute(sql, [*params, limit]).fetchall()
        return [_flag(row) for row in rows]


def _where(where: FlagFilter, before: int | None) -> tuple[str, list[object]]:
    conditions: list[str] = []
    params: list[object] = []
    for column in ("dataset", "version", "key", "run"):
        value = getattr(where, column)
        if value:
            conditions.append(f"f.{column} = ?")
            params.append(value)
    if where.tag:
        conditions.append("EXISTS (SELECT 1 FROM flag_tags t WHERE t.flag_id = f.id AND t.tag = ?)")
        params.append(where.tag)
    if before is not None:
        conditions.append("f.id < ?")
        params.append(before)
    return ("WHERE " + " AND ".join(conditions) if conditions else ""), params


def _migrate(connection: sqlite3.Connection) -> None:
    """Bring a database made by an older version up to the schema (columns are only ever added)."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(flags)")}
    for column, kind in (("position", "INTEGER"), ("updated", "TEXT")):
        if column not in columns:
            with contextlib.suppress(sqlite3.OperationalError):  # another process added it first
                connection.execute(f"ALTER TABLE flags ADD COLUMN {column} {kind}")


def _flag(row: tuple) -> Flag:
    flag_id, dataset, version, key, note, created, run, step, rank, index, position, updated, tags = row
    context = None
    if run is not None and step is not None and rank is not None:
        # The anchor is the sample's position in the rank's batch; flags stored before positions were kept link
        # to the rank page without one (their global index is not an anchor of that page).
        context = urls.rank(run, step, rank) + (urls.sample_anchor(position) if position is not None else "")
    return Flag(
        id=flag_id,
        dataset=dataset,
        version=version,
        key=key,
        note=note,
        tags=json.loads(tags) if tags else [],
        created=created,
        run=run,
        step=step,
        rank=rank,
        index=index,
        position=position,
        url=urls.flag(flag_id),
        sample_url=urls.sample(dataset, version, key),
        context_url=context,
        updated=updated,
    )
