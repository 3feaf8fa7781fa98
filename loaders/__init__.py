"""batchscope's read path: catalog → plan → sampling → storage → decode → transforms → Batch.

>>> from loaders import Catalog
>>> catalog = Catalog("/tmp/batchscope-doc")                  # doctest: +SKIP
>>> version = catalog.register("web-text", ["a.parquet"], tag="v1")  # doctest: +SKIP
"""

from . import _moved
from .catalog.kinds import KINDS, infer_kind, infer_kinds
from .catalog.store import default_root
from .catalog.version import DatasetVersion
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
from .run.catalog import Catalog
from .run.facade import Run, Verification, WorldSizeSpan
from .sampling.batch import Address, Batch, Document, Sample
from .sampling.plan import ReadPlan, Shuffle, Source
from .training.ledger import Ledger, LedgerEntry
from .training.reader import Reader
from .transforms import ChatTemplate, Pack, RandomResizedCrop, SampleFrames, Tokenize, Transform, UserFunction, UseTokens

_moved.install()  # the old module paths (loaders.training.reader, loaders.sampling.plan...) stay importable

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
