"""The loader the recorded torchrun job reads: a PyTorch DataLoader with worker processes over a map-style dataset of
a registered version's rows, split across ranks by a shuffling DistributedSampler (deterministic for a seed)."""

from __future__ import annotations

from typing import Any

from torch.utils.data import DataLoader, Dataset, DistributedSampler

from loaders import Catalog

BATCH = 4


class Rows(Dataset):
    """The rows of ``corpus@v1`` by record index (each worker opens the catalog itself)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.rows = Catalog(root).resolve("corpus@v1").rows

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, index: int) -> dict[str, Any]:
        return dict(Catalog(self.root).resolve("corpus@v1").record(index))


def make_loader(root: str, rank: int, world_size: int, *, workers: int = 0) -> DataLoader:
    """The same batches for the same rank, world size and seed, with or without workers."""
    dataset = Rows(root)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=7, drop_last=True)
    return DataLoader(dataset, batch_size=BATCH, sampler=sampler, num_workers=workers, drop_last=True)
