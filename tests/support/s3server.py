"""A real S3 API server for tests: moto's standalone ``moto_server`` on 127.0.0.1.

Fixtures, loaded with ``pytest_plugins = ["tests.support.s3server"]`` (in the
top-level ``tests/conftest.py`` or in the test modules that use them):

- ``s3_server`` (session): the running server, its endpoint and a boto3 client.
- ``s3_bucket``: a fresh bucket, with ``AWS_ENDPOINT_URL``, keys and region set
  in the environment for the test and the disk cache pointed at ``tmp_path``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from .processes import free_port, stop, wait_until_serving

ACCESS_KEY = "batchscope-test"
SECRET_KEY = "batchscope-test-secret"
REGION = "us-east-1"

__all__ = ["S3Bucket", "S3Server", "env_for_subprocess", "free_port", "wait_until_serving"]


def _moto_server_command() -> list[str]:
    script = Path(sys.executable).parent / "moto_server"
    found = str(script) if script.exists() else shutil.which("moto_server")
    if found is None:
        raise RuntimeError("moto_server is not installed: run `pip install -e '.[test]'` (the test extra has moto[server])")
    return [found]


@dataclass
class S3Server:
    """A running S3 API server."""

    endpoint: str
    process: subprocess.Popen[bytes]

    def client(self, endpoint: str | None = None) -> Any:
        """A boto3 S3 client talking to this server (or to ``endpoint``, e.g. a proxy in front of it)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=endpoint or self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """Environment variables that point ``loaders.storage.s3`` at this server (or at ``endpoint``)."""
        return {
            "AWS_ENDPOINT_URL": endpoint or self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
        }


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """Start ``moto_server`` on a free 127.0.0.1 port for the whole session."""
    port = free_port()
    process = subprocess.Popen(
        [*_moto_server_command(), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(endpoint + "/", process=process, what="moto_server")
        # Drain the server's request log so a full pipe never blocks it.
        if process.stdout is not None:
            import threading

            threading.Thread(target=process.stdout.read, daemon=True).start()
        yield S3Server(endpoint=endpoint, process=process)
    finally:
        stop(process)


@dataclass
class S3Bucket:
    """A fresh bucket on the test server."""

    server: S3Server
    name: str

    @property
    def uri(self) -> str:
        """``s3://<bucket>``."""
        return f"s3://{self.name}"

    def put(self, key: str, data: bytes) -> str:
        """Upload ``data`` under ``key`` and return its ``s3://`` URI."""
        self.server.client().put_object(Bucket=self.name, Key=key, Body=data)
        return f"{self.uri}/{key}"

    def get(self, key: str) -> bytes:
        """The stored bytes of ``key``."""
        return self.server.client().get_object(Bucket=self.name, Key=key)["Body"].read()


@pytest.fixture
def s3_bucket(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, request: pytest.FixtureRequest) -> S3Bucket:
    """A new bucket; the environment points the read path at the server and the disk cache at ``tmp_path``.

    The bucket is named after the test, so object paths, and with them the
    faults a :class:`~tests.support.faultproxy.FaultProxy` draws for them,
    are the same on every run.
    """
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("BATCHSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    name = f"bucket-{hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:12]}"
    s3_server.client().create_bucket(Bucket=name)
    return S3Bucket(server=s3_server, name=name)


def env_for_subprocess(server: S3Server, **extra: str) -> dict[str, str]:
    """``os.environ`` plus the server's variables, for tests that start real processes."""
    return {**os.environ, **server.env(), **extra}
