"""The global order as pure arithmetic: keyed permutations, each source's order of records, mixtures exact at every
prefix and per step, and the stream parts lossless packing cuts into sequences. No I/O, no state, O(1) per draw.

``SourceOrder`` is :mod:`loaders.order.source_order`'s, re-exported.
"""

from .source_order import SourceOrder

__all__ = ["SourceOrder"]
