"""A tiny real language model for runs that tests train: unigram counts learned online, each batch scored before it is learned.

>>> model = OnlineUnigram(4)
>>> first, _ = model.step([[1, 1, 1]], [[1, 1, 1]])
>>> second, _ = model.step([[1, 1, 1]], [[1, 1, 1]])
>>> second < first  # it learned that token 1 is common
True
"""

from __future__ import annotations

from typing import Any

import numpy as np


class OnlineUnigram:
    """Token frequencies with add-``alpha`` smoothing; the loss is the mean negative log-likelihood of the trained tokens."""

    def __init__(self, vocab_size: int, *, alpha: float = 0.5) -> None:
        self.vocab_size = vocab_size
        self.alpha = alpha
        self.counts = np.zeros(vocab_size, dtype=np.float64)

    def step(self, input_ids: Any, loss_mask: Any) -> tuple[float, list[float]]:
        """Score then learn a ``[batch, seq]`` array; returns (mean loss over samples with trained tokens, per-sample losses)."""
        ids = np.clip(np.asarray(input_ids, dtype=np.int64), 0, self.vocab_size - 1)
        trained = np.asarray(loss_mask, dtype=bool)
        nll = -np.log((self.counts[ids] + self.alpha) / (self.counts.sum() + self.alpha * self.vocab_size))
        per_sample = [float(nll[i][trained[i]].mean()) if trained[i].any() else 0.0 for i in range(len(ids))]
        np.add.at(self.counts, ids[trained], 1.0)
        scored = [loss for loss, row in zip(per_sample, trained) if row.any()]
        return (float(np.mean(scored)) if scored else 0.0), per_sample
