"""A run's logged metrics imported into its ledger (``--metrics FILE``): TensorBoard events, JSON lines, CSV, or the
``trainer_state.json`` a Hugging Face ``Trainer`` checkpoint keeps.

Every format gives points ``(step, rank, {name: value})``; names are kept as logged (``loss``, ``train/loss``...).
Numbers chart as curves; a list under ``sample_loss`` (one number per sample of that rank's batch) ranks the samples
of a step, and ``token_loss`` lists draw per-token heat, as for native runs. ``step_base`` is the number the log gives
the run's first step (1 for ``transformers.Trainer``, whose ``global_step`` counts optimizer steps done), so logged
step ``n`` is the run's step ``n - step_base``.

- **JSON lines** (``.jsonl``): ``{"step": 12, "loss": 2.31, "rank": 0, "sample_loss": [...]}`` per line
  (``rank`` optional, 0 by default);
- **CSV** (``.csv``): a header with a ``step`` column (and optionally ``rank``), one row per step;
- **Trainer state** (``trainer_state.json``): its ``log_history`` entries (the closing summary is left out);
- **TensorBoard**: an event file (``*tfevents*``) or a folder of them; every scalar tag.

>>> read_metrics_text('{"step": 1, "loss": 0.5}\\n', "log.jsonl", step_base=1)
[(0, 0, {'loss': 0.5})]
"""

from __future__ import annotations

import csv
import io
import json
import os
from typing import Any

from ..errors import ReplayError
from .tensorboard import scalar_events

#: ``(step, rank, values)``.
Point = tuple[int, int, dict[str, Any]]
#: ``trainer_state.json`` entries that summarize the whole training (left out: they are not a step's metrics).
_SUMMARY_KEYS = ("train_runtime", "train_samples_per_second", "total_flos")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _values(entry: dict[str, Any], where: str) -> dict[str, Any]:
    out = {}
    for name, value in entry.items():
        if name in ("step", "rank"):
            continue
        if _number(value) or (isinstance(value, list) and all(_number(v) or v is None or isinstance(v, list) for v in value)):
            out[name] = value
    return out


def _point(entry: Any, where: str, step_base: int) -> Point | None:
    if not isinstance(entry, dict):
        raise ReplayError(f"{where}: not a JSON object")
    step, rank = entry.get("step"), entry.get("rank", 0)
    if not isinstance(step, int) or isinstance(step, bool):
        raise ReplayError(f"{where}: 'step' is {step!r}, not an integer")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
        raise ReplayError(f"{where}: 'rank' is {rank!r}, not a rank")
    values = _values(entry, where)
    return (step - step_base, rank, values) if values else None


def _jsonl(text: str, where: str, step_base: int) -> list[Point]:
    points = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            raise ReplayError(f"{where}:{number}: not JSON: {line[:60]!r}") from None
        found = _point(entry, f"{where}:{number}", step_base)
        if found is not None:
            points.append(found)
    return points


def _trainer_state(data: Any, where: str, step_base: int) -> list[Point]:
    history = data.get("log_history") if isinstance(data, dict) else None
    if not isinstance(history, list):
        raise ReplayError(f"{where}: a trainer state holds a 'log_history' list")
    points = []
    for number, entry in enumerate(history):
        if isinstance(entry, dict) and any(k in entry for k in _SUMMARY_KEYS):
            continue
        found = _point(entry, f"{where} log_history[{number}]", step_base)
        if found is not None:
            points.append(found)
    return points


def _csv(text: str, where: str, step_base: int) -> list[Point]:
    rows = csv.DictReader(io.StringIO(text))
    if rows.fieldnames is None or "step" not in rows.fieldnames:
        raise ReplayError(f"{where}: a metrics CSV needs a 'step' column (columns: {', '.join(rows.fieldnames or [])})")
    points = []
    for number, row in enumerate(rows, start=2):
        entry: dict[str, Any] = {}
        for name, text_value in row.items():
            if text_value in (None, ""):
                continue
            try:
                value = float(text_value)
            except ValueError:
                raise ReplayError(f"{where}:{number}: {name} is {text_value!r}, not a number") from None
            entry[name] = int(value) if name in ("step", "rank") and value.is_integer() else value
        found = _point(entry, f"{where}:{number}", step_base)
        if found is not None:
            points.append(found)
    return points


def _tensorboard(paths: list[str], step_base: int) -> list[Point]:
    by_step: dict[int, dict[str, Any]] = {}
    for path in paths:
        with open(path, "rb") as f:
            for step, tag, value in scalar_events(f.read(), where=path):
                by_step.setdefault(step - step_base, {})[tag] = value
    return [(step, 0, values) for step, values in sorted(by_step.items())]


def read_metrics_text(text: str, where: str, *, step_base: int = 0) -> list[Point]:
    """Points of a text log named ``where`` (JSON lines, CSV or a trainer state, by its name and content)."""
    name = os.path.basename(where)
    if name.endswith(".csv"):
        return _csv(text, where, step_base)
    stripped = text.lstrip()
    if name.endswith(".json") or (stripped.startswith("{") and '"log_history"' in stripped[:4096]):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict) and "log_history" in data:
            return _trainer_state(data, where, step_base)
        if data is not None and not name.endswith(".jsonl"):
            raise ReplayError(f"{where}: a JSON metrics file is a trainer state with 'log_history' (or use JSON lines)")
    return _jsonl(text, where, step_base)


def read_metrics(path: str, *, step_base: int = 0) -> list[Point]:
    """Points of the metrics file or TensorBoard folder at ``path``."""
    if os.path.isdir(path):
        events = sorted(os.path.join(d, f) for d, _, files in os.walk(path) for f in files if "tfevents" in f)
        if not events:
            raise ReplayError(f"{path}: folder holds no TensorBoard event file (*tfevents*)")
        return _tensorboard(events, step_base)
    if not os.path.isfile(path):
        raise ReplayError(f"{path}: no such metrics file")
    if "tfevents" in os.path.basename(path):
        return _tensorboard([path], step_base)
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReplayError(f"{path}: not a text metrics file (JSON lines, CSV, trainer_state.json) nor a TensorBoard event file") from None
    return read_metrics_text(text, path, step_base=step_base)


def check_points(points: list[Point], *, where: str, steps: int, world_size: int, step_base: int) -> None:
    """Refuse a point outside the run, naming the file and the step or rank."""
    for step, rank, _ in points:
        if not 0 <= step < steps:
            raise ReplayError(
                f"{where}: logged step {step + step_base} is the run's step {step}, outside steps 0 to {steps - 1} "
                f"(--metrics-step-base {step_base} says the log numbers the first step {step_base})"
            )
        if rank >= world_size:
            raise ReplayError(f"{where}: rank {rank} logged at step {step + step_base}, but the run has {world_size} ranks")


def ledger_lines(points: list[Point], *, world_size: int) -> dict[int, str]:
    """The ledger files (``rank → text``) holding ``points`` as metrics records."""
    files: dict[int, list[str]] = {}
    for step, rank, values in points:
        record = {"t": "metrics", "step": step, "rank": rank, "world_size": world_size, "metrics": values}
        files.setdefault(rank, []).append(json.dumps(record) + "\n")
    return {rank: "".join(lines) for rank, lines in files.items()}
