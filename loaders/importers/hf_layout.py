"""Find the splits and configs of a Hugging Face dataset folder: ``save_to_disk`` output, or a Hub-style Parquet layout.

Each split (of each config) becomes its own dataset, named
``NAME.SPLIT`` (or ``NAME.CONFIG.SPLIT`` for a config other than
``default``): splits are never merged.

- ``DatasetDict.save_to_disk``: ``dataset_dict.json`` lists the splits, each a
  folder with ``state.json`` naming its Arrow files.
- ``Dataset.save_to_disk``: ``state.json`` and Arrow files: one dataset, ``NAME``.
- ``README.md`` with ``configs:`` in its YAML header: each config's
  ``data_files`` (a pattern, a list, or ``{split, path}`` entries).
- Otherwise Parquet (or Arrow IPC) files, split by name as the Hub does: ``data/train-00000-of-00002.parquet``
  and ``train/0.parquet`` belong to ``train``; files that name no split are ``train``.
"""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass

from ..errors import RegistrationError

#: Between the dataset name and the split (and config) in the names of imported datasets.
SEPARATOR = "."
#: ``{split}-00000-of-00002.parquet``: the Hub's shard names.
_SHARD_NAME = re.compile(r"^(?P<split>\w+?)-\d+-of-\d+\.(?:parquet|arrow)$")
_DATA_FILES = (".parquet", ".parq", ".pq", ".arrow")


@dataclass(frozen=True)
class Part:
    """One split of one config: the name suffix (``""`` for a lone ``Dataset``) and its files, in order."""

    suffix: str
    files: tuple[str, ...]
    arrow: bool

    def dataset(self, name: str) -> str:
        """The name of the dataset this part is imported as."""
        return f"{name}{SEPARATOR}{self.suffix}" if self.suffix else name


def shard_split(filename: str) -> str | None:
    """The split a Hub shard name says (``train-00000-of-00002.parquet`` → ``train``), or None.

    >>> shard_split("test-00001-of-00002.parquet"), shard_split("part-00000.parquet")
    ('test', None)
    """
    match = _SHARD_NAME.match(filename)
    return match.group("split") if match else None


def split_of(relative: str) -> str | None:
    """The split a Hub-style file path (relative to the dataset folder) belongs to, or None when it names none.

    >>> split_of("data/train-00000-of-00002.parquet"), split_of("test/0.parquet"), split_of("part-0.parquet")
    ('train', 'test', None)
    """
    parts = relative.replace(os.sep, "/").split("/")
    if parts[0] == "data" and len(parts) > 1:
        parts = parts[1:]
    if len(parts) > 1:
        return parts[0]
    return shard_split(parts[0])


