"""Peers measured beside batchscope, imported lazily: Hugging Face datasets, mosaicml-streaming, Grain, torchdata.

A peer that is not installed or cannot be imported is reported as
``{"status": "unavailable", "reason": ...}``, never silently skipped. The
measurement functions here run in fresh processes (``bench.harness.isolated``)
so each one's peak resident memory is its own.

>>> status("no-such-peer")["status"]
'unavailable'
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .harness import RssProbe, Timing, package_version, time_calls

PEERS = {
    "datasets": "datasets",
    "streaming": "mosaicml-streaming",
    "grain": "grain",
    "torchdata": "torchdata",
}
"""Peer name → the distribution that provides it."""


class PeerUnavailable(RuntimeError):
    """A peer cannot be imported on this machine (the message says why)."""


def unavailable(reason: str) -> dict[str, Any]:
    """The result of a measurement that could not run because its peer is missing or broken."""
    return {"status": "unavailable", "reason": reason}


def _hf() -> Any:
    import datasets
    from datasets.distributed import split_dataset_by_node

    datasets.disable_progress_bars()
    return datasets.Dataset, split_dataset_by_node


def import_streaming() -> None:
    """Import mosaicml-streaming's package, or only make its subpackages importable when its ``__init__`` cannot run.

    Its ``__init__`` imports its vision datasets and so torchvision, whose PyPI wheel is built against CUDA torch and
    cannot load beside a CPU-only torch; the partition, shuffle and MDS writer code do not need it. The read path's
    Streaming replay does the same (:func:`loaders.replay.streaming.library.import_streaming`), so this is that one.
    """
    from loaders.replay.streaming.library import import_streaming as import_streaming_parts

    import_streaming_parts()


def _streaming() -> Any:
    import_streaming()
    from streaming.base.partition import get_partitions
    from streaming.base.shuffle import get_shuffle

    return get_partitions, get_shuffle


def _grain() -> Any:
    try:
        import grain.python as gp
    except ImportError:
        import grain as gp  # newer releases expose the API at the top level
    return gp.IndexSampler, gp.ShardOptions


def _torchdata() -> Any:
    from torchdata.stateful_dataloader import StatefulDataLoader

    return StatefulDataLoader


_LOADERS: dict[str, Callable[[], Any]] = {
    "datasets": _hf,
    "streaming": _streaming,
    "grain": _grain,
    "torchdata": _torchdata,
}


def load(peer: str) -> Any:
    """Import ``peer`` and return what the benchmarks use from it; raises :class:`PeerUnavailable`."""
    if peer not in _LOADERS:
        raise PeerUnavailable(f"unknown peer {peer!r} (known: {', '.join(PEERS)})")
    if package_version(PEERS[peer]) is None:
        raise PeerUnavailable(f"{PEERS[peer]} is not installed (install the bench extra: pip install -e '.[bench]')")
    try:
        return _LOADERS[peer]()
    except Exception as exc:  # noqa: BLE001 - report any import failure as the reason
        raise PeerUnavailable(f"{PEERS[peer]} {package_version(PEERS[peer])} failed to import: {type(exc).__name__}: {exc}") from exc


def status(peer: str) -> dict[str, Any]:
    """``{"status": "available", "version": ...}`` or ``{"status": "unavailable", "reason": ...}``."""
    try:
        load(peer)
    except PeerUnavailable as exc:
        return unavailable(str(exc))
    return {"status": "available", "version": package_version(PEERS[peer])}


def _guarded(peer: str) -> Any:
    try:
        return load(peer), None
    except PeerUnavailable as exc:
        return None, unavailable(str(exc))


def _epoch_position(n: int, step: int, batch: int) -> tuple[int, int]:
    """``(epoch, first global position of the step within that epoch)``."""
    return divmod(step * batch, n)


def _lookup_result(first_s: float, warm: Timing, probe: RssProbe, indices: list[int]) -> dict[str, Any]:
    return {
        "status": "ok",
        "first_lookup_ms": round(first_s * 1e3, 4),
        "lookup": warm.to_json(),
        **probe.to_json(),
        "indices": [int(i) for i in indices[:4]],
    }


# -- lookup of the batch at (step, rank): run in a fresh process ---------------------------------------
def hf_lookup(*, n: int, step: int, rank: int, world_size: int, batch: int, seed: int, warm: int) -> dict[str, Any]:
    """Hugging Face datasets: ``Dataset.shuffle`` + ``split_dataset_by_node``, then the rank's rows of step ``step``.

    The N-row dataset (one ``id`` column) is built before the measurement; the
    measurement is the shuffle, the split and the slice, as a resume or an
    inspector would pay them.
    """
    loaded, missing = _guarded("datasets")
    if missing:
        return missing
    dataset_cls, split_dataset_by_node = loaded
    import numpy as np

    per_rank = batch // world_size
    dataset = dataset_cls.from_dict({"id": np.arange(n, dtype=np.int64)})
    epoch, _ = _epoch_position(n, step, batch)
    with RssProbe() as probe:
        start = time.perf_counter()
        part = split_dataset_by_node(dataset.shuffle(seed=seed + epoch), rank=rank, world_size=world_size)
        span = max(1, len(part) - per_rank)

        def rows(s: int) -> list[int]:
            first_row = (s * per_rank) % span
            return part[first_row : first_row + per_rank]["id"]

        indices = rows(step)
        first = time.perf_counter() - start
    timing = time_calls(lambda k: rows(step + k), range(1, warm + 1))
    return _lookup_result(first, timing, probe, indices)


def streaming_lookup(
    *, n: int, step: int, rank: int, world_size: int, batch: int, seed: int, warm: int, shard_size: int = 32768
) -> dict[str, Any]:
    """mosaicml-streaming: the epoch's partition (``get_partitions``) and shuffle (``get_shuffle``), as its resume builds them.

    Defaults of ``StreamingDataset``: ``relaxed`` partition, ``py1e`` shuffle,
    canonical nodes = physical nodes (8 ranks per node), shuffle block
    ``max(4e6 / nodes, 2**18)``, shards of ``shard_size`` samples.
    """
    loaded, missing = _guarded("streaming")
    if missing:
        return missing
    get_partitions, get_shuffle = loaded
    import numpy as np

    per_rank = batch // world_size
    ranks_per_node = min(8, world_size)
    nodes = world_size // ranks_per_node
    epoch, sample_in_epoch = _epoch_position(n, step, batch)
    sizes = np.full(n // shard_size, shard_size, dtype=np.int64)
    if n % shard_size:
        sizes = np.append(sizes, np.int64(n % shard_size))
    with RssProbe() as probe:
        start = time.perf_counter()
        ids = get_partitions("relaxed", n, nodes, nodes, ranks_per_node, 1, per_rank, sample_in_epoch)
        shuffle = get_shuffle("py1e", sizes, nodes, seed, epoch, max(4_000_000 // nodes, 1 << 18))
        mine = ids[rank // ranks_per_node, rank % ranks_per_node, 0]
        indices = shuffle[mine[0][mine[0] >= 0]]
        first = time.perf_counter() - start
    batches = len(mine)
    timing = time_calls(lambda k: shuffle[mine[k % batches][mine[k % batches] >= 0]], range(1, warm + 1))
    return _lookup_result(first, timing, probe, list(indices))


def grain_lookup(*, n: int, step: int, rank: int, world_size: int, batch: int, seed: int, warm: int) -> dict[str, Any]:
    """Grain: ``IndexSampler`` (global shuffle, sharded by rank) record keys of the rank's step ``step``."""
    loaded, missing = _guarded("grain")
    if missing:
        return missing
    index_sampler, shard_options = loaded
    per_rank = batch // world_size

    def keys(sampler: Any, s: int) -> list[int]:
        return [sampler[rank + k * world_size].record_key for k in range(s * per_rank, (s + 1) * per_rank)]

    with RssProbe() as probe:
        start = time.perf_counter()
        sampler = index_sampler(
            num_records=n,
            shard_options=shard_options(shard_index=rank, shard_count=world_size, drop_remainder=True),
            shuffle=True,
            num_epochs=None,
            seed=seed,
        )
        indices = keys(sampler, step)
        first = time.perf_counter() - start
    timing = time_calls(lambda k: keys(sampler, step + k), range(1, warm + 1))
    return _lookup_result(first, timing, probe, indices)


