"""The load benchmark's client and CPU accounting, against a real HTTP server on 127.0.0.1 and real child processes."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import time
from typing import Iterator

import pytest

from bench.load import RouteKind, free_port, process_tree_cpu, run_load, summarize, timed_load


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn answers

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        if self.path == "/drop":  # answer, then close the connection: the client must reconnect for its next request
            self.close_connection = True
        if self.path == "/spin":  # 30 ms of CPU: three of /proc's 10 ms ticks, however slow the machine is
            end = time.process_time() + 0.03
            while time.process_time() < end:
                pass
        status = 404 if self.path == "/missing" else 200
        body = f"<p>{self.path}</p>".encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def base_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_clients_request_the_mix_and_record_every_status(base_url: str) -> None:
    kinds = [RouteKind("page", ("/a", "/b", "/drop"), 3.0), RouteKind("gone", ("/missing",), 1.0)]
    samples = run_load(base_url, kinds, clients=4, seconds=0.5, seed=7)
    summary = summarize(samples, 0.5)
    assert summary["by_kind"]["page"]["requests"] > 10 and summary["by_kind"]["page"]["errors"] == 0
    gone = summary["by_kind"]["gone"]
    assert gone["requests"] > 0 and gone["errors"] == gone["requests"]
    assert gone["error_examples"] == ["404 /missing"]
    assert {s.status for s in samples} == {200, 404}  # "/drop" closed its connection and the next request still got through


def test_a_refused_connection_is_a_failed_sample_not_a_crash() -> None:
    nobody_listens = free_port()
    samples = run_load(f"http://127.0.0.1:{nobody_listens}", [RouteKind("page", ("/a",), 1.0)], clients=1, seconds=0.2)
    assert samples and all(s.status == 0 and "/a" in s.error for s in samples)


def test_the_process_tree_cpu_counts_children() -> None:
    spin = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\ntime.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", spin])
    try:
        deadline = time.monotonic() + 20
        while (process_tree_cpu(child.pid) or 0) < 0.4 and time.monotonic() < deadline:
            time.sleep(0.05)
        own = process_tree_cpu(os.getpid())
        mine_alone = time.process_time()
        assert own is not None and own >= (process_tree_cpu(child.pid) or 0) >= 0.4
        assert own - mine_alone >= 0.3  # the child's spin is in the parent's tree, not in its own process time
    finally:
        child.kill()
        child.wait()
    assert process_tree_cpu(child.pid) is None  # reaped: gone


def test_a_timed_load_reports_cpu_per_request(base_url: str) -> None:
    phase = timed_load(base_url, [RouteKind("page", ("/spin",), 1.0)], clients=2, seconds=0.3, seed=1, server_pid=os.getpid())
    cpu = phase.cpu()
    assert phase.samples and cpu["server_cores_busy"] is not None and cpu["server_cpu_ms_per_request"] > 0
    assert cpu["client_cpu_ms_per_request"] > 0
