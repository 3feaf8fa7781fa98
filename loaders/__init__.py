"""batchscope's read path: catalog → plan → sampling → storage → decode → transforms → Batch.

>>> from loaders import Catalog
>>> catalog = Catalog("/tmp/batchscope-doc")                  # doctest: +SKIP
>>> version = catalog.register("web-text", ["a.parquet"], tag="v1")  # doctest: +SKIP
"""

from .batch import Address, Batch, Document, Sample
from .catalog import default_root
from .errors import (
    AmbiguousKey,
    AmbiguousVersion,
    BatchscopeError,
    CatalogCorrupt,
    ChecksumMismatch,
    CorruptData,
    DatasetNotFound,
    DecodeError,
    InvalidName,
    InvalidPlan,
    InvalidQuery,
    MediaChanged,
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
from .ledger import Ledger, LedgerEntry
from .plan import ReadPlan, Shuffle, Source
from .reader import Reader
from .run import Run, Verification, WorldSizeSpan
from .run_catalog import Catalog
from .transforms import ChatTemplate, Pack, RandomResizedCrop, SampleFrames, Tokenize, Transform, UserFunction, UseTokens
from .version import DatasetVersion

__all__ = [
    "AmbiguousKey",
    "AmbiguousVersion",
    "BatchscopeError",
    "Catalog",
    "CatalogCorrupt",
    "ChecksumMismatch",
    "CorruptData",
    "DatasetNotFound",
    "DatasetVersion",
    "DecodeError",
    "InvalidName",
    "InvalidPlan",
    "InvalidQuery",
    "KINDS",
    "MediaChanged",
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
    "Address",
    "Batch",
    "ChatTemplate",
    "Document",
    "Ledger",
    "LedgerEntry",
    "Pack",
    "RandomResizedCrop",
    "ReadPlan",
    "Reader",
    "Run",
    "Sample",
    "SampleFrames",
    "Shuffle",
    "Source",
    "Tokenize",
    "Transform",
    "UseTokens",
    "UserFunction",
    "Verification",
    "WorldSizeSpan",
]
