"""What a run reads at (step, rank), and back: the read plan, the sampler's draws, the documents they read, packed
sequences, the assembled ``Batch`` with its digests, and the inverse (``where``: which steps read a record).

Everything here is a pure function of the run manifest; :mod:`loaders.run` puts it behind the ``Run`` façade.
"""
