"""The run's train dataset as megatron-core builds it, and where its index files are: the run's cache, or built here.

megatron-core names every index file by an MD5 of a JSON description of the dataset (class, prefix, sample count,
split, seed, sequence length, tokenizer), and writes the description beside it. This module asks megatron-core
itself for those descriptions: it builds the train/valid/test datasets with ``BlendedMegatronDatasetBuilder`` in
megatron's deferred mode (``defer_npy_index_mmap``), which computes names and lengths but builds and reads no index.
Then each train index file is looked for where the run kept it: ``--data-cache-path``, or (without one) megatron's
default ``PREFIX/cache/GPTDataset_indices`` beside the data (megatron caches no blend index there). Found files are
used in place. When one is missing, megatron-core's own builder builds the whole set into a folder of ours, never
into the run's folders.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import RegistrationError
from ._extra import megatron_module
from .args import MegatronArgs

#: Index arrays of each megatron dataset class, by the attribute megatron's deferred mode stores each path in.
ROLES = {
    "GPTDataset": ("document_index", "sample_index", "shuffle_index"),
    "BlendedDataset": ("dataset_index", "dataset_sample_index"),
}
_BUILD_LOCK = threading.Lock()


@dataclass(frozen=True)
class IndexSet:
    """One megatron dataset's cached indexes: its class, prefix (None for the blend), description and files."""

    kind: str
    prefix: str | None
    description: str
    hash: str
    files: dict[str, Path]  # role → path, and "description"
    origin: str  # "run cache" or "built"


