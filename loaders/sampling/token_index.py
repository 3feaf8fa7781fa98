"""Token counts per chunk of a source: the one index lossless packing needs, built once, stored, verified.

The count of chunk ``c`` is the number of tokens the run's document
transforms make of records ``[c·C, (c+1)·C)``. Document transforms are keyed
per record (not per epoch or stream), so the counts hold for every epoch.
The array (one int64 per chunk, i.e. one number per ``C`` records) is stored
under the catalog's ``token-counts/`` folder by a key naming everything it
depends on, sealed (``loaders.storage.derived``), and the SHA-256 of the counts
is recorded in the run manifest: a file that does not match is rebuilt, and a
rebuild that still does not match is refused. A run being created believes only
a file this installation sealed.

Beside it, for runs created since, the token count of every *record* (the
smallest unsigned dtype that holds them) is stored and pinned the same way.
A window's documents are shuffled across its chunks, so only per-record
counts tell where a document starts inside a window without tokenizing the
documents read before it: with them a packed sequence costs the tokenizing of
its own few documents, not of the window's prefix. Per-record counts are
checked against the chunk counts they sum to, and every document tokenized
against its own count.
"""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any, Callable, Sequence

import numpy as np

from .. import storage
from ..errors import CorruptData
from ..storage import derived

#: Records tokenized per batch while building (bounded memory, one ``encode_batch`` each).
BUILD_BATCH = 4096


def index_key(version_id: str, rows: int, chunk: int, transforms: list[dict[str, Any]], tokenizers: dict[str, str], seed: int) -> str:
    """A content key for the counts of one source under one set of document transforms."""
    spec = {"version": version_id, "rows": rows, "chunk": chunk, "transforms": transforms, "tokenizers": tokenizers, "seed": seed}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:32]


def _encode(counts: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, counts if counts.dtype.kind == "u" else counts.astype(np.int64), allow_pickle=False)
    return buffer.getvalue()


def digest(counts: np.ndarray) -> str:
    """SHA-256 of the stored form of ``counts``."""
    return hashlib.sha256(_encode(counts)).hexdigest()


def records_path(key: str) -> str:
    """The file name of the per-record counts beside the chunk counts ``{key}.npy``."""
    return f"{key}.records.npy"


def build_record_counts(rows: int, lengths: Callable[[np.ndarray], Sequence[int]]) -> np.ndarray:
    """Tokens of every record, from ``lengths(record indices) -> token counts``, in the smallest unsigned dtype.

    >>> build_record_counts(5, lambda indices: [int(i) * 2 for i in indices]).tolist()
    [0, 2, 4, 6, 8]
    """
    counts = np.zeros(rows, dtype=np.int64)
    for begin in range(0, rows, BUILD_BATCH):
        indices = np.arange(begin, min(begin + BUILD_BATCH, rows), dtype=np.int64)
        counts[begin : begin + len(indices)] = np.asarray(lengths(indices), dtype=np.int64)
    largest = int(counts.max()) if rows else 0
    dtype = np.uint16 if largest < 2**16 else np.uint32 if largest < 2**32 else np.uint64
    return counts.astype(dtype)


def chunk_sums(record_counts: np.ndarray, chunk: int) -> np.ndarray:
    """Tokens per chunk of ``chunk`` consecutive records (the last chunk may be partial).

    >>> chunk_sums(np.array([1, 2, 3, 4, 5]), 2).tolist()
    [3, 7, 5]
    """
    if not len(record_counts):
        return np.zeros(0, dtype=np.int64)
    return np.add.reduceat(record_counts.astype(np.int64), np.arange(0, len(record_counts), chunk))


def _derivation(path: str) -> derived.Derivation:
    """What the counts stored at ``path`` are: their file name is the content key naming every input."""
    return derived.Derivation("token counts", path.rsplit("/", 1)[-1])


def _stored(path: str, expected: str | None) -> tuple[np.ndarray, str] | None:
    """The counts stored at ``path`` when they can be believed: pinned by ``expected`` (the digest a run recorded), or,
    for a run being created, sealed by this installation."""
    if not storage.stat(path).exists:
        return None
    data = storage.read_bytes(path)
    what = _derivation(path)
    if expected is None:
        payload = derived.guarded(path, what, lambda: derived.unwrap(data, what))
    else:  # pinned by the run's manifest: the sealed envelope's payload, or a bare file from before seals
        payload = (
            derived.guarded(path, what, lambda: derived.unwrap(data, what, sealed=False)) if data.startswith(derived.ENVELOPE) else data
        )
        if payload is not None and hashlib.sha256(payload).hexdigest() != expected:
            payload = None
    if payload is None:
        return None
    counts = derived.guarded(path, what, lambda: np.load(io.BytesIO(payload), allow_pickle=False))
    return None if counts is None else (counts, hashlib.sha256(payload).hexdigest())


def load_or_build(path: str, expected: str | None, build: Callable[[], np.ndarray]) -> tuple[np.ndarray, str]:
    """The counts stored at ``path`` if they hash to ``expected``; else rebuilt, checked and stored.

    ``expected`` None (a run being created) accepts only a file this
    installation sealed, or builds one. Returns the counts and their digest.
    """
    found = _stored(path, expected)
    if found is not None:
        return found
    counts = build()
    made = digest(counts)
    if expected is not None and made != expected:
        raise CorruptData(
            f"token counts {path}: rebuilding them gives digest {made[:16]}…, but the run recorded {expected[:16]}… "
            "(the documents or a document transform no longer give the same tokens)"
        )
    derived.write_bytes(path, _encode(counts), _derivation(path))
    return counts, made
