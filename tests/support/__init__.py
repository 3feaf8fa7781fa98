"""Shared test support: read-path helpers and real servers on 127.0.0.1 (S3 API, fault-injecting proxy, nginx)."""

import pytest

# The server modules are loaded as pytest plugins and also imported by test modules: rewrite their asserts either way.
pytest.register_assert_rewrite("tests.support.s3server", "tests.support.nginx", "tests.support.faultproxy")
