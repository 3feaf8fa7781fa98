"""`batchscope serve` knows where it listens: it records its address in the catalog root while it runs (so the links
other commands print open), forgets it when stopped, and a busy port is one line naming it and how to choose another.
Real server processes."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app import urls
from app.cli import app as cli
from loaders import Catalog, ReadPlan, Source
from tests.conftest import write_parquet
from tests.support.processes import stop, wait_until_serving

BATCHSCOPE = str(Path(sys.executable).parent / "batchscope")
ENV = {"PATH": "/usr/bin:/bin", "BATCHSCOPE_WORKERS": "1"}


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    import pyarrow as pa

    catalog = Catalog(str(tmp_path / "catalog"))
    catalog.register("docs", write_parquet(pa.table({"id": ["a", "b"], "text": ["x", "y"]}), tmp_path / "src"), key="id", tag="v1")
    run = catalog.create_run("tiny", ReadPlan([Source("docs@v1")], seed=0, global_batch_size=2, steps=1))
    with run.reader(0, 1) as reader:
        for batch in reader:
            reader.log(batch.step, loss=1.0, sample_loss=[1.0, 2.0])
    return catalog


@pytest.mark.slow
def test_serve_records_the_address_it_listens_on_and_commands_print_links_that_open(catalog: Catalog) -> None:
    process = subprocess.Popen(
        [BATCHSCOPE, "serve", "--root", catalog.root, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV
    )
    try:
        first = process.stdout.readline().decode()  # type: ignore[union-attr]
        found = re.search(r"at (http://127\.0\.0\.1:(\d+))$", first.strip())
        assert found, first
        url = found.group(1)
        wait_until_serving(url + "/", process=process, what="batchscope serve")
        record = json.loads(Path(catalog.root, "server.json").read_text())
        assert record["url"] == url and record["pid"] == process.pid
        # A command run without any setting prints links on that server, and they open.
        result = CliRunner().invoke(
            cli, ["step", "tiny", "--step", "0", "--root", catalog.root], env={"BATCHSCOPE_PORT": "", "COLUMNS": "80"}
        )
        assert result.exit_code == 0, result.output
        printed = [line for line in result.output.splitlines() if line.startswith("http")]
        assert printed[0] == url + urls.step("tiny", 0) and len(printed) == 2
        for link in printed:
            with urllib.request.urlopen(link.split("#")[0], timeout=30) as answer:
                assert answer.status == 200
    finally:
        stop(process)
    assert not Path(catalog.root, "server.json").exists()  # forgotten when the server stops


@pytest.mark.slow
def test_a_busy_port_is_one_line_naming_it_and_how_to_choose_another(catalog: Catalog) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        started = time.monotonic()
        done = subprocess.run([BATCHSCOPE, "serve", "--root", catalog.root, "--port", str(port)], capture_output=True, text=True, env=ENV)
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines() == [
        f"error: port {port} on 127.0.0.1 is in use (is another server running?); choose another with --port P "
        "(or BATCHSCOPE_PORT=P; with make: make demo PORT=P)"
    ]
    assert "Errno" not in done.stderr + done.stdout and time.monotonic() - started < 60
    assert not Path(catalog.root, "server.json").exists()
