"""Field kinds: how a column is meant (text, tokens, image, rollout...), inferred from Arrow types and names."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

import pyarrow as pa

from ..errors import RegistrationError

#: How the version diff (``loaders.diff``) details a changed value of a kind.
DIFF_VALUE = "value"  # by the values' types: two strings word by word, structures path by path, the rest before → after
DIFF_SEQUENCE = "sequence"  # id sequences aligned block by block (token ids, masks, labels)
DIFF_PATHS = "paths"  # changed paths, also when the field is added or removed
DIFF_JSON = "json"  # as ``paths``; strings holding JSON are parsed first
DIFF_MEDIA = "media"  # size and sha256 of the bytes (and the path or URI they are stored at)
DIFF_TREATMENTS = (DIFF_VALUE, DIFF_SEQUENCE, DIFF_PATHS, DIFF_JSON, DIFF_MEDIA)


@dataclass(frozen=True)
class KindSpec:
    """The domain facts of one field kind: what a column of it holds, how it is recognized, stored, served and diffed.

    How the inspector shows a kind lives beside its renderers (``app.renderers.kinds``), one entry per kind here.
    """

    name: str
    #: The Parquet shape a column of this kind holds.
    shape: str
    #: Encoded media (pictures, sound): bytes inline, or a ``{bytes, path}`` struct whose ``path`` may name a file.
    media: bool = False
    #: Values are bytes (or media naming them): the media route serves them, a terminal summarizes rather than prints them.
    holds_bytes: bool = False
    #: Has pixels: thumbnails, a view page of its own, the image grid of a version page.
    picture: bool = False
    #: Files its values name are checksummed at registration (the table's digest is part of the version id).
    checksummed_files: bool = False
    #: How the version diff details a changed value (one of ``DIFF_TREATMENTS``).
    diff: str = DIFF_VALUE
    #: Values are what a document says (its text, tokens, turns, pixels, sound, steps): ``batchscope lint`` finds the same
    #: document under two keys by these columns.
    content: bool = False
    #: Words in a column's name that make bytes (or a ``{bytes, path}`` struct) this kind; a token column's names.
    name_words: tuple[str, ...] = ()
    #: The Hugging Face feature ``_type`` inferred as this kind.
    hf_type: str | None = None


#: Every field kind a column can have, once.
SPECS: tuple[KindSpec, ...] = (
    KindSpec("text", "string or large_string", content=True),
    KindSpec(
        "tokens",
        "list<int> of token ids (a tokenizer is named by the plan or the dataset)",
        diff=DIFF_SEQUENCE,
        content=True,
        name_words=("input_ids", "token_ids", "tokens", "ids"),
    ),
    KindSpec("mask", "list<int|bool>, one entry per token: 1 = trained, 0 = masked", diff=DIFF_SEQUENCE),
    KindSpec("labels", "list<int>, one per token; -100 marks a masked position", diff=DIFF_SEQUENCE),
    KindSpec("chat", "list<struct<role: string, content: string>>", diff=DIFF_PATHS, content=True),
    KindSpec(
        "image",
        "binary (encoded PNG/JPEG/WebP/...) or struct<bytes: binary, path: string> (Hugging Face Image)",
        media=True,
        holds_bytes=True,
        picture=True,
        checksummed_files=True,
        diff=DIFF_MEDIA,
        content=True,
        name_words=("image", "img", "photo", "picture", "jpeg", "jpg", "png", "pixel", "thumbnail"),
        hf_type="Image",
    ),
    KindSpec(
        "video",
        "binary (encoded MP4/WebM/...), struct<bytes, path>, or a string URI",
        media=True,
        holds_bytes=True,
        picture=True,
        checksummed_files=True,
        diff=DIFF_MEDIA,
        content=True,
        name_words=("video", "clip", "mp4", "webm", "movie"),
        hf_type="Video",
    ),
    KindSpec(
        "audio",
        "binary (encoded WAV/FLAC/MP3/OGG/...) or struct<bytes: binary, path: string> (Hugging Face Audio)",
        media=True,
        holds_bytes=True,
        checksummed_files=True,
        diff=DIFF_MEDIA,
        content=True,
        name_words=("audio", "speech", "sound", "wav", "flac", "mp3"),
        hf_type="Audio",
    ),
    KindSpec("class_label", "integer class id; names from Hugging Face ClassLabel metadata shown beside it", hf_type="ClassLabel"),
    KindSpec(
        "episode",
        "struct with list fields: frames (list<binary>), actions, rewards (list<float>), dones (list<bool>)",
        diff=DIFF_PATHS,
        content=True,
    ),
    KindSpec(
        "rollout", "struct<prompt, completion, reward, advantage, group_id, logprobs: list<float>, ...>", diff=DIFF_PATHS, content=True
    ),
    KindSpec("json", "any other struct, list or map; or a string column holding JSON", diff=DIFF_JSON),
    KindSpec("scalar", "integer, floating point, boolean, decimal, date or timestamp"),
    KindSpec("binary", "other bytes", holds_bytes=True, content=True),
)


def _by_name(specs: tuple[KindSpec, ...]) -> dict[str, KindSpec]:
    found: dict[str, KindSpec] = {}
    for spec in specs:
        if spec.name in found:
            raise ValueError(f"field kind {spec.name!r} is specified twice")
        if spec.diff not in DIFF_TREATMENTS:
            raise ValueError(f"field kind {spec.name!r} has diff treatment {spec.diff!r}; allowed: {', '.join(DIFF_TREATMENTS)}")
        found[spec.name] = spec
    return found


SPEC: dict[str, KindSpec] = _by_name(SPECS)
#: Every field kind a column can have, with the Parquet shape it expects.
KINDS: dict[str, str] = {spec.name: spec.shape for spec in SPECS}


def kinds_where(**facts: object) -> tuple[str, ...]:
    """The kinds whose spec has every one of ``facts``, in table order.

    >>> kinds_where(picture=True), kinds_where(diff=DIFF_SEQUENCE)
    (('image', 'video'), ('tokens', 'mask', 'labels'))
    """
    unknown = [name for name in facts if name not in KindSpec.__dataclass_fields__]
    if unknown:
        raise TypeError(f"KindSpec has no fact {unknown[0]!r}")
    return tuple(spec.name for spec in SPECS if all(getattr(spec, name) == value for name, value in facts.items()))


#: Encoded media (image, video, audio): values are bytes or ``{bytes, path}`` structs that may name a file.
MEDIA_KINDS = kinds_where(media=True)
#: Kinds whose values are bytes: the media route serves their stored bytes.
BYTES_KINDS = kinds_where(holds_bytes=True)
#: Kinds with pixels: thumbnails, frames, the media view page and the image grid.
PICTURE_KINDS = kinds_where(picture=True)
#: Kinds whose by-path files registration checksums.
CHECKSUMMED_KINDS = kinds_where(checksummed_files=True)

_IMAGE_WORDS = SPEC["image"].name_words
_VIDEO_WORDS = SPEC["video"].name_words
_AUDIO_WORDS = SPEC["audio"].name_words
_TOKEN_WORDS = SPEC["tokens"].name_words
#: Hugging Face feature ``_type`` → field kind.
_HF_KINDS = {spec.hf_type: spec.name for spec in SPECS if spec.hf_type}


def _has(name: str, words: tuple[str, ...]) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in words)


def _field_names(type_: pa.DataType) -> set[str]:
    if pa.types.is_struct(type_):
        return {type_.field(i).name.lower() for i in range(type_.num_fields)}
    return set()


def _hf_features(metadata: Mapping[bytes, bytes] | None) -> dict[str, object]:
    """Hugging Face ``datasets`` stores its feature types in the schema metadata."""
    if not metadata or b"huggingface" not in metadata:
        return {}
    try:
        info = json.loads(metadata[b"huggingface"])
    except ValueError:
        return {}
    features = info.get("info", {}).get("features", {})
    return features if isinstance(features, dict) else {}


def _hf_kind(feature: object) -> str | None:
    if not isinstance(feature, dict):
        return None
    return _HF_KINDS.get(str(feature.get("_type")))


def class_names(metadata: Mapping[bytes, bytes] | None) -> dict[str, list[str]]:
    """Column → class names, from the Hugging Face ``ClassLabel`` features in a schema's metadata.

    >>> meta = {b"huggingface": b'{"info": {"features": {"label": {"_type": "ClassLabel", "names": ["neg", "pos"]}}}}'}
    >>> class_names(meta)
    {'label': ['neg', 'pos']}
    """
    found = {}
    for column, feature in _hf_features(metadata).items():
        if _hf_kind(feature) == "class_label":
            names = feature.get("names")  # type: ignore[union-attr]
            if isinstance(names, list) and all(isinstance(n, str) for n in names):
                found[column] = names
    return found


def _media_kind(name: str) -> str:
    """The media kind of bytes (or a ``{bytes, path}`` struct) from the column's name; image when it says nothing."""
    if _has(name, _VIDEO_WORDS):
        return "video"
    if _has(name, _AUDIO_WORDS):
        return "audio"
    return "image"


