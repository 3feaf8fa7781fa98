"""Model inputs of a step/rank sample as field blocks: token views, sampled frames, crops, other new fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from loaders.run.kinds import claims

from .. import urls
from .registry import FieldContext, View, render_field

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from loaders import Run, Sample

#: How the token view reads the companions of ``input_ids`` among a sample's model inputs.
INPUT_KINDS = {"input_ids": "tokens", "loss_mask": "mask", "labels": "labels"}
#: Inputs folded into the token view rather than shown on their own.
TOKEN_PARTS = ("input_ids", "loss_mask", "position_ids", "doc_spans", "padding", "role_spans")
FRAME_PARTS = ("frames", "frame_indices", "frame_times")
CROP_PARTS = ("crop_box", "source_size")


@dataclass
class InputBlock:
    """One rendered model input (laid out like a dataset field)."""

    column: str
    kind: str
    fragment_url: str
    view: View


@dataclass
class TokenValues:
    """Per-token values the trainer logged for one sample (``token_loss`` or ``token_logprob``), for the heat layer."""

    name: str
    values: list[Any]


@dataclass
class InputPlace:
    """Where a sample sits, for URLs and error messages."""

    run: str
    step: int
    rank: int
    position: int
    where: str


def source_transforms(run: "Run", source: int) -> list[Any]:
    """A source's own transforms (a run with a read plan; other kinds of run apply none of batchscope's)."""
    return list(run.plan.sources[source].transforms) if claims(run.kind).planned else []


def run_tokenizer(run: "Run", source: int) -> "Tokenizer | None":
    """The tokenizer that made a source's tokens: its tokenize/chat transform's, else its dataset's (a run without a
    plan, such as a recorded one, has only its versions')."""
    if not claims(run.kind).planned:
        named = run.version(source).tokenizer
        return run.catalog.tokenizer(named) if named else None
    names = [n for t in source_transforms(run, source) for n in t.tokenizer_names()]
    names += [n for t in run.plan.document_transforms for n in t.tokenizer_names()]
    name = names[0] if names else run.version(source).tokenizer
    if name is None:
        return None
    return run.catalog.tokenizer(run.tokenizers.get(name, name))


def _changed(inputs: dict[str, Any], record: dict[str, Any]) -> list[str]:
    """Inputs a transform added or replaced (raw copies of the record are shown with the record)."""
    return [k for k, v in inputs.items() if k not in record or v is not record[k]]


def _kind_of(value: Any) -> str:
    if isinstance(value, str):
        return "text"
    if isinstance(value, (bool, int, float)) or value is None:
        return "scalar"
    return "json"


def input_blocks(
    run: "Run",
    sample: "Sample",
    place: InputPlace,
    *,
    only: str | None = None,
    token_threshold: int = 1024,
    token_values: TokenValues | None = None,
) -> list[InputBlock]:
    """The blocks of a sample's model inputs (or just ``only``, in full).

    The token view draws the loss mask, padding and packed documents from the
    inputs, and ``token_values`` (logged per-token loss or logprob) as heat.
    """
    inputs = sample.inputs
    record = sample.record if not sample.packed else {}
    names = _changed(inputs, record)
    blocks: list[InputBlock] = []

    # The logged per-token values come first, so the heat layer takes them over any float list a transform made.
    token_record = {token_values.name: token_values.values, **inputs} if token_values is not None else inputs

    def block(name: str, kind: str, value: Any, *, media_url: str | None = None, tokenizer: Any = None) -> None:
        if only is not None and name != only:
            return
        fragment = urls.input_view(place.run, place.step, place.rank, place.position, name)
        ctx = FieldContext(
            column=name,
            kind=kind,
            record=token_record if kind == "tokens" else inputs,
            kinds=INPUT_KINDS,
            tokenizer=tokenizer,
            full=only is not None,
            fragment_url=fragment,
            media_url=media_url,
            token_threshold=token_threshold,
            where=place.where,
        )
        blocks.append(InputBlock(name, kind, fragment, render_field(value, ctx)))

    if "input_ids" in inputs:
        block("input_ids", "tokens", inputs["input_ids"], tokenizer=run_tokenizer(run, sample.documents[0].source))
    doc = sample.documents[0]
    source_ref = {"dataset": doc.address.dataset, "version": doc.address.version, "key": doc.key}
    if "frames" in inputs:
        frames = np.asarray(inputs["frames"])
        video_field = next((t.field for t in source_transforms(run, doc.source) if t.type == "sample_frames"), "video")
        value = {
            "frame_indices": list(inputs.get("frame_indices", [])),
            "frame_times": list(inputs.get("frame_times", [])),
            "field": video_field,
            "shape": list(frames.shape),
            **source_ref,
        }
        block("frames", "model_frames", value, media_url=urls.input_media(place.run, place.step, place.rank, place.position, "frames"))
    if "crop_box" in inputs:
        crop_field = next((t.field for t in source_transforms(run, doc.source) if t.type == "random_resized_crop"), "image")
        crop = np.asarray(inputs.get(crop_field))
        value = {
            "field": crop_field,
            "crop_box": list(inputs["crop_box"]),
            "source_size": list(inputs.get("source_size", [])),
            "size": list(crop.shape[:2]),
            **source_ref,
        }
        block(crop_field, "model_image", value, media_url=urls.input_media(place.run, place.step, place.rank, place.position, crop_field))
    handled = set(TOKEN_PARTS) | set(FRAME_PARTS) | set(CROP_PARTS)
    handled |= {t.field for t in source_transforms(run, doc.source) if t.type == "random_resized_crop"}
    for name in names:
        if name in handled:
            continue
        value = inputs[name]
        if isinstance(value, np.ndarray):
            value = {"dtype": str(value.dtype), "shape": list(value.shape)}
        block(name, _kind_of(value), value)
    return blocks
