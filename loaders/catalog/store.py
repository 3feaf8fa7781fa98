"""The catalog store: named, versioned, content-addressed datasets, tags and tokenizers under one root.

Runs live under the same root; :class:`loaders.run.catalog.Catalog` (exported as ``loaders.Catalog``) is this store
plus creating, opening and listing them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import fcntl
import glob
import hashlib
import json
import os
import re
import threading
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import storage
from ..errors import (
    AmbiguousVersion,
    CatalogCorrupt,
    DanglingTag,
    DatasetNotFound,
    InvalidName,
    RegistrationError,
    TokenizerNotFound,
    VersionNotFound,
)
from ..storage.formats import DEFAULT as DEFAULT_FORMAT
from ..storage.formats import shard_format as format_named
from ..storage.shards import ShardInfo
from .files import is_version_id, load_manifest, read_names, read_refs
from .keys import KeyColumn, refuse_duplicates, suffix_column
from .kinds import infer_kinds
from .leftovers import sweep
from .lineage import checked_parent
from .manifest import Manifest
from .media_files import encode_table, scan_media, table_path
from .version import DatasetVersion

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from ..engine import Engine
    from .registration import FileScan, Progress

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
DEFAULT_ROOT = "./batchscope-data"


def default_root() -> str:
    """``$BATCHSCOPE_ROOT``, else ``./batchscope-data``."""
    return os.environ.get("BATCHSCOPE_ROOT") or DEFAULT_ROOT


def check_name(kind: str, name: str) -> str:
    """Validate a dataset, tag, tokenizer or run name (letters, digits, ``.``, ``_``, ``-``)."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise InvalidName(f"invalid {kind} name {name!r}: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return name


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def _remove_torn_writes(directory: str) -> None:
    """Remove temporary files a killed writer left in a dataset's directories (call holding the dataset's lock)."""
    for sub in ("", "versions", "media"):
        folder = os.path.join(directory, sub)
        with contextlib.suppress(OSError):
            for entry in os.listdir(folder):
                if entry.startswith(".") and entry.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(folder, entry))


def scanned_keys(scans: "Sequence[FileScan]") -> KeyColumn:
    """Every row's key in record order, with its shard and row, from the key columns registration read."""
    keys = [scan.keys for scan in scans if scan.keys is not None]
    counts = [scan.shard.rows for scan in scans]
    return KeyColumn(
        pa.concat_arrays(keys) if keys else pa.array([], pa.string()),
        pa.array(np.repeat(np.arange(len(scans), dtype=np.int32), counts), pa.int32()),
        pa.array(np.concatenate([np.arange(n, dtype=np.int64) for n in counts]) if counts else np.empty(0, np.int64), pa.int64()),
    )


def sorted_keys(column: KeyColumn) -> KeyColumn:
    """The same keys, shards and rows, in key order (what the key index is sorted by: sorting it again is cheap)."""
    order = pc.sort_indices(column.keys)
    return KeyColumn(column.keys.take(order), column.shards.take(order), column.rows.take(order))


def has_repeats(ordered_keys: pa.Array) -> bool:
    """Whether sorted keys hold one value twice (neighbours are equal).

    >>> has_repeats(pa.array(["a", "b", "b"])), has_repeats(pa.array(["a", "b"]))
    (True, False)
    """
    n = len(ordered_keys)
    return n > 1 and bool(pc.any(pc.equal(ordered_keys.slice(1), ordered_keys.slice(0, n - 1))).as_py())


def _expand(paths: Iterable[str | os.PathLike[str]], extensions: tuple[str, ...] = (".parquet",)) -> list[str]:
    """Files named directly, directories (their files ending in one of ``extensions``, sorted) and glob patterns."""
    out: list[str] = []
    for item in paths:
        text = os.fspath(item)
        if storage.is_remote(text):
            out.append(text)
        elif os.path.isdir(text):
            found = sorted(p for ext in extensions for p in glob.glob(os.path.join(text, "**", f"*{ext}"), recursive=True))
            if not found:
                raise RegistrationError(f"{text}: directory holds no {' or '.join(extensions)} files")
            out.extend(found)
        elif any(ch in text for ch in "*?["):
            found = sorted(glob.glob(text, recursive=True))
            if not found:
                raise RegistrationError(f"{text}: pattern matches no files")
            out.extend(found)
        else:
            out.append(text)
    if not out:
        raise RegistrationError("no files given to register")
    return [storage.normalize(p) for p in out]


