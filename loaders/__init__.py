"""batchscope's read path: catalog → plan → sampling → storage → decode → transforms → Batch.

>>> from loaders import Catalog
>>> catalog = Catalog("/tmp/batchscope-doc")                  # doctest: +SKIP
>>> version = catalog.register("web-text", ["a.parquet"], tag="v1")  # doctest: +SKIP
"""

from .catalog import Catalog, default_root
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
]

from .batch import Address, Batch, Document, Sample  # noqa: E402
from .ledger import Ledger, LedgerEntry  # noqa: E402
from .plan import ReadPlan, Shuffle, Source  # noqa: E402
from .reader import Reader  # noqa: E402
from .run import Run, Verification, WorldSizeSpan  # noqa: E402
from .transforms import (  # noqa: E402
    ChatTemplate,
    Pack,
    RandomResizedCrop,
    SampleFrames,
    Tokenize,
    Transform,
    UserFunction,
    UseTokens,
)

__all__ += [
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
