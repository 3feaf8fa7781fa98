"""Pixels of a model input exactly as the model got them: a crop, or frame ``j`` of the frames a run sampled.

``/runs/{run}/steps/{step}/ranks/{rank}/samples/{position}/inputs/{name}``
recomputes the batch through the read path (``run.batch(step, rank)`` at the
world size in force), takes ``samples[position].inputs[name]`` (an H×W×C
uint8 array; with ``/{j}`` frame ``j`` of a k×H×W×C array) and sends it as
PNG, so every pixel is the model's. A run's batches never change, so the
answer is immutable: its ETag is keyed by the run's fingerprint, step, rank,
world size, position, input name and ``j``. Encoded images are cached in
the media cache; the batch is computed once however many images ask at once.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Path, Request
from fastapi.responses import Response

from loaders import Batch, Catalog, Run
from loaders.catalog.store import check_name
from loaders.errors import SampleNotFound
from loaders.media import encode_png

from ..deps import CatalogDep, RunsDep
from ..errors import ERROR_RESPONSES
from ..http_semantics import etag, immutable
from ..media_cache import MediaCache
from ..pages.common import check_rank
from ..pages.media import MediaRequestError
from ..routing import bytes_answer
from ..run_cache import RunCache
from .media import MediaDep

router = APIRouter(tags=["media"], responses=ERROR_RESPONSES)

StepParam = Annotated[int, Path(ge=0, description="Step of the run.")]
RankParam = Annotated[int, Path(ge=0, description="Rank, below the world size in force at that step.")]
PositionParam = Annotated[int, Path(ge=0, description="Position of the sample in the rank's batch (0-based).")]
NameParam = Annotated[str, Path(max_length=200, description="Name of the model input, e.g. image or frames.")]


def _batch(cache: MediaCache, runs: RunCache, run: Run, step: int, rank: int, world_size: int) -> Batch:
    """The recomputed batch, made once for concurrent requests (the run cache keeps it)."""
    key = ("batch", run.fingerprint, step, rank, world_size)
    return cache.get_or_make(key, lambda: runs.batch(run, step, rank, world_size), keep=False)


def _pixels(array: Any, where: str) -> np.ndarray:
    """An input array as an image encoders take: H×W, H×W×3 or H×W×4 uint8."""
    if not isinstance(array, np.ndarray):
        raise MediaRequestError(f"{where} is a {type(array).__name__}, not an image array")
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.dtype != np.uint8 or not (array.ndim == 2 or (array.ndim == 3 and array.shape[2] in (3, 4))):
        raise MediaRequestError(f"{where} is a {array.dtype} array of shape {list(array.shape)}, not an H×W(×3) uint8 image")
    return array


def input_png(
    catalog: Catalog, cache: MediaCache, runs: RunCache, run_name: str, step: int, rank: int, position: int, name: str, j: int | None
) -> tuple[str, Any]:
    """``(etag, make)`` for one input image; ``make()`` recomputes (or reuses) the batch and encodes the pixels."""
    check_name("run", run_name)
    run = runs.run(catalog, run_name)
    world_size = check_rank(run, step, rank)
    tag = etag("input", run.fingerprint, step, rank, world_size, position, name, j)

    def make() -> bytes:
        batch = _batch(cache, runs, run, step, rank, world_size)
        if not 0 <= position < len(batch.samples):
            raise SampleNotFound(f"step {step} rank {rank} of run {run.name} has samples 0 to {len(batch.samples) - 1}, not {position}")
        sample = batch.samples[position]
        where = f"run {run.name} step {step} rank {rank} sample {sample.index} input {name!r}"
        if name not in sample.inputs:
            raise SampleNotFound(
                f"sample {sample.index} of run {run.name} has no model input {name!r} (inputs: {', '.join(sample.inputs)})"
            )
        value = sample.inputs[name]
        if j is None:
            if isinstance(value, np.ndarray) and value.ndim == 4:
                raise MediaRequestError(f"{where} holds {value.shape[0]} frames: ask for one at .../inputs/{name}/{{j}}")
            return encode_png(_pixels(value, where))
        if not isinstance(value, np.ndarray) or value.ndim != 4:
            raise MediaRequestError(f"{where} is not a stack of frames, so it has no frame {j}")
        if not 0 <= j < value.shape[0]:
            raise SampleNotFound(f"{where} holds frames 0 to {value.shape[0] - 1}, not {j}")
        return encode_png(_pixels(value[j], f"{where} frame {j}"))

    def cached() -> bytes:
        return cache.get_or_make(("input", run.fingerprint, step, rank, world_size, position, name, j), make)

    return tag, cached


@router.get(
    "/runs/{run}/steps/{step}/ranks/{rank}/samples/{position}/inputs/{name}",
    summary="A model input image (PNG)",
    **bytes_answer("image/png", description="The pixels the model got, lossless"),
)
def input_image(
    request: Request,
    run: str,
    step: StepParam,
    rank: RankParam,
    position: PositionParam,
    name: NameParam,
    catalog: CatalogDep,
    cache: MediaDep,
    runs: RunsDep,
) -> Response:
    tag, make = input_png(catalog, cache, runs, run, step, rank, position, name, None)
    return immutable(request, tag, make)


@router.get(
    "/runs/{run}/steps/{step}/ranks/{rank}/samples/{position}/inputs/{name}/{j}",
    summary="Frame j of sampled frames (PNG)",
    **bytes_answer("image/png", description="The pixels of frame j the model got, lossless"),
)
def input_frame(
    request: Request,
    run: str,
    step: StepParam,
    rank: RankParam,
    position: PositionParam,
    name: NameParam,
    j: Annotated[int, Path(ge=0, description="Which of the sampled frames (0-based).")],
    catalog: CatalogDep,
    cache: MediaDep,
    runs: RunsDep,
) -> Response:
    tag, make = input_png(catalog, cache, runs, run, step, rank, position, name, j)
    return immutable(request, tag, make)
