"""Reading the catalog's own files (manifests, refs.json, tokenizer names): checked, or refused naming the file.

Every JSON file the catalog reads goes through :func:`read_json`, so a file
that is not JSON is one clear :class:`~loaders.errors.CatalogCorrupt` naming
it, never a ``JSONDecodeError`` traceback. A manifest must hash to the id its
file is named after (and belong to the dataset whose directory holds it); a
tag in ``refs.json`` must be a version id, never a path.

>>> is_version_id("0123456789abcdef0123456789abcdef")
True
>>> is_version_id("../../other/versions/0123456789abcdef0123456789abcdef")
False
"""

from __future__ import annotations

import json
import re
from typing import Any

from .. import storage
from ..errors import CatalogCorrupt
from .manifest import Manifest

_VERSION_ID = re.compile(r"[0-9a-f]{32}")


def is_version_id(value: object) -> bool:
    """True for a full version id: 32 lowercase hexadecimal characters."""
    return isinstance(value, str) and _VERSION_ID.fullmatch(value) is not None


def read_json(path: str, what: str) -> Any:
    """The JSON value stored at ``path``, or CatalogCorrupt naming the file and ``what`` it should hold."""
    raw = storage.read_bytes(path)
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CatalogCorrupt(f"{path}: {what} is not valid JSON ({exc}); restore the file or remove it") from exc


def load_manifest(path: str, *, name: str, version_id: str) -> Manifest:
    """The manifest stored at ``path``, checked against the version id it is filed under and the dataset's name.

    Its id covers its notes and exact schema unless it was registered before
    ids did (then it hashes to its id without them, and they are unverified).
    """
    data = read_json(path, "dataset manifest")
    try:
        manifest = Manifest.from_json(data)
        if manifest.id != version_id:
            manifest = Manifest.from_json(data, covers_meta=False)
    except Exception as exc:  # noqa: BLE001 - any malformed field is the same refusal
        raise CatalogCorrupt(f"{path}: dataset manifest is malformed ({type(exc).__name__}: {exc})") from exc
    if manifest.id != version_id or data.get("id", version_id) != version_id:
        raise CatalogCorrupt(
            f"{path}: dataset manifest does not match its id {version_id} (its content hashes to {manifest.id}); "
            "it was edited after registration and is refused"
        )
    if manifest.name != name:
        raise CatalogCorrupt(f"{path}: manifest names dataset {manifest.name!r}, but it is filed under dataset {name!r}")
    return manifest


def check_refs(path: str, data: Any) -> dict[str, Any]:
    """``refs.json`` content as ``{"head": id or None, "tags": {tag: id}}``, or CatalogCorrupt naming the bad entry."""
    if not isinstance(data, dict) or not isinstance(data.get("tags", {}), dict):
        raise CatalogCorrupt(f"{path}: tags file must be an object with a 'tags' object")
    head = data.get("head")
    if head is not None and not is_version_id(head):
        raise CatalogCorrupt(f"{path}: head {str(head)[:80]!r} is not a version id")
    tags = data.get("tags", {})
    for tag, target in tags.items():
        if not is_version_id(target):
            raise CatalogCorrupt(
                f"{path}: tag {str(tag)[:80]!r} points at {str(target)[:80]!r}, which is not a version id "
                "(32 hexadecimal characters); the tag is refused"
            )
    return {"head": head, "tags": dict(tags)}


def read_refs(path: str) -> dict[str, Any]:
    """A dataset's checked tags (an absent file means no tags yet)."""
    if not storage.stat(path).exists:
        return {"head": None, "tags": {}}
    return check_refs(path, read_json(path, "tags file (refs.json)"))


def read_names(path: str, what: str) -> dict[str, str]:
    """A JSON object of names to content ids (tokenizer names), checked; absent means empty."""
    if not storage.stat(path).exists:
        return {}
    data = read_json(path, what)
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and re.fullmatch(r"[0-9a-f]{32}", v) for k, v in data.items()
    ):
        raise CatalogCorrupt(f"{path}: {what} must map names to content ids (32 hexadecimal characters)")
    return data
