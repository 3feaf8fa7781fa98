"""A flag database that cannot be written (disk full) degrades to inline errors: flag writes fail with one clear
message, every page still renders. The failure is real: the process runs with a file-size limit (RLIMIT_FSIZE)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from app.flags import FlagStore
from loaders import Catalog

FULL_DISK = """
import json, resource, signal, sys
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from app.factory import create_app
from app.flags import FlagStore
from app.settings import Settings
from loaders.errors import StorageError
from tests.support.local_client import local_client

root, flags_path, version = sys.argv[1:4]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)       # a write past the limit fails with EFBIG instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))  # no file may grow past 1 KiB: the database's next page cannot land
report = {}
try:
    FlagStore(flags_path).add(dataset="docs", version=version, key="doc-0", note="while the disk is full")
    report["add"] = "stored"
except StorageError as exc:
    report["add"] = exc.message
client = local_client(create_app(Settings(root=root, flags_path=flags_path)))
home = client.get("/")
sample = client.get(f"/datasets/docs/versions/{version}/samples/doc-1")
report["home"] = home.status_code
report["home_error"] = BeautifulSoup(home.text, "html.parser").select_one("#recent-flags .error-inline, #recent-flags li").get_text()
report["sample"] = sample.status_code
form = BeautifulSoup(sample.text, "html.parser").select_one(".error-inline")
report["sample_error"] = form.get_text() if form else None
exported = client.get("/flags.jsonl")
report["jsonl"], report["jsonl_body"] = exported.status_code, exported.text
print(json.dumps(report))
"""


def test_a_full_disk_makes_flag_writes_one_clear_error_and_pages_still_render(inspector_catalog: Catalog, tmp_path: Path) -> None:
    flags_path = str(tmp_path / "flags.sqlite")
    version = inspector_catalog.resolve("docs@v1").id
    FlagStore(flags_path).add(dataset="docs", version=version, key="doc-0", note="stored before the disk filled")
    result = subprocess.run(
        [sys.executable, "-c", FULL_DISK, inspector_catalog.root, flags_path, version], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["add"] != "stored" and report["add"].startswith(f"flags database {flags_path}"), report
    assert report["home"] == 200 and report["sample"] == 200, report
    assert "flags database" in report["home_error"] and "flags database" in report["sample_error"], report
    assert "Traceback" not in result.stderr
    # the export answers 503 with the error before sending a byte of JSON lines (never a 200 cut off)
    assert report["jsonl"] == 503 and "flags database" in report["jsonl_body"], report
    assert [f.note for f in FlagStore(flags_path).list()] == ["stored before the disk filled"]  # nothing torn, nothing half-written
