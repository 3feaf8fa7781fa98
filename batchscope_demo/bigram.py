"""Tiny real models the demo trains under the reader: an online bigram LM and a linear autoencoder for pixels."""

from __future__ import annotations

import numpy as np


class OnlineBigram:
    """A count-based bigram language model trained online: each batch is scored, then learned.

    The loss is the mean negative log-likelihood of the trained (mask = 1)
    next tokens under add-``alpha`` smoothed counts seen so far, so it really
    falls as training proceeds, and a strange sample really spikes.
    """

    def __init__(self, vocab_size: int, *, alpha: float = 0.1) -> None:
        self.vocab_size = vocab_size
        self.alpha = alpha
        self.counts = np.zeros((vocab_size, vocab_size), dtype=np.float32)
        self.totals = np.zeros(vocab_size, dtype=np.float64)
        #: Per-token losses of the last batch scored: for each sample, the loss of predicting each token from the
        #: one before (``None`` for the first token and for masked tokens), rounded to 3 decimals for the ledger.
        self.token_loss: list[list[float | None]] = []

    def step(self, input_ids: np.ndarray, loss_mask: np.ndarray) -> tuple[float, list[float]]:
        """Score then learn a ``[batch, seq]`` array; returns (mean loss, per-sample losses) and keeps ``token_loss``."""
        ids = np.clip(np.asarray(input_ids, dtype=np.int64), 0, self.vocab_size - 1)
        mask = np.asarray(loss_mask, dtype=bool)
        prev, nxt, trained = ids[:, :-1], ids[:, 1:], mask[:, 1:]
        probability = (self.counts[prev, nxt] + self.alpha) / (self.totals[prev] + self.alpha * self.vocab_size)
        nll = -np.log(probability)
        per_sample = [float(nll[i][trained[i]].mean()) if trained[i].any() else 0.0 for i in range(len(ids))]
        rounded = np.round(nll, 3).tolist()
        self.token_loss = [
            [None] + [value if keep else None for value, keep in zip(rounded[i], trained[i].tolist())] for i in range(len(ids))
        ]
        np.add.at(self.counts, (prev[trained], nxt[trained]), 1.0)
        np.add.at(self.totals, prev[trained], 1.0)
        valid = [loss for loss, row in zip(per_sample, trained) if row.any()]
        return (float(np.mean(valid)) if valid else 0.0), per_sample


class LinearAutoencoder:
    """A rank-``k`` linear autoencoder over 16×16 grayscale thumbnails, trained by SGD."""

    def __init__(self, *, rank: int = 8, seed: int = 0, lr: float = 0.5) -> None:
        rng = np.random.default_rng(seed)
        self.encoder = rng.normal(0, 0.05, (256, rank)).astype(np.float32)
        self.decoder = rng.normal(0, 0.05, (rank, 256)).astype(np.float32)
        self.lr = lr

    @staticmethod
    def features(pixels: np.ndarray) -> np.ndarray:
        """Mean-pool an ``H×W×3`` (or ``H×W``) uint8 array to a 256-vector in [0, 1]."""
        from PIL import Image

        image = Image.fromarray(np.asarray(pixels, dtype=np.uint8)).convert("L").resize((16, 16))
        return np.asarray(image, dtype=np.float32).reshape(-1) / 255.0

    def step(self, x: np.ndarray) -> tuple[float, list[float]]:
        """One SGD step on a ``[batch, 256]`` array; returns (mean loss, per-sample MSE)."""
        code = x @ self.encoder
        error = code @ self.decoder - x
        per_sample = (error**2).mean(axis=1)
        scale = 2.0 / error.size
        grad_decoder = code.T @ error * scale
        grad_encoder = x.T @ (error @ self.decoder.T) * scale
        self.decoder -= self.lr * np.clip(grad_decoder, -1, 1)
        self.encoder -= self.lr * np.clip(grad_encoder, -1, 1)
        return float(per_sample.mean()), [float(v) for v in per_sample]


class TabularPolicy:
    """A softmax policy over the 4 gridworld actions per environment, trained by REINFORCE on recorded episodes.

    Each episode's loss is ``-(return - baseline) * sum_t log pi(a_t | env)``, the baseline being the mean return of
    every episode the step read (all ranks), so the logged per-episode losses say which episodes pushed the policy.
    """

    def __init__(self, *, actions: int = 4, lr: float = 0.05) -> None:
        self.actions = actions
        self.lr = lr
        self.logits: dict[str, np.ndarray] = {}

    def _log_pi(self, env: str) -> np.ndarray:
        logits = self.logits.setdefault(env, np.zeros(self.actions, dtype=np.float64))
        shifted = logits - logits.max()
        return shifted - np.log(np.exp(shifted).sum())

    def step(self, ranks: list[list[dict]]) -> tuple[list[float], list[list[float]]]:
        """One update from every rank's episodes; returns each rank's mean loss and its per-episode losses."""
        returns = [float(r["return"]) for records in ranks for r in records]
        baseline = float(np.mean(returns)) if returns else 0.0
        grads: dict[str, np.ndarray] = {}
        losses, per_sample = [], []
        for records in ranks:
            rank_losses = []
            for record in records:
                env, actions = str(record["env"]), np.asarray(record["episode"]["actions"], dtype=np.int64)
                log_pi = self._log_pi(env)
                advantage = float(record["return"]) - baseline
                rank_losses.append(-advantage * float(log_pi[actions].sum()))
                counts = np.bincount(actions, minlength=self.actions).astype(np.float64)
                grad = grads.setdefault(env, np.zeros(self.actions))
                grad += advantage * (counts - len(actions) * np.exp(log_pi))  # d(advantage * log-likelihood)/d(logits)
            losses.append(float(np.mean(rank_losses)) if rank_losses else 0.0)
            per_sample.append(rank_losses)
        for env, grad in grads.items():
            self.logits[env] = self.logits[env] + self.lr * grad / max(1, len(returns))
        return losses, per_sample
