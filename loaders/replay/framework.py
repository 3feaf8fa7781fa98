"""The plug-in interface of replays: what one framework's module provides, and the table that finds it by name.

A *replayed* run read through another framework's deterministic read path. batchscope recomputes what rank ``r``
consumed at step ``s`` by calling that framework's own code (its sampler, its index builders) with the run's settings,
over the run's own files, pinned by checksum when the run is attached. Each framework is one module of this package,
found by name in :data:`FRAMEWORKS` (like fsspec's ``known_implementations``) and imported only when asked; the module
imports its framework inside functions, so it imports without it, and :func:`framework` refuses a missing framework in
one line naming the pip extra that installs it.

A framework module provides one class implementing :class:`Framework` (four methods, no base class needed):

1. ``parse(argv)`` reads the flags after ``batchscope attach NAME RUN`` (and any config file they name) into the
   framework's settings, a frozen dataclass with ``to_json()``; ``load(data)`` reads them back from the run manifest.
2. ``layout(settings)`` names the files to pin: the stored documents as :class:`Documents` (each becomes a catalog
   version read in place through a format reader, so sample pages, permalinks and flags work), and :class:`Pinned`
   files besides (configurations, the run's cached indexes). Every one is checksummed at attach and checked again
   when the run is opened; a changed file is refused, naming it.
3. ``check(settings, context)`` refuses a stored fingerprint or configuration hash that contradicts a setting
   (raise :class:`~loaders.errors.SettingMismatch` naming the setting and both values).
4. ``open(settings, context)`` returns a :class:`Replay`: total steps, global batch, data-parallel world size
   (``shape()``), ``prepare()`` to build its derived arrays once (attach calls it), and for
   ``(step, rank)`` the samples in the order that rank consumed them, each naming the stored documents it holds
   (:class:`Piece`) and the model inputs the framework made (token arrays, loss masks); ``where`` inverts the order
   where the framework allows it, else raises :class:`~loaders.errors.WhereUnsupported` saying why in one line.

The :class:`ReplayContext` a framework receives gives random access to its stored documents (``context.versions``),
the paths and checksums of its pinned files, and ``context.array(name, build)``: derived arrays (epoch orders,
inverse indexes) built once, stored in the catalog under a key naming the settings and pinned files, and checked
against their recorded digest whenever they are read, so attaching a run whose indexes are kept builds nothing.

>>> sorted(FRAMEWORKS)
['grain', 'hf', 'hf-trainer']
>>> extra_of("hf")
'hf'
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from ..errors import FrameworkMissing, ReplayError

if TYPE_CHECKING:
    from ..catalog.version import DatasetVersion
    from ..sampling.where import WhereReads

#: framework name (``batchscope attach NAME``) → ``"module:Class"`` implementing :class:`Framework`, imported on use.
FRAMEWORKS: dict[str, str] = {
    "hf": "loaders.replay.hf:HuggingFace",
    "hf-trainer": "loaders.replay.hf_trainer:HuggingFaceTrainer",
    "grain": "loaders.replay.grain:Grain",
}


@dataclass(frozen=True)
class Documents:
    """Stored documents a replay reads, registered as one catalog version read in place (never copied).

    ``format`` names the format reader (``parquet``, ``arrow-stream``, or one a framework adds to
    :data:`loaders.storage.formats.FORMATS`); ``files`` are in the framework's own order, so record ``i`` of the
    version is the framework's document ``i``. ``key`` is the permalink column (content hash when ``None``).
    """

    name: str
    format: str
    files: tuple[str, ...]
    key: str | None = None
    kinds: dict[str, str] = field(default_factory=dict)
    tokenizer: str | None = None

    def __post_init__(self) -> None:
        if not self.files:
            raise ReplayError(f"documents {self.name!r} name no files")


@dataclass(frozen=True)
class Pinned:
    """A file besides the documents that the replay reads (a configuration, a cached index), pinned by checksum."""

    path: str
    role: str = "config"  # "config" | "index" | what the framework calls it; shown on the run page


@dataclass(frozen=True)
class Layout:
    """Everything a replay reads: its documents (catalog versions, in order: a :class:`Piece`'s ``source`` indexes
    this list) and other pinned files."""

    documents: tuple[Documents, ...]
    pinned: tuple[Pinned, ...] = ()


@dataclass(frozen=True)
class Piece:
    """One stored document's part in a sample: record ``record`` of documents ``source``.

    ``span`` is set for samples that hold several documents or parts of them (packed sequences): the token range
    ``[start, end)`` of the sample and the ``offset`` in the document where it begins, as native packed spans.
    """

    source: int
    record: int
    span: dict[str, int] | None = None


@dataclass(frozen=True)
class ReplayedSample:
    """One sample a rank consumed: the framework's own number for it (the dataset index its sampler drew, the sample
    index of its index files), its epoch, the documents in it, and the model inputs the framework made (``None``: the
    record's own values are the inputs)."""

    index: int
    pieces: tuple[Piece, ...]
    epoch: int = 0
    inputs: dict[str, Any] | None = None


@dataclass(frozen=True)
class Shape:
    """How much a replayed run reads: its steps, the samples of one step across ranks, and its data-parallel ranks."""

    total_steps: int
    global_batch_size: int
    world_size: int

    def __post_init__(self) -> None:
        for name in ("total_steps", "global_batch_size", "world_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ReplayError(f"a replay's {name.replace('_', ' ')} must be a positive integer, not {value!r}")


class ReplayContext(Protocol):
    """What a framework is given to open its replay: its documents, its pinned files and a store of derived arrays."""

    @property
    def versions(self) -> Sequence["DatasetVersion"]: ...  # random access to each Documents entry, in layout order

    def pinned_path(self, path: str) -> str: ...  # a pinned file's path, once checked against its checksum

    def array(self, name: str, build: Callable[[], np.ndarray]) -> np.ndarray: ...  # derived, checked, memory-mapped


@runtime_checkable
class Replay(Protocol):
    """One run's read path, opened: what it reads at ``(step, rank)``, and back where it can be inverted."""

    def shape(self) -> Shape: ...

    def prepare(self) -> None: ...  # build every derived array now (attach calls it once; later lookups are O(batch))

    def samples(self, step: int, rank: int) -> list[ReplayedSample]: ...  # in the order the rank consumed them

    def where(self, source: int, record: int, *, first_epoch: int, epochs: int) -> "WhereReads": ...  # or WhereUnsupported

    def describe(self) -> list[tuple[str, str]]: ...  # (label, value) lines for the run page, in the framework's words


@runtime_checkable
class Framework(Protocol):
    """One framework's replay: its name, its pip extra, the modules it imports, and the four steps of an attach."""

    name: str  # as in ``batchscope attach NAME``
    title: str  # how pages name it ("Hugging Face datasets + DistributedSampler")
    extra: str  # ``pip install 'batchscope[EXTRA]'``
    requires: tuple[str, ...]  # importable modules the replay calls

    def parse(self, argv: Sequence[str]) -> Any: ...  # settings: a frozen dataclass with to_json()

    def load(self, data: dict[str, Any]) -> Any: ...

    def layout(self, settings: Any) -> Layout: ...

    def check(self, settings: Any, context: ReplayContext) -> None: ...

    def open(self, settings: Any, context: ReplayContext) -> Replay: ...


def extra_of(name: str) -> str:
    """The pip extra that installs framework ``name`` (``batchscope[EXTRA]``) — its class's ``extra``, read without
    importing the framework itself."""
    return framework_class(name).extra


def framework_class(name: str) -> type:
    """The class of framework ``name`` (its module imported on first use; the framework itself is not)."""
    if name not in FRAMEWORKS:
        raise ReplayError(f"no replay for framework {name!r}; known: {', '.join(sorted(FRAMEWORKS))}")
    module, _, attribute = FRAMEWORKS[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


def framework(name: str) -> Framework:
    """Framework ``name``, once every module it calls can be imported (else one line naming the extra).

    >>> framework("hf").title                                    # doctest: +SKIP
    'Hugging Face datasets + torch DistributedSampler'
    """
    found = framework_class(name)()
    missing = [module for module in found.requires if importlib.util.find_spec(module) is None]
    if missing:
        raise FrameworkMissing(
            f"replaying {found.title} needs {', '.join(missing)}, which is not installed: pip install 'batchscope[{found.extra}]'"
        )
    return found
