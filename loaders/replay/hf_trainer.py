"""Replay of the sampling of ``transformers.Trainer`` (through ``accelerate``), gradient accumulation included.

What a ``Trainer`` does with a map-style ``datasets.Dataset``, step by step (transformers 4.4x-4.5x, accelerate 1.x,
with the default ``TrainingArguments`` and ``accelerator_config``):

1. ``Trainer.__init__`` seeds torch with ``args.seed`` (``set_seed``).
2. ``get_train_dataloader`` builds ``DataLoader(dataset, batch_size=per_device_train_batch_size,
   sampler=RandomSampler(dataset), drop_last=dataloader_drop_last)``.
3. ``accelerator.prepare`` replaces the ``RandomSampler`` by accelerate's ``SeedableRandomSampler`` seeded with
   ``args.data_seed``, or else torch's initial seed (``args.seed``, from step 1), and (on more than one process)
   shards the batches: process ``r`` takes batches ``r, r + W, r + 2W...`` (``BatchSamplerShard``, ``even_batches``:
   the last round is completed from the epoch's first batches so every process gets as many).
4. Each epoch ``e``: ``set_epoch(e)``, so the sampler draws ``randperm`` with seed ``data_seed + e``; ``L`` is the
   number of batches each process's loader yields.
5. An optimizer step consumes ``gradient_accumulation_steps`` (``G``) consecutive batches of each process; an epoch
   has ``ceil(L / G)`` optimizer steps, the last one taking the ``L mod G`` batches left (when not 0). Steps never
   cross an epoch.
6. Training stops after ``max_steps`` optimizer steps, or ``ceil(num_train_epochs × ceil(L / G))`` of them.

Step ``s`` here is optimizer step ``s`` (``state.global_step`` before it, so the ``Trainer`` logs it as ``s + 1``:
``--metrics trainer_state.json`` takes that into account); rank ``r`` is process ``r``, and its samples are its ``G``
batches in the order its model received them. The batches come from running accelerate's own
``prepare_data_loader`` and torch's samplers over the dataset's positions, once per epoch.

``batchscope attach hf-trainer RUN --dataset PATH --world-size W --per-device-train-batch-size B
--gradient-accumulation-steps G (--max-steps N | --num-train-epochs E) [--seed 42] [--data-seed S]
[--dataloader-drop-last] [--checkpoint DIR]``: flags named as ``TrainingArguments``' own; ``--checkpoint`` reads a
checkpoint's ``trainer_state.json`` (pinned), fills in what the flags leave out, and refuses a flag that contradicts it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import ReplayError, SettingMismatch
from .batch_index import Positions
from .flags import Flags, natural, positive
from .framework import Layout, Pinned, ReplayContext
from .hf import HFReplay, add_folder_flags, check_dataset, folder_layout
from .hf_folder import hf_folder

#: ``trainer_state.json`` field → the setting it must agree with.
_STATE_FIELDS = {"train_batch_size": "per_device_train_batch_size", "max_steps": "max_steps", "num_train_epochs": "num_train_epochs"}


@dataclass(frozen=True)
class TrainerSettings:
    """The ``TrainingArguments`` that decide what each process reads, and the folder it read."""

    dataset: str
    world_size: int
    per_device_train_batch_size: int
    gradient_accumulation_steps: int = 1
    max_steps: int = -1
    num_train_epochs: float = 3.0
    seed: int = 42
    data_seed: int | None = None
    dataloader_drop_last: bool = False
    shuffle_seed: int | None = None
    split: str | None = None
    checkpoint: str | None = None
    name: str | None = None
    key: str | None = None
    tokenizer: str | None = None
    fingerprint: str | None = None

    def __post_init__(self) -> None:
        for flag, value in (
            ("--world-size", self.world_size),
            ("--per-device-train-batch-size", self.per_device_train_batch_size),
            ("--gradient-accumulation-steps", self.gradient_accumulation_steps),
        ):
            if not isinstance(value, int) or value < 1:
                raise ReplayError(f"attach hf-trainer: {flag} must be a positive integer, not {value!r}")
        if self.max_steps <= 0 and not self.num_train_epochs > 0:
            raise ReplayError("attach hf-trainer: give --max-steps N or --num-train-epochs E (> 0)")

    @property
    def sampler_seed(self) -> int:
        """The seed of accelerate's sampler: ``data_seed``, else ``seed``."""
        return self.seed if self.data_seed is None else self.data_seed

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _trainer_state(checkpoint: str) -> tuple[str, dict[str, Any]]:
    path = os.path.join(os.path.abspath(checkpoint), "trainer_state.json")
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError) as exc:
        raise ReplayError(f"--checkpoint {checkpoint}: {path} cannot be read ({exc})") from exc
    if not isinstance(state, dict):
        raise ReplayError(f"{path}: not a trainer state")
    return path, state


