"""Model inputs for causal language models from a collated batch: labels from the loss mask (-100 where masked)."""

from __future__ import annotations

from typing import Any, Sequence

IGNORE_INDEX = -100  # the label PyTorch's cross entropy (and every Hugging Face model) ignores


def causal_lm_inputs(
    batch: dict[str, Any], *, fields: Sequence[str] = ("input_ids",), mask: str = "loss_mask", labels_from: str = "input_ids"
) -> dict[str, Any]:
    """``fields`` of a collated tensor batch plus ``labels``: ``labels_from`` where ``mask`` is set, else -100.

    Models shift labels themselves (Hugging Face causal LMs do), so ``labels[i]`` is the token at ``i``. Without a
    ``mask`` field every token is a label.

    >>> causal_lm_inputs({"input_ids": torch.tensor([[5, 6, 7]]), "loss_mask": torch.tensor([[0, 1, 1]])})["labels"]   # doctest: +SKIP
    tensor([[-100,    6,    7]])
    """
    missing = [name for name in (*fields, labels_from) if name not in batch]
    if missing:
        raise KeyError(f"the batch has no field {missing[0]!r} (it has {sorted(batch)}): check the plan's transforms")
    out = {name: batch[name] for name in fields}
    tokens = batch[labels_from]
    out["labels"] = tokens.masked_fill(batch[mask] == 0, IGNORE_INDEX) if mask in batch else tokens.clone()
    return out
