"""Megatron-Core replay: what each data-parallel rank of a Megatron-LM run read, recomputed with megatron-core.

From the run's training arguments (flags, an arguments file, or a checkpoint's saved ``args``) and its own
``.bin``/``.idx`` files and cached indexes, :class:`MegatronReplay` answers for any (iteration, data-parallel rank)
the samples that rank consumed, micro-batch by micro-batch, each with megatron-core's own ``tokens`` and its
provenance (prefix, documents, token spans), and back (:meth:`MegatronReplay.where`). megatron-core is an optional
extra (``batchscope[megatron]``), imported only when a replay opens.

>>> args = parse_args(["--data-path", "corpus", "--seq-length", "16", "--micro-batch-size", "2", "--global-batch-size", "8",
...                    "--data-parallel-size", "2", "--train-iters", "60", "--tokenizer-type", "NullTokenizer", "--vocab-size", "500"])
>>> Schedule.of(args).samples(3, rank=1, microbatch=0)
range(26, 28)
"""

from ._extra import MissingExtra
from .args import MegatronArgs, parse_args, read_args_file
from .checkpoint import SavedArgs, read_checkpoint_args
from .checks import CacheMismatch
from .replay import Location, MegatronReplay, PinnedFile, RankBatch, ReplaySample, Span
from .schedule import Position, Schedule

__all__ = [
    "CacheMismatch",
    "Location",
    "MegatronArgs",
    "MegatronReplay",
    "MissingExtra",
    "PinnedFile",
    "Position",
    "RankBatch",
    "ReplaySample",
    "SavedArgs",
    "Schedule",
    "Span",
    "parse_args",
    "read_args_file",
    "read_checkpoint_args",
]
