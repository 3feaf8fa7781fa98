"""Token counts per chunk of a source: the one index lossless packing needs, built once, stored, verified.

The count of chunk ``c`` is the number of tokens the run's document
transforms make of records ``[c·C, (c+1)·C)``. Document transforms are keyed
per record (not per epoch or stream), so the counts hold for every epoch.
The array (one int64 per chunk, i.e. one number per ``C`` records) is stored
under the catalog's ``token-counts/`` folder by a key naming everything it
depends on, and its SHA-256 is recorded in the run manifest: a file that does
not match is rebuilt, and a rebuild that still does not match is refused.
"""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any, Callable

import numpy as np

from . import storage
from .errors import CorruptData

#: Records tokenized per batch while building (bounded memory, one ``encode_batch`` each).
BUILD_BATCH = 4096


def index_key(version_id: str, rows: int, chunk: int, transforms: list[dict[str, Any]], tokenizers: dict[str, str], seed: int) -> str:
    """A content key for the counts of one source under one set of document transforms."""
    spec = {"version": version_id, "rows": rows, "chunk": chunk, "transforms": transforms, "tokenizers": tokenizers, "seed": seed}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:32]


def _encode(counts: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, counts.astype(np.int64), allow_pickle=False)
    return buffer.getvalue()


def digest(counts: np.ndarray) -> str:
    """SHA-256 of the stored form of ``counts``."""
    return hashlib.sha256(_encode(counts)).hexdigest()


def build_counts(rows: int, chunk: int, lengths: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Tokens per chunk, from ``lengths(record indices) -> token counts`` over every record in order."""
    slots = -(-rows // chunk)
    counts = np.zeros(slots, dtype=np.int64)
    for begin in range(0, rows, BUILD_BATCH):
        indices = np.arange(begin, min(begin + BUILD_BATCH, rows), dtype=np.int64)
        np.add.at(counts, indices // chunk, np.asarray(lengths(indices), dtype=np.int64))
    return counts


def load_or_build(path: str, expected: str | None, build: Callable[[], np.ndarray]) -> tuple[np.ndarray, str]:
    """The counts stored at ``path`` if they hash to ``expected``; else rebuilt, checked and stored.

    ``expected`` None (a run being created) accepts a stored file or builds one.
    Returns the counts and their digest.
    """
    if storage.stat(path).exists:
        data = storage.read_bytes(path)
        found = hashlib.sha256(data).hexdigest()
        if expected is None or found == expected:
            try:
                return np.load(io.BytesIO(data), allow_pickle=False), found
            except ValueError:
                pass  # unreadable: rebuilt below
    counts = build()
    made = digest(counts)
    if expected is not None and made != expected:
        raise CorruptData(
            f"token counts {path}: rebuilding them gives digest {made[:16]}…, but the run recorded {expected[:16]}… "
            "(the documents or a document transform no longer give the same tokens)"
        )
    storage.write_bytes_atomic(path, _encode(counts))
    return counts, made
