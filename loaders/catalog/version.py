"""DatasetVersion: random access to the rows of one registered, immutable dataset version."""

from __future__ import annotations

import bisect
import functools
import logging
import os
import threading
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import storage
from ..errors import AmbiguousKey, BatchscopeError, CatalogCorrupt, CorruptData, SampleNotFound
from ..storage import derived
from ..storage.cache import ByteLRU
from ..storage.formats import ShardReader, shard_format
from ..storage.shards import ShardInfo
from ..storage.staging import Staging
from .keys import KeyColumn, index_derivation, write_index
from .kinds import class_names
from .manifest import Manifest
from .records import Record, content_key, record_key, table_records

_ROW_GROUP_CACHE: ByteLRU[pa.Table] = ByteLRU(
    budget=int(os.environ.get("BATCHSCOPE_ROW_GROUP_CACHE_BYTES", str(1 << 30))), size_of=lambda t: t.nbytes
)


class ReadStats:
    """Process-wide counters of decoded row groups (for read-amplification measurements)."""

    row_groups = 0
    rows = 0
    bytes = 0

    @classmethod
    def reset(cls) -> None:
        cls.row_groups = cls.rows = cls.bytes = 0


READ_STATS = ReadStats


class _Records(list):  # type: ignore[type-arg]
    """Decoded Python records of one row group, with an estimate of their memory."""

    nbytes = 0


#: Python records of recently read row groups: a shuffle window converts each row group once, not once per sample.
_RECORD_CACHE: ByteLRU[_Records] = ByteLRU(
    budget=int(os.environ.get("BATCHSCOPE_RECORD_CACHE_BYTES", str(1 << 30))), size_of=lambda rows: rows.nbytes
)
_OPEN: dict[tuple[str, str], ShardReader] = {}
_OPEN_LOCK = threading.Lock()
#: Key indexes opened in this process (their sealed footers checked), by (path, version id).
_KEY_INDEXES: dict[tuple[str, str], derived.RowGroupTable] = {}
log = logging.getLogger("batchscope.loaders")


#: Row groups being decoded ahead of use (readers stage what their next steps touch).
_STAGING = Staging()


def clear_read_caches() -> None:
    """Forget every decoded row group and record in this process (benchmarks and tests start cold with it)."""
    _ROW_GROUP_CACHE.clear()
    _RECORD_CACHE.clear()
    _STAGING.clear()
    with _OPEN_LOCK:
        _KEY_INDEXES.clear()


def row_group_cache() -> ByteLRU[pa.Table]:
    """The process-wide cache of decoded, verified row groups."""
    return _ROW_GROUP_CACHE


