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
            env=env, stdout=out, stderr=subprocess.STDOUT,
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
