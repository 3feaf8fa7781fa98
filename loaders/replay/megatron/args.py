"""Megatron-LM's training arguments that decide what each data-parallel rank reads, from flags, a file or a checkpoint.

Megatron-LM takes hundreds of flags; only the data ones matter here. The rest are accepted and ignored, so a run's
whole command line (or its saved arguments) can be given as it is. Flags that change the read path in ways this
replay does not reproduce are refused by name.

>>> args = parse_args(["--data-path", "0.3", "a", "0.7", "b", "--seq-length", "16", "--micro-batch-size", "2",
...                    "--global-batch-size", "8", "--data-parallel-size", "2", "--train-iters", "60", "--lr", "3e-4"])
>>> args.prefixes, args.weights, args.split, args.seed
(('a', 'b'), (0.3, 0.7), '969, 30, 1', 1234)
"""

from __future__ import annotations

import argparse
import json
import shlex
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ...errors import InvalidPlan, RegistrationError

#: Megatron-LM's default ``--split`` when ``--data-path`` is given without one (``arguments.py``: the legacy value).
LEGACY_DEFAULT_SPLIT = "969, 30, 1"

#: Flags that change what ranks read in ways this replay does not reproduce: flag → why.
REFUSED: dict[str, str] = {
    "mock_data": "--mock-data reads generated data, not files",
    "sft": "--sft uses SFTDataset, not GPTDataset",
    "fim_data": "--fim-data uses GPTFIMDataset, not GPTDataset",
    "phase_transition_iterations": "--phase-transition-iterations restarts the sampler per phase",
    "legacy_tokenizer": "--legacy-tokenizer builds Megatron-LM's own tokenizer, which is not in megatron-core",
    "train_data_path": "--train-data-path (a blend per split) is not supported; use --data-path",
    "per_split_data_args_path": "--per-split-data-args-path (a blend per split) is not supported; use --data-path",
    "per_dataset_sequences_path": "--per-dataset-sequences-path changes how the .idx files are read",
    "decrease_batch_size_if_needed": "--decrease-batch-size-if-needed changes the running global batch size",
    "hybrid_context_parallel": "--hybrid-context-parallel uses another sampler",
    "dataloader_fast_cache_load": "--dataloader-fast-cache-load is not supported",
    "skip_train": "--skip-train trains nothing",
}

#: Tokenizer arguments passed to megatron-core's ``build_tokenizer`` (their Megatron-LM defaults).
TOKENIZER_DEFAULTS: dict[str, Any] = {
    "tokenizer_type": None,
    "vocab_size": None,
    "vocab_file": None,
    "merge_file": None,
    "tokenizer_model": None,
    "tokenizer_metadata": None,
    "tokenizer_special_tokens": None,
    "tiktoken_pattern": None,
    "tiktoken_num_special_tokens": 1000,
    "tokenizer_sentencepiece_legacy": False,
    "tokenizer_hf_use_fast": False,
    "tokenizer_hf_include_special_tokens": False,
    "trust_remote_code": False,
}


