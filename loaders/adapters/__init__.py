"""Training-framework adapters: each marks batches trained when the framework finishes them and saves the reader
state with the framework's own checkpoints, so a kill and resume trains every step exactly once.

- :mod:`loaders.adapters.lightning` — PyTorch Lightning (``BatchscopeDataModule`` + ``BatchscopeCallback``)
- :mod:`loaders.adapters.hf` — Hugging Face ``transformers.Trainer`` (``BatchscopeTrainer``)
- a plain torchrun loop needs no adapter: :func:`loaders.torch.make_loader` and ``loader.log(step, loss=...)``

Each module imports its framework when it is imported, never before: ``import loaders`` needs neither.
"""
