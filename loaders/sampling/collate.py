"""Collation: a Batch's model inputs stacked into arrays, for numpy/JAX (and, via loaders.torch, tensors)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .batch import Batch

_SKIP = {"doc_spans", "role_spans", "cu_seqlens"}


def _stackable(values: list[Any]) -> np.ndarray | None:
    if not values or isinstance(values[0], (str, bytes, dict)) or values[0] is None:
        return None  # text, binary and nested values stay lists (and are not copied into a numpy string array first)
    try:
        array = np.asarray(values)
    except (ValueError, TypeError):
        return None
    if array.dtype == object or array.dtype.kind in "USV":
        return None
    return array


def collate_numpy(batch: Batch) -> dict[str, Any]:
    """Stack every input field whose values form a regular numeric array; keep the rest as lists.

    Always includes ``step``, ``rank``, ``index``, ``key`` and ``digest`` so a
    trainer can log exactly what it used. Packed batches also carry
    ``cu_seqlens`` per sample (a list) and, for document-masked attention over
    the flattened batch, ``cu_seqlens_flat`` and ``max_seqlen``.
    """
    out: dict[str, Any] = {
        "step": batch.step,
        "rank": batch.rank,
        "digest": batch.digest,
        "index": np.asarray(batch.indices, dtype=np.int64),
        "key": batch.keys,
    }
    inputs = batch.inputs
    if not inputs:
        return out
    for name in list(inputs[0]):
        values = [i.get(name) for i in inputs]
        if name in _SKIP:
            out[name] = values
            continue
        array = _stackable(values)
        out[name] = array if array is not None else values
    if "cu_seqlens" in out:
        out["cu_seqlens_flat"], out["max_seqlen"] = flat_cu_seqlens(out["cu_seqlens"], [len(i["input_ids"]) for i in inputs])
    return out


def flat_cu_seqlens(per_sample: list[list[int]], lengths: list[int]) -> tuple[np.ndarray, int]:
    """Document boundaries of the whole batch laid end to end, as variable-length attention kernels take them
    (``flash_attn_varlen_func``'s ``cu_seqlens``), and the longest segment.

    >>> flat, longest = flat_cu_seqlens([[0, 3, 4], [0, 4]], [4, 4])
    >>> flat.tolist(), longest
    ([0, 3, 4, 8], 4)
    """
    bounds = [0]
    offset = 0
    for cuts, length in zip(per_sample, lengths):
        bounds.extend(offset + c for c in cuts[1:])
        offset += length
    flat = np.asarray(bounds, dtype=np.int32)
    return flat, int(np.diff(flat).max()) if len(flat) > 1 else 0
