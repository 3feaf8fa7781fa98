"""Ground truth for the Megatron-Core replay: megatron-core's own data pipeline run for real under torchrun.

Every rank (gloo, CPU) initializes megatron's ``parallel_state``, builds the train/valid/test datasets with
``BlendedMegatronDatasetBuilder`` exactly as Megatron-LM's ``pretrain_gpt.py`` does (``GPTDatasetConfig`` from the
training arguments, the tokenizer from megatron-core's ``build_tokenizer``; rank 0 builds the index caches, the others
load them), wraps the train dataset in a ``torch.utils.data.DataLoader`` driven by the pretraining batch sampler, and
runs Megatron-LM's training-loop data schedule: each iteration asks megatron-core's micro-batch calculator how many
micro-batches to draw (batch-size ramp-up), draws them, skips the iterations of ``--iterations-to-skip`` the way
Megatron-LM does (the data iterator still advances), and counts consumed samples. What each data-parallel rank
received, micro-batch by micro-batch, is written to ``<out>/<case>/rank<r>.npz``.

Megatron-LM's training package (``megatron.training``: the loop and ``MegatronPretrainingSampler``) is not published on
PyPI (only ``megatron.core`` is), so this script states the sampler and the loop's data arithmetic itself, statement
for statement as Megatron-LM ``core_v0.16.1`` has them (``megatron/training/datasets/data_samplers.py``,
``megatron/training/training.py``). Everything else is megatron-core's own code.

    python -m torch.distributed.run --nproc_per_node=2 tests/support/megatron_truth.py SPEC.json OUT_DIR
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
VOCAB = 500


def write_corpus(prefix: Path, *, documents: int, seed: int, min_len: int = 2, max_len: int = 40) -> Path:
    """Write ``documents`` random token documents with megatron-core's own ``IndexedDatasetBuilder`` (``.bin``/``.idx``)."""
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    prefix.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    builder = IndexedDatasetBuilder(str(prefix) + ".bin", dtype=np.int32)
    for _ in range(documents):
        length = int(rng.integers(min_len, max_len + 1))
        body = rng.integers(0, VOCAB, length - 1)
        builder.add_document(np.append(body, VOCAB), [length])  # NullTokenizer's eod is the vocab size
    builder.finalize(str(prefix) + ".idx")
    return prefix


def run(spec: list[dict[str, Any]], out: Path, *, nproc: int = 2, timeout: float = 240) -> None:
    """Run every case of ``spec`` (``{"name", "argv"}``) under torchrun with ``nproc`` ranks; raises with the log on failure."""
    from tests.support.processes import torchrun_command

    out.mkdir(parents=True, exist_ok=True)
    spec_path = out / "spec.json"
    spec_path.write_text(json.dumps(spec))
    command = torchrun_command(str(Path(__file__).resolve()), str(spec_path), str(out), nproc=nproc)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"megatron ground-truth run failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")


COMMON = ["--seq-length", "16", "--micro-batch-size", "2", "--tokenizer-type", "NullTokenizer", "--vocab-size", str(VOCAB)]


def cases(data: Path, cache: Path) -> list[dict[str, Any]]:
    """The runs the replay is proven against (2 ranks, ≥ 50 iterations, ≥ 2 epochs of every dataset each):

    - ``plain``: one prefix, ``--train-iters``, indexes cached in ``--data-cache-path``;
    - ``blend``: ``--data-path 0.45 alpha 0.55 beta``, ``--train-samples`` (a ``BlendedDataset``, cached too);
    - ``rampup``: ``--rampup-batch-size 4 4 100`` to a global batch of 12, no ``--data-cache-path`` (megatron caches
      beside the prefix);
    - ``skip``: ``plain`` with ``--iterations-to-skip 3 17 40``.
    """
    alpha, beta = str(data / "alpha"), str(data / "beta")
    plain = ["--data-path", alpha, "--split", "90,8,2", "--seed", "7", "--global-batch-size", "8", "--train-iters", "60"]
    plain += ["--data-cache-path", str(cache), *COMMON]
    blend = ["--data-path", "0.45", alpha, "0.55", beta, "--split", "90,8,2", "--seed", "11", "--global-batch-size", "8"]
    blend += ["--train-samples", "720", "--data-cache-path", str(cache), *COMMON]
    rampup = ["--data-path", beta, "--split", "95,5,0", "--seed", "5", "--global-batch-size", "12", "--rampup-batch-size", "4", "4", "100"]
    rampup += ["--train-samples", "700", *COMMON]
    return [
        {"name": "plain", "argv": plain},
        {"name": "blend", "argv": blend},
        {"name": "rampup", "argv": rampup},
        {"name": "skip", "argv": [*plain, "--iterations-to-skip", "3", "17", "40"]},
    ]