class DatasetVersion:
    """One immutable version of a dataset: its manifest plus checked random access to its rows.

    >>> version = catalog.resolve("web-text@v1")      # doctest: +SKIP
    >>> version.read(0, [0, 1])[0]["text"][:20]       # doctest: +SKIP
    'Return the absolute '
    """

    def __init__(self, manifest: Manifest, root: str) -> None:
        self.manifest = manifest
        self.root = root
        self.id = manifest.id
        self._starts = [0]
        for shard in manifest.shards:
            self._starts.append(self._starts[-1] + shard.rows)
        self._starts_array = np.asarray(self._starts, dtype=np.int64)
        self._rg_starts = []
        for shard in manifest.shards:
            starts = [0]
            for n in shard.row_groups:
                starts.append(starts[-1] + n)
            self._rg_starts.append(starts)
        # Every row group of the version in record-index order: its first record, shard and group number.
        firsts, shards, groups = [], [], []
        for shard, starts in enumerate(self._rg_starts):
            for group in range(len(starts) - 1):
                firsts.append(self._starts[shard] + starts[group])
                shards.append(shard)
                groups.append(group)
        self._rg_firsts = np.asarray(firsts, dtype=np.int64)
        self._rg_shards = shards
        self._rg_groups = groups

    # -- description -------------------------------------------------------
    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def short_id(self) -> str:
        return self.id[:12]

    @property
    def ref(self) -> str:
        """``name@short_id``: how the inspector and errors name this version."""
        return f"{self.name}@{self.short_id}"

    @property
    def kinds(self) -> dict[str, str]:
        return self.manifest.kinds

    @property
    def key(self) -> str | None:
        return self.manifest.key

    @property
    def schema(self) -> pa.Schema:
        return self.manifest.schema

    @functools.cached_property
    def class_names(self) -> dict[str, list[str]]:
        """Column → class names, for ``class_label`` columns whose Hugging Face ``ClassLabel`` metadata names them."""
        names = class_names(self.schema.metadata)
        return {column: names[column] for column, kind in self.kinds.items() if kind == "class_label" and column in names}

    @property
    def shards(self) -> tuple[ShardInfo, ...]:
        return self.manifest.shards

    @property
    def rows(self) -> int:
        return self._starts[-1]

    @property
    def tokenizer(self) -> str | None:
        return self.manifest.tokenizer

    def __repr__(self) -> str:
        return f"DatasetVersion({self.ref}, rows={self.rows}, shards={len(self.shards)})"

    def where(self, shard: int, row: int | None = None) -> str:
        """Human-readable location used in every error message."""
        text = f"dataset {self.name} version {self.short_id} shard {shard} ({os.path.basename(self.shards[shard].uri)})"
        return text if row is None else f"{text} row {row}"

    # -- addressing --------------------------------------------------------
    def locate(self, index: int) -> tuple[int, int]:
        """Map a record index in ``[0, rows)`` to ``(shard, row)``."""
        if not 0 <= index < self.rows:
            raise SampleNotFound(f"record {index} is outside {self.ref} (it has {self.rows} rows)")
        shard = bisect.bisect_right(self._starts, index) - 1
        return shard, index - self._starts[shard]

    def locate_arrays(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorized :meth:`locate`: ``(shards, rows)`` arrays for an array of record indices."""
        array = self._checked(indices)
        shards = np.searchsorted(self._starts_array, array, side="right") - 1
        return shards, array - self._starts_array[shards]

    def _checked(self, indices: np.ndarray) -> np.ndarray:
        """``indices`` as int64, or SampleNotFound naming the first one outside ``[0, rows)``."""
        array = np.asarray(indices, dtype=np.int64)
        if array.size and (array.min() < 0 or array.max() >= self.rows):
            bad = int(array[(array < 0) | (array >= self.rows)][0])
            raise SampleNotFound(f"record {bad} is outside {self.ref} (it has {self.rows} rows)")
        return array

    def index_of(self, shard: int, row: int) -> int:
        """The record index of ``(shard, row)``."""
        return self._starts[shard] + row

    def row_group_of(self, shard: int, row: int) -> tuple[int, int]:
        """``(row group, row within it)`` for a row of a shard."""
        starts = self._rg_starts[shard]
        group = bisect.bisect_right(starts, row) - 1
        return group, row - starts[group]

    # -- reading -----------------------------------------------------------
    @property
    def shard_format(self) -> str:
        """How this version's files are stored (``parquet`` unless a replay registered others: :mod:`loaders.storage.formats`)."""
        return self.manifest.shard_format

    def _open(self, shard: int) -> ShardReader:
        info = self.shards[shard]
        cache_key = (info.uri, info.checksum)
        with _OPEN_LOCK:
            opened = _OPEN.get(cache_key)
        if opened is None:
            opened = shard_format(self.shard_format).open(info, where=self.where(shard))
            with _OPEN_LOCK:
                _OPEN[cache_key] = opened
        return opened

    def row_group(self, shard: int, group: int) -> pa.Table:
        """One decoded, verified row group (cached process-wide by shard checksum)."""
        if not 0 <= shard < len(self.shards):
            raise SampleNotFound(f"{self.ref} has no shard {shard} (it has {len(self.shards)})")
        info = self.shards[shard]
        return _ROW_GROUP_CACHE.get_or_make((info.checksum, group), lambda: self._load_row_group(shard, group))

    def _load_row_group(self, shard: int, group: int) -> pa.Table:
        table = self._open(shard).read_row_group(group)
        READ_STATS.row_groups += 1
        READ_STATS.rows += table.num_rows
        READ_STATS.bytes += table.nbytes
        return table

    def read(self, shard: int, rows: Sequence[int]) -> list[Record]:
        """Decoded records for ``rows`` of ``shard``, in the order asked."""
        if not 0 <= shard < len(self.shards):
            raise SampleNotFound(f"{self.ref} has no shard {shard} (it has {len(self.shards)})")
        out: list[Record] = []
        for row in rows:
            if not 0 <= row < self.shards[shard].rows:
                raise SampleNotFound(f"{self.where(shard)} has no row {row} (it has {self.shards[shard].rows})")
            group, offset = self.row_group_of(shard, row)
            table = self.row_group(shard, group)
            try:
                out.append(table_records(table.slice(offset, 1))[0])
            except BatchscopeError:
                raise
            except Exception as exc:
                raise CorruptData(f"{self.where(shard, row)}: cannot be decoded: {exc}") from exc
        return out

    def group_records(self, shard: int, group: int) -> list[Record]:
        """Every record of one row group as Python values (cached; treat them as read-only)."""
        info = self.shards[shard]

        def convert() -> _Records:
            key = (info.checksum, group)
            staged = _STAGING.take(key)
            if staged is not None:
                return staged.result()
            table = _ROW_GROUP_CACHE.get(key) if key in _ROW_GROUP_CACHE else None
            return self._records_of(shard, group, table)

        return _RECORD_CACHE.get_or_make((info.checksum, group), convert)

    def _records_of(self, shard: int, group: int, table: pa.Table | None = None) -> _Records:
        """Read (unless given), verify, decode and convert one row group to Python records.

        The Arrow table is not kept: the records are. (Keeping both doubles the
        memory a shuffle window holds, and fresh memory costs page faults.)
        """
        if table is None:
            table = self._load_row_group(shard, group)
        try:
            records = _Records(table_records(table))
        except Exception as exc:
            first = self._rg_starts[shard][group]
            raise CorruptData(f"{self.where(shard)} rows {first}-{first + len(table) - 1}: cannot be decoded: {exc}") from exc
        records.nbytes = table.nbytes + 160 * len(records) * max(1, table.num_columns)
        return records

    def read_many(self, locations: Sequence[tuple[int, int]]) -> list[Record]:
        """Decoded records for many ``(shard, row)`` pairs, in the order asked (each row group converted once)."""
        indices = []
        for shard, row in locations:
            if not 0 <= shard < len(self.shards) or not 0 <= row < self.shards[shard].rows:
                raise SampleNotFound(f"{self.ref} has no shard {shard} row {row}")
            indices.append(self._starts[shard] + row)
        return self.read_indices(np.asarray(indices, dtype=np.int64))

    def read_indices(self, indices: np.ndarray) -> list[Record]:
        """Decoded records at an array of record indices, in order: vectorized grouping by row group.

        Each row group touched is read, verified and converted to Python
        records once (and cached), so a shuffle window pays the conversion
        once per row group, not once per sample.
        """
        indices = self._checked(indices)
        if not indices.size:
            return []
        groups = np.searchsorted(self._rg_firsts, indices, side="right") - 1
        offsets = (indices - self._rg_firsts[groups]).tolist()
        ids = groups.tolist()
        wanted = list(dict.fromkeys(ids))
        self._stage(wanted, needed=True)
        records = {g: self.group_records(self._rg_shards[g], self._rg_groups[g]) for g in wanted}
        return [records[g][o] for g, o in zip(ids, offsets)]

    def prefetch_indices(self, indices: np.ndarray) -> None:
        """Start decoding, in the background, the row groups holding these records (a hint: errors surface on read)."""
        indices = np.asarray(indices, dtype=np.int64)
        indices = indices[(indices >= 0) & (indices < self.rows)]
        if indices.size:
            self._stage(np.unique(np.searchsorted(self._rg_firsts, indices, side="right") - 1).tolist(), needed=False)

    def _stage(self, groups: list[int], *, needed: bool) -> None:
        """Stage the row groups (version-wide ids) whose records are not converted yet; one alone is not worth a thread."""
        missing = []
        for g in groups:
            shard, group = self._rg_shards[g], self._rg_groups[g]
            if (self.shards[shard].checksum, group) not in _RECORD_CACHE:
                missing.append((shard, group))
        if needed and len(missing) < 2:
            return
        for shard, group in missing:
            _STAGING.stage((self.shards[shard].checksum, group), functools.partial(self._records_of, shard, group), needed=needed)

    def record(self, index: int) -> Record:
        """The record at a global record index."""
        shard, row = self.locate(index)
        return self.read(shard, [row])[0]

    def key_of(self, record: Record) -> str:
        return record_key(record, self.key)

    def iter_tables(self, columns: list[str] | None = None) -> Iterator[tuple[int, int, pa.Table]]:
        """Every row group in order as ``(shard, first row, table)``; for scans (search, stats, diff)."""
        for shard, info in enumerate(self.shards):
            for group in range(len(info.row_groups)):
                table = self.row_group(shard, group)
                if columns is not None:
                    table = table.select(columns)
                yield shard, self._rg_starts[shard][group], table

    def scan_tables(self, columns: list[str] | None = None) -> Iterator[tuple[int, int, pa.Table]]:
        """Like :meth:`iter_tables`, reading only ``columns`` and leaving the process caches alone (one-pass scans)."""
        for shard, info in enumerate(self.shards):
            opened = shard_format(self.shard_format).open(info, where=self.where(shard), cache=False)
            for group in range(len(info.row_groups)):
                yield shard, self._rg_starts[shard][group], opened.read_row_group(group, columns)

    # -- keys --------------------------------------------------------------
    def key_at(self, shard: int, row: int, record: Record) -> str:
        """The key of the record at ``(shard, row)``: its key column (``~N``-suffixed for allowed duplicates) or content hash."""
        if self._suffixes and (shard, row) in self._suffixes:
            return self._suffixes[(shard, row)]
        return record_key(record, self.key)

    @functools.cached_property
    def _suffixes(self) -> dict[tuple[int, int], str]:
        return {(shard, row): key for shard, row, key in self.manifest.key_suffixes}

    def _key_index_path(self) -> str:
        return storage.join(self.root, "indexes", self.name, f"{self.id}.keys.parquet")

    def key_column(self, *, suffixed: bool = True) -> KeyColumn:
        """Every row's key in record order (one scan of the key column, or of the records for content keys)."""
        keys: list[pa.Array] = []
        shards: list[pa.Array] = []
        rows: list[pa.Array] = []
        for shard, first, table in self.scan_tables([self.key] if self.key else None):
            if self.key:
                column = pc.cast(table.column(self.key), pa.string()).fill_null("None")
            else:
                column = pa.array([content_key(r) for r in table_records(table)], pa.string())
            keys.append(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
            shards.append(pa.array([shard] * len(table), pa.int32()))
            rows.append(pa.array(range(first, first + len(table)), pa.int64()))
        column = KeyColumn(
            pa.concat_arrays(keys) if keys else pa.array([], pa.string()),
            pa.concat_arrays(shards) if shards else pa.array([], pa.int32()),
            pa.concat_arrays(rows) if rows else pa.array([], pa.int64()),
        )
        if suffixed and self._suffixes:
            renamed = column.keys.to_pylist()
            for position, (shard, row) in enumerate(zip(column.shards.to_pylist(), column.rows.to_pylist())):
                renamed[position] = self._suffixes.get((shard, row), renamed[position])
            column = KeyColumn(pa.array(renamed, pa.string()), column.shards, column.rows)
        return column

    def write_key_index(self, column: KeyColumn | None = None) -> None:
        """Build (from ``column`` when the caller already has it) and store the sealed key index of this version."""
        write_index(self._key_index_path(), column if column is not None else self.key_column(), self.id)

    def key_index(self, *, rebuild: bool = False) -> derived.RowGroupTable:
        """A sorted ``key → (shard, row)`` index, built on first use and kept in the catalog.

        It is derived data: an index not sealed for this version (another
        version's, an older layout, torn, edited, or not Parquet at all) is
        rebuilt; each row group a lookup reads is checked against its seal.
        """
        path = self._key_index_path()
        what = index_derivation(self.id)
        if not rebuild:
            with _OPEN_LOCK:
                opened = _KEY_INDEXES.get((path, self.id))
            if opened is None:
                opened = derived.open_row_groups(path, what, rows=self.rows)
        if rebuild or opened is None:
            self.write_key_index()
            opened = derived.open_row_groups(path, what, rows=self.rows)
            if opened is None:
                raise CatalogCorrupt(f"{path}: the key index of {self.ref} cannot be read back after rebuilding it")
        with _OPEN_LOCK:
            _KEY_INDEXES[(path, self.id)] = opened
        return opened

    def _lookup(self, index: derived.RowGroupTable, key: str) -> tuple[int, int] | None:
        """``(shard, row)`` the index gives for ``key``; AmbiguousKey when it names several rows; ``derived.Damaged``
        when a row group it reads fails its check."""
        found: list[tuple[int, int]] = []
        for group, facts in enumerate(index.groups):
            if not facts["rows"] or not (facts["first"] <= key <= facts["last"]):
                continue
            table = index.read_row_group(group)
            keys = table.column("key").to_pylist()
            low, high = bisect.bisect_left(keys, key), bisect.bisect_right(keys, key)
            shards, rows = table.column("shard").to_pylist(), table.column("row").to_pylist()
            found.extend(zip(shards[low:high], rows[low:high]))
            if found and high < len(keys):
                break
        if len(found) > 1 and self.key is not None:  # only a version registered before keys were checked
            # (rows without a key column that share a content hash hold the same values: the first stands for all)
            rows = ", ".join(f"shard {s} row {r}" for s, r in found[:5])
            raise AmbiguousKey(
                f"key {key!r} names {len(found)} rows of {self.ref} ({rows}): it was registered before duplicate keys "
                "were refused; register the files again with allow_duplicate_keys (--allow-duplicate-keys) to link each row"
            )
        return found[0] if found else None

    def find(self, key: str) -> tuple[int, int]:
        """``(shard, row)`` of the row whose key is ``key``.

        The row found is read and its key compared with ``key``: an index that
        points elsewhere, or whose row group fails its check, is rebuilt, never
        followed. A key the sealed index lacks is not in the version.
        """
        for rebuild in (False, True):
            try:
                found = self._lookup(self.key_index(rebuild=rebuild), key)
            except derived.Damaged as exc:
                if rebuild:
                    raise CorruptData(f"{exc} (after rebuilding it)") from exc
                log.warning("%s; rebuilding the key index of %s", exc, self.ref)
                continue
            if found is None:
                break
            shard, row = found
            if 0 <= shard < len(self.shards) and 0 <= row < self.shards[shard].rows:
                if self._stored_key(shard, row) == key:
                    return shard, row
            log.warning(
                "%s: key index of %s points %r at shard %d row %d, which holds another key; rebuilding",
                self._key_index_path(),
                self.ref,
                key,
                shard,
                row,
            )
        raise SampleNotFound(f"{self.ref} has no row with key {key!r} (key column: {self.key or 'content hash'})")

    def _stored_key(self, shard: int, row: int) -> str:
        """The permalink key of one row, decoding only its key column when there is one (not the whole row group)."""
        if not self.key or (shard, row) in self._suffixes:
            return self.key_at(shard, row, self.read(shard, [row])[0] if not self.key else {})
        group, offset = self.row_group_of(shard, row)
        table = self._open(shard).read_row_group(group, columns=[self.key])
        return record_key({self.key: table.column(self.key)[offset].as_py()}, self.key)

    def sample(self, key: str) -> Record:
        """The decoded record whose key is ``key``."""
        shard, row = self.find(key)
        return self.read(shard, [row])[0]
