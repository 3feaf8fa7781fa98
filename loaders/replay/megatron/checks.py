"""Checks of megatron index files before they are trusted: their descriptions, shapes, sampled positions, a rebuild.

- :func:`check_descriptions`: each description file says exactly what megatron-core says these settings are.
- :func:`explain_mismatch`: when the run's cache holds descriptions of the same dataset but none for these settings,
  name the settings that differ (a seed, a split, a sample count...).
- :func:`check_sampled`: shapes as megatron's arithmetic predicts, and at sampled positions each sample-index step
  recomputed from the document index and the ``.idx`` lengths as megatron's C++ builder steps (no index is built).
- :func:`compare_rebuild`: every array equal to the one megatron-core's own builder makes now (costs its build time).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import IntegrityError, InvalidPlan

SAMPLED_POSITIONS = 256

#: megatron's description keys → the training flag that sets each.
FLAGS = {
    "random_seed": "--seed",
    "sequence_length": "--seq-length",
    "split": "--split",
    "split_matrix": "--split",
    "num_samples": "--train-samples/--train-iters (× --global-batch-size)",
    "size": "--train-samples/--train-iters (× --global-batch-size)",
    "weights": "--data-path weights",
    "dataset_path": "--data-path",
    "tokenizer": "--tokenizer-type/--vocab-size",
}


class CacheMismatch(IntegrityError):
    """A cached index file of the run differs from what megatron-core makes for its settings; names file and position."""

    status = 409


def check_descriptions(sets: list[Any]) -> None:
    for index_set in sets:
        path = index_set.files["description"]
        if path.read_text() != index_set.description:
            raise CacheMismatch(f"{path}: the description does not match megatron-core's for these settings (edited or corrupt)")


def _flatten(value: Any, key: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        return {k: v for name, item in value.items() for k, v in _flatten(item, f"{key}.{name}" if key else name).items()}
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return {k: v for i, item in enumerate(value) for k, v in _flatten(item, f"{key}[{i}]").items()}
    return {key: value}


def explain_mismatch(folder: Path, kind: str, dataset: Any) -> None:
    """Refuse, naming the differing settings, when ``folder`` describes this dataset only under other settings."""
    ours = _flatten(json.loads(dataset.unique_description))
    best: tuple[int, list[str], Path] | None = None
    for path in sorted(folder.glob(f"*-{kind}-train-description.txt")):
        try:
            theirs = _flatten(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
        if kind == "GPTDataset" and theirs.get("dataset_path") != ours.get("dataset_path"):
            continue
        differing = [k for k in ours if theirs.get(k) != ours[k]]
        if differing and (best is None or len(differing) < best[0]):
            best = (len(differing), differing, path)
    if best is None:
        return
    _, differing, path = best
    theirs = _flatten(json.loads(path.read_text()))
    said = []
    for key in differing[:3]:
        flag = FLAGS.get(key.split(".")[-1].split("[")[0], FLAGS.get(key.split(".")[0].split("[")[0], key))
        said.append(f"{key} ({flag}) is {theirs.get(key)!r} there, {ours[key]!r} in the arguments")
    raise InvalidPlan(f"the run's cached indexes contradict the arguments: {'; '.join(said)} ({path})")


def _load(index_set: Any, role: str) -> np.ndarray:
    try:
        return np.load(index_set.files[role], mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise CacheMismatch(f"{index_set.files[role]}: not a readable numpy array ({exc})") from None


def _next_start(start: tuple[int, int], document_index: np.ndarray, lengths: np.ndarray, seq_length: int, extra: int) -> tuple[int, int]:
    """Where the sample after one starting at ``start`` starts: megatron's ``build_sample_idx`` step, for one sample."""
    doc, offset = start
    remaining = seq_length + extra
    while True:
        available = int(lengths[document_index[doc]]) - offset
        remaining -= available
        if remaining <= 0:
            return doc, offset + remaining + available - extra
        if doc == len(document_index) - 1:
            return doc, int(lengths[document_index[doc]]) - extra
        doc, offset = doc + 1, 0


