"""Keys of one registered version → ``(shard, row)``, from its key index read once into memory.

The recorder resolves every key in the training thread as the batch goes by, so a lookup must cost a dictionary
access: the version's key index (built at registration, checked when read) is loaded once, about 100 bytes per row.

>>> resolver = KeyResolver(catalog.resolve("web@v1"))   # doctest: +SKIP
>>> resolver.find("doc-7")                              # doctest: +SKIP
(0, 7)
"""

from __future__ import annotations

from ..catalog.version import DatasetVersion


class KeyResolver:
    """Where each key of ``version`` lives; :meth:`find` is None for a key the version does not hold."""

    def __init__(self, version: DatasetVersion) -> None:
        self.version = version
        self.ref = version.ref
        index = version.key_index()
        self._rows: dict[str, tuple[int, int]] = {}
        for group in range(index.num_row_groups):  # each row group checked against its seal as it is read
            table = index.read_row_group(group)
            self._rows.update(zip(table.column("key").to_pylist(), zip(table.column("shard").to_pylist(), table.column("row").to_pylist())))

    def find(self, key: str) -> tuple[int, int] | None:
        return self._rows.get(key)

    def find_all(self, keys: list[str | None]) -> list[tuple[int, int] | None]:
        """:meth:`find` of every key (None for a missing key, and for None)."""
        return list(map(self._rows.get, keys))

    def __len__(self) -> int:
        return len(self._rows)
