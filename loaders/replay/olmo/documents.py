"""The documents of a token file, by OLMo-core's own boundary rule, and which of them a token range holds.

OLMo-core finds documents in a token file with ``olmo_core.data.utils.iter_document_indices`` (a document ends at an
EOS token, or at an EOS followed by BOS when the tokenizer has a BOS). A file's boundaries are computed once with that
function and kept as a stamped derived array of document ends (named by the pinned file's checksum), so finding the
documents of an instance is a binary search.

>>> ends = np.array([5, 9, 20])
>>> [(p.number, p.start, p.end, p.position, p.complete) for p in pieces(ends, 0, 5, 12, file_size=24)]
[(1, 5, 9, 0, True), (2, 9, 20, 4, False)]
>>> [(p.number, p.terminated) for p in pieces(ends, 0, 18, 24, file_size=24)]
[(2, True), (3, False)]
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .derived import open_stamped, write_stamped
from .model import DocumentPiece


def document_ends(path: str, *, cache: Path, eos_token_id: int, bos_token_id: int | None, dtype: type) -> np.ndarray:
    """The end (one past the last token) of every document of the token file ``path``, built once into ``cache``."""
    ends = open_stamped(cache, np.int64)
    if ends is None:
        from olmo_core.data.utils import iter_document_indices

        found = [end for _, end in iter_document_indices(path, eos_token_id=eos_token_id, bos_token_id=bos_token_id, dtype=dtype)]
        write_stamped(cache, np.asarray(found, dtype=np.int64))
        ends = open_stamped(cache, np.int64)
        assert ends is not None
    return ends


def pieces(ends: np.ndarray, file: int, start: int, end: int, *, file_size: int) -> tuple[DocumentPiece, ...]:
    """The document pieces inside tokens ``[start, end)`` of a file of ``file_size`` tokens whose documents end at ``ends``."""
    out = []
    number = int(np.searchsorted(ends, start, side="right"))  # the document holding token ``start``
    position = start
    while position < end:
        doc_start = int(ends[number - 1]) if number > 0 else 0
        terminated = number < len(ends)
        doc_end = int(ends[number]) if terminated else file_size
        piece_end = min(doc_end, end)
        out.append(
            DocumentPiece(
                file=file,
                number=number,
                start=doc_start,
                end=doc_end,
                piece_start=position,
                piece_end=piece_end,
                position=position - start,
                terminated=terminated,
            )
        )
        position = piece_end
        number += 1
    return tuple(out)
