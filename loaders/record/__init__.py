"""Recorded runs: ``batchscope.record`` writes, per (step, rank), what any loader yielded, and
:class:`~loaders.record.run.RecordedRun` shows it like any other run (imported on use by the run kinds table).

>>> from loaders.record import record, column
>>> callable(record) and column("id")([{"id": 1}])
['1']
"""

from .extract import column, samples
from .manifest import RecordRefused
from .recorder import Recorder, RecordOptions, record
from .writer import RecordWarning

__all__ = ["RecordOptions", "RecordRefused", "RecordWarning", "Recorder", "column", "record", "samples"]
