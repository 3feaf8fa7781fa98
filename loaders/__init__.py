"""batchscope's read path: catalog → plan → sampling → storage → decode → transforms → Batch.

>>> from loaders import Catalog
>>> catalog = Catalog("/tmp/batchscope-doc")                  # doctest: +SKIP
>>> version = catalog.register("web-text", ["a.parquet"], tag="v1")  # doctest: +SKIP
"""

from .catalog import Catalog, default_root
from .errors import (
    AmbiguousVersion,
    BatchscopeError,
    ChecksumMismatch,
    CorruptData,
    DatasetNotFound,
    DecodeError,
    InvalidName,
    InvalidPlan,
    NotFound,
    RankOutOfRange,
    RegistrationError,
    RunNotFound,
    SampleNotFound,
    StateMismatch,
    StepOutOfRange,
    StorageError,
    TokenizerNotFound,
    VersionNotFound,
)
from .kinds import KINDS, infer_kind, infer_kinds
from .version import DatasetVersion

__all__ = [
    "AmbiguousVersion",
    "BatchscopeError",
    "Catalog",
    "ChecksumMismatch",
    "CorruptData",
    "DatasetNotFound",
    "DatasetVersion",
    "DecodeError",
    "InvalidName",
    "InvalidPlan",
    "KINDS",
    "NotFound",
    "RankOutOfRange",
    "RegistrationError",
    "RunNotFound",
    "SampleNotFound",
    "StateMismatch",
    "StepOutOfRange",
    "StorageError",
    "TokenizerNotFound",
    "VersionNotFound",
    "default_root",
    "infer_kind",
    "infer_kinds",
]
