"""Replays: runs that read through another framework's deterministic read path, recomputed with that framework's own
code over the run's pinned files. Each framework lives in one sub-package of its own (``olmo``...) that imports the
framework only when used; its package is an optional extra (``batchscope[olmo]``)."""
