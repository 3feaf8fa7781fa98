"""MosaicML Streaming runs, replayed: which samples each rank of a job that trained on ``StreamingDataset`` consumed
at each step, recomputed with mosaicml-streaming's own partitioning, shuffling and batching over the run's own MDS
shards (the ``batchscope[streaming]`` extra, imported only when used).

:class:`StreamingReplay` is the run; :class:`StreamingSettings` (with :class:`StreamSpec`, :class:`Launch` and
:class:`ResumeState`) says how it trained; :class:`ReplayedSample` and :class:`SamplePosition` are its answers.
"""

from .example import demo_streams
from .library import StreamingUnavailable
from .replay import STEP_MEANING, LaunchSpan, ReplayedSample, SamplePosition, StreamingReplay
from .settings import Launch, ResumeState, StreamingSettings, StreamSpec
from .source import PinnedFile, ReplayFileChanged

__all__ = [
    "STEP_MEANING",
    "Launch",
    "LaunchSpan",
    "PinnedFile",
    "ReplayFileChanged",
    "ReplayedSample",
    "ResumeState",
    "SamplePosition",
    "StreamSpec",
    "StreamingReplay",
    "StreamingSettings",
    "StreamingUnavailable",
    "demo_streams",
]
