"""What killed writers leave in a catalog's ``data/`` folders, found and removed by any import or registration.

An import writes into ``data/<name>/.staging-<format>-<random>/`` and holds an
exclusive lock on ``<that directory>.lock`` while it runs (the kernel drops the
lock when the process dies, even by SIGKILL); ``register --exclude`` writes
``<copy>.<pid>.tmp`` files under ``data/<name>/excluded-*/``. ``sweep`` removes,
in every dataset's folder, the staging directories whose lock can be taken (or
which have no lock and were last touched ``STALE_SECONDS`` ago, as imports from
before locks left them) and the copies whose writer process no longer exists;
a staging area whose lock a live process holds is never touched.

>>> sweep("/nonexistent/catalog")
[]
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time

#: Staging directories are named ``.staging-<format>-<random>``, beside a ``.lock`` file their import holds.
STAGING_PREFIX = ".staging-"
#: A staging directory without a lock file (left by an older version) is stale after this long untouched.
STALE_SECONDS = 600


def claim(lock_path: str) -> int:
    """Create and hold the lock at ``lock_path`` (a staging area in use); returns its descriptor.

    A sweep that took the lock in the instant between creating the file and
    locking it unlinks the file before releasing it: the lock is then taken
    again on a fresh file, so a held lock always is the one on disk.
    """
    while True:
        handle = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            if os.fstat(handle).st_ino == os.stat(lock_path).st_ino:
                return handle
        except FileNotFoundError:
            pass
        os.close(handle)


def _remove_if_abandoned(path: str) -> bool:
    """Remove the staging directory ``path`` when no live process holds its lock; True when removed."""
    lock_path = path + ".lock"
    try:
        handle = os.open(lock_path, os.O_RDWR)
    except FileNotFoundError:
        with contextlib.suppress(OSError):
            if time.time() - os.stat(path).st_mtime > STALE_SECONDS:
                shutil.rmtree(path, ignore_errors=True)
                return True
        return False
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live import holds it
        shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.unlink(lock_path)  # while still locked: a claimant that opened it sees it gone and locks a new file
        return True
    finally:
        os.close(handle)


#: The journal a resumable import keeps in its staging directory (``loaders.importers.resume``).
RESUME_JOURNAL = "journal.json"


def remove_stale_staging(base: str, *, keep: str | None = None, keep_resumable: bool = False) -> list[str]:
    """Remove the abandoned staging directories (and their lock files) in ``base``; returns what was removed.

    ``keep`` (the name of the staging directory of the import about to run, which resumes it) is left; with
    ``keep_resumable``, so is every abandoned import that kept a journal: running that import again resumes it."""
    try:
        entries = os.listdir(base)
    except OSError:
        return []
    removed = []
    for entry in entries:
        if entry.startswith(STAGING_PREFIX):
            path = os.path.join(base, entry.removesuffix(".lock"))
            if entry.endswith(".lock") and os.path.exists(path):
                continue  # handled with its directory
            if entry.endswith(".lock"):
                _remove_lone_lock(os.path.join(base, entry))
            elif entry == keep or (keep_resumable and os.path.exists(os.path.join(path, RESUME_JOURNAL))):
                continue
            elif _remove_if_abandoned(path):
                removed.append(path)
    return removed


def _remove_lone_lock(lock_path: str) -> None:
    """A lock file whose directory is gone: removed unless a live process holds it (it may be about to create it)."""
    with contextlib.suppress(OSError):
        handle = os.open(lock_path, os.O_RDWR)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(lock_path)
        except BlockingIOError:
            pass
        finally:
            os.close(handle)


def remove_abandoned_copies(directory: str) -> list[str]:
    """Remove ``<copy>.<pid>.tmp`` files in ``directory`` whose writer process no longer exists; returns them."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.listdir(directory):
            parts = entry.rsplit(".", 2)
            if len(parts) != 3 or parts[2] != "tmp" or not parts[1].isdigit():
                continue
            try:
                os.kill(int(parts[1]), 0)
            except ProcessLookupError:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(directory, entry))
                    removed.append(os.path.join(directory, entry))
            except PermissionError:
                pass  # alive, owned by someone else
    return removed


def sweep(root: str) -> list[str]:
    """Remove what killed imports and exclusions left in every dataset's folder under ``root/data``; returns it.

    Imports that can resume (their staging keeps a journal of finished shards) are left for the same import to resume;
    the next import of their dataset removes them when it is another import."""
    data = os.path.join(root, "data")
    try:
        names = os.listdir(data)
    except OSError:
        return []
    removed = []
    for name in names:
        base = os.path.join(data, name)
        removed += remove_stale_staging(base, keep_resumable=True)
        with contextlib.suppress(OSError):
            for entry in os.listdir(base):
                if entry.startswith("excluded-"):
                    removed += remove_abandoned_copies(os.path.join(base, entry))
    return removed
