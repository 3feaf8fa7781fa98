"""Small MDS streams written by mosaicml-streaming's own ``MDSWriter``, for examples, benchmarks and tests: a ``web``
stream of text, a ``code`` stream of text and tokens, and optionally a ``pictures`` stream of PNG images.

>>> import tempfile
>>> folder = demo_streams(tempfile.mkdtemp(), web=10, code=6)
>>> sorted(os.listdir(folder))
['code', 'web']
"""

from __future__ import annotations

import os

import numpy as np

from .library import import_streaming

WORDS = "the a cat dog sat ran on under mat log sun rain and then".split()


def _text(stream: str, number: int) -> str:
    rng = np.random.default_rng(number)
    return f"{stream}-{number}: " + " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), 3 + number % 5))


def demo_streams(folder: str, *, web: int = 30, code: int = 10, pictures: int = 0, shard_bytes: int = 600) -> str:
    """Write the streams into ``folder`` (shards of about ``shard_bytes``) and return ``folder``."""
    import_streaming()
    from streaming.base.format.mds.writer import MDSWriter

    if web:
        with MDSWriter(out=os.path.join(folder, "web"), columns={"text": "str"}, size_limit=shard_bytes) as writer:
            for number in range(web):
                writer.write({"text": _text("web", number)})
    if code:
        with MDSWriter(
            out=os.path.join(folder, "code"), columns={"text": "str", "tokens": "ndarray:int32"}, size_limit=shard_bytes
        ) as writer:
            for number in range(code):
                text = _text("code", number)
                writer.write({"text": text, "tokens": np.asarray([WORDS.index(w) if w in WORDS else 99 for w in text.split()], np.int32)})
    if pictures:
        from PIL import Image

        with MDSWriter(
            out=os.path.join(folder, "pictures"), columns={"caption": "str", "image": "png"}, size_limit=shard_bytes * 4
        ) as writer:
            for number in range(pictures):
                image = Image.new("RGB", (6, 4), ((40 * number) % 256, 90, 200 - (7 * number) % 200))
                writer.write({"caption": _text("picture", number), "image": image})
    return folder
