"""Where the instances of an OLMo-core fixed-sequence-length dataset come from, checked against the pinned files.

``NumpyFSLDataset`` concatenates each token file's tokens and cuts them into instances of ``sequence_length`` tokens;
its ``offsets`` give each file's first and last instance, so instance ``i`` of file ``f`` is tokens
``[(i - first) * L, (i - first + 1) * L)`` of that file. :class:`Provenance` answers that range, the documents in it,
and checks that what OLMo-core read for an instance is exactly the pinned bytes of that range (and of its label mask).

The files a replay pins are every token file and label-mask file of the dataset, and the Dolma metadata file beside a
token file when there is one at attach time.

>>> [role for _, role in required_files(("a.npy", "b.npy"), ("a.mask.npy",))]
['tokens', 'tokens', 'label_mask']
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ... import storage
from ...errors import ChecksumMismatch, InvalidPlan
from .documents import Metadata, document_ends, metadata_path, pieces, read_metadata
from .model import Instance, TokenRange
from .pins import PinnedFile, PinnedReader, pin_file


def required_files(paths: tuple[str, ...], label_mask_paths: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(path, role)`` of every file the dataset reads: its token files, then its label masks."""
    return [(p, "tokens") for p in paths] + [(p, "label_mask") for p in label_mask_paths]


def pin_files(paths: tuple[str, ...], label_mask_paths: tuple[str, ...], *, store: str) -> tuple[PinnedFile, ...]:
    """Pin every file the dataset reads, and the Dolma metadata of each token file that has one."""
    wanted = required_files(paths, label_mask_paths)
    wanted += [(metadata_path(p), "metadata") for p in paths if metadata_path(p) != p and storage.stat(metadata_path(p)).exists]
    return tuple(pin_file(path, role=role, store=store) for path, role in wanted)


def open_pins(
    pins: tuple[PinnedFile, ...], paths: tuple[str, ...], label_mask_paths: tuple[str, ...], *, store: str, where: str
) -> dict[str, PinnedReader]:
    """A checked reader of every pinned file; a file the dataset reads that was not pinned is refused."""
    pinned = {(pin.path, pin.role) for pin in pins}
    for path, role in required_files(paths, label_mask_paths):
        if (path, role) not in pinned:
            raise ChecksumMismatch(f"{where}: {role} file {path} of the dataset was not pinned when the run was attached")
    return {pin.path: PinnedReader(pin, store=store) for pin in pins}


class Provenance:
    """Token ranges, documents and checked contents of a ``NumpyFSLDataset``'s instances."""

    def __init__(self, dataset: Any, *, readers: dict[str, PinnedReader], work_dir: Path) -> None:
        self.dataset = dataset
        self.readers = readers
        self.work_dir = work_dir
        self.paths = tuple(str(p) for p in dataset.paths)
        self.label_mask_paths = tuple(str(p) for p in (dataset._label_mask_paths or ()))
        self.offsets = np.asarray(dataset.offsets, dtype=np.int64).reshape(-1, 2)
        self.sequence_length = int(dataset.sequence_length)
        self.itemsize = np.dtype(dataset.dtype).itemsize
        self._ends: dict[int, np.ndarray] = {}
        self._metadata: dict[int, Metadata | None] = {}

    def tokens_in(self, file: int) -> int:
        """How many tokens the token file ``file`` holds."""
        return self.readers[self.paths[file]].pin.size // self.itemsize

    def _document_ends(self, file: int) -> np.ndarray:
        if file not in self._ends:
            pin = self.readers[self.paths[file]].pin
            cache = self.work_dir / "documents" / f"{pin.checksum[7:39]}.ends.npy"
            d = self.dataset
            self._ends[file] = document_ends(
                self.paths[file], cache=cache, eos_token_id=d.eos_token_id, bos_token_id=d.bos_token_id, dtype=d.dtype
            )
        return self._ends[file]

    def _metadata_of(self, file: int) -> Metadata | None:
        if file not in self._metadata:
            reader = self.readers.get(metadata_path(self.paths[file]))
            self._metadata[file] = None if reader is None else read_metadata(reader.read(0, reader.pin.size), where=reader.pin.what)
        return self._metadata[file]

    def place(self, index: int) -> Instance:
        """Instance ``index``: its token file and range, and the documents in it (nothing of its tokens read)."""
        file = int(np.searchsorted(self.offsets[:, 1], index, side="right"))
        start = (index - int(self.offsets[file, 0])) * self.sequence_length
        tokens = TokenRange(file, self.paths[file], start, start + self.sequence_length, self.itemsize)
        documents = pieces(
            self._document_ends(file), file, start, tokens.end, file_size=self.tokens_in(file), metadata=self._metadata_of(file)
        )
        return Instance(index, tokens, documents)

    def checked(self, index: int, row: int, batch: dict[str, Any]) -> Instance:
        """Instance ``index`` with what OLMo-core's ``batch`` holds for it in ``row``, checked against its pinned bytes."""
        placed = self.place(index)
        input_ids = batch["input_ids"][row].numpy()
        start, end = placed.tokens.byte_range
        pinned = np.frombuffer(self.readers[placed.tokens.path].read(start, end - start), dtype=self.dataset.dtype)
        if not np.array_equal(pinned.astype(np.int64), input_ids):
            raise ChecksumMismatch(
                f"OLMo-core read instance {index} from {placed.tokens.path} tokens {placed.tokens.start}-{placed.tokens.end} "
                "differently from its pinned bytes"
            )
        fields: dict[str, Any] = {}
        if "label_mask" in batch:
            mask_path = self.label_mask_paths[placed.tokens.file]
            mask = np.frombuffer(self.readers[mask_path].read(placed.tokens.start, self.sequence_length), dtype=np.bool_)
            fields["label_mask"] = batch["label_mask"][row].numpy()
            if not np.array_equal(mask, fields["label_mask"]):
                raise ChecksumMismatch(
                    f"OLMo-core read the label mask of instance {index} from {mask_path} differently from its pinned bytes"
                )
        if "instance_mask" in batch:
            fields["instance_mask"] = bool(batch["instance_mask"][row])
        if "doc_lens" in batch:
            lens = batch["doc_lens"][row].numpy()
            fields["doc_lens"] = tuple(int(n) for n in lens[lens > 0])
        if "metadata" in batch:
            fields["metadata"] = batch["metadata"][row]
        return Instance(index, placed.tokens, placed.documents, input_ids, fields)

    def instance_at(self, path: str, token: int) -> int | None:
        """The instance holding token ``token`` of the token file ``path``; None for the tail of a file no instance holds."""
        if path not in self.paths:
            raise InvalidPlan(f"{path} is not one of the run's token files")
        file = self.paths.index(path)
        if not 0 <= token < self.tokens_in(file):
            raise InvalidPlan(f"token {token} is outside {path} ({self.tokens_in(file)} tokens)")
        first, last = (int(x) for x in self.offsets[file])
        index = first + token // self.sequence_length
        return index if index < last else None
