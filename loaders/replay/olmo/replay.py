"""Replay an OLMo-core run: what any data-parallel rank consumed at any step, recomputed with OLMo-core's own code.

:meth:`OlmoReplay.attach` reads a checkpoint (``config.json``, the trainer state, ``data_paths.txt``), builds the
dataset and data loader with OLMo-core's config classes over the token files where they are now, refuses whatever
contradicts the checkpoint (seed, sequence length, dataset fingerprint, steps), and pins every token and label-mask
file by checksum. From then on:

- :meth:`~OlmoReplay.batch` is OLMo-core's own random access to a rank's batch (``NumpyFSLDataLoader.__getitem__``:
  its global indices file for the epoch, sliced by batch and data-parallel rank, each instance read by the dataset
  and collated by its collator), every instance checked against the pinned bytes of its token range;
- :meth:`~OlmoReplay.locate` says which instances a rank consumed without reading them;
- :meth:`~OlmoReplay.instance` reads one instance for rendering;
- :meth:`~OlmoReplay.where` inverts the order: every (step, rank, position) that read an instance.

Each epoch's global indices are built once, by OLMo-core (a permutation of the dataset's instances seeded with
``seed + epoch``), into the replay's working directory and memory-mapped, so a lookup costs the same at any step.

A run of one token file (40 tokens: documents of 10 ending with EOS 0), sequence length 8, global batch 2 instances
over 2 data-parallel ranks, 2 epochs, described by a ``config.json`` alone (a checkpoint directory adds the trainer
state that attaching checks):

>>> import json, tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> (np.arange(40, dtype=np.uint16) % 10).tofile(folder / "part-0.npy")
>>> _ = (folder / "config.json").write_text(json.dumps({
...     "dataset": {"_CLASS_": "olmo_core.data.numpy_dataset.NumpyFSLDatasetConfig", "paths": [str(folder / "part-0.npy")],
...                 "sequence_length": 8, "dtype": "uint16", "tokenizer": {"vocab_size": 10, "eos_token_id": 9, "pad_token_id": 0}},
...     "data_loader": {"_CLASS_": "olmo_core.data.data_loader.NumpyDataLoaderConfig", "global_batch_size": 16, "seed": 3},
...     "trainer": {"max_duration": {"value": 2, "unit": "epochs"}}}))
>>> replay = OlmoReplay.attach(folder / "config.json", work_dir=folder / "work", dp_world_size=2)
>>> replay.total_steps, replay.batches_per_epoch, len(replay.dataset)
(4, 2, 5)
>>> [(i.index, i.tokens.start, i.input_ids.tolist()) for i in replay.batch(3, rank=1).instances]
[(2, 16, [6, 7, 8, 9, 0, 1, 2, 3])]
>>> [(p.number, p.piece_start, p.piece_end, p.complete) for p in replay.batch(3, rank=1).instances[0].documents]
[(1, 16, 20, False), (2, 20, 24, False)]
>>> [(p.step, p.rank, p.epoch) for p in replay.where(2)]
[(0, 0, 1), (3, 1, 2)]
>>> [(p.step, p.rank, p.epoch) for p in replay.where(0)]  # the instance epoch 2 dropped (5 make 2 batches of 2)
[(1, 0, 1)]
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InvalidPlan, RankOutOfRange, StateMismatch, StepOutOfRange
from . import derived, settings
from .checkpoint import OlmoCheckpoint, TrainerState, read_checkpoint
from .framework import installed_version, olmo_core
from .model import Instance, Placement, RankBatch
from .pins import PinnedFile, PinnedReader
from .provenance import Provenance, open_pins, pin_files
from .settings import ReplayOptions

FORMAT = 1


class OlmoReplay:
    """An OLMo-core run whose batches are recomputed by OLMo-core over its pinned files (see the module docstring)."""

    def __init__(
        self, checkpoint: OlmoCheckpoint, *, options: ReplayOptions, work_dir: str | Path, pins: tuple[PinnedFile, ...] | None
    ) -> None:
        olmo_core()
        self.checkpoint = checkpoint
        self.options = options
        self.work_dir = Path(work_dir).absolute()
        self.olmo_core_version = installed_version()
        settings.refuse_schedules(checkpoint)
        for pin in pins or ():
            PinnedReader(pin, store=str(self.work_dir / "pins"))  # a pinned file changed or gone is named before OLMo-core reads it
        self.dataset = settings.build_dataset(checkpoint, options, self.work_dir)
        loader = settings.loader_config(checkpoint)
        state: TrainerState | None = checkpoint.state
        self.config_seed = int(loader.seed)
        self.seed = state.seed if state is not None else self.config_seed  # OLMo-core resumes with the state's seed
        if options.seed is not None and options.seed != self.seed:
            source = "trainer state" if state is not None else "config.json"
            raise StateMismatch(f"{checkpoint.where}: data seed {options.seed} contradicts the {source}'s seed {self.seed}")
        self.global_batch_size = int(loader.global_batch_size)
        self.sequence_length = int(self.dataset.sequence_length)
        self.instances_per_batch = self.global_batch_size // self.sequence_length
        self.itemsize = np.dtype(self.dataset.dtype).itemsize
        self._lock = threading.RLock()
        self._loaders: dict[tuple[int, int], Any] = {}
        self._ready: set[int] = set()
        self._inverse: dict[int, np.ndarray] = {}
        first = self._loader(1, 0)
        self.batches_per_epoch = int(first.total_batches)
        self.instances_per_epoch = int(first.total_size)
        if self.batches_per_epoch == 0:
            raise InvalidPlan(f"{checkpoint.where}: {len(self.dataset)} instances make no global batch of {self.instances_per_batch}")
        self.total_steps = settings.total_steps(
            checkpoint, batches_per_epoch=self.batches_per_epoch, global_batch_size=self.global_batch_size
        )
        settings.check_state(
            checkpoint,
            dataset=self.dataset,
            batches_per_epoch=self.batches_per_epoch,
            global_batch_size=self.global_batch_size,
        )
        self.dp_world_size = settings.default_dp_world_size(checkpoint, options)
        if self.dp_world_size is not None:
            self._loader(self.dp_world_size, 0)  # a world size the loader cannot split is refused now
        self.paths = tuple(str(p) for p in self.dataset.paths)
        masks = tuple(str(p) for p in (self.dataset._label_mask_paths or ()))
        store = str(self.work_dir / "pins")
        self.pins = pins if pins is not None else pin_files(self.paths, masks, store=store)
        readers = open_pins(self.pins, self.paths, masks, store=store, where=checkpoint.where)
        self.provenance = Provenance(self.dataset, readers=readers, work_dir=self.work_dir)

    # -- attaching and reopening ----------------------------------------------------------------------------------------
    @classmethod
    def attach(
        cls,
        checkpoint: str | Path,
        *,
        work_dir: str | Path,
        path_map: tuple[tuple[str, str], ...] | list[tuple[str, str]] = (),
        dp_world_size: int | None = None,
        seed: int | None = None,
    ) -> "OlmoReplay":
        """Read the checkpoint, check it against the files, pin every file (hashing each once) and return the replay."""
        options = ReplayOptions(path_map=tuple(tuple(p) for p in path_map), dp_world_size=dp_world_size, seed=seed)  # type: ignore[misc]
        olmo_core()  # before the trainer state is unpickled with torch, which comes with OLMo-core
        return cls(read_checkpoint(checkpoint), options=options, work_dir=work_dir, pins=None)

    def to_json(self) -> dict[str, Any]:
        """Everything :meth:`from_json` needs to reopen the replay without hashing the files again."""
        ckpt = self.checkpoint
        return {
            "framework": "olmo-core",
            "format": FORMAT,
            "olmo_core_version": self.olmo_core_version,
            "checkpoint": {
                "path": ckpt.path,
                "config": ckpt.config,
                "state": None if ckpt.state is None else ckpt.state.to_json(),
                "data_paths": None if ckpt.data_paths is None else list(ckpt.data_paths),
                "olmo_core_version": ckpt.olmo_core_version,
                "read": ckpt.read,
            },
            "options": self.options.to_json(),
            "pins": [pin.to_json() for pin in self.pins],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], *, work_dir: str | Path) -> "OlmoReplay":
        """Reopen a replay :meth:`to_json` described; its files must still match their pins."""
        if data.get("framework") != "olmo-core" or data.get("format") != FORMAT:
            raise InvalidPlan(f"not an OLMo-core replay of format {FORMAT}: {data.get('framework')!r} format {data.get('format')!r}")
        raw = data["checkpoint"]
        checkpoint = OlmoCheckpoint(
            path=raw["path"],
            config=raw["config"],
            state=None if raw["state"] is None else TrainerState.from_json(raw["state"]),
            data_paths=None if raw["data_paths"] is None else tuple(raw["data_paths"]),
            olmo_core_version=raw["olmo_core_version"],
            read=raw["read"],
        )
        pins = tuple(PinnedFile.from_json(p) for p in data["pins"])
        return cls(checkpoint, options=ReplayOptions.from_json(data["options"]), work_dir=work_dir, pins=pins)

    def save(self, path: str | Path) -> None:
        """Write :meth:`to_json` to ``path``."""
        Path(path).write_text(json.dumps(self.to_json(), indent=1))

    @property
    def fingerprint(self) -> str:
        """OLMo-core's fingerprint of the dataset (class, settings, every token file's name and size)."""
        return str(self.dataset.fingerprint)

    def files(self) -> tuple[PinnedFile, ...]:
        """Every file the replay reads, with its size and checksum: token files, label masks, Dolma metadata files."""
        return self.pins

    # -- OLMo-core's loader and its global indices ----------------------------------------------------------------------
    def _loader(self, dp_world_size: int, rank: int) -> Any:
        key = (dp_world_size, rank)
        loader = self._loaders.get(key)
        if loader is not None:
            return loader
        from olmo_core.data import DataCollator, NumpyDataLoaderBase
        from olmo_core.exceptions import OLMoConfigurationError

        per_rank, left = divmod(self.instances_per_batch, dp_world_size)
        if dp_world_size < 1 or left or per_rank * self.sequence_length != self.global_batch_size // dp_world_size:
            raise InvalidPlan(
                f"OLMo-core's data loader cannot split a global batch of {self.instances_per_batch} instances "
                f"({self.global_batch_size} tokens, sequence length {self.sequence_length}) over {dp_world_size} data-parallel ranks"
            )
        try:
            loader = NumpyDataLoaderBase.wrap_numpy_dataset(
                self.dataset,
                global_batch_size=self.global_batch_size,
                collator=DataCollator(pad_token_id=self.dataset.pad_token_id, vocab_size=self.dataset.vocab_size),
                work_dir=self.work_dir / "loader",
                seed=self.seed,
                dp_world_size=dp_world_size,
                dp_rank=rank,
                fs_local_rank=0,
                num_workers=0,
                target_device_type="cpu",
            )
        except OLMoConfigurationError as exc:
            raise InvalidPlan(f"OLMo-core's data loader refuses {dp_world_size} data-parallel ranks: {exc}") from exc
        with self._lock:
            return self._loaders.setdefault(key, loader)

    def _epoch_file(self, epoch: int) -> Path:
        loader = self._loader(1, 0)
        with self._lock:
            loader._epoch = epoch
            return Path(loader._global_indices_file)

    def _prepare_epoch(self, epoch: int) -> None:
        """Build the epoch's global indices with OLMo-core (once), stamp them, and trust them only when the stamp matches.

        OLMo-core's own ``_build_global_indices`` computes the order (what its ``reshuffle`` computes); the file is the
        one its ``reshuffle`` would write there (the same uint32 values, no header), written and hashed from memory in
        one pass, so OLMo-core's loaders read it as their own."""
        if epoch in self._ready:
            return
        with self._lock:
            path = self._epoch_file(epoch)
            if derived.problem(path, np.uint32) is not None:
                path.unlink(missing_ok=True)
                indices = self._loader(1, 0)._build_global_indices()  # the epoch _epoch_file set
                if len(indices) >= np.iinfo(np.uint32).max:
                    raise InvalidPlan(f"{path}: {len(indices)} instances in one epoch are more than OLMo-core's uint32 indices hold")
                derived.write_stamped(path, np.asarray(indices, dtype=np.uint32))
            self._ready.add(epoch)

    def prepare(self, *, inverse: bool = False) -> int:
        """Build (once) the global indices of every epoch the run reaches, and their inverses for :meth:`where` when
        asked; returns the number of epochs. Lookups build what they need on first use without this."""
        epochs = -(-self.total_steps // self.batches_per_epoch)
        for epoch in range(1, epochs + 1):
            self._inverse_of(epoch) if inverse else self._prepare_epoch(epoch)
        return epochs

    # -- steps and ranks ---------------------------------------------------------------------------------------------------
    def check_step(self, step: int) -> None:
        """Refuse a step outside the run."""
        if not 0 <= step < self.total_steps:
            raise StepOutOfRange(
                f"step {step} is outside the OLMo-core run: its steps are 0..{self.total_steps - 1} (trainer steps 1..{self.total_steps})"
            )

    def epoch_of(self, step: int) -> tuple[int, int]:
        """``(epoch, batch of the epoch)`` of a step (epochs from 1, as OLMo-core counts them)."""
        self.check_step(step)
        epoch, batch = divmod(step, self.batches_per_epoch)
        return epoch + 1, batch

    def _world(self, rank: int, dp_world_size: int | None) -> int:
        world = dp_world_size if dp_world_size is not None else self.dp_world_size
        if world is None:
            raise InvalidPlan(f"{self.checkpoint.where}: no trainer state names the world size: give dp_world_size")
        if not 0 <= rank < world:
            raise RankOutOfRange(f"rank {rank} is not below the data-parallel world size {world}")
        self._loader(world, rank)
        return world

    def _slots(self, step: int, rank: int, world: int) -> tuple[int, int, np.ndarray]:
        epoch, batch = self.epoch_of(step)
        self._prepare_epoch(epoch)
        indices = np.memmap(self._epoch_file(epoch), dtype=np.uint32, mode="r")
        # OLMo-core's slicing of an epoch's global indices (NumpyFSLDataLoader.__getitem__): by batch, then by rank.
        mine = indices[: self.instances_per_epoch].reshape(-1, self.instances_per_batch)[batch, rank::world]
        return epoch, batch, np.array(mine, dtype=np.int64)

    def locate(self, step: int, rank: int = 0, *, dp_world_size: int | None = None) -> tuple[Instance, ...]:
        """The instances ``rank`` consumed at ``step``, in order, with their token ranges and documents (nothing read)."""
        world = self._world(rank, dp_world_size)
        _, _, indices = self._slots(step, rank, world)
        return tuple(self.provenance.place(int(i)) for i in indices)

    def batch(self, step: int, rank: int = 0, *, dp_world_size: int | None = None) -> RankBatch:
        """What ``rank`` consumed at ``step``: OLMo-core's batch for it, and each instance checked against its pinned bytes."""
        world = self._world(rank, dp_world_size)
        epoch, batch_in_epoch, indices = self._slots(step, rank, world)
        loader = self._loader(world, rank)
        with self._lock:
            loader.reshuffle(epoch=epoch)
            batch = loader[batch_in_epoch]
        got = batch["index"].numpy().astype(np.int64)
        if not np.array_equal(got, indices):
            raise StateMismatch(
                f"OLMo-core {self.olmo_core_version} gave instances {got.tolist()} for step {step} rank {rank}, its global indices {indices.tolist()}"
            )
        instances = tuple(self.provenance.checked(int(i), row, batch) for row, i in enumerate(indices))
        return RankBatch(step, step + 1, epoch, batch_in_epoch, rank, world, instances, batch)

    def instance(self, index: int) -> Instance:
        """One instance of the dataset, read by OLMo-core and checked against its pinned bytes."""
        if not 0 <= index < len(self.dataset):
            raise StepOutOfRange(f"instance {index} is outside the dataset: its instances are 0..{len(self.dataset) - 1}")
        loader = self._loader(1, 0)
        item = loader._get_dataset_item(index)
        return self.provenance.checked(index, 0, loader.collator([item]))

    # -- the inverse: where an instance was read -------------------------------------------------------------------------
    def _inverse_of(self, epoch: int) -> np.ndarray:
        inverse = self._inverse.get(epoch)
        if inverse is None:
            self._prepare_epoch(epoch)
            source = self._epoch_file(epoch)
            path = source.with_name("inverse_" + source.name)
            inverse = derived.open_stamped(path, np.uint32)
            if inverse is None:
                order = np.memmap(source, dtype=np.uint32, mode="r")
                built = np.empty(len(order), dtype=np.uint32)
                built[order] = np.arange(len(order), dtype=np.uint32)
                derived.write_stamped(path, built)
                inverse = derived.open_stamped(path, np.uint32)
                assert inverse is not None
            self._inverse[epoch] = inverse
        return inverse

    def where(self, index: int, *, dp_world_size: int | None = None) -> tuple[Placement, ...]:
        """Every place the run read instance ``index``: one per epoch it was not dropped from (the tail that makes no
        whole batch is dropped) and that the run reached."""
        world = self._world(0, dp_world_size)
        if not 0 <= index < len(self.dataset):
            raise StepOutOfRange(f"instance {index} is outside the dataset: its instances are 0..{len(self.dataset) - 1}")
        out = []
        for epoch in range(1, -(-self.total_steps // self.batches_per_epoch) + 1):
            position = int(self._inverse_of(epoch)[index])
            if position >= self.instances_per_epoch:
                continue
            batch, slot = divmod(position, self.instances_per_batch)
            step = (epoch - 1) * self.batches_per_epoch + batch
            if step < self.total_steps:
                out.append(Placement(step, step + 1, epoch, batch, slot % world, slot // world, world))
        return tuple(out)

    def instance_at(self, path: str, token: int) -> int | None:
        """The instance holding token ``token`` of the token file ``path``; None for the tail of a file no instance holds."""
        return self.provenance.instance_at(path, token)