def ground_truth(shared: Path) -> Path:
    """Write the corpora and run every case once into ``shared`` (whichever test process comes first; the others
    wait for it and reuse it). Returns ``shared``; the corpora are in ``shared/data``, the run's cache in
    ``shared/cache``, what each rank received in ``shared/out``."""
    from filelock import FileLock

    shared.mkdir(parents=True, exist_ok=True)
    with FileLock(str(shared / "lock")):
        if not (shared / "done").exists():
            write_corpus(shared / "data" / "alpha", documents=120, seed=1)
            write_corpus(shared / "data" / "beta", documents=80, seed=2)
            run(cases(shared / "data", shared / "cache"), shared / "out")
            (shared / "done").write_text("ok")
    return shared


def load(out: Path, case: str, rank: int) -> dict[str, np.ndarray]:
    """What ``rank`` received in ``case``: ``tokens`` (rows × seq), and per row ``iteration``, ``microbatch``, ``row``,
    ``sample`` (the sampler's index into the train dataset), ``skipped``."""
    with np.load(out / case / f"rank{rank}.npz") as data:
        return {key: data[key] for key in data.files}


def meta(out: Path, case: str) -> dict[str, Any]:
    return json.loads((out / case / "meta.json").read_text())


# -- what runs under torchrun --------------------------------------------------------------------------------------
def _training_args(argv: list[str]) -> argparse.Namespace:
    """The Megatron-LM training arguments these cases use, with Megatron-LM's names and defaults."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-path", nargs="*")
    parser.add_argument("--split", default="969, 30, 1")
    parser.add_argument("--seq-length", type=int)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--global-batch-size", type=int)
    parser.add_argument("--micro-batch-size", type=int)
    parser.add_argument("--train-iters", type=int)
    parser.add_argument("--train-samples", type=int)
    parser.add_argument("--rampup-batch-size", nargs=3, type=int)
    parser.add_argument("--iterations-to-skip", nargs="+", type=int, default=[])
    parser.add_argument("--data-cache-path")
    parser.add_argument("--tokenizer-type", default="NullTokenizer")
    parser.add_argument("--vocab-size", type=int)
    parser.add_argument("--eval-iters", type=int, default=100)
    parser.add_argument("--eval-interval", type=int, default=1000)
    parser.add_argument("--num-workers", type=int, default=1)
    return parser.parse_args(argv)


class PretrainingSampler:
    """Megatron-LM's ``MegatronPretrainingSampler`` (``dataloader_type="single"``, ``drop_last=True``), as written there."""

    def __init__(self, total_samples: int, consumed_samples: int, micro_batch_size: int, data_parallel_rank: int, data_parallel_size: int):
        assert total_samples > 0 and consumed_samples < total_samples
        assert micro_batch_size > 0 and data_parallel_size > 0 and data_parallel_rank < data_parallel_size
        self.total_samples = total_samples
        self.consumed_samples = consumed_samples
        self.micro_batch_size = micro_batch_size
        self.data_parallel_rank = data_parallel_rank
        self.micro_batch_times_data_parallel_size = micro_batch_size * data_parallel_size
        self.given: list[list[int]] = []  # what the DataLoader asked for, in order (it iterates this in the main process)

    def __len__(self) -> int:
        return self.total_samples

    def __iter__(self):
        batch: list[int] = []
        for idx in range(self.consumed_samples, self.total_samples):
            batch.append(idx)
            if len(batch) == self.micro_batch_times_data_parallel_size:
                start = self.data_parallel_rank * self.micro_batch_size
                chosen = batch[start : start + self.micro_batch_size]
                self.given.append(chosen)
                yield chosen
                batch = []


def _train_iters(args: argparse.Namespace) -> int:
    """Megatron-LM's ``update_train_iters``: iterations of a sample-based run, ramp-up phase counted one by one."""
    from megatron.core.num_microbatches_calculator import get_current_global_batch_size, update_num_microbatches

    if args.train_iters:
        return args.train_iters
    if args.rampup_batch_size is None:
        return args.train_samples // args.global_batch_size
    iterations = consumed = 0
    while consumed <= int(args.rampup_batch_size[2]) and consumed <= args.train_samples:
        update_num_microbatches(consumed, consistency_check=False)
        consumed += get_current_global_batch_size()
        iterations += 1
    update_num_microbatches(0, consistency_check=False)
    if args.train_samples > consumed:
        iterations += (args.train_samples - consumed) // args.global_batch_size
    return iterations


