"""Streaming's decoded sample fields as plain values a page renders: numpy arrays as lists (tokens), numpy scalars as
numbers, PIL images as ``{bytes, path}`` PNGs of the decoded pixels (exactly what the model saw), JSON as objects.

>>> renderable(np.arange(3, dtype=np.int32))
[0, 1, 2]
>>> from PIL import Image
>>> sorted(renderable(Image.new("RGB", (2, 2))))
['bytes', 'path']
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np


def renderable(value: Any) -> Any:
    """``value`` as plain Python (see the module docstring); strings, bytes and numbers stay as they are."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {key: renderable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [renderable(item) for item in value]
    if type(value).__module__.startswith("PIL."):
        out = io.BytesIO()
        value.save(out, format="PNG")
        return {"bytes": out.getvalue(), "path": None}
    return value
