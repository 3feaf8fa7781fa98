"""Schemathesis against the inspector's OpenAPI schema over a small real catalog with a run: no request gets a 5xx.

Every documented operation gets schemathesis's deterministic coverage cases
(boundary values, wrong types, missing and unknown parameters), then is fuzzed
three ways: values generated from the schema, generated values with the path
pinned to things that exist (so the fuzzer reaches real pages, not only 404s),
and values that break the schema. Few examples per operation keep it fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from app import urls
from app.factory import create_app
from app.settings import Settings
from loaders import Catalog, ReadPlan, Source
from tests.conftest import build_inspector_catalog

RUN = "fuzz-run"
EXAMPLES = {GenerationMode.POSITIVE: 25, GenerationMode.NEGATIVE: 15}
PINNED_EXAMPLES = 25


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """The shared test datasets plus a run over two of them whose reader was consumed (so its ledger exists)."""
    catalog = build_inspector_catalog(tmp_path_factory.mktemp("fuzz"))
    run = catalog.create_run(RUN, ReadPlan([Source("docs@v1"), Source("chat@v1")], seed=0, global_batch_size=4, steps=3))
    with run.reader(0, 1) as reader:
        for _ in reader:
            pass
    return catalog


def existing(catalog: Catalog) -> list[dict[str, Any]]:
    """Path parameters that name real things: datasets, versions (by id and by tag), keys, the run, its steps and ranks."""
    docs, chat = catalog.resolve("docs@v1"), catalog.resolve("chat@v1")
    return [
        {"name": "docs", "version": docs.id, "key": "doc-1", "a": docs.id, "b": catalog.resolve("docs@v2").id, "flag_id": 1},
        {"name": "chat", "version": "v1", "key": "good", "a": "v1", "b": chat.id},
        {"run": RUN, "step": 0, "rank": 0, "position": 0, "name": "input_ids", "index": 0},
        {"run": RUN, "step": 2, "rank": 0, "position": 3, "name": "text", "index": 1},
    ]


def pinned(operation: Any, values: dict[str, Any]) -> dict[str, Any] | None:
    """``values`` restricted to the operation's path parameters, when it has them all."""
    names = [p.name for p in operation.path_parameters]
    if not names or not all(n in values for n in names):
        return None
    return {n: values[n] for n in names}


def strategies(operation: Any, catalog: Catalog) -> list[tuple[str, Any, int]]:
    """``(label, strategy, examples)`` for one operation: generated, generated with real paths, schema-breaking."""
    found = [(mode.value, operation.as_strategy(generation_mode=mode), count) for mode, count in EXAMPLES.items()]
    real = [p for p in (pinned(operation, v) for v in existing(catalog)) if p]
    if real:
        pinned_cases = st.one_of(*[operation.as_strategy(path_parameters=p) for p in real])
        found.append(("pinned", pinned_cases, PINNED_EXAMPLES))
    return found


def test_no_request_gets_a_server_error(catalog: Catalog, tmp_path: Path) -> None:
    # schemathesis calls the app as http://testserver: a host name this app is told to answer to
    app = create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "flags.sqlite"), allowed_hosts="testserver"))
    schema = schemathesis.openapi.from_asgi(urls.openapi(), app)
    operations = [result.ok() for result in schema.get_all_operations()]
    labels = {f"{op.method.upper()} {op.path}" for op in operations}
    assert {"GET /api/datasets/{name}/versions/{version}/samples/{key}", "POST /api/flags"} <= labels
    failures: list[str] = []
    exercised = 0
    for operation in operations:
        failures += coverage_failures(schema, operation)
        for label, strategy, examples in strategies(operation, catalog):
            try:
                fuzz_test(operation, label, strategy, examples)()
                exercised += 1
            except Unsatisfiable:  # nothing breaks the schema of an operation without parameters
                assert label == GenerationMode.NEGATIVE.value, f"{operation.method.upper()} {operation.path} {label}"
            except AssertionError as exc:  # keep going: report every operation that fails, not just the first
                failures.append(str(exc).splitlines()[0])
    assert failures == []
    assert exercised >= 2 * len(operations)


def fuzz_test(operation: Any, label: str, strategy: Any, examples: int) -> Any:
    """A Hypothesis test calling the app with ``examples`` cases drawn from ``strategy``."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def fuzz(case: Any) -> None:
        check_answer(case, f"{operation.method.upper()} {case.formatted_path} {label}")

    return fuzz


def check_answer(case: Any, where: str) -> None:
    """One call: no exception escapes the app, no 5xx, and JSON answers are strict JSON."""
    try:
        response = case.call()
    except Exception as exc:  # the in-process client re-raises what the server did not handle
        raise AssertionError(f"{where} raised {type(exc).__name__}: {exc}") from exc
    assert response.status_code < 500, f"{where} -> {response.status_code}: {response.text[:400]}"
    if response.headers.get("content-type", [""])[0].startswith("application/json"):
        json.loads(response.text, parse_constant=_refuse_constant)


def coverage_failures(schema: Any, operation: Any) -> list[str]:
    """Schemathesis's deterministic coverage cases (boundaries, wrong types, missing and extra parameters)."""
    config = schema.config.generation_for(operation=operation)
    failures = []
    for case in schema.iter_coverage_cases(operation, generation_modes=list(GenerationMode), generation_config=config):
        try:
            check_answer(case, f"{operation.method.upper()} {case.formatted_path} coverage {case.query}")
        except AssertionError as exc:
            failures.append(str(exc).splitlines()[0])
    return failures


def _refuse_constant(name: str) -> None:
    raise AssertionError(f"JSON answer holds {name}, which is not JSON")
