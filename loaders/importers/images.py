"""Import a folder of images whose subfolders name their class: ``root/cat/1.jpg`` → label ``"cat"``."""

from __future__ import annotations

import io
import json
import os
from typing import TYPE_CHECKING, Iterator, Mapping

import pyarrow as pa

from ..catalog.store import CatalogStore
from ..catalog.version import DatasetVersion
from ..errors import RegistrationError
from .writer import Progress, staged_import

if TYPE_CHECKING:
    from ..engine import Engine

#: File suffixes taken as images; every other file is skipped.
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff")
IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
#: Hugging Face ``datasets`` feature metadata, so its readers decode the column as images too.
_HF_FEATURES = {
    "id": {"dtype": "string", "_type": "Value"},
    "image": {"_type": "Image"},
    "label": {"dtype": "string", "_type": "Value"},
}
SCHEMA = pa.schema(
    [("id", pa.string()), ("image", IMAGE), ("label", pa.string())],
    metadata={"huggingface": json.dumps({"info": {"features": _HF_FEATURES}})},
)
#: Files per batch handed to the shard writer, and at most about this many bytes.
_BATCH = 64
_BATCH_BYTES = 16 << 20


def image_files(root: str) -> list[str]:
    """Paths of the images below ``root`` relative to it, sorted, hidden files and folders skipped."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            if not name.startswith(".") and name.lower().endswith(IMAGE_SUFFIXES):
                found.append(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return sorted(found)


def check_image(data: bytes, where: str) -> None:
    """Decode ``data`` fully; a ``RegistrationError`` naming ``where`` when Pillow cannot."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError, DecompressionBombError...
        raise RegistrationError(f"{where}: not a readable image ({exc})") from exc


def _batches(root: str, files: list[str], verify: bool, progress: Progress | None, *, done: int = 0, total: int = 0) -> Iterator[pa.Table]:
    """Tables of ``files``' rows; progress counts ``done`` images before them, of ``total`` (default: ``files``)."""
    rows: dict[str, list[object]] = {"id": [], "image": [], "label": []}
    size = 0
    total = total or len(files)
    for count, relative in enumerate(files, start=1):
        path = os.path.join(root, relative)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise RegistrationError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
        if verify:
            check_image(data, path)
        folder, _, _ = relative.rpartition("/")
        rows["id"].append(relative)
        rows["image"].append({"bytes": data, "path": relative})
        rows["label"].append(folder.split("/", 1)[0] if folder else None)
        size += len(data)
        if len(rows["id"]) == _BATCH or size >= _BATCH_BYTES or count == len(files):
            yield pa.table(rows, schema=SCHEMA)
            rows, size = {"id": [], "image": [], "label": []}, 0
            if progress is not None:
                progress(done + count, total)


def import_images(
    catalog: CatalogStore,
    name: str,
    source: str | os.PathLike[str],
    *,
    tag: str | None = None,
    key: str | None = "id",
    rows_per_shard: int | None = None,
    row_group_size: int | None = None,
    verify: bool = True,
    kinds: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    engine: "str | Engine | None" = None,
) -> DatasetVersion:
    """Import the images below ``source`` as a new version of ``name``.

    Columns: ``id`` (the path relative to ``source``), ``image`` (the file's
    bytes and that path, Hugging Face's Image struct) and ``label`` (the
    top-level subfolder; null for images directly in ``source``). Files
    without an image suffix are skipped; with ``verify`` every image is
    decoded once and an unreadable one is an error naming the file.

    >>> import_images(catalog, "pets", "photos/", tag="v1").kinds["image"]  # doctest: +SKIP
    'image'
    """
    root = os.path.abspath(os.fspath(source))
    if not os.path.isdir(root):
        raise RegistrationError(f"{root}: not a directory (give the folder that holds one subfolder per class)")
    files = image_files(root)
    if not files:
        raise RegistrationError(f"{root}: no image files found (looked for {', '.join(IMAGE_SUFFIXES)})")
    shape = {"key": key, "rows_per_shard": rows_per_shard, "row_group_size": row_group_size, "verify": verify}
    with staged_import(catalog, name, "images", engine=engine, inputs=[os.path.join(root, f) for f in files], options=shape) as staging:
        writer = staging.writer(SCHEMA, rows_per_shard=rows_per_shard, row_group_size=row_group_size, key=key)
        first = staging.resume.position.row if staging.resume is not None else 0  # images already in finished shards
        for table in _batches(root, files[first:], verify, progress, done=first, total=len(files)):
            writer.write(table, where=[os.path.join(root, f) for f in table.column("id").to_pylist()], at=(0, first))
            first += len(table)
        return staging.publish(source=root, key=key, tag=tag, kinds=kinds)
