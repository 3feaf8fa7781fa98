"""A Streaming run's data: its streams opened with Streaming's own ``Stream`` (index, shard readers, weights), the
files to pin, and the view of a ``StreamingDataset`` that Streaming's epoch planning reads.

Shards are read in place from the folders the run trained from (their ``index.json`` and raw ``.mds`` files);
nothing is copied or written there.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ...errors import ChecksumMismatch, InvalidPlan
from .library import Streaming
from .settings import StreamingSettings

INDEX = "index.json"
_HASH_CHUNK = 8 << 20
#: The download settings a Stream takes from its StreamingDataset (irrelevant to a local, already-present stream).
_STREAM_DEFAULTS = {
    "remote": None,
    "local": None,
    "split": None,
    "download_retry": 2,
    "download_timeout": 60.0,
    "validate_hash": None,
    "keep_zip": False,
}


class ReplayFileChanged(ChecksumMismatch):
    """A file a replayed run reads is missing, moved or changed since the run was attached (the message names it).

    A request for such a run is refused (409) rather than answered from other bytes than the run read.
    """

    status = 409


@dataclass(frozen=True)
class PinnedFile:
    """One file a replayed run reads, as it was when pinned: path, size in bytes and SHA-256 of its content."""

    path: str
    size: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PinnedFile:
        return cls(str(data["path"]), int(data["size"]), str(data["sha256"]))


def file_sha256(path: str) -> str:
    """SHA-256 of a file's content, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def pin_file(path: str) -> PinnedFile:
    """The pin of one file as it is now."""
    return PinnedFile(path, os.path.getsize(path), file_sha256(path))


@dataclass(frozen=True)
class ShardRef:
    """One shard of one stream: its raw file, its sample count and the global sample id of its first sample."""

    stream: int
    shard: int
    path: str
    samples: int
    first_sample: int


class StreamSet:
    """The run's streams as Streaming loads them, weighted by Streaming's ``Stream.apply_weights``.

    ``pins`` (path → :class:`PinnedFile`) are checked as the files are used: every ``index.json`` and shard size on
    opening, a shard's full content the first time this process reads a record from it.
    """

    def __init__(self, settings: StreamingSettings, lib: Streaming, *, pins: Mapping[str, PinnedFile] | None = None) -> None:
        self.pins = dict(pins or {})
        self._checked: set[str] = set()
        self._lock = threading.Lock()
        self.streams: list[Any] = []
        self.readers: list[Any] = []
        self.shards: list[ShardRef] = []
        self.index_paths: list[str] = []
        shard_offsets, shard_counts, sample_counts = [], [], []
        first = 0  # global sample id of the next shard's first sample
        for number, spec in enumerate(settings.streams):
            weight = {k: getattr(spec, k) for k in ("proportion", "repeat", "choose") if getattr(spec, k) is not None}
            stream = _stream_call(number, lambda: lib.Stream(local=spec.local, split=spec.split or None, **weight))
            stream.apply_default(dict(_STREAM_DEFAULTS))
            index = os.path.join(spec.local, spec.split, INDEX)
            if not os.path.isfile(index):
                raise ReplayFileChanged(f"stream {number}: {index} is missing (point the stream at the folder that holds its index.json)")
            self._check_pin(index, full=True)
            readers = _stream_call(number, lambda: stream.get_shards(lib.World(1, 1, 1, 0), False))
            shard_offsets.append(len(self.readers))
            shard_counts.append(len(readers))
            sample_counts.append(sum(reader.samples for reader in readers))
            if not sample_counts[-1]:
                raise InvalidPlan(f"stream {number}: {index} lists no samples")
            for local_shard, reader in enumerate(readers):
                path = os.path.join(spec.local, spec.split, reader.raw_data.basename)
                if not os.path.isfile(path):
                    zipped = reader.zip_data.basename if reader.zip_data else None
                    held = (
                        f" (only its compressed form {zipped} is there: batchscope reads shards in place and does not decompress them)"
                        if zipped and os.path.isfile(os.path.join(spec.local, spec.split, zipped))
                        else ""
                    )
                    raise ReplayFileChanged(f"stream {number}: shard file {path} is missing{held}")
                self._check_pin(path, full=False)
                self.shards.append(ShardRef(number, local_shard, path, int(reader.samples), first))
                first += int(reader.samples)
            self.streams.append(stream)
            self.readers.extend(readers)
            self.index_paths.append(index)
        self.shard_offset_per_stream = np.asarray(shard_offsets, np.int64)
        self.shards_per_stream = np.asarray(shard_counts, np.int64)
        self.samples_per_stream = np.asarray(sample_counts, np.int64)
        self.samples_per_shard = np.asarray([s.samples for s in self.shards], np.int64)
        self.sample_offset_per_shard = self.samples_per_shard.cumsum() - self.samples_per_shard
        self.num_samples = int(self.samples_per_shard.sum())
        self.epoch_size = _stream_call(
            None, lambda: lib.Stream.apply_weights(self.streams, self.samples_per_stream, settings.epoch_size, settings.shuffle_seed)
        )

    # -- pins ----------------------------------------------------------------------------------------
    def files(self) -> list[str]:
        """Every file the run reads: each stream's ``index.json``, then its shards in order."""
        out = []
        for number, index in enumerate(self.index_paths):
            out.append(index)
            out.extend(shard.path for shard in self.shards if shard.stream == number)
        return out

    def _check_pin(self, path: str, *, full: bool) -> None:
        if not self.pins or path in self._checked:
            return
        pin = self.pins.get(path)
        if pin is None:
            raise ReplayFileChanged(f"{path}: not among the files pinned when the run was attached (its streams moved or changed)")
        try:
            size = os.path.getsize(path)
        except OSError:
            raise ReplayFileChanged(f"{path}: missing (it was pinned when the run was attached)") from None
        if size != pin.size:
            raise ReplayFileChanged(f"{path}: changed since the run was attached ({size} bytes, pinned {pin.size})")
        if full:
            found = file_sha256(path)
            if found != pin.sha256:
                raise ReplayFileChanged(f"{path}: changed since the run was attached (sha256 {found[:16]}…, pinned {pin.sha256[:16]}…)")
            self._checked.add(path)

    def check_shard(self, shard: int) -> None:
        """Check shard ``shard`` (global index) against its pin, once per process."""
        path = self.shards[shard].path
        if path not in self._checked:
            with self._lock:
                self._check_pin(path, full=True)

    def fingerprint(self) -> str:
        """A digest of what the order depends on in the data: every stream's index.json."""
        digest = hashlib.sha256()
        for index in self.index_paths:
            with open(index, "rb") as handle:
                digest.update(hashlib.sha256(handle.read()).digest())
        return digest.hexdigest()

    # -- addresses -----------------------------------------------------------------------------------
    def locate(self, sample_ids: np.ndarray) -> np.ndarray:
        """The global shard index of each global sample id."""
        return np.searchsorted(self.sample_offset_per_shard, sample_ids, side="right") - 1

    def read(self, sample_id: int) -> dict[str, Any]:
        """Sample ``sample_id`` decoded by Streaming's own shard reader (what its ``StreamingDataset`` yields)."""
        if not 0 <= sample_id < self.num_samples:
            raise InvalidPlan(f"sample id {sample_id} is out of range: the streams hold {self.num_samples} samples")
        shard = int(self.locate(np.asarray([sample_id]))[0])
        self.check_shard(shard)
        row = sample_id - int(self.sample_offset_per_shard[shard])
        return self.readers[shard].get_item(row)

    def columns(self) -> list[dict[str, str]]:
        """Each stream's columns, name → MDS encoding (as its index.json declares them)."""
        out = []
        for number in range(len(self.streams)):
            reader = self.readers[int(self.shard_offset_per_stream[number])]
            out.append(dict(zip(reader.column_names, reader.column_encodings)))
        return out


