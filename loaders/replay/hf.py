"""Replay of Hugging Face ``datasets`` read through torch's ``DistributedSampler`` and ``DataLoader``.

The training job this replays, on each of ``W`` ranks::

    dataset = datasets.load_from_disk(PATH)            # a save_to_disk folder (--split S of a DatasetDict)
    dataset = dataset.shuffle(seed=S)                  # only with --shuffle-seed S
    sampler = DistributedSampler(dataset, num_replicas=W, rank=r, seed=T, shuffle=True, drop_last=D)
    loader = DataLoader(dataset, batch_size=B, sampler=sampler, drop_last=D)
    for epoch in range(E):
        sampler.set_epoch(epoch)
        for batch in loader: ...                       # step s of rank r: the s-th batch over consecutive epochs

``batchscope attach hf RUN --dataset PATH [--shuffle-seed S] --seed T --world-size W --batch-size B [--epochs E]
[--drop-last]`` replays it exactly: the shuffle's indices come from ``datasets`` itself, and each epoch's batches
from torch's own ``DistributedSampler`` (drawn once for every rank and cut into batches as the ``DataLoader``'s batch
sampler cuts them), kept as a batch index (:mod:`loaders.replay.batch_index`). ``--drop-last`` is ``drop_last=True`` for both the sampler and the
loader (``--no-shuffle``: ``shuffle=False``). A sample is one row: its model inputs are the row's own columns.
``--fingerprint F`` (the shuffled dataset's ``_fingerprint`` the job logged) is checked against what ``datasets``
computes for the folder and shuffle seed.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import ReplayError, SettingMismatch, WhereUnsupported
from ..sampling.where import Read, WhereReads
from .batch_index import BatchIndex, Positions, RankDraw
from .flags import Flags, natural, positive
from .framework import Documents, Layout, Piece, Pinned, ReplayContext, ReplayedSample, Shape
from .hf_folder import HFFolder, catalog_name, hf_folder, load, shuffled


@dataclass(frozen=True)
class HFSettings:
    """How the job read: the folder and its shuffle, the sampler, the loader, the epochs."""

    dataset: str
    seed: int
    world_size: int
    batch_size: int
    epochs: int = 1
    shuffle_seed: int | None = None
    drop_last: bool = False
    shuffle: bool = True
    split: str | None = None
    name: str | None = None
    key: str | None = None
    tokenizer: str | None = None
    fingerprint: str | None = None

    def __post_init__(self) -> None:
        for flag, value in (("--world-size", self.world_size), ("--batch-size", self.batch_size), ("--epochs", self.epochs)):
            if not isinstance(value, int) or value < 1:
                raise ReplayError(f"attach hf: {flag} must be a positive integer, not {value!r}")
        if not 0 <= self.seed < 2**63:
            raise ReplayError(f"attach hf: --seed {self.seed} is outside 0 to 2**63 - 1 (torch seeds)")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def add_folder_flags(parser: Flags) -> None:
    """The flags naming a ``save_to_disk`` folder and how its documents are registered (shared by the HF replays)."""
    parser.add_argument("--dataset", required=True, metavar="PATH", help="the save_to_disk folder the job loaded")
    parser.add_argument("--split", help="the split of a DatasetDict folder")
    parser.add_argument("--shuffle-seed", type=natural, metavar="S", help="the job called dataset.shuffle(seed=S)")
    parser.add_argument("--fingerprint", help="the (shuffled) dataset's _fingerprint the job logged: checked")
    parser.add_argument("--name", help="catalog dataset name of its documents (default: the folder's name)")
    parser.add_argument("--key", help="permalink column (default: a content hash)")
    parser.add_argument("--tokenizer", help="catalog tokenizer that made its token columns")


def check_dataset(settings: Any, context: ReplayContext, *, what: str) -> None:
    """Check the settings' folder as ``datasets`` loads it against its pinned documents and the logged fingerprint."""
    folder = hf_folder(settings.dataset, settings.split)
    check_folder(folder, context.versions[0].rows, shuffle_seed=settings.shuffle_seed, fingerprint=settings.fingerprint, what=what)


def check_folder(folder: HFFolder, rows: int, *, shuffle_seed: int | None, fingerprint: str | None, what: str) -> np.ndarray | None:
    """Check the folder as ``datasets`` loads it (its length, the logged fingerprint); the shuffle's indices, if any."""
    dataset = load(folder)
    if len(dataset) != rows:
        raise ReplayError(f"{folder.path}: datasets reads {len(dataset)} rows, its Arrow files in state.json's order hold {rows}")
    indices, found = (None, dataset._fingerprint) if shuffle_seed is None else shuffled(folder, shuffle_seed)
    if fingerprint is not None and fingerprint != found:
        shuffle = "unshuffled" if shuffle_seed is None else f"shuffled with --shuffle-seed {shuffle_seed}"
        raise SettingMismatch(
            f"{what}: --fingerprint {fingerprint} is not the fingerprint datasets gives {folder.path} {shuffle} ({found}): "
            "another folder, another --shuffle-seed, or files changed since the run"
        )
    return indices


