"""A Megatron-Core run replayed: what data-parallel rank r read at iteration s, with megatron-core's own datasets.

:meth:`MegatronReplay.open` asks megatron-core for the run's train dataset (deferred: nothing built), finds its index
files (the run's cache in place, else built once with megatron's builder into ``work_dir``), checks them, and keeps
megatron's dataset objects over memory-mapped indexes. :meth:`MegatronReplay.batch` then gives a rank's samples
micro-batch by micro-batch: each sample's ``tokens`` come from megatron-core's ``__getitem__`` (``GPTDataset`` or
``BlendedDataset``), its provenance (prefix, documents and token spans) from the same memory-mapped indexes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ...errors import InvalidQuery, NotFound
from . import checks, indexes
from .args import MegatronArgs
from .schedule import Schedule


@dataclass(frozen=True)
class Span:
    """A run of one document's tokens inside a sample: document (sequence) id in the ``.idx``, its token offset and
    length, and where it starts in the sample's text (``seq_length + 1`` tokens: inputs, then the last label)."""

    document: int
    offset: int
    length: int
    start: int


@dataclass(frozen=True)
class ReplaySample:
    """One sample a rank read: where (iteration, rank, micro-batch, row), which (train-dataset ``index``; ``dataset``
    position in ``--data-path`` and its ``prefix``; ``dataset_sample`` in that prefix's GPTDataset), what (megatron's
    ``tokens``, ``labels``, ``loss_mask``) and from where (``spans``)."""

    iteration: int
    rank: int
    microbatch: int
    row: int
    index: int
    dataset: int
    prefix: str
    dataset_sample: int
    tokens: np.ndarray
    labels: np.ndarray
    loss_mask: np.ndarray
    spans: tuple[Span, ...]


@dataclass(frozen=True)
class RankBatch:
    """What a data-parallel rank read at an iteration, micro-batch by micro-batch (``skipped``: drawn, not trained on)."""

    iteration: int
    rank: int
    skipped: bool
    microbatches: tuple[tuple[ReplaySample, ...], ...]

    @property
    def samples(self) -> list[ReplaySample]:
        return [sample for microbatch in self.microbatches for sample in microbatch]


@dataclass(frozen=True)
class Location:
    """Where a document was read: iteration, rank, micro-batch, row, the train-dataset index, and its span there."""

    iteration: int
    rank: int
    microbatch: int
    row: int
    index: int
    span: Span


@dataclass(frozen=True)
class PinnedFile:
    """A file the replay reads: its path and role (``bin``, ``idx``, or an index role such as ``shuffle_index``)."""

    path: Path
    role: str


