"""The transform protocol: frozen, serializable specs applied identically by the reader and ``run.batch``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar

import numpy as np

from ..errors import InvalidPlan

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from ..catalog.store import CatalogStore
    from ..catalog.version import DatasetVersion

_REGISTRY: dict[str, type["Transform"]] = {}


@dataclass
class Context:
    """What a transform may use besides the record: the per-sample RNG and catalog lookups.

    ``rng`` is keyed by (seed, global index) for sample transforms and by
    (seed, stream, document) for document transforms inside packing, so it
    never depends on ranks or workers.
    """

    catalog: "CatalogStore"
    seed_key: tuple[int, ...]
    where: str
    version: "DatasetVersion | None" = None
    tokenizers: dict[str, str] = field(default_factory=dict)
    shard_uri: str | None = None

    _rng: np.random.Generator | None = None

    @property
    def rng(self) -> np.random.Generator:
        """``numpy.random.default_rng(seed_key)``, made on first use (most transforms need none)."""
        if self._rng is None:
            self._rng = np.random.default_rng(list(self.seed_key))
        return self._rng

    def tokenizer(self, name: str | None) -> "Tokenizer":
        """The tokenizer the run resolved for ``name`` (None: the dataset version's own)."""
        if name is None:
            if self.version is None or self.version.tokenizer is None:
                raise InvalidPlan(f"{self.where}: no tokenizer named and the dataset declares none")
            name = self.version.tokenizer
        return self.catalog.tokenizer(self.tokenizers.get(name, name))


class Transform:
    """Base of all transforms: a frozen dataclass with a registered ``type`` name.

    Subclasses implement :meth:`apply`, reading fields of ``inputs`` (which
    starts as a copy of the raw record) and writing model inputs into it.
    """

    type: ClassVar[str] = ""
    document_level: ClassVar[bool] = True
    #: Safe to apply to different samples on several threads at once (user functions may not be).
    thread_safe: ClassVar[bool] = True
    #: Spends its time in code that releases the GIL (image/video decoding), so threads speed it up.
    releases_gil: ClassVar[bool] = False
    #: Decodes images or video frames, so applying it can take as much memory as the media are large.
    decodes_media: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.type:
            _REGISTRY[cls.type] = cls

    def apply(self, inputs: dict[str, Any], ctx: Context) -> None:
        raise NotImplementedError

    def apply_many(self, items: list[tuple[dict[str, Any], Context]]) -> None:
        """:meth:`apply` to many documents; transforms that batch well (tokenizers) override it."""
        for inputs, ctx in items:
            self.apply(inputs, ctx)

    def tokenizer_names(self) -> list[str]:
        """Tokenizer names this transform uses (resolved to content ids when a run is created)."""
        name = getattr(self, "tokenizer", None)
        return [name] if isinstance(name, str) else []

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            data[f.name] = list(value) if isinstance(value, tuple) else value
        return data


def transform_from_json(data: dict[str, Any]) -> Transform:
    """Rebuild a transform from :meth:`Transform.to_json` output."""
    kind = data.get("type")
    if kind not in _REGISTRY:
        raise InvalidPlan(f"unknown transform type {kind!r}; known: {', '.join(sorted(_REGISTRY))}")
    cls = _REGISTRY[kind]
    names = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs = {}
    for key, value in data.items():
        if key == "type":
            continue
        if key not in names:
            raise InvalidPlan(f"transform {kind!r} has no option {key!r}; options: {', '.join(names)}")
        kwargs[key] = tuple(value) if isinstance(value, list) else value
    return cls(**kwargs)


def require(inputs: dict[str, Any], field_name: str, transform: str, where: str) -> Any:
    """Fetch a field a transform needs, or fail naming the transform, field and sample."""
    if field_name not in inputs:
        raise InvalidPlan(
            f"{where}: transform {transform!r} needs field {field_name!r}, which this record lacks (fields: {', '.join(inputs)})"
        )
    return inputs[field_name]


def registered() -> dict[str, type[Transform]]:
    return dict(_REGISTRY)


TransformFn = Callable[[dict[str, Any], np.random.Generator], dict[str, Any] | None]
