"""The scan engines: one interface, results by task, errors that name the task, workers that die and are replaced."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from loaders.engine import chosen_name, ordered, resolve_engine
from loaders.engine.local import LocalEngine
from loaders.errors import EngineError, RegistrationError
from tests.support import engine_tasks
from tests.support.ray_cluster import RAY_GROUP
from tests.support.s3server import free_port

pytestmark = RAY_GROUP


@pytest.fixture
def shipped(engine: str) -> str:
    """``engine``, with the test task module shipped by value to Ray workers (it is not installed there)."""
    if engine == "ray":
        import ray.cloudpickle

        ray.cloudpickle.register_pickle_by_value(engine_tasks)
    return engine


def test_results_come_back_in_task_order_on_every_engine(shipped):
    found = ordered(resolve_engine(shipped), engine_tasks.square, list(range(40)), labels=[f"item {i}" for i in range(40)])
    assert found == [i * i for i in range(40)]


def test_a_task_error_is_raised_as_it_was_naming_its_file(shipped):
    with pytest.raises(RegistrationError, match="part-3.parquet: refused on purpose"):
        ordered(resolve_engine(shipped), engine_tasks.refuse, ["part-3.parquet"], labels=["part-3.parquet"])


def test_a_worker_that_dies_is_replaced_and_its_task_tried_again(shipped, tmp_path, monkeypatch):
    monkeypatch.setenv("BATCHSCOPE_ENGINE_RETRIES", "1")
    markers = [tmp_path / f"die-{i}" for i in range(3)]
    for marker in markers:
        marker.touch()
    engine = resolve_engine(shipped)
    pids = ordered(engine, engine_tasks.die_once, [str(m) for m in markers], labels=[m.name for m in markers], work="python")
    assert not any(m.exists() for m in markers)  # every task killed its worker once...
    assert all(pid != os.getpid() for pid in pids)  # ...and ran again in another process
    with pytest.raises(EngineError, match=r"^shard-[78]\.parquet: the .*(worker|process).* died 2 times"):
        ordered(engine, engine_tasks.die_always, ["x", "y"], labels=["shard-7.parquet", "shard-8.parquet"], work="python")


def test_work_that_holds_the_gil_runs_in_processes_and_the_rest_on_threads():
    engine = LocalEngine()
    if engine.workers("python") < 2:
        pytest.skip("one usable core: the local engine runs everything in this process")
    in_processes = ordered(engine, engine_tasks.where_run, list(range(8)), labels=[str(i) for i in range(8)], work="python")
    assert [x for x, _ in in_processes] == list(range(8))
    assert {pid for _, pid in in_processes} - {os.getpid()}
    on_threads = ordered(engine, engine_tasks.where_run, list(range(8)), labels=[str(i) for i in range(8)], work="cpu")
    assert {pid for _, pid in on_threads} == {os.getpid()}


def test_the_engine_is_chosen_by_argument_then_environment_then_local(monkeypatch):
    monkeypatch.delenv("BATCHSCOPE_ENGINE", raising=False)
    assert chosen_name(None) == "local"
    monkeypatch.setenv("BATCHSCOPE_ENGINE", "ray")
    assert chosen_name(None) == "ray" and chosen_name("local") == "local"
    monkeypatch.setenv("BATCHSCOPE_ENGINE", "spark")
    with pytest.raises(EngineError, match=r"unknown engine 'spark' \(from \$BATCHSCOPE_ENGINE\); use one of local, ray"):
        resolve_engine(None)


def test_a_ray_cluster_that_cannot_be_reached_is_one_line_and_changes_nothing(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ["a", "b"]}), tmp_path / "a.parquet")
    root = tmp_path / "catalog"
    env = {**os.environ, "RAY_ADDRESS": f"127.0.0.1:{free_port()}", "BATCHSCOPE_RAY_CONNECT_TIMEOUT": "3"}
    batchscope = str(Path(sys.executable).parent / "batchscope")
    done = subprocess.run(
        [batchscope, "register", "docs", str(tmp_path / "a.parquet"), "--engine", "ray", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "cannot reach the Ray cluster at 127.0.0.1:" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert not (root / "datasets").exists()