class MegatronReplay:
    """The replay of one Megatron-Core run (see the module docstring). Open with :meth:`open`."""

    def __init__(self, args: MegatronArgs, schedule: Schedule, top: Any, sets: list[indexes.IndexSet], built_seconds: float | None):
        self.args = args
        self.schedule = schedule
        self.index_sets = sets
        self.built_seconds = built_seconds  # None when every index came from the run's cache (nothing built)
        self._top = top
        self._members = indexes.members(top)
        self._gpt = [m for m in self._members if m[0] == "GPTDataset"]
        self._arrays = {
            (s.hash, role): np.load(path, mmap_mode="r") for s in sets for role, path in s.files.items() if role != "description"
        }

    @classmethod
    def open(cls, args: MegatronArgs, *, work_dir: str | Path, check: Literal["sampled", "rebuild"] = "sampled") -> MegatronReplay:
        """Open the replay of the run ``args`` describes; ``work_dir`` holds indexes built here (never the run's folders).

        ``check="sampled"`` (the default) builds nothing when the run's cache has every index; ``"rebuild"`` also
        compares every cached array with megatron-core's own fresh build (its full build time).
        """
        indexes.check_files(args)
        schedule = Schedule.of(args)
        work_cache = Path(work_dir) / "megatron-indexes"
        tokenizer = indexes.tokenizer(args)
        split_sizes = indexes.sizes(args, schedule.total_iterations)
        top = indexes.build_train(args, split_sizes, path_to_cache=str(work_cache), defer=True, tokenizer_object=tokenizer)
        sets, missing = indexes.locate(args, top, work_cache)
        built = None
        if missing:
            for kind, prefix, dataset in missing:  # the run's cache describes it only under other settings: say which
                for folder in indexes.run_cache_folders(args, kind, prefix):
                    checks.explain_mismatch(folder, kind, dataset)
            built = indexes.build_indexes(args, split_sizes, work_cache, tokenizer_object=tokenizer)
            sets, missing = indexes.locate(args, top, work_cache)
        checks.check_descriptions(sets)
        checks.check_sampled(indexes.members(top), sets)
        if check == "rebuild" and any(s.origin == "run cache" for s in sets):
            Path(work_dir).mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix="megatron-rebuild-", dir=work_dir) as tmp:
                indexes.build_indexes(args, split_sizes, Path(tmp), tokenizer_object=tokenizer)
                checks.compare_rebuild([s for s in sets if s.origin == "run cache"], Path(tmp))
        indexes.attach_paths(top, sets)
        return cls(args, schedule, top, sets, built)

    # -- what the run is -----------------------------------------------------------------------------------------------
    @property
    def total_iterations(self) -> int:
        return self.schedule.total_iterations

    @property
    def data_parallel_size(self) -> int:
        return self.args.data_parallel_size

    @property
    def dataset(self) -> Any:
        """megatron-core's train dataset of the run (a ``GPTDataset``, or a ``BlendedDataset`` over several)."""
        return self._top

    @property
    def gpt_datasets(self) -> list[Any]:
        """megatron-core's ``GPTDataset`` of each ``--data-path`` prefix, in order."""
        return [dataset for _kind, _prefix, dataset in self._gpt]

    @property
    def fingerprint(self) -> str:
        """SHA-256 of megatron's descriptions of the train datasets and of the sampler settings."""
        a = self.args
        settings = [
            a.global_batch_size,
            a.micro_batch_size,
            a.data_parallel_size,
            a.train_iters,
            a.train_samples,
            a.rampup_batch_size,
            a.iterations_to_skip,
        ]
        text = json.dumps({"megatron": [s.hash for s in self.index_sets], "sampler": settings}, default=list)
        return hashlib.sha256(text.encode()).hexdigest()

    def files(self) -> list[PinnedFile]:
        """Every file a lookup reads, to pin by checksum: each prefix's ``.bin``/``.idx``, then the index files."""
        pinned = [PinnedFile(Path(p + suffix), suffix[1:]) for p in dict.fromkeys(self.args.prefixes) for suffix in (".bin", ".idx")]
        return pinned + [PinnedFile(path, role) for s in self.index_sets for role, path in s.files.items()]

    # -- forward -------------------------------------------------------------------------------------------------------
    def batch(self, iteration: int, rank: int) -> RankBatch:
        """What data-parallel rank ``rank`` read at ``iteration``, micro-batch by micro-batch.

        Raises :class:`~loaders.errors.StepOutOfRange` / :class:`~loaders.errors.RankOutOfRange` naming the range.
        """
        self.schedule.check(iteration, rank)
        microbatches = tuple(
            tuple(
                self._sample(index, iteration=iteration, rank=rank, microbatch=m, row=row)
                for row, index in enumerate(self.schedule.samples(iteration, rank=rank, microbatch=m))
            )
            for m in range(self.schedule.microbatches_at(iteration))
        )
        return RankBatch(iteration, rank, self.schedule.skipped(iteration), microbatches)

    def _route(self, index: int) -> tuple[int, int]:
        """Train-dataset index → (position in ``--data-path``, sample of that prefix's GPTDataset)."""
        if len(self._gpt) == len(self._members):  # one prefix, no blend
            return 0, index
        blend = self.index_sets[-1].hash
        return int(self._arrays[blend, "dataset_index"][index]), int(self._arrays[blend, "dataset_sample_index"][index])

    def _sample(self, index: int, *, iteration: int, rank: int, microbatch: int, row: int) -> ReplaySample:
        item = self._top[index]  # megatron-core's own __getitem__
        dataset, sample = self._route(index)
        return ReplaySample(
            iteration=iteration,
            rank=rank,
            microbatch=microbatch,
            row=row,
            index=index,
            dataset=dataset,
            prefix=self._gpt[dataset][1],
            dataset_sample=sample,
            tokens=item["tokens"].numpy(),
            labels=item["labels"].numpy(),
            loss_mask=item["loss_mask"].numpy(),
            spans=self._spans(dataset, sample),
        )

    def _spans(self, dataset: int, sample: int) -> tuple[Span, ...]:
        """The document spans of a GPTDataset sample, read from its indexes as megatron's ``__getitem__`` reads them."""
        key, gpt = self.index_sets[dataset].hash, self._gpt[dataset][2]
        document_index, sample_index = self._arrays[key, "document_index"], self._arrays[key, "sample_index"]
        k = int(self._arrays[key, "shuffle_index"][sample])
        (begin, begin_offset), (end, end_offset) = sample_index[k], sample_index[k + 1]
        extra = int(gpt.config.add_extra_token_to_sequence)
        lengths = gpt.dataset.sequence_lengths
        spans, start = [], 0
        for position in range(int(begin), int(end) + 1):
            document = int(document_index[position])
            offset = int(begin_offset) if position == begin else 0
            length = int(end_offset) + extra - offset if position == end else int(lengths[document]) - offset
            spans.append(Span(document, offset, length, start))
            start += length
        return tuple(spans)

    # -- inverse -------------------------------------------------------------------------------------------------------
    def where(self, prefix: str, document: int) -> list[Location]:
        """Every (iteration, rank, micro-batch, row) whose sample holds tokens of ``document`` of ``prefix``.

        Scans the memory-mapped indexes with numpy (O(indexes) per question, not per lookup): document positions in
        the document index, the samples spanning them (binary search), their places in the shuffle and the blend,
        then the sampler's arithmetic backwards. Samples past the run's last iteration are not listed.
        """
        positions = [i for i, (_kind, p, _d) in enumerate(self._gpt) if p == prefix]
        if not positions:
            raise InvalidQuery(f"prefix {prefix!r} is not in --data-path ({', '.join(self.args.prefixes)})")
        found: list[Location] = []
        for dataset in positions:
            gpt = self._gpt[dataset][2]
            count = len(gpt.dataset.sequence_lengths)
            if not 0 <= document < count:
                raise NotFound(f"{prefix} has documents 0..{count - 1}, not {document}")
            key = self.index_sets[dataset].hash
            doc_positions = np.flatnonzero(np.asarray(self._arrays[key, "document_index"]) == document)
            starts = np.asarray(self._arrays[key, "sample_index"][:, 0])
            wanted: set[int] = set()
            for p in doc_positions.tolist():  # samples k with starts[k] <= p <= starts[k + 1]
                first = int(np.searchsorted(starts[1:], p, side="left"))
                last = int(np.searchsorted(starts, p, side="right")) - 1
                wanted.update(range(first, min(last, len(starts) - 2) + 1))
            samples = np.flatnonzero(np.isin(np.asarray(self._arrays[key, "shuffle_index"]), list(wanted)))
            for sample in samples.tolist():
                for index in self._unroute(dataset, sample):
                    position = self.schedule.locate(index)
                    if position is None:
                        continue
                    for span in self._spans(dataset, sample):
                        if span.document == document:
                            found.append(Location(*position, index, span))
        return sorted(found, key=lambda loc: (loc.iteration, loc.rank, loc.microbatch, loc.row, loc.span.start))

    def _unroute(self, dataset: int, sample: int) -> list[int]:
        if len(self._gpt) == len(self._members):
            return [sample]
        blend = self.index_sets[-1].hash
        hits = (np.asarray(self._arrays[blend, "dataset_index"]) == dataset) & (
            np.asarray(self._arrays[blend, "dataset_sample_index"]) == sample
        )
        return np.flatnonzero(hits).tolist()


def remove_built(work_dir: str | Path) -> None:
    """Delete the indexes built into ``work_dir`` (the run's own cache is never touched)."""
    shutil.rmtree(Path(work_dir) / "megatron-indexes", ignore_errors=True)
