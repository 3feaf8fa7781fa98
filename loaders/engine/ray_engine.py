"""The ``ray`` engine: each task of a scan is a Ray Core task, on every machine of a Ray cluster.

It connects to the cluster ``$RAY_ADDRESS`` names (``host:port`` of the head,
or ``ray://host:10001`` through Ray Client), or starts a local Ray (with
``$BATCHSCOPE_RAY_CPUS`` CPUs, default all) when none is named; a process that
already called ``ray.init`` is used as it is. Every node must have batchscope
installed (the same version), with the ``ray`` extra: ``pip install
'batchscope[ray]'``.

A task whose worker dies (killed, out of memory, a lost node) is run again
by Ray, ``BATCHSCOPE_ENGINE_RETRIES`` times (default 3); then the scan stops
with one line naming the task's file. An address nobody answers at is refused
within ``BATCHSCOPE_RAY_CONNECT_TIMEOUT`` seconds (default 10).

>>> RayEngine.__name__  # doctest: +SKIP
'RayEngine'
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any, Callable, Iterator, Sequence, TypeVar

from ..errors import BatchscopeError, EngineError
from .base import Work
from .local import retries

T = TypeVar("T")
R = TypeVar("R")

#: Tasks in flight per CPU of the cluster (more for tasks that wait on the network).
_IN_FLIGHT_PER_CPU = 2
_IO_IN_FLIGHT_PER_CPU = 8


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise EngineError(f"the ray engine needs Ray, which is not installed ({exc}): pip install 'batchscope[ray]'") from exc
    return ray


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a cluster address (``host:port``, ``ray://host:port``); None for ``auto``/``local``."""
    text = address.strip()
    if text in ("auto", "local", ""):
        return None
    if "://" in text:
        text = text.split("://", 1)[1]
    text = text.split("/", 1)[0]
    host, sep, port = text.rpartition(":")
    if not sep:
        raise EngineError(f"cannot read the Ray cluster address {address!r}: expected host:port or ray://host:port")
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise EngineError(f"cannot read the Ray cluster address {address!r}: port {port!r} is not a number") from None


def _probe(address: str) -> None:
    """Refuse an address nobody answers at, quickly (Ray itself retries for minutes before giving up)."""
    found = _host_port(address)
    if found is None:
        return
    timeout = float(os.environ.get("BATCHSCOPE_RAY_CONNECT_TIMEOUT", "10"))
    try:
        with socket.create_connection(found, timeout=timeout):
            pass
    except OSError as exc:
        raise EngineError(
            f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}); start it (ray start --head) "
            "or unset RAY_ADDRESS to start a local Ray"
        ) from exc


def _call(fn: Callable[[Any], Any], item: Any) -> Any:
    """The Ray task: run one scan task on a worker."""
    return fn(item)


class RayEngine:
    """Ray Core tasks on the cluster ``$RAY_ADDRESS`` names, or on a local Ray started for this process."""

    name = "ray"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._remote: dict[str, Any] = {}
        self._connect()

    def __repr__(self) -> str:
        return f"RayEngine(address={self.address!r}, cpus={self.workers()})"

    def _connect(self) -> None:
        ray = _ray()
        self.address = os.environ.get("RAY_ADDRESS") or None
        if ray.is_initialized():
            return
        options: dict[str, Any] = {
            "include_dashboard": False,
            "logging_level": logging.WARNING,
            "log_to_driver": False,
            "configure_logging": True,
        }
        if self.address is None:
            cpus = os.environ.get("BATCHSCOPE_RAY_CPUS")
            if cpus:
                options["num_cpus"] = int(cpus)
        else:
            _probe(self.address)
        try:
            ray.init(address=self.address, **options)
        except BatchscopeError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever Ray raises, the answer is one line naming the cluster
            where = f"the Ray cluster at {self.address}" if self.address else "a local Ray"
            raise EngineError(f"cannot start or reach {where}: {type(exc).__name__}: {exc}") from exc

    def workers(self, work: Work = "cpu") -> int:
        """CPUs of the cluster (tasks of every kind take one CPU each)."""
        ray = _ray()
        try:
            return max(1, int(ray.cluster_resources().get("CPU", 1)))
        except Exception as exc:  # noqa: BLE001 - a cluster that went away
            raise EngineError(f"the Ray cluster at {self.address or 'this machine'} stopped answering: {exc}") from exc

    def _task(self) -> Any:
        ray = _ray()
        attempts = retries()
        with self._lock:
            remote = self._remote.get(str(attempts))
            if remote is None:
                remote = ray.remote(num_cpus=1, max_retries=attempts, retry_exceptions=False)(_call)
                self._remote[str(attempts)] = remote
            return remote

    def run(self, fn: Callable[[T], R], items: Sequence[T], *, labels: Sequence[str], work: Work = "cpu") -> Iterator[tuple[int, R]]:
        """Submit one Ray task per item (a bounded number in flight); yield ``(position, result)`` as they finish."""
        if len(labels) != len(items):
            raise ValueError(f"{len(items)} items but {len(labels)} labels")
        return self._run(fn, items, labels, work)

    def _run(self, fn: Callable[[T], R], items: Sequence[T], labels: Sequence[str], work: Work) -> Iterator[tuple[int, R]]:
        ray = _ray()
        if not items:
            return
        remote = self._task()
        function = ray.put(fn)
        window = self.workers() * (_IO_IN_FLIGHT_PER_CPU if work == "io" else _IN_FLIGHT_PER_CPU)
        pending: dict[Any, int] = {}
        upcoming = iter(range(len(items)))
        exhausted = False
        try:
            while True:
                while not exhausted and len(pending) < window:
                    position = next(upcoming, None)
                    if position is None:
                        exhausted = True
                        break
                    pending[remote.remote(function, items[position])] = position
                if not pending:
                    return
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    position = pending.pop(ref)
                    yield position, self._result(ray, ref, labels[position])
        finally:
            for ref in pending:
                try:
                    ray.cancel(ref, force=False)
                except Exception:  # noqa: BLE001, S110 - cancelling is a courtesy to the cluster
                    pass

    @staticmethod
    def _result(ray: Any, ref: Any, label: str) -> Any:
        """A finished task's result; its own error as it was raised, or one line naming ``label``."""
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None
            raise EngineError(f"{label}: the task failed on the Ray cluster: {exc}") from exc
        except ray.exceptions.RayError as exc:  # worker or node died after every retry, object lost...
            kind = type(exc).__name__
            raise EngineError(f"{label}: the Ray worker running it died {retries() + 1} times ({kind})") from exc
