"""The OpenAPI document describes every answer: each JSON twin's shape, and the media types of everything else."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import jsonschema

from app.factory import create_app
from app.jsonable import html_only, jsonable
from app.schemas import response_model
from app.settings import Settings


def test_every_operation_documents_what_it_answers() -> None:
    document = create_app(Settings(root="/nonexistent-catalog")).openapi()
    undocumented = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            success = {code: answer for code, answer in operation["responses"].items() if code[0] in "23"}
            content = {kind: media.get("schema", {}) for answer in success.values() for kind, media in answer.get("content", {}).items()}
            if path.startswith("/api") and method == "get" and "307" not in success:
                documented = "$ref" in content.get("application/json", {})
            elif method == "post":
                documented = "$ref" in content.get("application/json", {})
            else:
                documented = bool(success) and all(content.values()) and bool(content) or "307" in success
            if not documented:
                undocumented.append(f"{method.upper()} {path}: {success}")
    assert undocumented == []
    assert "/api/runs" in document["paths"] and "/api/datasets" in document["paths"]


@dataclass
class Inner:
    """A nested value."""

    name: str
    data: bytes


@dataclass
class Outer:
    """What the schema is made from: the JSON twin leaves the HTML-only field out, and floats may be non-finite."""

    value: float
    inner: Inner
    items: list[Inner] = field(default_factory=list)
    note: str | None = None
    svg: str = html_only("")


def test_the_schema_of_a_page_describes_exactly_its_json_twin() -> None:
    schema = response_model(Outer).model_json_schema()
    validator = jsonschema.Draft202012Validator(schema)
    twin = jsonable(Outer(math.nan, Inner("a", b"\x00" * 2000), [Inner("b", b"x")]))
    assert list(validator.iter_errors(twin)) == []
    assert "svg" not in schema["properties"] and schema["required"] == ["value", "inner"]
    assert list(validator.iter_errors({**twin, "value": "fast"}))  # not a number, nor a non-finite float's string
    assert list(validator.iter_errors({**twin, "inner": {"name": "a"}}))  # the bytes summary is required