@dataclasses.dataclass(frozen=True)
class PreparedVersion:
    """A version checked and described but not filed yet (:meth:`CatalogStore.prepare_version`)."""

    manifest: Manifest
    keys: KeyColumn | None
    media: tuple[str, bytes] | None

    def version(self, root: str) -> DatasetVersion:
        """The version as it will read once filed (reads go to its files, which it already describes)."""
        return DatasetVersion(self.manifest, root)


class CatalogStore:
    """A catalog root holding datasets, tags and tokenizers (and the files of runs, which this layer does not read).

    >>> catalog = CatalogStore("/tmp/bs-doc")                  # doctest: +SKIP
    >>> v1 = catalog.register("web-text", ["shard-0.parquet"], tag="v1")  # doctest: +SKIP
    >>> catalog.resolve("web-text@v1").id == v1.id             # doctest: +SKIP
    True
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = storage.normalize(root if root is not None else default_root())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    # -- paths -------------------------------------------------------------
    def path(self, *parts: str) -> str:
        """A path below the catalog root."""
        return storage.join(self.root, *parts)

    def _dataset_dir(self, name: str) -> str:
        return self.path("datasets", check_name("dataset", name))

    def data_dir(self, name: str) -> str:
        """Where importers and the demo write the shards of dataset ``name``."""
        return self.path("data", check_name("dataset", name))

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        """Serialize writers of one dataset's tags (local catalogs)."""
        if storage.is_remote(self.root):
            yield
            return
        directory = self._dataset_dir(name)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, ".lock"), "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                _remove_torn_writes(directory)
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # -- datasets ----------------------------------------------------------
    def datasets(self) -> list[str]:
        """Names of all registered datasets, sorted."""
        names = storage.list_names(self.path("datasets"))
        return [n for n in names if storage.list_names(storage.join(self.path("datasets"), n, "versions"))]

    def _refs(self, name: str) -> dict[str, Any]:
        return read_refs(storage.join(self._dataset_dir(name), "refs.json"))

    def tags(self, name: str) -> dict[str, str]:
        """Tag → full version id for dataset ``name``."""
        self._require(name)
        return dict(self._refs(name)["tags"])

    def _require(self, name: str) -> None:
        listed = name in storage.list_names(self.path("datasets"))  # a directory entry, so never a path
        if not (listed and storage.list_names(storage.join(self.path("datasets"), name, "versions"))):
            known = ", ".join(self.datasets()) or "none"
            raise DatasetNotFound(f"no dataset named {name!r} in catalog {self.root} (datasets: {known})")

    def _load(self, name: str, version_id: str) -> DatasetVersion:
        """The version filed as ``version_id``: its manifest must hash to that id (CatalogCorrupt otherwise)."""
        if not is_version_id(version_id):
            raise VersionNotFound(f"dataset {name} has no version {version_id[:80]!r} (a version id is 32 hexadecimal characters)")
        path = storage.join(self._dataset_dir(name), "versions", f"{version_id}.json")
        try:
            return DatasetVersion(load_manifest(path, name=name, version_id=version_id), self.root)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise VersionNotFound(f"dataset {name} has no version {version_id}") from None

    def _version_ids(self, name: str) -> list[str]:
        """Ids of the manifests filed under ``name`` (other files in its versions directory are ignored)."""
        names = storage.list_names(storage.join(self._dataset_dir(name), "versions"))
        return [n[: -len(".json")] for n in names if n.endswith(".json") and is_version_id(n[: -len(".json")])]

    def versions(self, name: str, *, broken: list[tuple[str, str]] | None = None) -> list[DatasetVersion]:
        """Every version of ``name``, oldest first.

        A manifest that fails its check raises CatalogCorrupt, unless ``broken``
        is given: then ``(version id, message)`` is appended to it and the
        other versions are still returned.
        """
        self._require(name)
        loaded = []
        for version_id in self._version_ids(name):
            try:
                loaded.append(self._load(name, version_id))
            except CatalogCorrupt as exc:
                if broken is None:
                    raise
                broken.append((version_id, exc.message))
        return sorted(loaded, key=lambda v: (v.manifest.created, v.id))

    def parent(self, version: DatasetVersion) -> tuple[str | None, str | None]:
        """The parent ``version``'s manifest records, when its chain of parents is sound (``loaders.catalog.lineage``):
        ``(parent, None)``, else ``(None, why it is refused)``. Parents are not part of version ids: show them unverified."""

        def recorded(version_id: str) -> str | None:
            if version_id == version.id:
                return version.manifest.parent
            try:
                return self._load(version.name, version_id).manifest.parent
            except (VersionNotFound, CatalogCorrupt):
                raise KeyError(version_id) from None

        return checked_parent(version.id, recorded)

    def resolve(self, ref: str) -> DatasetVersion:
        """Resolve ``name``, ``name@tag`` or ``name@id-prefix`` to a version.

        A bare name means the ``latest`` tag.
        """
        name, _, selector = ref.partition("@")
        self._require(name)
        refs = self._refs(name)
        selector = selector or "latest"
        if selector in refs["tags"]:
            target = refs["tags"][selector]
            try:
                return self._load(name, target)
            except VersionNotFound:
                refs_path = storage.join(self._dataset_dir(name), "refs.json")
                raise DanglingTag(
                    f"{refs_path}: tag {selector!r} of dataset {name} points at version {target}, which {name} does not have "
                    "(a missing version, or another dataset's); move the tag (batchscope tag) or remove it"
                ) from None
        ids = self._version_ids(name)
        matches = [i for i in ids if i.startswith(selector.lower())] if re.fullmatch(r"[0-9a-fA-F]{4,64}", selector) else []
        if len(matches) == 1:
            return self._load(name, matches[0])
        if len(matches) > 1:
            raise AmbiguousVersion(f"version prefix {selector!r} of {name} matches {len(matches)} versions; give more characters")
        tags = ", ".join(sorted(refs["tags"])) or "none"
        raise VersionNotFound(
            f"dataset {name} has no tag or version {selector!r} (tags: {tags}; versions: {', '.join(i[:12] for i in sorted(ids))})"
        )

    def register(
        self,
        name: str,
        paths: Sequence[str | os.PathLike[str]],
        *,
        key: str | None = None,
        tag: str | None = None,
        kinds: Mapping[str, str] | None = None,
        tokenizer: str | None = None,
        notes: Mapping[str, Any] | None = None,
        allow_duplicate_keys: bool = False,
        shard_format: str = DEFAULT_FORMAT,
        engine: "str | Engine | None" = None,
        progress: "Progress | None" = None,
    ) -> DatasetVersion:
        """Register Parquet files (or files of another ``shard_format``: :mod:`loaders.storage.formats`) as a version
        of ``name`` and return it.

        Footers give schema and row groups; each file is read once, in
        parallel on ``engine`` (``"local"``, ``"ray"``; default
        ``$BATCHSCOPE_ENGINE``, else local), to checksum it and read its key
        column; ``progress(done, total)`` counts bytes. An interrupted
        registration resumes without reading its finished files again. The
        same files give the same id on every engine and write nothing new;
        ``tag`` (and ``latest``) move to the version. Files are never
        modified. With ``key``, keys must be unique (RegistrationError names
        the first duplicates) unless ``allow_duplicate_keys``: then later rows
        of a repeated key are linked as ``key~1``, ``key~2``...
        """
        if tag is not None:
            check_name("tag", tag)
        if shard_format == DEFAULT_FORMAT:
            return self._register_parquet(
                name,
                paths,
                key=key,
                tag=tag,
                kinds=kinds,
                tokenizer=tokenizer,
                notes=notes,
                allow_duplicate_keys=allow_duplicate_keys,
                engine=engine,
                progress=progress,
            )
        prepared = self.prepare_version(
            name,
            paths,
            key=key,
            kinds=kinds,
            tokenizer=tokenizer,
            notes=notes,
            allow_duplicate_keys=allow_duplicate_keys,
            shard_format=shard_format,
        )
        return self.publish_version(prepared, tag=tag)

    def _register_parquet(
        self,
        name: str,
        paths: Sequence[str | os.PathLike[str]],
        *,
        key: str | None,
        tag: str | None,
        kinds: Mapping[str, str] | None,
        tokenizer: str | None,
        notes: Mapping[str, Any] | None,
        allow_duplicate_keys: bool,
        engine: "str | Engine | None",
        progress: "Progress | None",
    ) -> DatasetVersion:
        """Register Parquet files: each read once, in parallel on the scan engine, resuming from what it staged."""
        from ..engine import Checkpoints, resolve_engine
        from .registration import job_name, scan_files, staging_area

        check_name("dataset", name)
        if not storage.is_remote(self.root):
            sweep(self.root)  # what killed imports and exclusions left, in every dataset's folder
        files = _expand(paths)
        if tokenizer is not None:
            self.tokenizer_id(tokenizer)  # an unknown tokenizer is refused before anything is read
        scan_engine = resolve_engine(engine)
        with Checkpoints.open(staging_area(self.root, name), job_name(name, files, key)) as staged:
            scans = scan_files(files, key=key, engine=scan_engine, checkpoints=staged, progress=progress)
            schema = scans[0].schema  # every file's columns and types were checked against it before any data was read
            manifest = Manifest(
                name=name,
                schema=schema,
                kinds=infer_kinds(schema, kinds),
                key=key,
                shards=tuple(scan.shard for scan in scans),
                tokenizer=tokenizer,
                created=_now(),
                notes=dict(notes or {}),
            )
            manifest, keys = self._scanned_keys(manifest, scans, allow_duplicate_keys=allow_duplicate_keys)
            manifest, media = self._checked_media(manifest)
            version = self.publish_version(PreparedVersion(manifest, keys, media), tag=tag)
            staged.finish()
        return version

    def prepare_version(
        self,
        name: str,
        paths: Sequence[str | os.PathLike[str]],
        *,
        key: str | None = None,
        kinds: Mapping[str, str] | None = None,
        tokenizer: str | None = None,
        notes: Mapping[str, Any] | None = None,
        allow_duplicate_keys: bool = False,
        shard_format: str = DEFAULT_FORMAT,
    ) -> "PreparedVersion":
        """Everything :meth:`register` checks and computes, written nowhere: :meth:`publish_version` files it.

        A caller that registers versions as one step of something larger (attaching a replayed run) prepares every
        version first, so a failure anywhere leaves the catalog as it was.
        """
        check_name("dataset", name)
        reader = format_named(shard_format)
        if not storage.is_remote(self.root):
            sweep(self.root)  # what killed imports and exclusions left, in every dataset's folder
        files = _expand(paths, reader.extensions)
        shards: list[ShardInfo] = []
        schema = None
        for uri in files:
            shard, shard_schema = reader.scan(uri)
            if schema is None:
                schema = shard_schema
            elif [(f.name, str(f.type)) for f in shard_schema] != [(f.name, str(f.type)) for f in schema]:
                raise RegistrationError(
                    f"{uri}: schema differs from {files[0]}: "
                    f"{', '.join(f'{f.name}: {f.type}' for f in shard_schema)} vs "
                    f"{', '.join(f'{f.name}: {f.type}' for f in schema)}"
                )
            shards.append(shard)
        assert schema is not None
        if key is not None and key not in schema.names:
            raise RegistrationError(f"key column {key!r} is not in the schema of {files[0]} (columns: {', '.join(schema.names)})")
        if tokenizer is not None:
            self.tokenizer_id(tokenizer)
        manifest = Manifest(
            name=name,
            schema=schema,
            kinds=infer_kinds(schema, kinds),
            key=key,
            shards=tuple(shards),
            tokenizer=tokenizer,
            created=_now(),
            notes=dict(notes or {}),
            shard_format=shard_format,
        )
        manifest, keys = self._checked_keys(manifest, allow_duplicate_keys=allow_duplicate_keys)
        manifest, media = self._checked_media(manifest)
        return PreparedVersion(manifest, keys, media)

    def publish_version(self, prepared: "PreparedVersion", *, tag: str | None = None) -> DatasetVersion:
        """File a prepared version (its manifest, media table and key index) and move ``latest`` and ``tag`` to it."""
        manifest, keys, media = prepared.manifest, prepared.keys, prepared.media
        name = manifest.name
        if tag is not None:
            check_name("tag", tag)
        try:
            with self._locked(name):
                if media is not None:
                    storage.write_if_absent(table_path(self.root, name, media[0]), media[1])
                manifest = self._publish(manifest, tag)
            if keys is not None and not storage.stat(DatasetVersion(manifest, self.root)._key_index_path()).exists:
                DatasetVersion(manifest, self.root).write_key_index(keys)
        except OSError as exc:
            self._drop_if_empty(name)
            raise RegistrationError(f"registering {name} failed: {exc.strerror or exc} ({exc.filename or self.root})") from exc
        except BaseException:
            self._drop_if_empty(name)
            raise
        return self._load(name, manifest.id)

    def filed(self, name: str, version_id: str) -> bool:
        """Whether version ``version_id`` of ``name`` is filed in the catalog."""
        return storage.stat(storage.join(self._dataset_dir(name), "versions", f"{version_id}.json")).exists

    def withdraw_version(self, name: str, version_id: str, *, refs: dict[str, Any]) -> None:
        """Undo :meth:`publish_version` of a version that was not filed before it: remove its manifest and key index
        and put the tags back as ``refs`` (what :meth:`tags_file` gave before publishing). Local catalogs only."""
        with self._locked(name):
            for path in (
                storage.join(self._dataset_dir(name), "versions", f"{version_id}.json"),
                storage.join(self.root, "indexes", name, f"{version_id}.keys.parquet"),
            ):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            refs_path = storage.join(self._dataset_dir(name), "refs.json")
            if refs["head"] is None and not refs["tags"]:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(refs_path)
            else:
                storage.write_bytes_atomic(refs_path, json.dumps(refs, indent=1).encode())
        self._drop_if_empty(name)

    def tags_file(self, name: str) -> dict[str, Any]:
        """Dataset ``name``'s tags file as it stands (``{"head", "tags"}``; empty for a dataset not registered yet)."""
        return self._refs(name)

    def _checked_keys(self, manifest: Manifest, *, allow_duplicate_keys: bool) -> tuple[Manifest, KeyColumn | None]:
        """Read the key column once: refuse duplicates, or (when allowed) record their ``~N`` suffixes."""
        if manifest.key is None:
            return manifest, None
        keys = DatasetVersion(manifest, self.root).key_column(suffixed=False)
        if not allow_duplicate_keys:
            refuse_duplicates(keys, key=manifest.key, name=manifest.name)
            return manifest, keys
        keys, moved = suffix_column(keys)
        return dataclasses.replace(manifest, key_suffixes=tuple(moved)), keys

    def _scanned_keys(
        self, manifest: Manifest, scans: "Sequence[FileScan]", *, allow_duplicate_keys: bool
    ) -> tuple[Manifest, KeyColumn | None]:
        """Check the key column the scan read: refuse duplicates, or (when allowed) record their ``~N`` suffixes."""
        if manifest.key is None:
            return manifest, None
        keys = scanned_keys(scans)
        in_order = sorted_keys(keys)
        if not has_repeats(in_order.keys):
            return manifest, in_order  # no key is held twice (the common case: one sort, which the key index reuses)
        if not allow_duplicate_keys:
            refuse_duplicates(keys, key=manifest.key, name=manifest.name)
            return manifest, keys
        keys, moved = suffix_column(keys)
        return dataclasses.replace(manifest, key_suffixes=tuple(moved)), keys

    def _checked_media(self, manifest: Manifest) -> tuple[Manifest, tuple[str, bytes] | None]:
        """Checksum the media files the version stores by path: the manifest naming their table, and the table."""
        media = scan_media(DatasetVersion(manifest, self.root))
        if not media:
            return manifest, None
        data = encode_table(media)
        digest = hashlib.sha256(data).hexdigest()[:32]
        return dataclasses.replace(manifest, media_files={"digest": digest, "files": len(media)}), (digest, data)

    def _publish(self, manifest: Manifest, tag: str | None) -> Manifest:
        """Write the manifest (unless that version exists) and move ``latest`` and ``tag`` to it; hold the lock."""
        name = manifest.name
        refs = self._refs(name)
        version_path = storage.join(self._dataset_dir(name), "versions", f"{manifest.id}.json")
        if not storage.stat(version_path).exists:
            parent = refs["head"] if refs["head"] != manifest.id else None
            manifest = dataclasses.replace(manifest, parent=parent)
            storage.write_bytes_atomic(version_path, json.dumps(manifest.to_json(), indent=1).encode())
        new_refs = {"head": manifest.id, "tags": {**refs["tags"], "latest": manifest.id}}
        if tag is not None:
            new_refs["tags"][tag] = manifest.id
        if new_refs != refs:
            storage.write_bytes_atomic(storage.join(self._dataset_dir(name), "refs.json"), json.dumps(new_refs, indent=1).encode())
        return manifest

    def _drop_if_empty(self, name: str) -> None:
        """Remove ``datasets/{name}/`` when a failed registration left it without any version (local catalogs)."""
        if storage.is_remote(self.root) or self._version_ids(name):
            return
        directory = self._dataset_dir(name)
        with contextlib.suppress(OSError):
            for leftover in os.listdir(directory):
                if leftover == ".lock" or leftover.startswith("."):
                    os.unlink(os.path.join(directory, leftover))
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(directory, "versions"))
            os.rmdir(directory)

    def tag(self, ref: str, tag: str) -> DatasetVersion:
        """Point ``tag`` at the version ``ref`` resolves to."""
        check_name("tag", tag)
        version = self.resolve(ref)
        with self._locked(version.name):
            refs = self._refs(version.name)
            refs["tags"][tag] = version.id
            storage.write_bytes_atomic(storage.join(self._dataset_dir(version.name), "refs.json"), json.dumps(refs, indent=1).encode())
        return version

    # -- tokenizers --------------------------------------------------------
    def put_tokenizer(self, name: str, tokenizer_json: str) -> str:
        """Store a Hugging Face ``tokenizers`` JSON under ``name``; returns its content id."""
        check_name("tokenizer", name)
        data = tokenizer_json.encode()
        digest = hashlib.sha256(data).hexdigest()[:32]
        storage.write_if_absent(self.path("tokenizers", "blobs", f"{digest}.json"), data)
        names_path = self.path("tokenizers", "names.json")
        names = read_names(names_path, "tokenizer names")
        if names.get(name) != digest:
            names[name] = digest
            storage.write_bytes_atomic(names_path, json.dumps(names, indent=1, sort_keys=True).encode())
        return digest

    def tokenizers(self) -> dict[str, str]:
        """Tokenizer name → content id."""
        return read_names(self.path("tokenizers", "names.json"), "tokenizer names")

    def tokenizer_id(self, ref: str) -> str:
        """Resolve a tokenizer name (or content id) to its content id."""
        names = self.tokenizers()
        if ref in names:
            return names[ref]
        if is_version_id(ref) and storage.stat(self.path("tokenizers", "blobs", f"{ref}.json")).exists:
            return ref
        raise TokenizerNotFound(f"no tokenizer {ref!r} in catalog {self.root} (tokenizers: {', '.join(names) or 'none'})")

    def tokenizer_json(self, ref: str) -> str:
        """A stored tokenizer's JSON, checked against its content id."""
        digest = self.tokenizer_id(ref)
        path = self.path("tokenizers", "blobs", f"{digest}.json")
        data = storage.read_bytes(path)
        if hashlib.sha256(data).hexdigest()[:32] != digest:
            raise CatalogCorrupt(f"{path}: tokenizer does not match its content id {digest} (edited after it was stored)")
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise CatalogCorrupt(f"{path}: tokenizer is not UTF-8 text ({exc})") from exc

    def tokenizer(self, ref: str) -> "Tokenizer":
        """Load a stored tokenizer by name or content id.

        A name is resolved on every call (names move, like tags); the content id
        it resolves to is read, checked and parsed once per process.
        """
        from tokenizers import Tokenizer

        if not (is_version_id(ref) and (self.root, ref) in _TOKENIZERS_BY_ID):  # a loaded content id needs no lookup
            ref = self.tokenizer_id(ref)
        with _TOKENIZERS_LOCK:
            found = _TOKENIZERS_BY_ID.get((self.root, ref))
        if found is None:
            parsed = Tokenizer.from_str(self.tokenizer_json(ref))
            with _TOKENIZERS_LOCK:
                found = _TOKENIZERS_BY_ID.setdefault((self.root, ref), parsed)
        return found


#: Tokenizers loaded by content id, per catalog root: the id pins the bytes, which were checked when first loaded.
_TOKENIZERS_BY_ID: dict[tuple[str, str], "Tokenizer"] = {}
_TOKENIZERS_LOCK = threading.Lock()
