"""The documents of a token file, by OLMo-core's own boundary rule, and which of them a token range holds.

OLMo-core finds documents in a token file with ``olmo_core.data.utils.iter_document_indices`` (a document ends at an
EOS token, or at an EOS followed by BOS when the tokenizer has a BOS). A file's boundaries are computed once with that
function and kept as a stamped derived array of document ends (named by the pinned file's checksum), so finding the
documents of an instance is a binary search. When the Dolma toolkit's metadata file sits beside a token file
(``part-00.npy`` → ``part-00.csv.gz``: one ``start,end,id,src,loc`` row per document it wrote), each piece also names
the source document's ``id`` and ``src``.

>>> ends = np.array([5, 9, 20])
>>> [(p.number, p.start, p.end, p.position, p.complete) for p in pieces(ends, 0, 5, 12, file_size=24)]
[(1, 5, 9, 0, True), (2, 9, 20, 4, False)]
>>> [(p.number, p.terminated) for p in pieces(ends, 0, 18, 24, file_size=24)]
[(2, True), (3, False)]
>>> meta = read_metadata(gzip.compress(b'0,5,doc-a,s3://raw/a.json.gz,0\\n5,9,"doc,b",s3://raw/a.json.gz,1\\n'))
>>> [(p.number, p.id) for p in pieces(ends, 0, 3, 8, file_size=24, metadata=meta)]
[(0, 'doc-a'), (1, 'doc,b')]
>>> metadata_path("/data/part-00.npy")
'/data/part-00.csv.gz'
"""

from __future__ import annotations

import gzip
import io
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import CorruptData
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


def metadata_path(token_path: str) -> str:
    """Where the Dolma toolkit writes the metadata of a token file (its name with ``.csv.gz`` for the extensions)."""
    return re.sub(r"(\.npy?)?(\.[a-zA-Z]+)*$", "", token_path) + ".csv.gz"


@dataclass(frozen=True, eq=False)
class Metadata:
    """The rows of a Dolma metadata file: each document's token range in the file, id and source."""

    starts: np.ndarray
    ends: np.ndarray
    ids: list[str]
    srcs: list[str]

    def row_of(self, token: int) -> int | None:
        """The row whose token range holds ``token`` (None when no row does)."""
        row = int(np.searchsorted(self.ends, token, side="right"))
        return row if row < len(self.ends) and self.starts[row] <= token else None


def read_metadata(data: bytes, *, where: str = "metadata") -> Metadata:
    """Parse a Dolma metadata file (gzipped CSV rows ``start,end[,id[,src[,...]]]``)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        raw = gzip.decompress(data)
        table = pacsv.read_csv(
            io.BytesIO(raw),
            read_options=pacsv.ReadOptions(autogenerate_column_names=True),
            convert_options=pacsv.ConvertOptions(column_types={"f0": pa.int64(), "f1": pa.int64(), "f2": pa.string(), "f3": pa.string()}),
        )
    except (OSError, pa.ArrowInvalid) as exc:
        raise CorruptData(f"{where} is not a Dolma metadata file (gzipped start,end,id,src rows): {str(exc).splitlines()[0]}") from exc
    if not raw.strip():
        return Metadata(np.zeros(0, np.int64), np.zeros(0, np.int64), [], [])
    names = table.column_names
    starts, ends = (np.asarray(table.column(n), dtype=np.int64) for n in names[:2])
    if len(starts) and (np.any(ends <= starts) or np.any(starts[1:] < ends[:-1])):
        raise CorruptData(f"{where}: its document rows are not ordered, non-empty token ranges")
    blank = [""] * len(starts)
    ids = table.column(names[2]).to_pylist() if len(names) > 2 else blank
    srcs = table.column(names[3]).to_pylist() if len(names) > 3 else blank
    return Metadata(starts, ends, ids, srcs)


def pieces(
    ends: np.ndarray, file: int, start: int, end: int, *, file_size: int, metadata: Metadata | None = None
) -> tuple[DocumentPiece, ...]:
    """The document pieces inside tokens ``[start, end)`` of a file of ``file_size`` tokens whose documents end at
    ``ends``, named by the file's Dolma ``metadata`` when given."""
    out = []
    number = int(np.searchsorted(ends, start, side="right"))  # the document holding token ``start``
    position = start
    while position < end:
        doc_start = int(ends[number - 1]) if number > 0 else 0
        terminated = number < len(ends)
        doc_end = int(ends[number]) if terminated else file_size
        piece_end = min(doc_end, end)
        row = None if metadata is None else metadata.row_of(position)
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
                id=None if row is None else metadata.ids[row],  # type: ignore[union-attr]
                src=None if row is None else metadata.srcs[row],  # type: ignore[union-attr]
            )
        )
        position = piece_end
        number += 1
    return tuple(out)
