"""Inspector settings: one frozen dataclass, each field with a default and a line of help, read from ``BATCHSCOPE_*``."""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from loaders.catalog.store import DEFAULT_ROOT
from loaders.errors import BatchscopeError
from loaders.query.limits import QueryLimits

ENV_PREFIX = "BATCHSCOPE_"


class InvalidSetting(BatchscopeError):
    """A setting (or its environment variable) has a value outside its allowed range."""

    status = 422


def _setting(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Settings:
    """Everything the inspector can be configured with.

    >>> Settings(root="/tmp/catalog").port
    8000
    >>> Settings.from_env(port=9000).port
    9000
    """

    root: str = _setting(DEFAULT_ROOT, "Catalog root: a local directory or a pyarrow filesystem URI such as s3://bucket/prefix.")
    host: str = _setting("127.0.0.1", "Interface to bind; 127.0.0.1 keeps the inspector on this machine.")
    port: int = _setting(8000, "TCP port to listen on.")
    token: Optional[str] = _setting(
        None, "Access token; when set every page but static files needs it (Bearer header, or the cookie the login page sets)."
    )
    base_url: str = _setting(
        "",
        "URL every link the commands print starts with (a proxy's, say); empty means the address batchscope serve "
        "recorded in the catalog root while it runs, else http://HOST:PORT.",
    )
    page_size: int = _setting(50, "Rows per page of a dataset listing and of search results.")
    search_seconds: float = _setting(2.0, "Time budget of one search page; a page that runs out links to where the scan stopped.")
    text_collapse_chars: int = _setting(2000, "Text longer than this many characters is collapsed, with a link to expand it.")
    field_bytes: int = _setting(
        1 << 20,
        "Field values larger than this (characters of a text, items of a list) are cut in pages and JSON twins, with a "
        "link to the whole value (served with Range), so no answer holds a huge value whole.",
    )
    token_fragment_threshold: int = _setting(
        1024, "Token sequences longer than this load as a fragment when scrolled into view instead of with the page."
    )
    row_group_cache_bytes: int = _setting(1 << 30, "Byte budget of the process-wide cache of decoded, verified row groups.")
    media_cache_bytes: int = _setting(256 << 20, "Byte budget of the in-process cache of made thumbnails and decoded video frames.")
    diff_similarity: float = _setting(
        0.8, "Similarity (0-1) above which a removed and an added keyless row count as one edited row in a version diff."
    )
    flags_path: str = _setting("", "SQLite file holding flags; empty means inspector.sqlite in the catalog root.")
    workers: int = _setting(
        0,
        "Server processes answering requests in parallel, each with its own caches; 0 means one per core (at most 8), "
        "which a busy shared inspector needs.",
    )
    allowed_hosts: str = _setting(
        "",
        "Comma-separated host names the server answers to (Host header, any port; * for any); empty means the bind address, "
        "localhost, 127.0.0.1 and ::1. Other names are refused, so DNS rebinding cannot reach the inspector.",
    )
    header_timeout: float = _setting(
        10.0, "Seconds a client has to send a request line and headers (from connecting, or from a kept-alive request's first byte)."
    )
    request_memory_bytes: int = _setting(
        512 << 20,
        "Memory one request may decode into (an image's pixels, a page of rows); beyond it the request is refused with 413.",
    )
    decode_concurrency: int = _setting(
        2,
        "Slots per process for costly work besides the request slots: decodes over 1/8 of request_memory_bytes, ?against= "
        "comparisons, searches, diffs; one per client connection, each client within its share; others wait, holding no request slot.",
    )
    request_threads: int = _setting(
        2,
        "Requests one server process works on at once; the rest wait in order of arrival, behind them any client (by "
        "address, then connection) that used over four times its share lately. Pages are CPU-bound Python: a few at a time finish in turn, where many "
        "sharing the interpreter each take as long as all of them. Raise it for a catalog on remote storage, where requests "
        "mostly wait for the network.",
    )
    session_seconds: int = _setting(
        7 * 24 * 3600,
        "Seconds a login lasts: the login page's cookie holds an expiring value derived from the token (never the token), "
        "so it ends then, and changing the token ends every session at once.",
    )
    sql_seconds: float = _setting(10.0, "Time one SQL query (a SQL page, find, column statistics) may run before it is stopped.")
    sql_memory_bytes: int = _setting(
        1 << 30, "Memory DuckDB may hold for SQL queries, shared by those running at once in one process; a query needing more is stopped."
    )
    sql_rows: int = _setting(10_000, "Most rows a SQL query returns (a page shows them in pages; CSV and JSON exports hold them all).")
    form_secret: str = _setting(
        "", "Secret behind the anti-forgery token of forms; empty means a random one each time the server starts (shared by its workers)."
    )

    def __post_init__(self) -> None:
        checks = {
            "port": 0 <= self.port <= 65535,
            "page_size": 1 <= self.page_size <= 10_000,
            "workers": 0 <= self.workers <= 64,
            "header_timeout": 0 < self.header_timeout <= 3600,
            "request_memory_bytes": self.request_memory_bytes >= 1 << 20,
            "decode_concurrency": 1 <= self.decode_concurrency <= 64,
            "request_threads": 1 <= self.request_threads <= 256,
            "search_seconds": self.search_seconds >= 0,
            "text_collapse_chars": self.text_collapse_chars >= 1,
            "field_bytes": self.field_bytes >= 1024,
            "token_fragment_threshold": self.token_fragment_threshold >= 1,
            "row_group_cache_bytes": self.row_group_cache_bytes >= 0,
            "media_cache_bytes": self.media_cache_bytes >= 0,
            "diff_similarity": 0.0 <= self.diff_similarity <= 1.0,
            "session_seconds": 60 <= self.session_seconds <= 366 * 24 * 3600,
            "sql_seconds": 0 < self.sql_seconds <= 86_400,
            "sql_memory_bytes": self.sql_memory_bytes >= 16 << 20,
            "sql_rows": 1 <= self.sql_rows <= 10_000_000,
        }
        for name, ok in checks.items():
            if not ok:
                raise InvalidSetting(f"setting {name} ({env_name(name)}) = {getattr(self, name)!r} is out of range: {_RANGES[name]}")
        if not self.root:
            raise InvalidSetting(f"setting root ({env_name('root')}) must not be empty")
        if self.base_url and not re.match(r"^https?://[^\s/?#]+(/[^\s?#]*)?$", self.base_url):
            raise InvalidSetting(f"setting base_url ({env_name('base_url')}) = {self.base_url!r} is not an http(s) URL without query")

    @classmethod
    def from_env(cls, environ: typing.Mapping[str, str] | None = None, **overrides: Any) -> "Settings":
        """Defaults, then ``BATCHSCOPE_<NAME>`` environment variables, then ``overrides`` (``None`` values ignored)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for spec in specs():
            raw = env.get(spec.env)
            if raw is not None and raw != "":
                values[spec.name] = spec.parse(raw)
        unknown = set(overrides) - {s.name for s in specs()}
        if unknown:
            raise InvalidSetting(f"unknown setting(s) {', '.join(sorted(unknown))}; known: {', '.join(s.name for s in specs())}")
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """These settings as ``BATCHSCOPE_<NAME>`` variables (how worker processes receive them)."""
        return {spec.env: str(getattr(self, spec.name)) for spec in specs() if getattr(self, spec.name) is not None}

    def query_limits(self) -> QueryLimits:
        """The limits SQL queries run under (``sql_seconds``, ``sql_memory_bytes``, ``sql_rows``)."""
        return QueryLimits(seconds=self.sql_seconds, memory_bytes=self.sql_memory_bytes, max_rows=self.sql_rows)

    @property
    def processes(self) -> int:
        """How many server processes ``workers`` asks for (``0``: one per core, at most 8)."""
        return self.workers or max(1, min(os.cpu_count() or 1, 8))

    def with_form_secret(self) -> "Settings":
        """These settings, with a random ``form_secret`` when none is set (the server then passes it to its workers)."""
        return self if self.form_secret else dataclasses.replace(self, form_secret=secrets.token_hex(32))

    def host_names(self) -> frozenset[str]:
        """The ``Host`` names this server answers to, lower case (``*`` in it: any)."""
        given = {name.strip().lower().strip("[]") for name in self.allowed_hosts.split(",") if name.strip()}
        return frozenset(given or {self.host.lower().strip("[]"), "localhost", "127.0.0.1", "::1"})

    @property
    def url(self) -> str:
        """The address links to this server start with: ``base_url`` when set, else ``http://HOST:PORT`` as a browser on
        this machine opens it (a server bound to every interface, ``0.0.0.0``, is reached at ``127.0.0.1``).

        >>> Settings(host="0.0.0.0", port=8765).url, Settings(base_url="https://scope.example/team").url
        ('http://127.0.0.1:8765', 'https://scope.example/team')
        """
        from .listen import listening_url

        return self.base_url.rstrip("/") if self.base_url else listening_url(self.host, self.port)


_RANGES = {
    "port": "0-65535",
    "page_size": "1-10000",
    "search_seconds": ">= 0",
    "text_collapse_chars": ">= 1",
    "field_bytes": ">= 1024",
    "token_fragment_threshold": ">= 1",
    "row_group_cache_bytes": ">= 0",
    "media_cache_bytes": ">= 0",
    "diff_similarity": "0.0-1.0",
    "workers": "0-64 (0: one per core)",
    "header_timeout": "> 0 and <= 3600",
    "request_memory_bytes": ">= 1048576",
    "decode_concurrency": "1-64",
    "request_threads": "1-256",
    "session_seconds": "60-31622400 (a minute to a year)",
    "sql_seconds": "> 0 and <= 86400",
    "sql_memory_bytes": ">= 16777216",
    "sql_rows": "1-10000000",
}


def env_name(name: str) -> str:
    """The environment variable of a setting: ``page_size`` → ``BATCHSCOPE_PAGE_SIZE``."""
    return ENV_PREFIX + name.upper()


@dataclass(frozen=True)
class SettingSpec:
    """One setting as documented: name, environment variable, type, default and help."""

    name: str
    env: str
    type: type
    default: Any
    help: str

    def parse(self, raw: str) -> Any:
        """Parse an environment value, naming the variable when it is not of the setting's type."""
        try:
            return self.type(raw)
        except ValueError:
            raise InvalidSetting(f"{self.env}={raw!r} is not a valid {self.type.__name__}") from None


def _base_type(annotation: Any) -> type:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = args[0]
    return annotation


def specs() -> Iterator[SettingSpec]:
    """Every setting, in declaration order (drives ``--help``, the docs and the docs test)."""
    hints = typing.get_type_hints(Settings)
    for f in dataclasses.fields(Settings):
        yield SettingSpec(f.name, env_name(f.name), _base_type(hints[f.name]), f.default, f.metadata["help"])