def _from_checkpoint(values: dict[str, Any], checkpoint: str) -> dict[str, Any]:
    """``values`` with what the checkpoint's trainer state says filled in; a contradicting flag is refused."""
    path, state = _trainer_state(checkpoint)
    out = dict(values)
    for field, setting in _STATE_FIELDS.items():
        stored = state.get(field)
        if stored is None:
            continue
        given = values.get(setting)
        if given is None:
            out[setting] = stored
        elif float(given) != float(stored):
            flag = "--" + setting.replace("_", "-")
            raise SettingMismatch(f"{flag} {given} contradicts {path}: {field} is {stored}")
    return out


class TrainerReplay(HFReplay):
    """What each process of a ``Trainer`` read, one optimizer step (``G`` batches) at a time."""

    def __init__(self, settings: TrainerSettings, context: ReplayContext, title: str) -> None:
        self.group = settings.gradient_accumulation_steps
        super().__init__(settings, context, title)

    def no_batch(self) -> str:
        s = self.settings
        drop = " --dataloader-drop-last" if s.dataloader_drop_last else ""
        return f"attach hf-trainer: --world-size {s.world_size} --per-device-train-batch-size {s.per_device_train_batch_size}{drop}"

    def steps(self) -> int:
        s = self.settings
        return s.max_steps if s.max_steps > 0 else math.ceil(s.num_train_epochs * self.steps_per_epoch)

    def batch_size(self) -> int:
        return self.settings.per_device_train_batch_size * self.group

    def loaders(self, epoch: int) -> list[Any]:
        from accelerate.data_loader import prepare_data_loader
        from torch.utils.data import DataLoader, RandomSampler

        s = self.settings
        data = Positions(self.rows)
        loaders = []
        for rank in range(s.world_size):
            loader = DataLoader(
                data,
                batch_size=s.per_device_train_batch_size,
                sampler=RandomSampler(data),
                drop_last=s.dataloader_drop_last,
                collate_fn=list,
            )
            prepared = prepare_data_loader(
                loader,
                num_processes=s.world_size,
                process_index=rank,
                split_batches=False,
                put_on_device=False,
                dispatch_batches=False,
                even_batches=True,
                use_seedable_sampler=True,
                data_seed=s.sampler_seed,
            )
            prepared.set_epoch(epoch)
            loaders.append(prepared)
        return loaders

    def _draw(self, epoch: int) -> list[Any]:
        return [list(loader) for loader in self.loaders(epoch)]  # each batch: the list of positions accelerate's loader gave

    def describe(self) -> list[tuple[str, str]]:
        s = self.settings
        seed = f"data_seed={s.data_seed}" if s.data_seed is not None else f"seed={s.seed}"
        until = f"max_steps={s.max_steps}" if s.max_steps > 0 else f"num_train_epochs={s.num_train_epochs}"
        return [
            ("dataset", self.dataset_line()),
            (
                "sampler",
                f"accelerate SeedableRandomSampler ({seed}, reseeded with seed + epoch), BatchSamplerShard over "
                f"{s.world_size} process(es) (even_batches)",
            ),
            (
                "loader",
                f"DataLoader(batch_size={s.per_device_train_batch_size}, drop_last={s.dataloader_drop_last}): "
                f"{self.per_epoch} batches per process per epoch",
            ),
            (
                "step",
                f"optimizer step s: {s.gradient_accumulation_steps} consecutive batches of each process (gradient accumulation), "
                f"{self.steps_per_epoch} per epoch, the epoch's last taking what is left; {until}",
            ),
        ]


