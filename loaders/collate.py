"""Collation: a Batch's model inputs stacked into arrays, for numpy/JAX (and, via loaders.torch, tensors)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .batch import Batch

_SKIP = {"doc_spans", "role_spans"}


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
    trainer can log exactly what it used.
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
    return out