@dataclass(frozen=True)
class MegatronArgs:
    """The data settings of a Megatron-LM training run (argument names as Megatron-LM's ``args``).

    ``data_path`` is ``--data-path`` as given: one prefix, prefixes, or weight-prefix pairs.
    """

    data_path: tuple[str, ...]
    seq_length: int
    micro_batch_size: int
    data_parallel_size: int
    global_batch_size: int
    train_iters: int | None = None
    train_samples: int | None = None
    split: str = LEGACY_DEFAULT_SPLIT
    seed: int = 1234
    data_cache_path: str | None = None
    rampup_batch_size: tuple[int, int, int] | None = None
    iterations_to_skip: tuple[int, ...] = ()
    eval_iters: int = 100
    eval_interval: int = 1000
    mid_level_dataset_surplus: float = 0.005
    reset_position_ids: bool = False
    reset_attention_mask: bool = False
    eod_mask_loss: bool = False
    mmap_bin_files: bool = True
    tokenizer: tuple[tuple[str, Any], ...] = field(default=tuple(TOKENIZER_DEFAULTS.items()))

    def __post_init__(self) -> None:
        if not self.data_path:
            raise InvalidPlan("--data-path is required: one prefix, or weight-prefix pairs (W1 PREFIX1 W2 PREFIX2 ...)")
        for name in ("seq_length", "micro_batch_size", "data_parallel_size", "global_batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise InvalidPlan(f"--{name.replace('_', '-')} must be a positive integer, not {value!r}")
        if (self.train_iters is None) == (self.train_samples is None):
            raise InvalidPlan("give exactly one of --train-iters and --train-samples")
        total = self.train_iters if self.train_iters is not None else self.train_samples
        if not isinstance(total, int) or total < 1:
            raise InvalidPlan(f"--train-iters/--train-samples must be a positive integer, not {total!r}")
        if self.rampup_batch_size is not None and self.train_iters is not None:
            raise InvalidPlan("--rampup-batch-size needs --train-samples (Megatron-LM refuses it with --train-iters)")
        if self.rampup_batch_size is not None and len(self.rampup_batch_size) != 3:
            raise InvalidPlan(f"--rampup-batch-size takes 3 values (start, increment, samples), not {self.rampup_batch_size!r}")
        if self.global_batch_size % (self.micro_batch_size * self.data_parallel_size):
            raise InvalidPlan(
                f"data-parallel size {self.data_parallel_size} cannot produce global batch size {self.global_batch_size}: "
                f"it is not a multiple of micro batch size {self.micro_batch_size} × data-parallel size {self.data_parallel_size}"
            )
        _blend(self.data_path)  # refuses a non-positive weight

    @property
    def prefixes(self) -> tuple[str, ...]:
        """The dataset prefixes of ``--data-path`` (``PREFIX.bin`` / ``PREFIX.idx``)."""
        return _blend(self.data_path)[0]

    @property
    def weights(self) -> tuple[float, ...] | None:
        """The blend weights as given (None when ``--data-path`` has none: Megatron weighs by dataset size)."""
        return _blend(self.data_path)[1]

    @property
    def tokenizer_args(self) -> dict[str, Any]:
        return dict(self.tokenizer)

    def namespace(self) -> argparse.Namespace:
        """These settings as Megatron-LM's ``args`` namespace (what megatron-core's ``build_tokenizer`` reads)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "tokenizer"}
        return argparse.Namespace(**values, **self.tokenizer_args)


def _blend(data_path: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[float, ...] | None]:
    """Megatron's reading of ``--data-path``: an odd count or non-numbers are prefixes, else weight-prefix pairs."""
    if len(data_path) % 2 == 1:
        return tuple(p.strip() for p in data_path), None
    weights, prefixes = data_path[0::2], data_path[1::2]
    try:
        parsed = tuple(float(w) for w in weights)
    except ValueError:
        return tuple(p.strip() for p in data_path), None
    if any(w <= 0 for w in parsed):
        raise InvalidPlan(f"--data-path weights must be positive, not {', '.join(weights)}")
    return tuple(p.strip() for p in prefixes), parsed


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="megatron", add_help=False, allow_abbrev=False)
    add = parser.add_argument
    add("--data-path", nargs="*")
    add("--data-args-path")
    add("--split")
    add("--seq-length", type=int)
    add("--seed", type=int, default=1234)
    add("--global-batch-size", type=int)
    add("--micro-batch-size", type=int)
    add("--data-parallel-size", type=int)
    add("--world-size", type=int)
    add("--tensor-model-parallel-size", type=int, default=1)
    add("--pipeline-model-parallel-size", type=int, default=1)
    add("--context-parallel-size", type=int, default=1)
    add("--train-iters", type=int)
    add("--train-samples", type=int)
    add("--data-cache-path")
    add("--rampup-batch-size", nargs=3, type=int)
    add("--iterations-to-skip", nargs="+", type=int, default=[])
    add("--eval-iters", type=int, default=100)
    add("--eval-interval", type=int, default=1000)
    add("--mid-level-dataset-surplus", type=float, default=0.005)
    add("--dataloader-type", default="single")
    add("--no-mmap-bin-files", action="store_false", dest="mmap_bin_files")
    for flag in ("--reset-position-ids", "--reset-attention-mask", "--eod-mask-loss"):
        add(flag, action="store_true")
    add("--tokenizer-type")
    add("--vocab-size", type=int)
    add("--vocab-file")
    add("--merge-file")
    add("--tokenizer-model")
    add("--tokenizer-metadata")
    add("--tokenizer-special-tokens", nargs="+")
    add("--tiktoken-pattern")
    add("--tiktoken-num-special-tokens", type=int, default=1000)
    for flag in (
        "--tokenizer-sentencepiece-legacy",
        "--tokenizer-hf-use-fast",
        "--tokenizer-hf-include-special-tokens",
        "--trust-remote-code",
    ):
        add(flag, action="store_true")
    for name in REFUSED:
        add("--" + name.replace("_", "-"), nargs="?", const=True, default=None)
    return parser


def parse_args(argv: list[str], *, base: dict[str, Any] | None = None) -> MegatronArgs:
    """Megatron-LM's training flags → :class:`MegatronArgs`; flags that do not touch the data are ignored.

    ``--data-parallel-size`` is the data-parallel size Megatron derives as world size ÷ (tensor × pipeline × context
    parallel sizes); ``--world-size`` with those sizes is accepted instead.

    >>> parse_args(["--data-path", "p", "--seq-length", "8", "--micro-batch-size", "1", "--data-parallel-size", "2",
    ...             "--train-samples", "100"]).global_batch_size  # Megatron's default: micro batch × data parallel
    2
    """
    namespace, _unknown = _parser().parse_known_args(argv)
    if namespace.train_iters is not None and namespace.train_samples is not None:
        raise InvalidPlan("give exactly one of --train-iters and --train-samples")
    return from_mapping({**(base or {}), **{k: v for k, v in vars(namespace).items() if v is not None}})