class HFReplay:
    """The replay of one run: batch index of every epoch, the shuffle's indices and their inverse.

    A step is ``group`` consecutive batches of a rank's loader (1 here; the gradient-accumulation steps of a
    ``Trainer``), never crossing an epoch: the last step of an epoch takes the batches left.
    """

    group = 1

    def __init__(self, settings: Any, context: ReplayContext, title: str) -> None:
        self.settings = settings
        self.context = context
        self.title = title
        self.rows = context.versions[0].rows
        folder = hf_folder(settings.dataset, settings.split)
        self.shuffle = (
            context.array("shuffle", lambda: shuffled(folder, settings.shuffle_seed)[0]) if settings.shuffle_seed is not None else None
        )
        self.per_epoch = self._batches_per_epoch()
        if self.per_epoch == 0:
            raise ReplayError(f"{self.no_batch()} over {self.rows} rows: each rank's DataLoader yields no batch")
        self.steps_per_epoch = -(-self.per_epoch // self.group)
        self.total_steps = self.steps()
        self.epochs = -(-self.total_steps // self.steps_per_epoch)
        self.index = BatchIndex(context, epochs=self.epochs, draw=self._draw)

    # -- what a framework's loader does (overridden by the Trainer's replay) ----------------------------------------
    def no_batch(self) -> str:
        """The settings that leave a rank no batch, as flags."""
        s = self.settings
        return f"attach hf: --world-size {s.world_size} --batch-size {s.batch_size}{' --drop-last' if s.drop_last else ''}"

    def steps(self) -> int:
        """The run's steps."""
        return self.per_epoch * self.settings.epochs

    def samplers(self, epoch: int) -> list[Any]:
        """Every rank's ``DistributedSampler``, set to ``epoch``."""
        from torch.utils.data import DistributedSampler

        data = Positions(self.rows)
        s = self.settings
        samplers = []
        for rank in range(s.world_size):
            sampler = DistributedSampler(data, num_replicas=s.world_size, rank=rank, shuffle=s.shuffle, seed=s.seed, drop_last=s.drop_last)
            sampler.set_epoch(epoch)
            samplers.append(sampler)
        return samplers

    def loaders(self, epoch: int) -> list[Any]:
        """Every rank's loader, set to ``epoch``, iterating the batches of dataset positions it yields."""
        from torch.utils.data import DataLoader

        s = self.settings
        return [
            DataLoader(sampler.dataset, batch_size=s.batch_size, sampler=sampler, drop_last=s.drop_last).batch_sampler
            for sampler in self.samplers(epoch)
        ]

    def describe(self) -> list[tuple[str, str]]:
        s = self.settings
        return [
            ("dataset", self.dataset_line()),
            (
                "sampler",
                f"torch DistributedSampler(num_replicas={s.world_size}, rank=r, shuffle={s.shuffle}, seed={s.seed}, "
                f"drop_last={s.drop_last}), set_epoch(e) before epoch e",
            ),
            ("loader", f"DataLoader(batch_size={s.batch_size}, drop_last={s.drop_last}): {self.per_epoch} batches per rank per epoch"),
            ("step", f"step s of rank r is the s-th batch that rank's DataLoader yields over {s.epochs} consecutive epoch(s)"),
        ]

    def batch_size(self) -> int:
        """Samples per rank per step (before an epoch's short last step)."""
        return int(self.settings.batch_size) * self.group

    # -- shared ---------------------------------------------------------------------------------------------------
    def dataset_line(self) -> str:
        s = self.settings
        shuffle = f".shuffle(seed={s.shuffle_seed})" if s.shuffle_seed is not None else ""
        split = f"[{s.split!r}]" if s.split else ""
        return f"datasets.load_from_disk({s.dataset!r}){split}{shuffle}: {self.rows} rows"

    def _batches_per_epoch(self) -> int:
        """Batches each rank's loader yields per epoch (kept with the arrays: reopening needs no torch)."""
        return int(self.context.array("batches-per-epoch", lambda: np.asarray([len(self.loaders(0)[0])], dtype=np.int64))[0])

    def _draw(self, epoch: int) -> list[Any]:
        """Every rank's batches of ``epoch``: what its ``DistributedSampler`` yields, cut into batches as the
        ``DataLoader``'s ``BatchSampler`` cuts them (:meth:`RankDraw.batched`), without a Python loop per batch.

        Every rank's sampler shuffles the same epoch (``randperm`` seeded with ``seed + epoch``), pads or trims it to
        ``total_size`` and keeps every ``W``-th index from its rank on. The epoch is drawn once, by torch's own
        ``__iter__`` of rank 0's sampler told to keep every index (one replica, ``num_samples = total_size``), and each
        rank's share is then that stride. ``tests/loaders/test_replay_hf.py`` holds it equal to every rank's own sampler
        and to the loaders of a real job."""
        s = self.settings
        whole = self.samplers(epoch)[0]
        world, total = whole.num_replicas, whole.total_size
        whole.num_replicas, whole.rank, whole.num_samples = 1, 0, total  # its own shuffle, padding and trim; no stride
        drawn = np.fromiter(iter(whole), dtype=np.int64, count=total)
        return [RankDraw.batched(drawn[rank:total:world], s.batch_size, drop_last=s.drop_last) for rank in range(world)]

    def shape(self) -> Shape:
        s = self.settings
        return Shape(self.total_steps, s.world_size * self.batch_size(), s.world_size)

    def prepare(self) -> None:
        self.index.prepare()
        if self.shuffle is not None:
            self.unshuffle()

    def unshuffle(self) -> np.ndarray:
        """``position[row]``: where row ``row`` sits in the shuffled dataset."""
        assert self.shuffle is not None
        shuffle = self.shuffle

        def build() -> np.ndarray:
            inverse = np.empty(len(shuffle), dtype=np.int64)
            inverse[np.asarray(shuffle)] = np.arange(len(shuffle), dtype=np.int64)
            return inverse

        return self.context.array("unshuffle", build)

    def samples(self, step: int, rank: int) -> list[ReplayedSample]:
        epoch, update = divmod(step, self.steps_per_epoch)
        first = update * self.group
        positions = self.index.batch(epoch, rank, first, min(first + self.group, self.index.batches(epoch, rank)))
        rows = np.asarray(self.shuffle)[positions] if self.shuffle is not None else positions
        return [ReplayedSample(int(p), (Piece(0, int(r)),), epoch) for p, r in zip(positions.tolist(), rows.tolist())]

    def where(self, source: int, record: int, *, first_epoch: int, epochs: int) -> WhereReads:
        if source != 0:
            raise WhereUnsupported(f"{self.title} reads one set of documents, not {source}")
        position = int(self.unshuffle()[record]) if self.shuffle is not None else record
        world_size, width = self.settings.world_size, self.batch_size()
        stop = min(self.epochs, first_epoch + epochs)
        found = WhereReads("", source, record, self.epochs, first_epoch, stop if stop < self.epochs else None)
        for epoch in range(first_epoch, stop):
            for rank, batch, offset in self.index.find(epoch, position):
                update = batch // self.group
                sample = offset - self.index.offset(epoch, rank, update * self.group)
                step = epoch * self.steps_per_epoch + update
                if step < self.total_steps:
                    found.reads.append(Read("", epoch, step, rank, world_size, sample, rank * width + sample, position))
        return found


class HuggingFace:
    """``batchscope attach hf``: ``datasets`` + torch ``DistributedSampler`` + ``DataLoader``."""

    name = "hf"
    title = "Hugging Face datasets + torch DistributedSampler"
    extra = "hf"
    requires = ("datasets", "torch")
    metrics_step_base = 0

    def parse(self, argv: Sequence[str]) -> HFSettings:
        parser = Flags(self.name, __doc__.split("\n\n")[0] if __doc__ else None)
        add_folder_flags(parser)
        parser.add_argument("--seed", type=natural, required=True, help="the DistributedSampler's seed")
        parser.add_argument("--world-size", type=positive, required=True, help="data-parallel ranks (num_replicas)")
        parser.add_argument("--batch-size", type=positive, required=True, help="the DataLoader's batch size (per rank)")
        parser.add_argument("--epochs", type=positive, default=1, help="epochs read (set_epoch(e) before each)")
        parser.add_argument("--drop-last", action="store_true", help="drop_last=True for the sampler and the loader")
        parser.add_argument("--no-shuffle", action="store_true", help="DistributedSampler(shuffle=False)")
        args = parser.parse(argv)
        hf_folder(args.dataset, args.split)  # refuse a folder that is not one, naming it, before anything else
        return HFSettings(
            dataset=os.path.abspath(args.dataset),
            seed=args.seed,
            world_size=args.world_size,
            batch_size=args.batch_size,
            epochs=args.epochs,
            shuffle_seed=args.shuffle_seed,
            drop_last=args.drop_last,
            shuffle=not args.no_shuffle,
            split=args.split,
            name=args.name,
            key=args.key,
            tokenizer=args.tokenizer,
            fingerprint=args.fingerprint,
        )

    def load(self, data: dict[str, Any]) -> HFSettings:
        return HFSettings(**data)

    def layout(self, settings: HFSettings) -> Layout:
        return folder_layout(settings.dataset, settings.split, name=settings.name, key=settings.key, tokenizer=settings.tokenizer)

    def check(self, settings: HFSettings, context: ReplayContext) -> None:
        check_dataset(settings, context, what="attach hf")

    def open(self, settings: HFSettings, context: ReplayContext) -> HFReplay:
        return HFReplay(settings, context, self.title)


def folder_layout(path: str, split: str | None, *, name: str | None, key: str | None, tokenizer: str | None) -> Layout:
    """A ``save_to_disk`` folder's documents (its Arrow files, read in place) and the files describing them, pinned."""
    folder = hf_folder(path, split)
    documents = Documents(name or catalog_name(path, split), "arrow-stream", folder.files, key=key, tokenizer=tokenizer)
    return Layout((documents,), tuple(Pinned(p, "dataset description") for p in folder.described_by))
