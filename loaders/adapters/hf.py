"""Hugging Face ``transformers.Trainer``: one rank's batches as model inputs, marked trained at each optimizer step,
the reader state saved inside every checkpoint's ``trainer_state.json`` and restored by ``train(resume_from_checkpoint=...)``.

The trainer positions the data itself, so Hugging Face's own fast-forward (which would skip the resumed batches a
second time) is turned off for you: ``args.ignore_data_skip`` is set to True. Labels come from the loss mask
(-100 where masked, see :func:`loaders.adapters.inputs.causal_lm_inputs`). ``args.max_steps`` must be set (the
data has no length); it counts optimizer steps, each ``gradient_accumulation_steps`` batchscope steps, so
``max_steps × gradient_accumulation_steps`` must not exceed the run's steps (``train`` refuses it, naming both).
Before every checkpoint each rank's ledger is fsynced and the ranks wait for each other, so no checkpoint is ahead
of any rank's ledger.

>>> from loaders.adapters.hf import BatchscopeTrainer                      # doctest: +SKIP
>>> trainer = BatchscopeTrainer(model=model, args=TrainingArguments("out", max_steps=100, save_steps=10), run=run)  # doctest: +SKIP
>>> trainer.train(resume_from_checkpoint=get_last_checkpoint("out"))      # doctest: +SKIP
"""

from __future__ import annotations

import collections
import json
import os
from typing import Any, Callable, Iterator

import torch
from transformers import Trainer, TrainerCallback
from transformers.trainer_callback import ExportableState
from transformers.trainer_utils import get_last_checkpoint

from ..errors import InvalidPlan, StateMismatch
from ..run.facade import Run
from ..torch import Loader, make_loader
from .inputs import causal_lm_inputs
from .steps import check_optimizer_steps

TRAINER_STATE = "trainer_state.json"  # the file Hugging Face writes in each checkpoint
ToInputs = Callable[[dict[str, Any]], dict[str, Any]]


class TrainBatches:
    """The train dataloader the trainer iterates: model inputs of each batch, and which steps it has handed out."""

    def __init__(self, loader: Loader, to_inputs: ToInputs) -> None:
        self.loader = loader
        self.to_inputs = to_inputs
        self._handed: collections.deque[int] = collections.deque()  # handed to the trainer, not through training_step
        self._finished: list[tuple[int, float]] = []  # through training_step, not yet marked (optimizer step pending)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for batch in self.loader:
            inputs = self.to_inputs(batch)
            self._handed.append(int(batch["step"]))
            yield inputs

    def trained_one(self, loss: float) -> None:
        """The oldest batch handed out went through forward and backward."""
        self._finished.append((self._handed.popleft(), loss))

    def mark_finished(self) -> None:
        """An optimizer step applied the finished batches: mark them trained, with their losses."""
        for step, loss in self._finished:
            self.loader.log(step, loss=loss)
        self._finished.clear()


class BatchscopeCallback(TrainerCallback, ExportableState):
    """Marks batches trained at each optimizer step and exports the reader state into ``trainer_state.json``.

    Added by :class:`BatchscopeTrainer`; it finds the batches through the trainer's ``train_dataloader``, so it
    also works when Hugging Face re-creates it from a checkpoint.
    """

    def __init__(self) -> None:
        self.batches: TrainBatches | None = None
        self.batchscope_state: dict[str, Any] | None = None

    def _attach(self, kwargs: dict[str, Any]) -> TrainBatches:
        found = kwargs.get("train_dataloader")
        if isinstance(found, TrainBatches):
            self.batches = found
        if self.batches is None:
            raise RuntimeError("BatchscopeCallback: the train dataloader is not batchscope's; use BatchscopeTrainer")
        return self.batches

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._attach(kwargs)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        batches = self._attach(kwargs)
        batches.mark_finished()
        if control.should_save:  # every rank's ledger is durable before the checkpoint (written by rank 0) covers it
            batches.loader.progress.flush(sync=True)
            if torch.distributed.is_available() and torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
                torch.distributed.barrier()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._attach(kwargs).loader.close()

    def state(self) -> dict[str, Any]:
        """What Hugging Face stores in ``trainer_state.json``: the reader state after the last trained step."""
        if self.batches is not None:  # Hugging Face also asks once before training begins
            self.batchscope_state = self.batches.loader.state_dict()
        return {"args": {}, "attributes": {"batchscope_state": self.batchscope_state}}


class BatchscopeTrainer(Trainer):
    """A ``transformers.Trainer`` that trains on ``run``: this process's rank of it (``args.process_index`` of
    ``args.world_size``), marked trained at each optimizer step, resumed exactly from any checkpoint it saved.

    ``to_inputs`` turns a collated tensor batch into the model's keyword arguments (default: ``input_ids`` and
    ``labels`` from the loss mask); ``loader_options`` go to :func:`loaders.torch.make_loader`.
    """

    def __init__(
        self, *args: Any, run: Run, to_inputs: ToInputs = causal_lm_inputs, loader_options: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.args.ignore_data_skip = True  # batchscope resumes the data itself; a fast-forward would skip it twice
        loader = make_loader(run, rank=self.args.process_index, world_size=self.args.world_size, **(loader_options or {}))
        self.batchscope = TrainBatches(loader, to_inputs)
        callback = BatchscopeCallback()
        callback.batches = self.batchscope
        self.add_callback(callback)

    def get_train_dataloader(self) -> TrainBatches:  # type: ignore[override]
        return self.batchscope

    def training_step(self, model: torch.nn.Module, inputs: dict[str, Any], num_items_in_batch: Any = None) -> torch.Tensor:
        loss = super().training_step(model, inputs, num_items_in_batch)
        self.batchscope.trained_one(float(loss.detach()))
        return loss

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs: Any) -> Any:
        """Train; with a checkpoint (``True``: the last one in ``args.output_dir``), resume after its last trained step."""
        if resume_from_checkpoint is True:
            resume_from_checkpoint = get_last_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is None:
                raise ValueError(f"no checkpoint to resume from in {self.args.output_dir}")
        run, steps, accumulate = self.batchscope.loader.run, self.args.max_steps, self.args.gradient_accumulation_steps
        if steps <= 0:
            raise InvalidPlan(
                f"TrainingArguments(max_steps={steps}): set max_steps, the data has no length (run {run.name} has {run.total_steps} steps)"
            )
        check_optimizer_steps(
            run, steps, accumulate, arguments=f"TrainingArguments(max_steps={steps}, gradient_accumulation_steps={accumulate})"
        )
        if resume_from_checkpoint:
            self.batchscope.loader.load_state_dict(saved_state(str(resume_from_checkpoint)))
        return super().train(resume_from_checkpoint=resume_from_checkpoint or None, **kwargs)


def saved_state(checkpoint: str) -> dict[str, Any]:
    """The reader state a :class:`BatchscopeTrainer` saved in ``checkpoint`` (a ``checkpoint-N`` directory)."""
    path = os.path.join(checkpoint, TRAINER_STATE)
    try:
        with open(path, encoding="utf-8") as handle:
            stored = json.load(handle).get("stateful_callbacks", {}).get(BatchscopeCallback.__name__)
    except (OSError, ValueError) as exc:
        raise StateMismatch(f"cannot read the trainer state of checkpoint {checkpoint}: {exc}") from None
    if isinstance(stored, list):
        stored = stored[-1] if stored else None
    state = (stored or {}).get("attributes", {}).get("batchscope_state")
    if not isinstance(state, dict):
        raise StateMismatch(f"checkpoint {checkpoint} holds no batchscope reader state (was it saved by BatchscopeTrainer?)")
    return state
