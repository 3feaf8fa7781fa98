"""Replays of other frameworks' deterministic read paths: which samples each rank of a run that never used batchscope
read at each step, recomputed by calling that framework's own code over the run's own (pinned) files.

Each framework lives in one sub-package of its own (:mod:`loaders.replay.streaming` for MosaicML Streaming), imports
its framework only when used, and is an optional extra (``batchscope[streaming]``).
"""
