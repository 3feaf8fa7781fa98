"""What a recorder reads out of a batch: the samples' keys (a column of a collated batch) and the samples themselves
(the fields a page shows), whatever shape a loader collates them into.

A batch is split into samples by its shape: a list of dicts is already one dict per sample; a dict of columns
(lists, numpy arrays or torch tensors whose first dimension is the batch) gives each sample its row of every column;
a tuple or list of such parts (``(inputs, labels)``) merges them, naming bare arrays by position. Values become plain
Python and numpy (tensors are copied to the CPU), so nothing the trainer does to the batch afterwards changes them.

>>> samples({"id": ["a", "b"], "input_ids": [[1, 2], [3, 4]]})
[{'id': 'a', 'input_ids': [1, 2]}, {'id': 'b', 'input_ids': [3, 4]}]
>>> column("id")({"id": ["a", "b"]})
['a', 'b']
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

Sample = dict[str, Any]


def _plain(value: Any) -> Any:
    """A value as plain Python/numpy: tensors to numpy (on the CPU), numpy scalars to Python."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, without importing torch
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value.item() if value.ndim == 0 else value
    if isinstance(value, np.generic):
        return value.item()
    return value


def _length(value: Any) -> int | None:
    value = _plain(value)
    if isinstance(value, np.ndarray):
        return int(value.shape[0])
    if isinstance(value, (list, tuple)):
        return len(value)
    return None


def _rows(columns: dict[str, Any]) -> list[Sample]:
    """A dict of columns split into one dict per sample (columns of another length than the first are left out)."""
    plain = {str(k): _plain(v) for k, v in columns.items()}
    size = next((n for n in map(_length, plain.values()) if n is not None), None)
    if size is None:
        return [plain]
    kept = {k: v for k, v in plain.items() if _length(v) == size}
    return [{k: (v[i].copy() if isinstance(v, np.ndarray) else v[i]) for k, v in kept.items()} for i in range(size)]


def samples(batch: Any) -> list[Sample]:
    """One dict of fields per sample of ``batch`` (see the module docstring for the shapes understood).

    >>> samples([{"text": "x"}, {"text": "y"}])
    [{'text': 'x'}, {'text': 'y'}]
    >>> [sorted(s) for s in samples(({"input": [[1, 2]]}, [[2, 3]]))]
    [['1', 'input']]
    """
    if isinstance(batch, dict):
        return _rows(batch)
    if isinstance(batch, (list, tuple)) and batch and all(isinstance(item, dict) for item in batch):
        return [{str(k): _plain(v) for k, v in item.items()} for item in batch]
    if isinstance(batch, (list, tuple)) and batch:
        parts = [_rows(part) if isinstance(part, dict) else _rows({str(i): part}) for i, part in enumerate(batch)]
        size = max(len(p) for p in parts)
        merged: list[Sample] = [{} for _ in range(size)]
        for part in parts:
            if len(part) == size:
                for row, values in zip(merged, part):
                    row.update(values)
        return merged
    return _rows({"value": batch})


def column(name: str) -> Callable[[Any], list[str]]:
    """A ``keys`` function for :func:`batchscope.record`: the key column ``name`` of each sample, as text.

    Works on a dict of columns (what ``DataLoader``'s default collate makes of dict samples) and on a list of dicts.

    >>> column("id")([{"id": 7}, {"id": 8}])
    ['7', '8']
    """

    def keys(batch: Any) -> list[str]:
        if isinstance(batch, dict):
            values = batch[name]
            if isinstance(values, list) and all(type(v) is str for v in values):
                return values  # what the default collate makes of string keys: nothing to convert
            values = _plain(values)
            return [str(_plain(v)) for v in (values.tolist() if isinstance(values, np.ndarray) else values)]
        return [str(_plain(item[name])) for item in batch]

    keys.__name__ = f"column({name!r})"
    return keys


def size_of(value: Any) -> int:
    """Bytes a sample's values take (arrays by their buffer, text by its UTF-8 length), for the size limit.

    >>> size_of({"text": "abc", "ids": np.zeros(4, dtype=np.int64)})
    42
    """
    if isinstance(value, dict):
        return sum(len(str(k)) + size_of(v) for k, v in value.items())
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, (list, tuple)):
        return sum(size_of(v) for v in value)
    return 8