def check_sampled(members: list[tuple[str, str | None, Any]], sets: list[Any], *, positions: int = SAMPLED_POSITIONS) -> None:
    """Shapes and sampled positions of every index set (see the module docstring); raises :class:`CacheMismatch`."""
    for (kind, _prefix, dataset), index_set in zip(members, sets):
        rng = np.random.default_rng(int(index_set.hash[:8], 16))
        if kind == "BlendedDataset":
            dataset_index, sample_index = _load(index_set, "dataset_index"), _load(index_set, "dataset_sample_index")
            _shape(index_set, "dataset_index", dataset_index, (len(dataset),))
            _shape(index_set, "dataset_sample_index", sample_index, (len(dataset),))
            for t in _picks(rng, len(dataset), positions):
                d = int(dataset_index[t])
                if not 0 <= d < len(dataset.datasets) or not 0 <= int(sample_index[t]) < len(dataset.datasets[d]):
                    raise CacheMismatch(
                        f"{index_set.files['dataset_index']}: position {t} names sample {sample_index[t]} of dataset {d}, which does not exist"
                    )
            continue
        document_index, sample_index, shuffle_index = (_load(index_set, r) for r in ("document_index", "sample_index", "shuffle_index"))
        epochs = dataset._get_num_epochs(dataset._get_num_tokens_per_epoch())
        samples = len(dataset)
        _shape(index_set, "document_index", document_index, (epochs * len(dataset.indices),))
        _shape(index_set, "sample_index", sample_index, (samples + 1, 2))
        _shape(index_set, "shuffle_index", shuffle_index, (samples,))
        lengths = dataset.dataset.sequence_lengths
        low, high = int(dataset.indices[0]), int(dataset.indices[-1])
        extra = int(dataset.config.add_extra_token_to_sequence)
        for k in _picks(rng, samples, positions):
            start = (int(sample_index[k][0]), int(sample_index[k][1]))
            if not low <= int(document_index[start[0]]) <= high:
                raise CacheMismatch(
                    f"{index_set.files['document_index']}: position {start[0]} names document {document_index[start[0]]}, outside the train split {low}..{high}"
                )
            expected = _next_start(start, document_index, lengths, dataset.config.sequence_length, extra)
            if (int(sample_index[k + 1][0]), int(sample_index[k + 1][1])) != expected:
                raise CacheMismatch(
                    f"{index_set.files['sample_index']}: sample {k + 1} starts at {tuple(sample_index[k + 1])}, megatron's step gives {expected}"
                )
            if not 0 <= int(shuffle_index[k]) < samples:
                raise CacheMismatch(
                    f"{index_set.files['shuffle_index']}: position {k} holds {shuffle_index[k]}, not a sample below {samples}"
                )


def _picks(rng: np.random.Generator, n: int, count: int) -> list[int]:
    if n <= count:
        return list(range(n))
    return sorted({0, n - 1, *rng.integers(0, n, count - 2).tolist()})


def _shape(index_set: Any, role: str, array: np.ndarray, shape: tuple[int, ...]) -> None:
    if array.shape != shape:
        raise CacheMismatch(f"{index_set.files[role]}: shape {array.shape}, megatron's arithmetic for these settings gives {shape}")


def compare_rebuild(sets: list[Any], rebuilt_folder: Path, *, chunk: int = 1 << 20) -> None:
    """Compare every array of ``sets`` with megatron's fresh build in ``rebuilt_folder`` (same file names)."""
    for index_set in sets:
        for role, path in index_set.files.items():
            if role == "description":
                continue
            ours = np.load(rebuilt_folder / path.name, mmap_mode="r")
            cached = _load(index_set, role)
            if ours.shape != cached.shape:
                raise CacheMismatch(f"{path}: shape {cached.shape}, megatron-core rebuilds {ours.shape}")
            for begin in range(0, len(ours), chunk):
                a, b = np.asarray(ours[begin : begin + chunk]), np.asarray(cached[begin : begin + chunk])
                if not np.array_equal(a, b):
                    first = begin + int(np.flatnonzero((a != b).reshape(len(a), -1).any(axis=1))[0])
                    raise CacheMismatch(f"{path}: position {first} differs from megatron-core's rebuild ({cached[first]} vs {ours[first]})")