def infer_kind(name: str, type_: pa.DataType, hf_feature: object = None) -> str:
    """Infer the field kind of one column.

    >>> infer_kind("input_ids", pa.list_(pa.int32()))
    'tokens'
    >>> infer_kind("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
    'image'
    """
    hf = _hf_kind(hf_feature)
    if hf:
        return hf
    if pa.types.is_dictionary(type_):  # pandas Categorical, Arrow dictionary encoding: the kind of its values
        return infer_kind(name, type_.value_type)
    lowered = name.lower()
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        if _has(name, _VIDEO_WORDS) and ("uri" in lowered or "path" in lowered or "url" in lowered):
            return "video"
        return "json" if "json" in lowered else "text"
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
        if _has(name, _VIDEO_WORDS + _AUDIO_WORDS + _IMAGE_WORDS):
            return _media_kind(name)
        return "binary"
    if pa.types.is_struct(type_):
        fields = _field_names(type_)
        if {"bytes", "path"} <= fields:
            return _media_kind(name)
        if {"prompt", "completion"} <= fields or {"completion", "reward"} <= fields:
            return "rollout"
        if any("action" in f for f in fields) and any("reward" in f for f in fields):
            return "episode"
        return "json"
    if pa.types.is_list(type_) or pa.types.is_large_list(type_) or pa.types.is_fixed_size_list(type_):
        value = type_.value_type
        if pa.types.is_struct(value):
            fields = _field_names(value)
            if {"role", "content"} <= fields:
                return "chat"
            if any("action" in f for f in fields) and any("reward" in f for f in fields):
                return "episode"
            return "json"
        if pa.types.is_integer(value) or pa.types.is_boolean(value):
            if "mask" in lowered:
                return "mask"
            if "label" in lowered:
                return "labels"
            if _has(name, _TOKEN_WORDS):
                return "tokens"
        return "json"
    if pa.types.is_map(type_):
        return "json"
    if (
        pa.types.is_integer(type_)
        or pa.types.is_floating(type_)
        or pa.types.is_boolean(type_)
        or pa.types.is_decimal(type_)
        or pa.types.is_temporal(type_)
    ):
        return "scalar"
    return "json"


def infer_kinds(schema: pa.Schema, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """Infer the kind of every column, then apply ``overrides`` (validated)."""
    features = _hf_features(schema.metadata)
    kinds = {field.name: infer_kind(field.name, field.type, features.get(field.name)) for field in schema}
    for column, kind in (overrides or {}).items():
        if column not in kinds:
            raise RegistrationError(f"kinds override names column {column!r}, which is not in the schema (columns: {', '.join(kinds)})")
        if kind not in KINDS:
            raise RegistrationError(f"unknown field kind {kind!r} for column {column!r}; allowed: {', '.join(KINDS)}")
        kinds[column] = kind
    return kinds
