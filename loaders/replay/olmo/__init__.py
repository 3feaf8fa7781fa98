"""OLMo-core runs replayed: any (step, data-parallel rank) of a run that read through OLMo-core's numpy
fixed-sequence-length dataset, recomputed by OLMo-core over the run's own token files (``batchscope[olmo]``).

:class:`OlmoReplay` is the whole interface; the rest are the plain values it answers with. OLMo-core is imported
only when a replay is made, and a missing package is one line naming the ``olmo`` extra.

>>> from loaders.replay.olmo import OlmoReplay
>>> replay = OlmoReplay.attach("checkpoints/step1000", work_dir="replay-work")   # doctest: +SKIP
>>> replay.total_steps, replay.global_batch_size                                   # doctest: +SKIP
"""

from .checkpoint import OlmoCheckpoint, TrainerState, read_checkpoint
from .model import DocumentPiece, Instance, Placement, RankBatch, TokenRange
from .pins import PinnedFile
from .replay import OlmoReplay
from .settings import ReplayOptions

__all__ = [
    "DocumentPiece",
    "Instance",
    "OlmoCheckpoint",
    "OlmoReplay",
    "PinnedFile",
    "Placement",
    "RankBatch",
    "ReplayOptions",
    "TokenRange",
    "TrainerState",
    "read_checkpoint",
]