def _run_case(name: str, argv: list[str], out: Path) -> None:
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.utils import get_blend_from_list
    from megatron.core.num_microbatches_calculator import (
        get_num_microbatches,
        init_num_microbatches_calculator,
        unset_num_microbatches_calculator,
        update_num_microbatches,
    )
    from megatron.core.tokenizers.text.utils.build_tokenizer import build_tokenizer

    args = _training_args(argv)
    rank = parallel_state.get_data_parallel_rank()
    dp = parallel_state.get_data_parallel_world_size()
    init_num_microbatches_calculator(dist.get_rank(), args.rampup_batch_size, args.global_batch_size, args.micro_batch_size, dp, False)
    train_iters = _train_iters(args)
    train_samples = args.train_samples or train_iters * args.global_batch_size
    eval_samples = (train_iters // args.eval_interval + 1) * args.eval_iters * args.global_batch_size
    config = GPTDatasetConfig(
        random_seed=args.seed,
        sequence_length=args.seq_length,
        blend=get_blend_from_list(args.data_path),
        split=args.split,
        path_to_cache=args.data_cache_path,
        tokenizer=build_tokenizer(args),
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        create_attention_mask=True,
        mid_level_dataset_surplus=0.005,
        data_parallel_size=dp,
    )
    sizes = [train_samples, eval_samples, args.eval_iters * args.global_batch_size]
    train_ds = BlendedMegatronDatasetBuilder(
        GPTDataset, sizes, lambda: parallel_state.get_tensor_model_parallel_rank() == 0, config
    ).build()[0]

    sampler = PretrainingSampler(len(train_ds), 0, args.micro_batch_size, rank, dp)
    loader = torch.utils.data.DataLoader(
        train_ds, batch_sampler=sampler, num_workers=args.num_workers, persistent_workers=args.num_workers > 0
    )
    iterator = iter(loader)
    rows: dict[str, list] = {k: [] for k in ("tokens", "iteration", "microbatch", "row", "sample", "skipped", "dataset_id")}
    consumed = 0
    for iteration in range(train_iters):
        update_num_microbatches(consumed, consistency_check=True)
        microbatches = get_num_microbatches()
        skipped = iteration in args.iterations_to_skip  # a skipped iteration still draws its micro-batches
        for microbatch in range(microbatches):
            batch = next(iterator)
            for row, tokens in enumerate(batch["tokens"]):
                rows["tokens"].append(tokens.numpy())
                rows["iteration"].append(iteration)
                rows["microbatch"].append(microbatch)
                rows["row"].append(row)
                rows["skipped"].append(skipped)
                rows["dataset_id"].append(int(batch["dataset_id"][row]) if "dataset_id" in batch else 0)
        consumed += dp * args.micro_batch_size * microbatches
    samples = [index for chosen in sampler.given for index in chosen][: len(rows["tokens"])]
    case_dir = out / name
    case_dir.mkdir(parents=True, exist_ok=True)
    np.savez(
        case_dir / f"rank{rank}.npz",
        tokens=np.stack(rows["tokens"]),
        iteration=np.array(rows["iteration"]),
        microbatch=np.array(rows["microbatch"]),
        row=np.array(rows["row"]),
        sample=np.array(samples),
        skipped=np.array(rows["skipped"]),
        dataset_id=np.array(rows["dataset_id"]),
    )
    if dist.get_rank() == 0:
        (case_dir / "meta.json").write_text(
            json.dumps(
                {"train_iters": train_iters, "consumed_samples": consumed, "dataset_length": len(train_ds), "data_parallel_size": dp}
            )
        )
    del iterator, loader
    unset_num_microbatches_calculator()
    dist.barrier()


def main() -> None:
    import torch.distributed as dist
    from megatron.core import parallel_state

    spec_path, out = sys.argv[1], Path(sys.argv[2])
    dist.init_process_group("gloo")
    parallel_state.initialize_model_parallel()  # tensor and pipeline parallel 1: data-parallel size = world size
    for case in json.loads(Path(spec_path).read_text()):
        _run_case(case["name"], case["argv"], out)
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
