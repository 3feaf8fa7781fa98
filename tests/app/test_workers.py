"""``workers`` > 1: several uvicorn processes, each building the app from the same settings, all answering."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from loaders import Catalog
from tests.browser.conftest import free_port, wait_for


def test_two_worker_processes_serve_the_same_catalog(inspector_catalog: Catalog, tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "BATCHSCOPE_WORKERS": "2", "BATCHSCOPE_PAGE_SIZE": "3", "BATCHSCOPE_FLAGS_PATH": str(tmp_path / "f.sqlite")}
    env.pop("BATCHSCOPE_TOKEN", None)
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "batchscope"), "serve", "--root", inspector_catalog.root, "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(port, process, log)
        for _ in range(6):  # spread over both workers
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/datasets/docs/versions/v1?start=0", timeout=30) as response:
                import json

                body = json.loads(response.read())
            assert len(body["listing"]["rows"]) == 3  # the page size setting reached every worker
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_request_threads_bounds_the_requests_a_process_works_on_at_once(inspector_catalog: Catalog, tmp_path: Path) -> None:
    """The setting is the number of slots of the process's gate (``app.fair``), and worker threads outnumber them."""
    import anyio.to_thread

    from app.factory import create_app
    from app.settings import Settings
    from tests.support.local_client import local_client

    def pool_size() -> int:
        return int(anyio.to_thread.current_default_thread_limiter().total_tokens)

    for threads in (1, 3):
        app = create_app(Settings(root=inspector_catalog.root, flags_path=str(tmp_path / "f.sqlite"), request_threads=threads))
        with local_client(app) as client:
            assert client.get("/datasets/docs").status_code == 200
            assert app.state.gate.slots == threads and app.state.gate.running == 0
            assert client.portal.call(pool_size) > threads
