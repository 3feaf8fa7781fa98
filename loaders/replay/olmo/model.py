"""What an OLMo-core replay answers: instances, where their tokens came from, and where each was read.

Steps count from 0: batchscope's step ``s`` is the batch OLMo-core's trainer consumed as its step ``s + 1`` (the
trainer counts from 1, logs that number and names the checkpoint written after it ``step{s + 1}``).

>>> piece = DocumentPiece(file=0, number=3, start=40, end=52, piece_start=48, piece_end=52, position=0, terminated=True)
>>> piece.complete, piece.length
(False, 4)
>>> TokenRange(file=1, path="part-01.npy", start=32, end=48, itemsize=2).byte_range
(64, 96)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


@dataclass(frozen=True)
class TokenRange:
    """Tokens ``[start, end)`` of the token file ``path`` (number ``file`` in the dataset's paths)."""

    file: int
    path: str
    start: int
    end: int
    itemsize: int

    def __post_init__(self) -> None:
        _check(0 <= self.start <= self.end, f"a token range needs 0 <= start <= end, got {self.start}..{self.end}")
        _check(self.itemsize in (1, 2, 4, 8), f"itemsize must be 1, 2, 4 or 8 bytes, got {self.itemsize}")

    @property
    def byte_range(self) -> tuple[int, int]:
        """The bytes of the file these tokens occupy."""
        return self.start * self.itemsize, self.end * self.itemsize

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "path": self.path, "start": self.start, "end": self.end}


@dataclass(frozen=True)
class DocumentPiece:
    """The part of one document (by OLMo-core's document boundaries: EOS, or EOS then BOS) inside an instance.

    ``number`` counts the documents of the token file from 0; ``start``/``end`` are the whole document's tokens in the
    file, ``piece_start``/``piece_end`` the part the instance holds, ``position`` where that part begins in the
    instance. ``terminated`` is False for the tokens after a file's last boundary (a document without its EOS).
    ``id``/``src`` come from the Dolma metadata file beside the token file, when there is one.
    """

    file: int
    number: int
    start: int
    end: int
    piece_start: int
    piece_end: int
    position: int
    terminated: bool
    id: str | None = None
    src: str | None = None

    def __post_init__(self) -> None:
        _check(
            self.start <= self.piece_start < self.piece_end <= self.end,
            f"a document piece lies inside its document: {self.start} <= {self.piece_start} < {self.piece_end} <= {self.end}",
        )

    @property
    def complete(self) -> bool:
        """Whether the instance holds the whole document."""
        return self.piece_start == self.start and self.piece_end == self.end

    @property
    def length(self) -> int:
        return self.piece_end - self.piece_start

    def to_json(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in ("file", "number", "start", "end", "piece_start", "piece_end", "position", "terminated")}
        data["complete"] = self.complete
        if self.id is not None:
            data["id"], data["src"] = self.id, self.src
        return data


@dataclass(frozen=True, eq=False)
class Instance:
    """One instance of the dataset: its index, where its tokens are, the documents in it, and what OLMo-core yields.

    ``index`` is the dataset index OLMo-core's batches carry as ``index``. ``input_ids`` and ``fields`` (``label_mask``,
    ``instance_mask``, ``doc_lens``, ``metadata``, as the dataset configuration produces them) are what OLMo-core's
    dataset returned for it, checked against the pinned bytes of its token range; they are ``None``/empty when only
    the instance's place was asked (:meth:`OlmoReplay.locate`).
    """

    index: int
    tokens: TokenRange
    documents: tuple[DocumentPiece, ...]
    input_ids: np.ndarray | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"index": self.index, "tokens": self.tokens.to_json(), "documents": [d.to_json() for d in self.documents]}
        if self.input_ids is not None:
            data["input_ids"] = self.input_ids.tolist()
        for name, value in self.fields.items():
            data[name] = value.tolist() if isinstance(value, np.ndarray) else value
        return data


@dataclass(frozen=True)
class Placement:
    """Where an instance was read: step (from 0), the trainer's step (from 1), epoch, batch of the epoch, rank, slot."""

    step: int
    trainer_step: int
    epoch: int
    batch_in_epoch: int
    rank: int
    position: int
    dp_world_size: int

    def __post_init__(self) -> None:
        _check(self.trainer_step == self.step + 1, f"trainer_step is step + 1, got {self.trainer_step} for step {self.step}")
        _check(0 <= self.rank < self.dp_world_size, f"rank {self.rank} is not below the world size {self.dp_world_size}")

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True, eq=False)
class RankBatch:
    """What one data-parallel rank consumed at one step: its instances in order, and the batch as OLMo-core collated it.

    ``batch`` is the dictionary OLMo-core's data loader yielded to the train module (``input_ids``, ``index``, and
    ``label_mask``, ``instance_mask``, ``doc_lens``, ``max_doc_lens``, ``metadata`` when the dataset makes them).
    """

    step: int
    trainer_step: int
    epoch: int
    batch_in_epoch: int
    rank: int
    dp_world_size: int
    instances: tuple[Instance, ...]
    batch: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        head = {k: getattr(self, k) for k in ("step", "trainer_step", "epoch", "batch_in_epoch", "rank", "dp_world_size")}
        return {**head, "instances": [i.to_json() for i in self.instances]}