def _load_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise RegistrationError(f"{path}: not readable JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise RegistrationError(f"{path}: expected a JSON object")
    return data


def _saved_dataset(folder: str) -> tuple[str, ...]:
    """The Arrow files of one ``Dataset.save_to_disk`` folder, in the order ``state.json`` lists them."""
    state = _load_json(os.path.join(folder, "state.json"))
    files = [entry.get("filename") for entry in state.get("_data_files") or [] if isinstance(entry, dict)]
    if not files or not all(isinstance(f, str) and f and "/" not in f and f not in (".", "..") for f in files):
        raise RegistrationError(f"{folder}/state.json: lists no Arrow data files")
    return tuple(os.path.join(folder, f) for f in files)


def _front_matter(readme: str) -> dict:
    """The YAML header of a dataset card (between ``---`` lines), or ``{}``."""
    import yaml

    with open(readme, encoding="utf-8") as handle:
        text = handle.read()
    if not text.startswith("---"):
        return {}
    header, sep, _ = text[3:].partition("\n---")
    if not sep:
        return {}
    try:
        data = yaml.safe_load(header)
    except yaml.YAMLError as exc:
        raise RegistrationError(f"{readme}: its YAML header does not parse ({exc})") from exc
    return data if isinstance(data, dict) else {}


def _pattern_files(root: str, patterns: object, where: str) -> tuple[str, ...]:
    items = [patterns] if isinstance(patterns, str) else patterns
    if not isinstance(items, list) or not all(isinstance(p, str) for p in items):
        raise RegistrationError(f"{where}: data_files must be a pattern or a list of patterns")
    found: list[str] = []
    for pattern in items:
        matches = sorted(m for m in glob.glob(os.path.join(root, pattern), recursive=True) if os.path.isfile(m))
        if not matches:
            raise RegistrationError(f"{where}: pattern {pattern!r} matches no files")
        found += [m for m in matches if m not in found]
    return tuple(found)


def _configs(root: str, configs: object) -> list[Part]:
    where = os.path.join(root, "README.md")
    if not isinstance(configs, list):
        raise RegistrationError(f"{where}: configs must be a list")
    parts = []
    for config in configs:
        if not isinstance(config, dict) or not isinstance(config.get("config_name"), str):
            raise RegistrationError(f"{where}: every config needs a config_name")
        prefix = "" if config["config_name"] == "default" else config["config_name"] + SEPARATOR
        data_files = config.get("data_files")
        entries = data_files if isinstance(data_files, list) and all(isinstance(e, dict) for e in data_files) else None
        splits = [("train", data_files)] if entries is None else [(e.get("split"), e.get("path")) for e in entries]
        for split, patterns in splits:
            if not isinstance(split, str):
                raise RegistrationError(f"{where}: config {config['config_name']!r} has a data_files entry without a split")
            files = _pattern_files(root, patterns, f"{where} config {config['config_name']!r} split {split!r}")
            parts.append(Part(prefix + split, files, arrow=all(f.endswith(".arrow") for f in files)))
    return parts


def _split_files(root: str) -> list[Part]:
    """Parquet (or Arrow IPC) files below ``root``, grouped by the split their path names."""
    by_split: dict[str, list[str]] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for file in sorted(files):
            if file.lower().endswith(_DATA_FILES) and not file.startswith((".", "_")):
                path = os.path.join(folder, file)
                by_split.setdefault(split_of(os.path.relpath(path, root)) or "train", []).append(path)
    if not by_split:
        raise RegistrationError(
            f"{root}: no Hugging Face dataset here (no dataset_dict.json, state.json, README configs, Parquet or Arrow files)"
        )
    parts = []
    for split, files in sorted(by_split.items()):
        arrow = [f.endswith(".arrow") for f in files]
        if any(arrow) and not all(arrow):
            raise RegistrationError(f"{root}: split {split!r} mixes Arrow and Parquet files; import them separately")
        parts.append(Part(split, tuple(sorted(files)), arrow=all(arrow)))
    return parts


def find_parts(source: str) -> list[Part]:
    """Every split (and config) of the Hugging Face dataset at ``source``, each with its files.

    >>> [p.dataset("squad") for p in find_parts("exports/squad")]  # doctest: +SKIP
    ['squad.train', 'squad.validation']
    """
    root = os.path.abspath(source)
    if os.path.isfile(root) and root.endswith(".arrow"):
        return [Part("", (root,), arrow=True)]
    if not os.path.isdir(root):
        raise RegistrationError(f"{root}: not a directory (give the folder save_to_disk wrote, or a dataset repository)")
    if os.path.isfile(os.path.join(root, "dataset_dict.json")):
        splits = _load_json(os.path.join(root, "dataset_dict.json")).get("splits")
        if not isinstance(splits, list) or not all(isinstance(s, str) and s and "/" not in s for s in splits):
            raise RegistrationError(f"{root}/dataset_dict.json: lists no splits")
        return [Part(split, _saved_dataset(os.path.join(root, split)), arrow=True) for split in splits]
    if os.path.isfile(os.path.join(root, "state.json")):
        return [Part("", _saved_dataset(root), arrow=True)]
    readme = os.path.join(root, "README.md")
    if os.path.isfile(readme):
        configs = _front_matter(readme).get("configs")
        if configs is not None:
            return _configs(root, configs)
    return _split_files(root)
