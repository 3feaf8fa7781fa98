"""Replays of other frameworks' read paths: what a job that never used batchscope read at (step, rank), recomputed with
that framework's own code over the run's own files (one module or folder per framework, imported lazily)."""
