"""The PyTorch adapter as ``batchscope.torch``: ``make_loader(run)`` gives a ``DataLoader``-style iterator of tensors."""

from loaders.torch import BatchscopeDataset, Loader, collate_torch, make_loader

__all__ = ["BatchscopeDataset", "Loader", "collate_torch", "make_loader"]