LOOKUPS: dict[str, str] = {
    "datasets": "bench.peers:hf_lookup",
    "streaming": "bench.peers:streaming_lookup",
    "grain": "bench.peers:grain_lookup",
}
"""Peer → the isolated lookup function measuring it."""


# -- resume: torchdata StatefulDataLoader ---------------------------------------------------------------
def _torchdata_loader(records: list[dict[str, Any]], n: int, batch: int, seed: int) -> Any:
    import torch

    class Records(torch.utils.data.Dataset):  # map-style: virtual index i → real record i mod rows
        def __len__(self) -> int:
            return n

        def __getitem__(self, i: int) -> dict[str, Any]:
            return records[i % len(records)]

    loader_cls = load("torchdata")
    generator = torch.Generator()
    generator.manual_seed(seed)
    return loader_cls(Records(), batch_size=batch, shuffle=True, generator=generator, num_workers=0, collate_fn=list)


def _state_at(records: list[dict[str, Any]], batch: int, seed: int, step: int) -> dict[str, Any]:
    """The loader's state after ``step`` batches: a real state after one batch with its counters moved to ``step``.

    The state holds the generator state from the start of the epoch and the
    counters, nothing that depends on the dataset size, so a small loader gives it.
    """
    loader = _torchdata_loader(records, 2 * batch, batch, seed)
    next(iter(loader))
    state = loader.state_dict()
    state["_num_yielded"] = state["_sampler_iter_yielded"] = step
    state["_sampler_iter_state"]["samples_yielded"] = step * batch
    state["_sampler_iter_state"]["sampler_iter_state"]["yielded"] = step * batch
    return state