def _stream_call(number: int | None, call: Any) -> Any:
    """Run a call into Streaming's ``Stream``; its refusals (bad weights, unsafe types, index versions) become one line."""
    where = "" if number is None else f"stream {number}: "
    try:
        return call()
    except json.JSONDecodeError as exc:
        raise InvalidPlan(f"{where}{exc}") from exc
    except (ValueError, RuntimeError, KeyError) as exc:
        raise InvalidPlan(f"{where}Streaming refuses the stream settings: {exc}") from exc


class DatasetView:
    """What Streaming's epoch planning (``generate_work`` and ``StreamingDataset.resample_streams``) reads of a
    ``StreamingDataset``, for one launch; every value is the one ``StreamingDataset`` itself would hold.

    Reading any other attribute fails with a line naming it, so a Streaming release that reads more of its dataset
    is refused, never replayed wrongly.
    """

    def __init__(
        self,
        streams: StreamSet,
        settings: StreamingSettings,
        lib: Streaming,
        *,
        num_canonical_nodes: int,
        batch_size: int,
        initial_physical_nodes: int | None,
    ) -> None:
        self._lib = lib
        self.streams = streams.streams
        self.num_streams = len(streams.streams)
        for name in ("shard_offset_per_stream", "shards_per_stream", "samples_per_shard", "sample_offset_per_shard", "epoch_size"):
            setattr(self, name, getattr(streams, name))
        for name in (
            "sampling_method",
            "sampling_granularity",
            "shuffle",
            "shuffle_algo",
            "shuffle_seed",
            "partition_algo",
            "batching_method",
        ):
            setattr(self, name, getattr(settings, name))
        # As StreamingDataset.__init__ sets it: the seed changes each epoch only when shuffling with balanced sampling.
        self.epoch_seed_change = settings.shuffle and settings.sampling_method == "balanced"
        self.num_canonical_nodes = num_canonical_nodes
        self.batch_size = batch_size
        self.initial_physical_nodes = initial_physical_nodes
        self.shuffle_block_size = settings.shuffle_block_size
        lib.set_shuffle_block_size(self, lib.World(1, 1, 1, 0))

    def resample_streams(self, epoch: int, stream_id: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Streaming's own ``StreamingDataset.resample_streams``, run on this view."""
        return self._lib.resample_streams(self, epoch, stream_id)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"mosaicml-streaming {self.__dict__['_lib'].version} reads StreamingDataset.{name}, which this replay does not provide; "
            "it replays the StreamingDataset attributes of mosaicml-streaming 0.13"
        )