def sizes(args: MegatronArgs, total_iterations: int) -> list[int]:
    """Megatron-LM's ``get_train_valid_test_num_samples``: the sample counts asked of the train, valid and test splits."""
    train = args.train_samples if args.train_samples is not None else args.train_iters * args.global_batch_size
    valid = (total_iterations // args.eval_interval + 1) * args.eval_iters * args.global_batch_size
    return [train, valid, args.eval_iters * args.global_batch_size]


def check_files(args: MegatronArgs) -> None:
    """Refuse, naming it, a prefix whose ``.bin`` or ``.idx`` is missing (moved or deleted since the run)."""
    for prefix in args.prefixes:
        for suffix in (".idx", ".bin"):
            if not os.path.isfile(prefix + suffix):
                raise RegistrationError(f"--data-path prefix {prefix}: {prefix + suffix} does not exist (moved or deleted?)")


def tokenizer(args: MegatronArgs) -> Any:
    """The run's tokenizer, built by megatron-core's ``build_tokenizer`` from the tokenizer arguments."""
    build = megatron_module("megatron.core.tokenizers.text.utils.build_tokenizer").build_tokenizer
    if not args.tokenizer_args.get("tokenizer_type"):
        raise RegistrationError("--tokenizer-type is required (with --vocab-size for NullTokenizer): it is part of megatron's cache key")
    try:
        return build(argparse.Namespace(**args.tokenizer_args))
    except Exception as exc:  # noqa: BLE001 - any tokenizer library can fail here; say which
        raise RegistrationError(
            f"--tokenizer-type {args.tokenizer_args['tokenizer_type']}: megatron-core cannot build it ({exc})"
        ) from None


def config(args: MegatronArgs, *, path_to_cache: str, defer: bool, tokenizer_object: Any) -> Any:
    """The ``GPTDatasetConfig`` Megatron-LM's ``pretrain_gpt.py`` makes from these arguments."""
    gpt = megatron_module("megatron.core.datasets.gpt_dataset")
    utils = megatron_module("megatron.core.datasets.utils")
    return gpt.GPTDatasetConfig(
        random_seed=args.seed,
        sequence_length=args.seq_length,
        blend=utils.get_blend_from_list(list(args.data_path)),
        split=args.split,
        path_to_cache=path_to_cache,
        mmap_bin_files=args.mmap_bin_files,
        tokenizer=tokenizer_object,
        reset_position_ids=args.reset_position_ids,
        reset_attention_mask=args.reset_attention_mask,
        eod_mask_loss=args.eod_mask_loss,
        create_attention_mask=False,  # not part of the cache key, and not shown: saves a seq × seq mask per sample
        mid_level_dataset_surplus=args.mid_level_dataset_surplus,
        defer_npy_index_mmap=defer,
        data_parallel_size=args.data_parallel_size,
    )


def build_train(args: MegatronArgs, split_sizes: list[int], *, path_to_cache: str, defer: bool, tokenizer_object: Any) -> Any:
    """The train split's top-level dataset (a ``GPTDataset`` or a ``BlendedDataset``) from megatron-core's builder."""
    builder = megatron_module("megatron.core.datasets.blended_megatron_dataset_builder")
    gpt = megatron_module("megatron.core.datasets.gpt_dataset")
    made = builder.BlendedMegatronDatasetBuilder(
        gpt.GPTDataset, split_sizes, lambda: True, config(args, path_to_cache=path_to_cache, defer=defer, tokenizer_object=tokenizer_object)
    )
    try:
        return made.build()[0]
    except (AssertionError, IndexError, ValueError) as exc:
        raise RegistrationError(f"megatron-core cannot build the train split of --data-path {' '.join(args.data_path)}: {exc}") from None


def members(top: Any) -> list[tuple[str, str | None, Any]]:
    """``(kind, prefix, dataset)`` of every megatron dataset whose indexes the train split reads, the blend last."""
    kind = type(top).__name__
    if kind == "BlendedDataset":
        return [("GPTDataset", d.dataset_path, d) for d in top.datasets] + [("BlendedDataset", None, top)]
    return [("GPTDataset", top.dataset_path, top)]


def _names(kind: str, dataset: Any) -> dict[str, str]:
    base = f"{dataset.unique_description_hash}-{kind}-{_split(dataset)}"
    return {role: f"{base}-{role}.npy" for role in ROLES[kind]} | {"description": f"{base}-description.txt"}


def _split(dataset: Any) -> str:
    return (dataset.split if type(dataset).__name__ == "BlendedDataset" else dataset.index_split).name


def run_cache_folders(args: MegatronArgs, kind: str, prefix: str | None) -> list[Path]:
    """Where the run kept a dataset's cached indexes: ``--data-cache-path``, else megatron's default beside the prefix."""
    if args.data_cache_path:
        return [Path(args.data_cache_path)]
    if kind == "GPTDataset" and prefix is not None:
        return [Path(prefix) / "cache" / "GPTDataset_indices"]
    return []


def locate(args: MegatronArgs, top: Any, work_cache: Path) -> tuple[list[IndexSet], list[tuple[str, str | None, Any]]]:
    """The index sets found (the run's cache first, then ours) and the members found nowhere."""
    found, missing = [], []
    for kind, prefix, dataset in members(top):
        names = _names(kind, dataset)
        for folder, origin in [(f, "run cache") for f in run_cache_folders(args, kind, prefix)] + [(work_cache, "built")]:
            if all((folder / name).is_file() for name in names.values()):
                files = {role: folder / name for role, name in names.items()}
                found.append(IndexSet(kind, prefix, dataset.unique_description, dataset.unique_description_hash, files, origin))
                break
        else:
            missing.append((kind, prefix, dataset))
    return found, missing


def attach_paths(top: Any, sets: list[IndexSet]) -> None:
    """Point megatron's deferred datasets at the files found, so its own ``__getitem__`` memory-maps them."""
    for (kind, _prefix, dataset), index_set in zip(members(top), sets):
        for role in ROLES[kind]:
            setattr(dataset, f"path_to_{role}", str(index_set.files[role]))


def build_indexes(args: MegatronArgs, split_sizes: list[int], folder: Path, *, tokenizer_object: Any) -> float:
    """Build every index of the three splits with megatron-core's own builder into ``folder``; returns the seconds taken.

    The build goes to a fresh folder beside ``folder`` whose files move into ``folder`` only once megatron has
    finished, so a failed build leaves nothing half-written. megatron's ``BlendedDataset`` asks ``torch.distributed``
    for the rank when it builds, so a one-process group on an in-memory store stands in for the run's rank 0 when
    none is initialized.
    """
    import torch.distributed as dist

    folder.parent.mkdir(parents=True, exist_ok=True)
    with _BUILD_LOCK, tempfile.TemporaryDirectory(prefix=".building-", dir=folder.parent) as tmp:
        own_group = not dist.is_initialized()
        if own_group:
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        try:
            start = time.perf_counter()
            build_train(args, split_sizes, path_to_cache=tmp, defer=False, tokenizer_object=tokenizer_object)
            seconds = time.perf_counter() - start
        finally:
            if own_group:
                dist.destroy_process_group()
        folder.mkdir(exist_ok=True)
        for built in sorted(Path(tmp).iterdir(), key=lambda p: p.name.endswith("description.txt")):  # descriptions last
            os.replace(built, folder / built.name)
        return seconds