def torchdata_resume(*, paths: list[str], step: int, batch: int, seed: int, check_step: int = 3) -> dict[str, Any]:
    """torchdata ``StatefulDataLoader``: ``load_state_dict`` at ``step`` to the first batch, shuffled map-style dataset.

    The dataset holds ``(step + 1) * batch`` samples (sample ``i`` is record
    ``i mod rows`` of the same Parquet files) so that ``step`` lies in the
    first epoch, as in single-epoch pretraining. The state at ``step`` is a
    real state whose counters are moved to ``step``; that this equals the
    state of a loader that really ran is checked at ``check_step``.
    """
    loaded, missing = _guarded("torchdata")
    if missing:
        return missing
    import pyarrow.parquet as pq

    records = [r for path in paths for r in pq.read_table(path).to_pylist()]
    n = (step + 1) * batch
    small = (check_step + 2) * batch
    real = _torchdata_loader(records, small, batch, seed)
    expected = next(b for k, b in enumerate(real) if k == check_step)
    resumed = _torchdata_loader(records, small, batch, seed)
    resumed.load_state_dict(_state_at(records, batch, seed, check_step))
    state_check = next(iter(resumed)) == expected
    state = _state_at(records, batch, seed, step)
    with RssProbe() as probe:
        start = time.perf_counter()
        loader = _torchdata_loader(records, n, batch, seed)
        loader.load_state_dict(state)
        first = next(iter(loader))
        elapsed = time.perf_counter() - start
    return {
        "status": "ok",
        "resume_ms": round(elapsed * 1e3, 3),
        "samples": len(first),
        "state_check": bool(state_check),
        **probe.to_json(),
    }
