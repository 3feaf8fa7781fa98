"""Media stored by path (``{bytes: null, path}``): copy the files' bytes into the imported rows, or refuse at import.

Hugging Face ``Image()``/``Audio()``/``Video()`` columns built from file paths
hold no bytes, only the path (often absolute). Imported shards live in the
catalog, far from those files, so such a value could never be shown: the
importer refuses it, naming the row, unless ``copy_media`` is set. Then each
file is read into the row; a path outside ``media_root`` (the folder the
user vouches for) is refused, so an import never reads arbitrary files.
"""

from __future__ import annotations

import os
from typing import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from ..catalog.kinds import MEDIA_KINDS, infer_kinds
from ..errors import RegistrationError


def _is_bytes_path(type_: pa.DataType) -> bool:
    if not pa.types.is_struct(type_):
        return False
    names = {type_.field(i).name for i in range(type_.num_fields)}
    return {"bytes", "path"} <= names


class MediaFiles:
    """Fills (with ``copy=True``) or refuses the path-only media values of the tables an importer writes.

    >>> media = MediaFiles(schema, copy=True, root="/data/pics")   # doctest: +SKIP
    >>> table = media.fill(table, where="train/data-00000.arrow", first_row=0)  # doctest: +SKIP
    """

    def __init__(self, schema: pa.Schema, *, copy: bool, root: str | None, kinds: Mapping[str, str] | None = None) -> None:
        resolved = infer_kinds(schema, kinds)
        self.columns = [f.name for f in schema if resolved[f.name] in MEDIA_KINDS and _is_bytes_path(f.type)]
        self.copy = copy
        self.root = os.path.realpath(root) if root is not None else None

    def fill(self, table: pa.Table, *, where: str, first_row: int) -> pa.Table:
        """``table`` with every path-only media value replaced by ``{bytes: <file>, path: <relative path>}``."""
        for column in self.columns:
            values = table.column(column).combine_chunks()
            path_only = pc.and_(values.is_valid(), pc.and_(values.field("bytes").is_null(), values.field("path").is_valid()))
            if not pc.any(path_only).as_py():
                continue
            rows = values.to_pylist()
            for offset, value in enumerate(rows):
                if value is not None and value["bytes"] is None and value["path"] is not None:
                    here = f"{where} row {first_row + offset} column {column!r}"
                    rows[offset] = {**value, **self._read(value["path"], here)}
            filled = pa.array(rows, type=values.type)
            table = table.set_column(table.schema.get_field_index(column), table.schema.field(column), filled)
        return table

    def _read(self, path: str, here: str) -> dict[str, object]:
        if not self.copy:
            raise RegistrationError(
                f"{here}: holds only the path {path!r}, no bytes; the imported shards could not show it. "
                "Import with --copy-media (copy_media=True) to copy the files into the shards"
            )
        if self.root is None:
            raise RegistrationError(f"{here}: copying {path!r} needs the folder that holds the media: give --media-root")
        full = os.path.realpath(path if os.path.isabs(path) else os.path.join(self.root, path))
        if not full.startswith(self.root + os.sep):
            raise RegistrationError(
                f"{here}: {path!r} is outside the media folder {self.root}; only files below it are copied "
                "(give the folder that holds them with --media-root)"
            )
        try:
            with open(full, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise RegistrationError(f"{here}: cannot read {path!r} ({exc.strerror or exc})") from exc
        return {"bytes": data, "path": os.path.relpath(full, self.root).replace(os.sep, "/")}
