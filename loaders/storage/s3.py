"""S3 configuration from the standard environment variables (``AWS_ENDPOINT_URL``, credentials, region)."""

from __future__ import annotations

import os
from functools import lru_cache

import pyarrow.fs as pafs


@lru_cache(maxsize=4)
def _cached(
    endpoint: str | None,
    region: str | None,
    key: str | None,
    secret: str | None,
    timeout: float = 30.0,
    pid: int = 0,
) -> pafs.S3FileSystem:
    options: dict[str, object] = {}
    if endpoint:
        scheme, _, rest = endpoint.partition("://")
        options["endpoint_override"] = rest or endpoint
        options["scheme"] = scheme if rest else "https"
    if region:
        options["region"] = region
    if key and secret:
        options["access_key"] = key
        options["secret_key"] = secret
    options["connect_timeout"] = min(timeout, 10.0)
    options["request_timeout"] = timeout
    # Retries are ours (loaders.storage.retry); keep the client's own to a minimum.
    options["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=1)
    return pafs.S3FileSystem(**options)


def s3_filesystem() -> pafs.S3FileSystem:
    """An S3 filesystem configured like the AWS CLI: ``AWS_ENDPOINT_URL``, ``AWS_REGION``, keys.

    ``BATCHSCOPE_REQUEST_TIMEOUT`` (seconds, default 30) bounds connecting (at
    most 10 s; pyarrow applies its read timeout on Windows and macOS only).
    One client per process: a forked child makes its own.
    """
    return _cached(
        os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
        os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
        os.environ.get("AWS_ACCESS_KEY_ID"),
        os.environ.get("AWS_SECRET_ACCESS_KEY"),
        float(os.environ.get("BATCHSCOPE_REQUEST_TIMEOUT") or 30),
        os.getpid(),
    )
