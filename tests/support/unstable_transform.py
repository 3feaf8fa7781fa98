"""A user transform that is *not* deterministic per record (it counts calls): packing must notice."""

from __future__ import annotations

import itertools
from typing import Any

_calls = itertools.count()


def grow(inputs: dict[str, Any], rng: Any) -> dict[str, Any]:
    """Append 0, 1 or 2 extra words, changing from one call to the next."""
    return {"text": inputs["text"] + " word" * (next(_calls) % 3)}