class HuggingFaceTrainer:
    """``batchscope attach hf-trainer``: the default sampling of ``transformers.Trainer`` through ``accelerate``."""

    name = "hf-trainer"
    title = "transformers Trainer (accelerate) over Hugging Face datasets"
    extra = "hf"
    requires = ("datasets", "torch", "accelerate")
    metrics_step_base = 1  # the Trainer logs optimizer step s as global_step s + 1

    def parse(self, argv: Sequence[str]) -> TrainerSettings:
        parser = Flags(self.name, "Replay of transformers.Trainer's default sampling; flags are TrainingArguments' own.")
        add_folder_flags(parser)
        parser.add_argument("--world-size", type=positive, required=True, help="processes (data-parallel ranks)")
        parser.add_argument("--per-device-train-batch-size", type=positive, help="TrainingArguments.per_device_train_batch_size")
        parser.add_argument("--gradient-accumulation-steps", type=positive, default=1)
        parser.add_argument("--max-steps", type=positive, help="TrainingArguments.max_steps")
        parser.add_argument("--num-train-epochs", type=float, help="TrainingArguments.num_train_epochs")
        parser.add_argument("--seed", type=natural, default=42, help="TrainingArguments.seed (default 42)")
        parser.add_argument("--data-seed", type=natural, help="TrainingArguments.data_seed")
        parser.add_argument("--dataloader-drop-last", action="store_true")
        parser.add_argument("--checkpoint", metavar="DIR", help="a checkpoint folder: its trainer_state.json fills in and checks")
        args = parser.parse(argv)
        hf_folder(args.dataset, args.split)
        values = {
            "per_device_train_batch_size": args.per_device_train_batch_size,
            "max_steps": args.max_steps,
            "num_train_epochs": args.num_train_epochs,
        }
        if args.checkpoint is not None:
            values = _from_checkpoint(values, args.checkpoint)
        if values["per_device_train_batch_size"] is None:
            raise ReplayError("attach hf-trainer: give --per-device-train-batch-size (or --checkpoint DIR whose trainer state has it)")
        return TrainerSettings(
            dataset=os.path.abspath(args.dataset),
            world_size=args.world_size,
            per_device_train_batch_size=int(values["per_device_train_batch_size"]),
            gradient_accumulation_steps=args.gradient_accumulation_steps,
            max_steps=int(values["max_steps"]) if values["max_steps"] is not None else -1,
            num_train_epochs=float(values["num_train_epochs"]) if values["num_train_epochs"] is not None else 0.0,
            seed=args.seed,
            data_seed=args.data_seed,
            dataloader_drop_last=args.dataloader_drop_last,
            shuffle_seed=args.shuffle_seed,
            split=args.split,
            checkpoint=os.path.abspath(args.checkpoint) if args.checkpoint else None,
            name=args.name,
            key=args.key,
            tokenizer=args.tokenizer,
            fingerprint=args.fingerprint,
        )

    def load(self, data: dict[str, Any]) -> TrainerSettings:
        return TrainerSettings(**data)

    def layout(self, settings: TrainerSettings) -> Layout:
        layout = folder_layout(settings.dataset, settings.split, name=settings.name, key=settings.key, tokenizer=settings.tokenizer)
        if settings.checkpoint is None:
            return layout
        state = Pinned(os.path.join(settings.checkpoint, "trainer_state.json"), "trainer state")
        return Layout(layout.documents, (*layout.pinned, state))

    def check(self, settings: TrainerSettings, context: ReplayContext) -> None:
        check_dataset(settings, context, what="attach hf-trainer")

    def open(self, settings: TrainerSettings, context: ReplayContext) -> TrainerReplay:
        return TrainerReplay(settings, context, self.title)
