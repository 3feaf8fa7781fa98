"""Field kinds: how a column is meant (text, tokens, image, rollout...), inferred from Arrow types and names."""

from __future__ import annotations

import json
from typing import Mapping

import pyarrow as pa

from .errors import RegistrationError

#: Every field kind a column can have, with the Parquet shape it expects.
KINDS: dict[str, str] = {
    "text": "string or large_string",
    "tokens": "list<int> of token ids (a tokenizer is named by the plan or the dataset)",
    "mask": "list<int|bool>, one entry per token: 1 = trained, 0 = masked",
    "labels": "list<int>, one per token; -100 marks a masked position",
    "chat": "list<struct<role: string, content: string>>",
    "image": "binary (encoded PNG/JPEG/WebP/...) or struct<bytes: binary, path: string> (Hugging Face Image)",
    "video": "binary (encoded MP4/WebM/...), struct<bytes, path>, or a string URI",
    "audio": "binary (encoded WAV/FLAC/MP3/OGG/...) or struct<bytes: binary, path: string> (Hugging Face Audio)",
    "class_label": "integer class id; names from Hugging Face ClassLabel metadata shown beside it",
    "episode": "struct with list fields: frames (list<binary>), actions, rewards (list<float>), dones (list<bool>)",
    "rollout": "struct<prompt, completion, reward, advantage, group_id, logprobs: list<float>, ...>",
    "json": "any other struct, list or map; or a string column holding JSON",
    "scalar": "integer, floating point, boolean, decimal, date or timestamp",
    "binary": "other bytes",
}

_IMAGE_WORDS = ("image", "img", "photo", "picture", "jpeg", "jpg", "png", "pixel", "thumbnail")
_VIDEO_WORDS = ("video", "clip", "mp4", "webm", "movie")
_AUDIO_WORDS = ("audio", "speech", "sound", "wav", "flac", "mp3")
_TOKEN_WORDS = ("input_ids", "token_ids", "tokens", "ids")
#: Hugging Face feature ``_type`` → field kind.
_HF_KINDS = {"Image": "image", "Video": "video", "Audio": "audio", "ClassLabel": "class_label"}


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
            raise RegistrationError(
                f"kinds override names column {column!r}, which is not in the schema (columns: {', '.join(kinds)})"
            )
        if kind not in KINDS:
            raise RegistrationError(f"unknown field kind {kind!r} for column {column!r}; allowed: {', '.join(KINDS)}")
        kinds[column] = kind
    return kinds
