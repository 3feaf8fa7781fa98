"""Response schemas of the JSON twins: a page-data dataclass turned into the pydantic model of what ``jsonable`` makes of it.

The JSON twin of a page is ``jsonable(data)``: the dataclass's fields without
the HTML-only ones, nested dataclasses as objects, bytes as a size/hash
summary, and non-finite floats as the strings ``"NaN"``, ``"Infinity"`` and
``"-Infinity"``. :func:`response_model` builds a pydantic model with exactly
that shape, so the OpenAPI document describes what the API answers.

>>> from dataclasses import dataclass
>>> @dataclass
... class Point:
...     x: float
...     label: str | None = None
>>> schema = response_model(Point).model_json_schema()
>>> sorted(schema["properties"]), schema["required"]
(['label', 'x'], ['x'])
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import sys
import types
import typing
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

#: What ``jsonable`` writes for a float that is not finite.
NonFinite = Literal["NaN", "Infinity", "-Infinity"]

_MODELS: dict[type, type[BaseModel]] = {}
_NAMES: dict[str, type] = {}
_BUILDING: set[type] = set()


class BytesSummary(BaseModel):
    """Bytes in JSON: size and sha256, plus base64 when at most 1 KiB."""

    size: int
    sha256: str
    base64: str | None = None


def _field_type(cls: type, field: dataclasses.Field[Any]) -> Any:
    """The annotation of ``field`` evaluated in its module (``Any`` when it names something only type checkers import)."""
    annotation = field.type
    if not isinstance(annotation, str):
        return annotation
    namespace = {**vars(sys.modules[cls.__module__]), **{c.__name__: c for c in cls.__mro__}}
    try:
        return eval(annotation, namespace)  # noqa: S307 - a dataclass annotation of our own code
    except Exception:  # noqa: BLE001 - a TYPE_CHECKING-only name: its JSON is described as any value
        return Any


def _json_type(annotation: Any) -> Any:
    """The type ``jsonable`` turns values of ``annotation`` into."""
    if annotation is Any or annotation is object:
        return Any
    if annotation is float:
        return Union[float, NonFinite]
    if annotation in (bytes, bytearray, memoryview):
        return BytesSummary
    if annotation in (_dt.datetime, _dt.date, _dt.time):
        return str
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return response_model(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        return Union[tuple(_json_type(a) for a in args)]
    if origin in (list, set, frozenset, tuple) or annotation in (list, set, frozenset, tuple):
        inner = [a for a in args if a is not Ellipsis]
        return list[_json_type(inner[0]) if len(set(inner)) == 1 else Any]
    if origin is dict or annotation is dict:
        return dict[str, _json_type(args[1]) if len(args) == 2 else Any]
    if origin is Literal or annotation in (str, int, bool, type(None)):
        return annotation
    return Any  # a view model or another object: its JSON depends on the value


def _name(cls: type) -> str:
    """A schema name unique in the document: the class name, or its module's last part and name on a clash."""
    name = cls.__name__
    if _NAMES.setdefault(name, cls) is not cls:
        name = f"{cls.__module__.rsplit('.', 1)[-1]}_{cls.__name__}"
        _NAMES.setdefault(name, cls)
    return name


def response_model(cls: type) -> type[BaseModel]:
    """The pydantic model of ``jsonable(instance of cls)`` for a page-data dataclass ``cls`` (made once)."""
    if cls in _MODELS:
        return _MODELS[cls]
    if cls in _BUILDING:  # a dataclass that holds itself: described as any object below the first level
        return dict[str, Any]  # type: ignore[return-value]
    _BUILDING.add(cls)
    try:
        model = _build(cls)
    finally:
        _BUILDING.discard(cls)
    _MODELS[cls] = model
    return model


def _build(cls: type) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if not field.metadata.get("json", True):
            continue
        annotation = _json_type(_field_type(cls, field))
        has_default = field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
        # A JSON name that pydantic's models use themselves (``schema``) is kept as the alias of another attribute.
        attribute = f"{field.name}_" if hasattr(BaseModel, field.name) else field.name
        fields[attribute] = (annotation, Field(default=None if has_default else ..., alias=field.name))
    doc = (cls.__doc__ or "").strip()
    if doc.startswith(f"{cls.__name__}("):  # the signature dataclasses write when a class has no docstring
        doc = ""
    return create_model(  # type: ignore[call-overload,no-any-return]
        _name(cls),
        __config__=ConfigDict(json_schema_extra={"description": " ".join(doc.split("\n\n")[0].split())} if doc else None),
        **fields,
    )
