"""The read path's error hierarchy: every failure names what failed and where."""

from __future__ import annotations


class BatchscopeError(Exception):
    """Base class of every error the read path raises on purpose.

    ``status`` is the HTTP status the inspector answers with; the message is
    written for a person and always names the dataset, version, shard, row,
    run, step or file involved.
    """

    status: int = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class NotFound(BatchscopeError):
    """Something named does not exist; the message says what does."""

    status = 404


class DatasetNotFound(NotFound):
    """No dataset of that name is registered in the catalog."""


class VersionNotFound(NotFound):
    """No version of the dataset matches the tag or id prefix."""


class DanglingTag(VersionNotFound):
    """A tag in ``refs.json`` points at a version id the dataset does not have (a missing or another dataset's id)."""


class SampleNotFound(NotFound):
    """No row of the version has that key."""


class RunNotFound(NotFound):
    """No run of that name exists in the catalog."""


class StepOutOfRange(NotFound):
    """The step is negative or beyond the run's last step."""


class RankOutOfRange(NotFound, ValueError):
    """The rank is not below the world size in force at that step (also a ``ValueError``: a bad argument)."""


class TokenizerNotFound(NotFound):
    """No tokenizer of that name is stored in the catalog."""


class AmbiguousVersion(BatchscopeError):
    """A version id prefix matches more than one version."""

    status = 400


class AmbiguousKey(BatchscopeError):
    """A key names several rows of a version registered before duplicate keys were refused."""

    status = 409


class InvalidName(BatchscopeError):
    """A dataset, tag or run name contains characters a catalog cannot store."""

    status = 422


class InvalidPlan(BatchscopeError):
    """A read plan option is out of range; the message names the value and the allowed range."""

    status = 422


class InvalidQuery(BatchscopeError):
    """A query of a data view names what the data does not have: an unknown sort or view, a column of another kind.

    The message names the value and what is allowed. The inspector's ``BadQuery`` (a bad request parameter) is one.
    """

    status = 422


class SqlRefused(BatchscopeError):
    """A SQL query or predicate that cannot run as written: a syntax error, an unknown table or column, a statement that
    is not a query (writes, settings, files, extensions), or a predicate that is not boolean. The message is one line
    naming what failed."""

    status = 400


class SqlStopped(SqlRefused):
    """A SQL query stopped by a limit: its time, its memory, or the size of its text; the message names the limit."""


class ExtraMissing(BatchscopeError):
    """A feature needs an optional package that is not installed; the message names the extra that installs it."""

    status = 424


class RegistrationError(BatchscopeError):
    """Files could not be registered (not Parquet, truncated, schema drift...)."""

    status = 422


class IntegrityError(BatchscopeError):
    """Stored bytes do not match what the manifest recorded."""

    status = 500


class ChecksumMismatch(IntegrityError):
    """A shard's bytes changed after registration."""


class CorruptData(IntegrityError):
    """A shard or a record cannot be decoded; the message names dataset, version, shard and row."""


class CatalogCorrupt(IntegrityError):
    """A catalog file (manifest, refs.json, tokenizer names, key index...) is unreadable or fails its check; names the file."""


class MediaChanged(ChecksumMismatch):
    """A media file stored by path beside a shard changed after registration."""


class DecodeError(BatchscopeError):
    """A value (image, video, chat) cannot be decoded or rendered; names the cause."""

    status = 422


class StateMismatch(BatchscopeError):
    """A reader state was saved under a different plan or run."""

    status = 409


class StorageError(BatchscopeError):
    """Storage kept failing after the retry budget was spent."""

    status = 503


class ReplayError(BatchscopeError):
    """A replayed run (another framework's read path, recomputed) cannot be attached or read as asked: a setting out of
    range, a step beyond the run, a world size its sampler cannot produce. The message names the setting and the value."""

    status = 422


class SettingMismatch(ReplayError):
    """A setting contradicts what the run or its data recorded (a fingerprint, a saved configuration); names the setting."""

    status = 409


class PinnedFileChanged(ReplayError):
    """A file a replayed run pinned when it was attached is missing, moved or changed since; names the file."""

    status = 409


class FrameworkMissing(ReplayError):
    """The framework a replay calls is not installed: one line naming what is missing and the pip extra that installs
    it (every replay raises it through :func:`loaders.replay.framework.missing_extra`)."""

    status = 424


class WhereUnsupported(ReplayError):
    """A run's read order cannot be inverted (where was a sample read); the message says why, in one line."""

    status = 422


class EngineError(BatchscopeError):
    """A scan engine could not run a scan: an unknown engine, a Ray cluster that cannot be reached, a worker that kept dying."""

    status = 503
