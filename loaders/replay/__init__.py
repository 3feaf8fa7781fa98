"""Replays: runs that read through another framework's deterministic read path, recomputed with that framework's code.

:mod:`loaders.replay.framework` is the plug-in interface (one module per framework, found by name, imported lazily);
:mod:`loaders.replay.run` is the replayed run every page and command reads (``kind`` ``"replayed"``).
"""