def from_mapping(values: dict[str, Any], *, where: str = "the arguments") -> MegatronArgs:
    """Megatron-LM's ``args`` as a mapping (``vars(args)`` of a checkpoint, a JSON or YAML file) → :class:`MegatronArgs`."""
    for name, why in REFUSED.items():
        if values.get(name) not in (None, False, [], ""):
            raise InvalidPlan(f"{where}: {why}")
    if values.get("dataloader_type") not in (None, "single"):
        raise InvalidPlan(f"{where}: --dataloader-type {values['dataloader_type']} is not supported (only 'single')")
    if values.get("data_args_path") and not values.get("data_path"):
        values = {**values, "data_path": _read_data_args(values["data_args_path"])}
    data_path = values.get("data_path")
    if isinstance(data_path, str):
        data_path = data_path.split()
    dp = values.get("data_parallel_size")
    if dp is None and values.get("world_size"):
        model = values.get("tensor_model_parallel_size", 1) * values.get("pipeline_model_parallel_size", 1)
        model *= values.get("context_parallel_size", 1)
        if values["world_size"] % model:
            raise InvalidPlan(f"{where}: world size {values['world_size']} is not a multiple of the model-parallel size {model}")
        dp = values["world_size"] // model
    if dp is None:
        raise InvalidPlan(f"{where}: --data-parallel-size (or --world-size) is required")
    micro = values.get("micro_batch_size")
    missing = [
        flag for flag, key in (("--seq-length", "seq_length"), ("--micro-batch-size", "micro_batch_size")) if values.get(key) is None
    ]
    if missing:
        raise InvalidPlan(f"{where}: {' and '.join(missing)} required")
    rampup = values.get("rampup_batch_size")
    split = values.get("split")
    return MegatronArgs(
        data_path=tuple(str(p) for p in data_path or ()),
        seq_length=values["seq_length"],
        micro_batch_size=micro,
        data_parallel_size=dp,
        global_batch_size=values.get("global_batch_size") or micro * dp,
        # A sample-based run's saved args also hold the train_iters Megatron-LM computed from train_samples.
        train_iters=None if values.get("train_samples") else values.get("train_iters") or None,
        train_samples=values.get("train_samples") or None,
        split=LEGACY_DEFAULT_SPLIT if split is None else str(split),
        seed=values.get("seed", 1234),
        data_cache_path=values.get("data_cache_path"),
        rampup_batch_size=tuple(int(x) for x in rampup) if rampup else None,
        iterations_to_skip=tuple(int(x) for x in values.get("iterations_to_skip") or ()),
        eval_iters=values.get("eval_iters") or 100,
        eval_interval=values.get("eval_interval") or 1000,
        mid_level_dataset_surplus=values.get("mid_level_dataset_surplus", 0.005),
        reset_position_ids=bool(values.get("reset_position_ids")),
        reset_attention_mask=bool(values.get("reset_attention_mask")),
        eod_mask_loss=bool(values.get("eod_mask_loss")),
        mmap_bin_files=values.get("mmap_bin_files", True),
        tokenizer=tuple((k, _plain(values.get(k, default))) for k, default in TOKENIZER_DEFAULTS.items()),
    )


def _plain(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _read_data_args(path: str) -> list[str]:
    try:
        return Path(path).read_text().split()
    except OSError as exc:
        raise RegistrationError(f"--data-args-path {path}: {exc.strerror or exc}") from None


def read_args_file(path: str | Path) -> MegatronArgs:
    """The arguments of a run from a file: JSON or YAML of ``args`` names, else the command line's flags (shell
    quoting, ``\\`` line continuations and ``#`` comments as in a launch script; words before the first flag, such as
    ``torchrun pretrain_gpt.py``, are ignored)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise RegistrationError(f"arguments file {path}: {exc.strerror or exc}") from None
    if path.suffix in (".json", ".yaml", ".yml"):
        import yaml

        try:
            values = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise RegistrationError(f"arguments file {path}: not valid {path.suffix[1:].upper()} ({exc})") from None
        if not isinstance(values, dict):
            raise RegistrationError(f"arguments file {path}: expected a mapping of argument names to values")
        return from_mapping({k.replace("-", "_").lstrip("_"): v for k, v in values.items()}, where=str(path))
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    first = next((i for i, word in enumerate(words) if word.startswith("--")), len(words))
    return parse_args(words[first:])
