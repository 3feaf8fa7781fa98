"""A Hugging Face ``save_to_disk`` folder as a replay reads it: its Arrow files in ``datasets``' order, the files that
describe them, and the order ``Dataset.shuffle(seed)`` gives, computed by ``datasets`` itself.

A ``Dataset`` folder holds ``state.json`` (naming its ``data-*.arrow`` files in order), ``dataset_info.json`` and the
Arrow files; a ``DatasetDict`` folder holds ``dataset_dict.json`` and one such folder per split. Record ``i`` of the
catalog version made of the Arrow files, in ``state.json``'s order, is ``load_from_disk(folder)[i]``. Nothing is
written into the folder: the shuffle's indices go to a temporary file (the training job's own
``cache-*.arrow`` files beside the data are neither read nor pinned).

>>> catalog_name("/data/My Corpus/", None)
'My-Corpus'
>>> catalog_name("/data/corpus", "train")
'corpus.train'
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ReplayError


@dataclass(frozen=True)
class HFFolder:
    """One split's folder: its data files in order and the files describing them."""

    path: str
    files: tuple[str, ...]
    described_by: tuple[str, ...]


def catalog_name(path: str, split: str | None) -> str:
    """The catalog dataset a folder's documents are registered as, by default: its name (and split)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.basename(os.path.normpath(path))).strip("-.") or "dataset"
    return f"{base}.{split}" if split else base


def _json(path: str, flag: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise ReplayError(f"{flag} {path}: cannot be read as JSON ({exc})") from exc


def hf_folder(path: str, split: str | None, *, flag: str = "--dataset") -> HFFolder:
    """The split folder of a ``save_to_disk`` folder (``split`` names one of a ``DatasetDict``'s)."""
    root = os.path.abspath(path)
    if not os.path.isdir(root):
        raise ReplayError(f"{flag} {root}: no such folder")
    described: list[str] = []
    dict_file = os.path.join(root, "dataset_dict.json")
    if os.path.isfile(dict_file):
        splits = _json(dict_file, flag).get("splits", [])
        if split is None or split not in splits:
            given = "" if split is None else f"has no split {split!r}; "
            raise ReplayError(f"{flag} {root} is a DatasetDict: {given}pass --split (one of {', '.join(splits)})")
        described.append(dict_file)
        root = os.path.join(root, split)
    elif split is not None:
        raise ReplayError(f"--split {split}: {flag} {root} is one Dataset, not a DatasetDict of splits")
    state = os.path.join(root, "state.json")
    if not os.path.isfile(state):
        raise ReplayError(f"{flag} {root}: not a save_to_disk folder (no state.json)")
    entries = _json(state, flag).get("_data_files")
    if not isinstance(entries, list) or not entries:
        raise ReplayError(f"{state}: names no data files ('_data_files')")
    files = []
    for entry in entries:
        name = entry.get("filename") if isinstance(entry, dict) else None
        if not isinstance(name, str) or os.path.basename(name) != name:
            raise ReplayError(f"{state}: data file entry {entry!r} is not a file name in the folder")
        file = os.path.join(root, name)
        if not os.path.isfile(file):
            raise ReplayError(f"{file}: named by {state} but missing")
        files.append(file)
    described.append(state)
    info = os.path.join(root, "dataset_info.json")
    if os.path.isfile(info):
        described.append(info)
    return HFFolder(root, tuple(files), tuple(described))


def load(folder: HFFolder) -> Any:
    """``datasets.load_from_disk`` of the split folder (memory-mapped; nothing written)."""
    import datasets

    return datasets.load_from_disk(folder.path)


def shuffled(folder: HFFolder, seed: int) -> tuple[np.ndarray, str]:
    """``(indices, fingerprint)`` of ``load_from_disk(folder).shuffle(seed=seed)``: ``indices[i]`` is the row the
    shuffled dataset's ``i``-th element reads, and the fingerprint is the one that call gives in the training job."""
    dataset = load(folder)
    with tempfile.TemporaryDirectory() as scratch:
        out = dataset.shuffle(seed=seed, indices_cache_file_name=os.path.join(scratch, "indices.arrow"))
        indices = np.asarray(out._indices.column(0).to_numpy(), dtype=np.int64)
        fingerprint = out._fingerprint
        del out
    return indices, fingerprint
