"""A real Hugging Face ``transformers.Trainer`` job for the adapter test: checkpoints every few optimizer steps,
gradient accumulation (so batches are fetched ahead of the step that trains them), resumable.

Arguments: see tests.support.training.job_arguments.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import TrainingArguments

from loaders import Catalog
from loaders.adapters.hf import BatchscopeTrainer
from tests.support.training import TinyLM, job_arguments


def main() -> None:
    args = job_arguments(__doc__)

    torch.manual_seed(0)
    training = TrainingArguments(
        str(Path(args.out) / "checkpoints"),
        max_steps=args.max_steps,
        save_steps=args.every,
        save_strategy="steps",
        gradient_accumulation_steps=args.accumulate,
        learning_rate=0.1,
        report_to=[],
        use_cpu=True,
        logging_steps=1,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    model = TinyLM(received=args.out, pause_at=args.pause_at)
    run = Catalog(args.root).run(args.run)
    trainer = BatchscopeTrainer(model=model, args=training, run=run, loader_options={"flush_seconds": 0.1})
    trainer.train(resume_from_checkpoint=True if args.resume else None)


if __name__ == "__main__":
    main()
