"""Replay of Grain ``MapDataset`` pipelines: seeded shuffle, repeat, slicing per process, batching.

The training job this replays, on each of ``P`` processes (``p`` its index)::

    ds = grain.MapDataset.source(source)        # N records: a save_to_disk folder's Dataset, or Parquet rows
    ds = ds.seed(D)                             # only with --dataset-seed D (random stages then derive their seeds)
    ds = ds.shuffle(seed=S)                     # the stages in --pipeline order (default: shuffle,repeat,slice,batch)
    ds = ds.repeat(E)
    ds = ds[p::P]
    ds = ds.batch(B, drop_remainder=R)
    for step, batch in enumerate(ds.to_iter_dataset()): ...   # step s of process p is ds[s]

``batchscope attach grain RUN --source PATH --process-count P --batch-size B [--seed S] [--dataset-seed D]
[--epochs E] [--drop-remainder] [--pipeline shuffle,repeat,slice,batch] [--steps N]`` builds that very pipeline with
Grain over the source's positions (Grain's order depends only on ``N``, the seeds and the stages) and reads each
process's batches from it, once, into a batch index. A record's epoch is the pass it was read in. Map stages of the
job (``.map``, ``.random_map``) do not reorder records and are not replayed: a sample's inputs are its stored record.
Pipelines that filter, mix or pack records, ``repeat(reseed_each_epoch=False)`` and the ``IterDataset`` shuffle
buffers are not replayable (their order depends on the data or a buffer): record them instead.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import ReplayError
from ..sampling.where import Read, WhereReads
from .batch_index import BatchIndex, Positions
from .flags import Flags, natural, positive
from .framework import Documents, Layout, Piece, Pinned, ReplayContext, ReplayedSample, Shape
from .hf_folder import catalog_name, hf_folder

#: The stages a replayed pipeline may have (each at most once; ``batch`` exactly once).
STAGES = ("shuffle", "repeat", "slice", "batch")


@dataclass(frozen=True)
class GrainSettings:
    """The pipeline: its source, stages in order, seeds, processes and batch."""

    source: str
    process_count: int
    batch_size: int
    pipeline: tuple[str, ...] = ("shuffle", "repeat", "slice", "batch")
    seed: int | None = None
    dataset_seed: int | None = None
    epochs: int | None = 1
    drop_remainder: bool = False
    steps: int | None = None
    split: str | None = None
    name: str | None = None
    key: str | None = None
    tokenizer: str | None = None

    def __post_init__(self) -> None:
        stages = tuple(self.pipeline)
        object.__setattr__(self, "pipeline", stages)
        unknown = [s for s in stages if s not in STAGES]
        if unknown or len(set(stages)) != len(stages) or "batch" not in stages:
            raise ReplayError(f"attach grain: --pipeline {','.join(stages)}: stages are {', '.join(STAGES)}, each once, batch included")
        if self.process_count > 1 and "slice" not in stages:
            raise ReplayError(f"attach grain: --process-count {self.process_count} needs a slice stage in --pipeline (ds[p::P])")
        if "shuffle" in stages and self.seed is None and self.dataset_seed is None:
            raise ReplayError("attach grain: a shuffle stage needs --seed S (shuffle(seed=S)) or --dataset-seed D (ds.seed(D))")
        if "repeat" in stages and self.epochs is None and self.steps is None:
            raise ReplayError("attach grain: repeating forever (--epochs 0) needs --steps N, the steps the job took")
        for flag, value in (("--process-count", self.process_count), ("--batch-size", self.batch_size)):
            if value < 1:
                raise ReplayError(f"attach grain: {flag} must be a positive integer, not {value}")

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "pipeline": list(self.pipeline)}


def _tag(index: int, _: int) -> int:
    """The global index a record was asked for (``epoch * N + record``): its epoch is ``index // N``."""
    return index


def import_grain() -> Any:
    """``grain``, imported without the warning its import logs when JAX is not installed (JAX is not needed here)."""
    import logging

    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        import grain
    finally:
        absl.setLevel(level)
    return grain


