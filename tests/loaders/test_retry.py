"""Retries against a real local HTTP server that answers with scripted failures."""

from __future__ import annotations

import http.client
import random
import socket
import threading
import time
import urllib.error
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loaders import storage
from loaders.errors import StorageError
from loaders.storage.retry import RetryPolicy, ShortRead, is_transient, with_retries
from tests.support.s3server import free_port

CONTENT = bytes(range(256)) * 40  # 10240 bytes


class ScriptedServer:
    """Serves ``CONTENT`` at every path, with range support; each request takes the next scripted action.

    Actions: an HTTP status code (answered with an empty error), ``"ok"``, ``"short"`` (half the body,
    then the connection closes), ``"norange"`` (200 with the whole file) and ``"stall"`` (sleep 1 s first).
    The last action of a script repeats.
    """

    def __init__(self) -> None:
        self.scripts: dict[str, list[Any]] = {}
        self.requests: Counter[str] = Counter()
        self._positions: defaultdict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str, *script: Any) -> str:
        self.scripts[path] = list(script) or ["ok"]
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def _next(self, path: str) -> Any:
        with self._lock:
            script = self.scripts.get(path, ["ok"])
            action = script[min(self._positions[path], len(script) - 1)]
            self._positions[path] += 1
            self.requests[path] += 1
        return action

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def _answer(self) -> None:
                action = owner._next(self.path)
                if action == "stall":
                    time.sleep(1.0)
                    action = "ok"
                if isinstance(action, int):
                    self.send_response(action)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start, end, status = 0, len(CONTENT) - 1, 200
                wanted = self.headers.get("Range")
                if wanted and action != "norange":
                    first, _, last = wanted.removeprefix("bytes=").partition("-")
                    start, end, status = int(first), min(int(last), len(CONTENT) - 1), 206
                body = CONTENT[start : end + 1]
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", '"v1"')
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{len(CONTENT)}")
                if action == "short":
                    self.send_header("Connection", "close")
                self.end_headers()
                if self.command == "HEAD":
                    return
                if action == "short":
                    self.wfile.write(body[: len(body) // 2])
                    self.close_connection = True
                    return
                self.wfile.write(body)

            do_GET = do_HEAD = _answer

        return Handler


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    yield scripted
    scripted.server.shutdown()
    scripted.server.server_close()


@pytest.fixture(autouse=True)
def _fast_retries(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("BATCHSCOPE_RETRY_ATTEMPTS", "5")
    monkeypatch.setenv("BATCHSCOPE_RETRY_SECONDS", "30")
    monkeypatch.setenv("BATCHSCOPE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("status", [500, 502, 503, 504, 429, 408])
def test_transient_statuses_are_retried_until_the_bytes_come(server: ScriptedServer, status: int) -> None:
    url = server.url(f"/transient-{status}", status, status, "ok")
    assert storage.read_range(url, 100, 50, cache=False) == CONTENT[100:150]
    assert server.requests[f"/transient-{status}"] == 3


@pytest.mark.parametrize(
    ("status", "error"),
    [(404, FileNotFoundError), (410, FileNotFoundError), (403, PermissionError), (401, PermissionError), (400, StorageError)],
)
def test_permanent_statuses_fail_at_once(server: ScriptedServer, status: int, error: type[Exception]) -> None:
    path = f"/permanent-{status}"
    url = server.url(path, status, "ok")
    with pytest.raises(error, match=path):
        storage.read_range(url, 0, 10, cache=False)
    assert server.requests[path] == 1


def test_spent_attempt_budget_raises_storage_error_naming_uri_operation_and_attempts(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BATCHSCOPE_RETRY_ATTEMPTS", "3")
    url = server.url("/always-503", 503)
    with pytest.raises(StorageError) as raised:
        storage.read_range(url, 10, 20, cache=False)
    message = str(raised.value)
    assert url in message
    assert "read of bytes 10-29" in message
    assert "3 attempts" in message
    assert "503" in message
    assert server.requests["/always-503"] == 3


def test_spent_time_budget_stops_before_the_attempt_budget(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCHSCOPE_RETRY_ATTEMPTS", "1000")
    monkeypatch.setenv("BATCHSCOPE_RETRY_SECONDS", "0.3")
    url = server.url("/always-500-timed", 500)
    with pytest.raises(StorageError, match="budget: 1000 attempts, 0.3 s"):
        storage.read_range(url, 0, 10, cache=False)
    assert 1 <= server.requests["/always-500-timed"] < 1000


def test_short_body_is_retried_never_returned(server: ScriptedServer) -> None:
    url = server.url("/short-once", "short", "ok")
    assert storage.read_range(url, 1000, 4000, cache=False) == CONTENT[1000:5000]
    assert server.requests["/short-once"] == 2


def test_short_bodies_until_the_budget_raise(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCHSCOPE_RETRY_ATTEMPTS", "2")
    url = server.url("/always-short", "short")
    with pytest.raises(StorageError, match="IncompleteRead|ShortRead"):
        storage.read_range(url, 0, 4000, cache=False)
    assert server.requests["/always-short"] == 2


def test_range_past_the_end_is_an_error_not_short_data(server: ScriptedServer) -> None:
    url = server.url("/past-end", "ok")
    with pytest.raises(StorageError, match="10240 bytes"):
        storage.read_range(url, len(CONTENT) - 10, 20, cache=False)
    assert server.requests["/past-end"] == 1


def test_server_ignoring_range_requests_is_an_error(server: ScriptedServer) -> None:
    url = server.url("/norange", "norange")
    with pytest.raises(StorageError, match="ignores Range"):
        storage.read_range(url, 10, 10, cache=False)
    assert server.requests["/norange"] == 1


def test_timeout_is_retried(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCHSCOPE_REQUEST_TIMEOUT", "0.2")
    url = server.url("/stall-once", "stall", "ok")
    assert storage.read_range(url, 0, 64, cache=False) == CONTENT[:64]
    assert server.requests["/stall-once"] == 2


def test_stat_and_read_bytes_retry_and_report_missing_files(server: ScriptedServer) -> None:
    assert storage.stat(server.url("/stat-flaky", 503, 500, "ok")) == storage.FileStat(True, len(CONTENT))
    assert server.requests["/stat-flaky"] == 3
    assert storage.stat(server.url("/missing", 404)) == storage.FileStat(False, 0)
    assert storage.read_bytes(server.url("/read-flaky", 502, "ok")) == CONTENT
    assert server.requests["/read-flaky"] == 2


def test_cached_ranges_are_served_without_requests(server: ScriptedServer) -> None:
    url = server.url("/cached", "ok")
    assert storage.read_range(url, 5, 100) == CONTENT[5:105]
    after_first = server.requests["/cached"]  # a HEAD for the validator, then the GET
    assert storage.read_range(url, 5, 100) == CONTENT[5:105]
    assert server.requests["/cached"] == after_first == 2


def test_connection_refused_is_transient_then_storage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCHSCOPE_RETRY_ATTEMPTS", "2")
    url = f"http://127.0.0.1:{free_port()}/nothing-listens.parquet"
    with pytest.raises(StorageError, match="2 attempts.*(refused|URLError)"):
        storage.read_range(url, 0, 10, cache=False)


def test_http_storage_is_read_only(server: ScriptedServer) -> None:
    with pytest.raises(StorageError, match="read-only"):
        storage.write_bytes_atomic(server.url("/x.json", "ok"), b"{}")


def test_with_retries_runs_a_flaky_call_until_it_succeeds() -> None:
    failures = iter([ConnectionResetError("reset by peer"), TimeoutError("timed out")])

    def flaky() -> str:
        error = next(failures, None)
        if error is not None:
            raise error
        return "done"

    assert with_retries("read", "s3://bucket/key", flaky, policy=RetryPolicy(attempts=3, base_delay=0.001)) == "done"


def test_with_retries_does_not_retry_permanent_errors() -> None:
    calls = []

    def denied() -> None:
        calls.append(1)
        raise OSError("AWS Error ACCESS_DENIED during GetObject operation: Access Denied")

    with pytest.raises(OSError, match="ACCESS_DENIED"):
        with_retries("read", "s3://bucket/key", denied, policy=RetryPolicy(attempts=5))
    assert calls == [1]


# Messages as pyarrow raises them for S3 failures (captured from real runs against an S3 API server).
PYARROW_TRANSIENT = [
    "When getting information for key 'k' in bucket 'b': AWS Error UNKNOWN (HTTP status 503) during HeadObject operation: No response body.",
    "AWS Error SLOW_DOWN during GetObject operation: Please reduce your request rate.",
    "AWS Error INTERNAL_FAILURE during GetObject operation: injected",
    "AWS Error NETWORK_CONNECTION during GetObject operation: curlCode: 18, Transferred a partial file",
    "When reading information for key 'k' in bucket 'b': AWS Error NETWORK_CONNECTION during HeadObject operation: "
    "curlCode: 7, Could not connect to server",
    "AWS Error NETWORK_CONNECTION during GetObject operation: curlCode: 28, Timeout was reached",
    "AWS Error THROTTLING during GetObject operation: Rate exceeded",
]
PYARROW_PERMANENT = [
    "AWS Error ACCESS_DENIED during GetObject operation: Access Denied",
    "When getting information for key 'k' in bucket 'b': AWS Error UNKNOWN (HTTP status 403) during HeadObject operation",
    "AWS Error UNKNOWN (HTTP status 400) during GetObject operation: Bad Request",
    "Path does not exist 'bucket/key'",
]


@pytest.mark.parametrize("message", PYARROW_TRANSIENT)
def test_pyarrow_transient_messages(message: str) -> None:
    assert is_transient(OSError(message))


@pytest.mark.parametrize("message", PYARROW_PERMANENT)
def test_pyarrow_permanent_messages(message: str) -> None:
    assert not is_transient(OSError(message))


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ConnectionResetError(), True),
        (ConnectionRefusedError(), True),
        (TimeoutError(), True),
        (socket.timeout(), True),
        (http.client.IncompleteRead(b"", 10), True),
        (http.client.RemoteDisconnected("closed"), True),
        (ShortRead("3 of 10 bytes"), True),
        (urllib.error.URLError(ConnectionRefusedError()), True),
        (urllib.error.URLError(socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")), True),
        (urllib.error.URLError(socket.gaierror(socket.EAI_NONAME, "Name or service not known")), False),
        (FileNotFoundError(), False),
        (PermissionError(), False),
        (ValueError("bad"), False),
        (StorageError("already wrapped"), False),
    ],
)
def test_is_transient_on_python_errors(error: Exception, transient: bool) -> None:
    assert is_transient(error) is transient


def test_policy_from_env() -> None:
    assert RetryPolicy.from_env({}) == RetryPolicy()
    policy = RetryPolicy.from_env({"BATCHSCOPE_RETRY_ATTEMPTS": "4", "BATCHSCOPE_RETRY_SECONDS": "2.5"})
    assert (policy.attempts, policy.seconds) == (4, 2.5)
    with pytest.raises(ValueError, match="BATCHSCOPE_RETRY_ATTEMPTS='many'"):
        RetryPolicy.from_env({"BATCHSCOPE_RETRY_ATTEMPTS": "many"})
    with pytest.raises(ValueError, match="BATCHSCOPE_RETRY_ATTEMPTS='0' is out of range"):
        RetryPolicy.from_env({"BATCHSCOPE_RETRY_ATTEMPTS": "0"})
    with pytest.raises(ValueError, match="BATCHSCOPE_RETRY_SECONDS"):
        RetryPolicy.from_env({"BATCHSCOPE_RETRY_SECONDS": "-1"})


@given(attempt=st.integers(min_value=1, max_value=200), seed=st.integers(min_value=0, max_value=2**32))
def test_backoff_is_full_jitter_under_an_exponential_cap(attempt: int, seed: int) -> None:
    policy = RetryPolicy(base_delay=0.1, max_delay=3.0)
    delay = policy.delay(attempt, random.Random(seed))
    assert 0.0 <= delay <= min(3.0, 0.1 * 2 ** (attempt - 1))
