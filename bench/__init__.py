"""Benchmarks of batchscope's read path against baselines and peers (``python -m bench``); results in ``bench/results/``."""