def pipeline(settings: GrainSettings, rows: int, process: int) -> Any:
    """Process ``process``'s pipeline, built with Grain, over the positions of ``rows`` records (each element is the
    global index its record was read at)."""
    grain = import_grain()
    ds = grain.MapDataset.source(Positions(rows)).map_with_index(_tag)  # a map keeps every seed's depth below
    if settings.dataset_seed is not None:
        ds = ds.seed(settings.dataset_seed)
    for stage in settings.pipeline:
        if stage == "shuffle":
            ds = ds.shuffle(seed=settings.seed) if settings.seed is not None else ds.shuffle()
        elif stage == "repeat":
            ds = ds.repeat(settings.epochs)
        elif stage == "slice":
            ds = ds[process :: settings.process_count]
        else:
            ds = ds.batch(settings.batch_size, drop_remainder=settings.drop_remainder)
    return ds


class GrainReplay:
    """Every process's batches, drawn from the Grain pipeline once and kept as one batch index."""

    def __init__(self, settings: GrainSettings, context: ReplayContext) -> None:
        self.settings = settings
        self.context = context
        self.rows = context.versions[0].rows
        lengths = context.array("batches", self._lengths)
        self.total_steps = int(min(lengths)) if settings.steps is None else settings.steps
        if self.total_steps == 0:
            raise ReplayError(
                f"attach grain: --process-count {settings.process_count} --batch-size {settings.batch_size}"
                f"{' --drop-remainder' if settings.drop_remainder else ''} over {self.rows} records: a process gets no batch"
            )
        if settings.steps is not None and settings.steps > int(min(lengths)):
            raise ReplayError(
                f"attach grain: --steps {settings.steps} is more than the {int(min(lengths))} batches the pipeline gives a process"
            )
        self.index = BatchIndex(context, epochs=1, draw=self._draw)

    def _lengths(self) -> np.ndarray:
        """Batches each process's pipeline has (the job's steps when it repeats forever)."""
        s = self.settings
        if "repeat" in s.pipeline and s.epochs is None:
            return np.full(s.process_count, s.steps, dtype=np.int64)
        return np.asarray([len(pipeline(s, self.rows, p)) for p in range(s.process_count)], dtype=np.int64)

    def _draw(self, _: int) -> list[list[list[int]]]:
        out = []
        for process in range(self.settings.process_count):
            ds = pipeline(self.settings, self.rows, process)
            out.append([np.asarray(ds[step]).reshape(-1).tolist() for step in range(self.total_steps)])
        return out

    def shape(self) -> Shape:
        return Shape(self.total_steps, self.settings.process_count * self.settings.batch_size, self.settings.process_count)

    def prepare(self) -> None:
        self.index.prepare()

    def samples(self, step: int, rank: int) -> list[ReplayedSample]:
        found = self.index.batch(0, rank, step, step + 1).tolist()
        return [ReplayedSample(g % self.rows, (Piece(0, g % self.rows),), g // self.rows) for g in found]

    def epochs(self) -> int:
        """Passes over the records the run reached."""
        largest = int(np.asarray(self.index._array(0, "positions")).max()) if self.total_steps else 0
        return largest // self.rows + 1

    def where(self, source: int, record: int, *, first_epoch: int, epochs: int) -> WhereReads:
        reached = self.epochs()
        stop = min(reached, first_epoch + epochs)
        found = WhereReads("", source, record, reached, first_epoch, stop if stop < reached else None)
        batch = self.settings.batch_size
        for epoch in range(first_epoch, stop):
            for rank, step, offset in self.index.find(0, epoch * self.rows + record):
                sample = offset - self.index.offset(0, rank, step)
                if step < self.total_steps:
                    found.reads.append(Read("", epoch, step, rank, self.settings.process_count, sample, rank * batch + sample, record))
        return found

    def describe(self) -> list[tuple[str, str]]:
        s = self.settings
        stages = ["grain.MapDataset.source(...)"] + ([f"seed({s.dataset_seed})"] if s.dataset_seed is not None else [])
        for stage in s.pipeline:
            stages.append(
                {
                    "shuffle": f"shuffle(seed={s.seed})" if s.seed is not None else "shuffle()",
                    "repeat": f"repeat({s.epochs})",
                    "slice": f"[p::{s.process_count}]",
                    "batch": f"batch({s.batch_size}, drop_remainder={s.drop_remainder})",
                }[stage]
            )
        return [
            ("source", f"{s.source}: {self.rows} records"),
            ("pipeline", ".".join(stages).replace(".[", "[")),
            ("step", f"step s of process p is ds[s] of its pipeline; {self.total_steps} steps"),
        ]


def _source_layout(settings: GrainSettings) -> Layout:
    path = settings.source
    if os.path.isdir(path) and (
        os.path.isfile(os.path.join(path, "state.json")) or os.path.isfile(os.path.join(path, "dataset_dict.json"))
    ):
        folder = hf_folder(path, settings.split, flag="--source")
        name = settings.name or catalog_name(path, settings.split)
        documents = Documents(name, "arrow-stream", folder.files, key=settings.key, tokenizer=settings.tokenizer)
        return Layout((documents,), tuple(Pinned(p, "dataset description") for p in folder.described_by))
    files = sorted(glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True)) if os.path.isdir(path) else [path]
    if not files or not all(os.path.isfile(f) for f in files):
        raise ReplayError(f"--source {path}: neither a save_to_disk folder nor Parquet files")
    name = settings.name or catalog_name(path, None).removesuffix(".parquet")
    return Layout((Documents(name, "parquet", tuple(files), key=settings.key, tokenizer=settings.tokenizer),))


class Grain:
    """``batchscope attach grain``: Grain ``MapDataset`` pipelines."""

    name = "grain"
    title = "Grain MapDataset"
    extra = "grain"
    requires = ("grain",)
    metrics_step_base = 0

    def parse(self, argv: Sequence[str]) -> GrainSettings:
        parser = Flags(self.name, "Replay of a Grain MapDataset pipeline (shuffle, repeat, slice per process, batch).")
        parser.add_argument("--source", required=True, metavar="PATH", help="a save_to_disk folder, or Parquet files in order")
        parser.add_argument("--split", help="the split of a DatasetDict folder")
        parser.add_argument("--process-count", type=positive, required=True, help="P of ds[p::P] (jax.process_count())")
        parser.add_argument("--batch-size", type=positive, required=True, help="B of ds.batch(B), per process")
        parser.add_argument("--seed", type=natural, help="S of shuffle(seed=S)")
        parser.add_argument("--dataset-seed", type=natural, help="D of ds.seed(D) right after the source")
        parser.add_argument("--epochs", type=natural, default=1, help="E of repeat(E) (0: repeat(None), forever)")
        parser.add_argument("--drop-remainder", action="store_true", help="batch(..., drop_remainder=True)")
        parser.add_argument("--pipeline", default="shuffle,repeat,slice,batch", help="the stages in order, comma-separated")
        parser.add_argument("--steps", type=positive, help="the steps the job took (required when repeating forever)")
        parser.add_argument("--name", help="catalog dataset name of the source's records")
        parser.add_argument("--key", help="permalink column (default: a content hash)")
        parser.add_argument("--tokenizer", help="catalog tokenizer that made its token columns")
        args = parser.parse(argv)
        source = os.path.abspath(args.source)
        if not os.path.exists(source):
            raise ReplayError(f"--source {source}: no such file or folder")
        return GrainSettings(
            source=source,
            process_count=args.process_count,
            batch_size=args.batch_size,
            pipeline=tuple(s.strip() for s in args.pipeline.split(",") if s.strip()),
            seed=args.seed,
            dataset_seed=args.dataset_seed,
            epochs=args.epochs or None,
            drop_remainder=args.drop_remainder,
            steps=args.steps,
            split=args.split,
            name=args.name,
            key=args.key,
            tokenizer=args.tokenizer,
        )

    def load(self, data: dict[str, Any]) -> GrainSettings:
        return GrainSettings(**{**data, "pipeline": tuple(data["pipeline"])})

    def layout(self, settings: GrainSettings) -> Layout:
        return _source_layout(settings)

    def check(self, settings: GrainSettings, context: ReplayContext) -> None:
        """Nothing to compare: Grain keeps no fingerprint of a pipeline."""

    def open(self, settings: GrainSettings, context: ReplayContext) -> GrainReplay:
        return GrainReplay(settings, context)
