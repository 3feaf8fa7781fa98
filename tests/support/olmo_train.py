"""A real OLMo-core training run for the replay tests: its Trainer, data loader and checkpointer on gloo ranks.

Run under torchrun (``python -m torch.distributed.run --nproc_per_node=2 tests/support/olmo_train.py SPEC``), where
``SPEC`` is a JSON file :func:`tests.support.olmo_run.write_spec` wrote. Every rank trains a tiny model with
OLMo-core's own ``Trainer`` (``BasicTrainModule`` under DDP) over OLMo-style token files, for the spec's duration, and
saves checkpoints (trainer state, ``config.json``, ``data_paths.txt``) as any OLMo-core run does. A callback records
what each data-parallel rank received at each step, exactly as the trainer handed it to the model: the ``input_ids``
and every other field of the batch, written to ``received/rank{r}.pt`` when training ends.

With ``"resume": true`` in the spec the same script resumes from the spec's ``load_path`` checkpoint (the trainer
state's seed, epoch and batches processed), possibly on another number of ranks, and records into its own folder.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
from olmo_core.config import Config
from olmo_core.data import NumpyDataLoaderConfig, NumpyFSLDatasetConfig, TokenizerConfig
from olmo_core.data.numpy_dataset import InstanceFilterConfig, NumpyDatasetConfig
from olmo_core.distributed.utils import get_rank
from olmo_core.train import Duration, TrainerConfig, prepare_training_environment, teardown_training_environment
from olmo_core.train.callbacks import Callback, CheckpointerCallback, ConfigSaverCallback
from olmo_core.train.train_module import BasicTrainModule
from torch.nn.parallel import DistributedDataParallel


@dataclass
class ExperimentConfig(Config):
    """What the run's ``config.json`` holds, laid out as OLMo-core's own training scripts lay it out."""

    dataset: NumpyDatasetConfig
    data_loader: NumpyDataLoaderConfig
    trainer: TrainerConfig
    init_seed: int = 12536


@dataclass
class RecordBatches(Callback):
    """Keeps every batch this rank's train module received (before the step runs), written when training ends."""

    folder: str = ""
    _seen: list[dict[str, Any]] = field(default_factory=list)

    def pre_step(self, batch: dict[str, Any]) -> None:
        kept = {key: (value.clone() if isinstance(value, torch.Tensor) else value) for key, value in batch.items() if key != "labels"}
        self._seen.append({"step": self.trainer.global_step, "epoch": self.trainer.epoch, "batch": kept})

    def post_train(self) -> None:
        out = Path(self.folder)
        out.mkdir(parents=True, exist_ok=True)
        torch.save(self._seen, out / f"rank{get_rank()}.pt")


class TinyLM(nn.Module):
    """An embedding and a projection back to the vocabulary: enough for real forward, backward and optimizer steps."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, 4)
        self.out = nn.Linear(4, vocab_size)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(input_ids))


class TinyTrainModule(BasicTrainModule):
    """OLMo-core's ``BasicTrainModule``, with the flop counts it leaves unimplemented answered as unknown."""

    def num_flops_per_token(self, seq_len: int) -> int | None:
        return None

    def global_num_flops_in_batch(self, batch: dict[str, Any]) -> int | None:
        return None


def build_config(spec: dict[str, Any]) -> ExperimentConfig:
    """The experiment the spec describes, with OLMo-core's own config classes."""
    tokenizer = TokenizerConfig(vocab_size=spec["vocab_size"], eos_token_id=spec["eos"], pad_token_id=spec["pad"])
    filters = spec.get("instance_filter")
    dataset = NumpyFSLDatasetConfig(
        paths=spec["paths"],
        sequence_length=spec["sequence_length"],
        tokenizer=tokenizer,
        dtype=spec["dtype"],
        work_dir=spec["dataset_work_dir"],
        metadata=spec.get("metadata"),
        label_mask_paths=spec.get("label_mask_paths"),
        generate_doc_lengths=spec.get("generate_doc_lengths", False),
        instance_filter_config=InstanceFilterConfig(**filters) if filters else None,
    )
    data_loader = NumpyDataLoaderConfig(global_batch_size=spec["global_batch_size"], seed=spec["seed"], num_workers=0)
    trainer = (
        TrainerConfig(
            save_folder=spec["save_folder"],
            work_dir=spec["trainer_work_dir"],
            load_path=spec.get("load_path"),
            max_duration=Duration(value=spec["duration"]["value"], unit=spec["duration"]["unit"]),
            metrics_collect_interval=10,
            cancel_check_interval=10,
            save_overwrite=True,
        )
        .with_callback(
            "checkpointer",
            CheckpointerCallback(save_interval=spec["save_interval"], save_async=False, max_checkpoints=None, pre_train_checkpoint=False),
        )
        .with_callback("config_saver", ConfigSaverCallback())
        .with_callback("record_batches", RecordBatches(folder=spec["received"]))
    )
    return ExperimentConfig(dataset=dataset, data_loader=data_loader, trainer=trainer)


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    prepare_training_environment(seed=spec["seed"], backend="gloo", shared_filesystem=True)
    try:
        config = build_config(spec)
        model = DistributedDataParallel(TinyLM(spec["vocab_size"]))
        train_module = TinyTrainModule(
            model, torch.optim.SGD(model.parameters(), lr=0.01), rank_microbatch_size=spec["global_batch_size"] // spec["ranks"]
        )
        dataset = config.dataset.build()
        data_loader = config.data_loader.build(dataset)
        trainer = config.trainer.build(train_module, data_loader)
        trainer.callbacks["config_saver"].config = config.as_config_dict()  # type: ignore[attr-defined]
        trainer.fit()
    finally:
        teardown_training_environment()


if __name__ == "__main__":
    main(sys.argv[1])
