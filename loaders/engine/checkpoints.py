"""The staging area of a long scan: the results of its finished tasks, so a scan interrupted at 90 % resumes at 90 %.

A scan (registering files, importing them) owns one job directory,
``<area>/<job>/``, and holds a lock on ``<area>/<job>.lock`` while it runs (the
kernel releases it when the process dies, even by SIGKILL). Each finished task
leaves one entry: its key (a file's URI), the identity of its input when it
was read (size, modification time...), and its result's bytes with their
sha256. A later run of the same job takes an entry only when its input still
has that identity and the bytes still hash to their digest; anything else is
discarded and the task runs again. When the scan's result is published the
job directory is removed; jobs that died are removed by the next scan that
opens the area.

>>> import tempfile
>>> area = tempfile.mkdtemp()
>>> with Checkpoints.open(area, "job") as staged:
...     staged.put("a.parquet", "12:34", b"result")
...     staged.get("a.parquet", "12:34"), staged.get("a.parquet", "12:99")
(b'result', None)
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import uuid
from typing import Iterator

from ..errors import BatchscopeError

_SUFFIX = ".entry"


def _entry_name(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:32] + _SUFFIX


class Checkpoints:
    """One job's finished tasks (see the module's docstring); made with :meth:`open`."""

    def __init__(self, area: str, job: str, handle: int) -> None:
        self.area = area
        self.job = job
        self.directory = os.path.join(area, job)
        self._handle: int | None = handle
        #: Entries taken from an earlier run of this job, and entries discarded as stale.
        self.reused = 0
        self.discarded = 0

    @classmethod
    @contextlib.contextmanager
    def open(cls, area: str, job: str) -> Iterator["Checkpoints"]:
        """Claim job ``job`` in ``area`` (removing the jobs that died there) for the duration of the block."""
        os.makedirs(area, exist_ok=True)
        remove_abandoned(area, keep=job)
        handle = os.open(os.path.join(area, job + ".lock"), os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            raise BatchscopeError(
                f"the same scan is already running in another process (its staging area {os.path.join(area, job)} is locked)"
            ) from None
        staged = cls(area, job, handle)
        os.makedirs(staged.directory, exist_ok=True)
        try:
            yield staged
        finally:
            staged._release()

    def identity(self, key: str) -> str | None:
        """The identity of ``key``'s input when its result was kept (None when nothing is kept for it)."""
        try:
            with open(os.path.join(self.directory, _entry_name(key)), "rb") as handle:
                header = json.loads(handle.readline())
        except (OSError, ValueError):
            return None
        found = header.get("identity") if isinstance(header, dict) and header.get("key") == key else None
        return found if isinstance(found, str) else None

    def get(self, key: str, identity: str) -> bytes | None:
        """The result stored for ``key`` when its input still has ``identity`` and its bytes are intact; else None."""
        path = os.path.join(self.directory, _entry_name(key))
        try:
            with open(path, "rb") as handle:
                header = json.loads(handle.readline())
                payload = handle.read()
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            header, payload = {}, b""
        if (
            isinstance(header, dict)
            and header.get("key") == key
            and header.get("identity") == identity
            and header.get("sha256") == hashlib.sha256(payload).hexdigest()
        ):
            self.reused += 1
            return payload
        self.discarded += 1
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None

    def put(self, key: str, identity: str, payload: bytes) -> None:
        """Keep the result of a finished task (written atomically; a full disk only loses the checkpoint)."""
        header = json.dumps({"key": key, "identity": identity, "sha256": hashlib.sha256(payload).hexdigest()}).encode()
        path = os.path.join(self.directory, _entry_name(key))
        temporary = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            with open(temporary, "wb") as handle:
                handle.write(header + b"\n" + payload)
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)

    def finish(self) -> None:
        """The scan's result is published: its staging area is no longer needed."""
        shutil.rmtree(self.directory, ignore_errors=True)
        self._release()

    def _release(self) -> None:
        if self._handle is None:
            return
        if not os.path.isdir(self.directory):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.area, self.job + ".lock"))
        os.close(self._handle)
        self._handle = None
        with contextlib.suppress(OSError):
            os.rmdir(self.area)  # only when no other job is staged there


def remove_abandoned(area: str, *, keep: str | None = None) -> list[str]:
    """Remove the job directories in ``area`` whose scan is not running (its lock is free); returns them. ``keep`` is left."""
    removed: list[str] = []
    try:
        entries = sorted(os.listdir(area))
    except OSError:
        return removed
    for entry in entries:
        if entry.endswith(".lock") or entry == keep or not os.path.isdir(os.path.join(area, entry)):
            continue
        lock = os.path.join(area, entry + ".lock")
        try:
            handle = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
        except OSError:
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            continue  # a live scan
        try:
            shutil.rmtree(os.path.join(area, entry), ignore_errors=True)
            with contextlib.suppress(OSError):
                os.unlink(lock)
            removed.append(entry)
        finally:
            os.close(handle)
    return removed
