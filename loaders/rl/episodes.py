"""Facts of one environment episode as read (frames, actions, rewards, dones), with what is inconsistent in it.

An episode value is a struct of per-step lists (``frames``/``observations``,
``actions``, ``rewards``, ``dones``) or a list of per-step structs; ``frames[t]``
is the observation before ``actions[t]``. ``episode_facts`` reads either and
says what is inconsistent (list lengths, non-finite rewards, early dones, the
record's ``length``/``return`` columns disagreeing with the lists).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pyarrow as pa

from ..catalog.version import DatasetVersion
from ..errors import SampleNotFound
from .columns import episode_column
from .facts import as_float, finite, number_text

FRAME_FIELDS = ("frames", "frame", "observations", "observation", "obs", "images", "image", "pixels")
DONE_FIELDS = ("dones", "done", "terminals", "terminal", "terminated", "is_terminal")
MAX_LISTED = 5


def episode_fields(names: Sequence[str]) -> dict[str, str | None]:
    """Which field holds frames, actions, rewards and dones.

    >>> episode_fields(["obs", "action", "reward", "done"])
    {'frames': 'obs', 'actions': 'action', 'rewards': 'reward', 'dones': 'done'}
    """
    return {
        "frames": next((n for n in FRAME_FIELDS if n in names), None),
        "actions": next((n for n in names if "action" in n.lower()), None),
        "rewards": next((n for n in names if "reward" in n.lower()), None),
        "dones": next((n for n in DONE_FIELDS if n in names), None),
    }


def _steps_to_lists(value: Sequence[Any]) -> dict[str, list[Any]]:
    names: list[str] = []
    for step in value:
        if isinstance(step, Mapping):
            names.extend(n for n in step if n not in names)
    return {n: [s.get(n) if isinstance(s, Mapping) else None for s in value] for n in names}


@dataclass
class EpisodeFacts:
    """One episode as read: its per-step lists, returns, and a sentence for each inconsistency."""

    frames: list[Any]
    actions: list[Any]
    rewards: list[float | None]
    dones: list[Any]
    fields: dict[str, str | None]
    #: Steps on the timeline: the longest of the lists.
    length: int
    #: Cumulative return after each step over finite rewards (non-finite ones count as 0 and are reported).
    returns: list[float]
    total_return: float
    excluded: list[int] = field(default_factory=list)
    termination: str = ""
    warnings: list[str] = field(default_factory=list)

    def frame(self, t: int) -> Any:
        """The stored frame value at step ``t`` (``None`` when missing)."""
        return self.frames[t] if 0 <= t < len(self.frames) else None


def _steps_text(steps: list[int]) -> str:
    shown = ", ".join(str(s) for s in steps[:MAX_LISTED])
    return shown + (f" and {len(steps) - MAX_LISTED} more" if len(steps) > MAX_LISTED else "")


def episode_facts(value: Any, *, record: Mapping[str, Any] | None = None) -> EpisodeFacts:
    """Read and check an episode; ``record`` supplies the ``length``, ``return`` and ``termination`` columns beside it.

    >>> facts = episode_facts({"frames": [b"a", b"b"], "actions": [0, 1, 2], "rewards": [0.0, float("nan"), 1.0], "dones": [0, 0, 1]})
    >>> facts.length, facts.total_return, facts.warnings
    (3, 1.0, ['frames has 2 entries for 3 steps (a frame is missing)', 'reward is NaN at step 1 (excluded from the return)'])
    """
    if isinstance(value, (list, tuple)):
        value = _steps_to_lists(value)
    if not isinstance(value, Mapping):
        raise ValueError(f"expected an episode struct (a mapping of per-step lists), got {type(value).__name__}")
    names = episode_fields(list(value))
    lists: dict[str, list[Any]] = {}
    warnings: list[str] = []
    for role, name in names.items():
        raw = value.get(name) if name else None
        if raw is not None and not isinstance(raw, (list, tuple)):
            warnings.append(f"{name} is a {type(raw).__name__}, not a list")
            raw = None
        lists[role] = list(raw) if raw is not None else []
    length = max((len(v) for v in lists.values()), default=0)
    for role, name in names.items():
        count = len(lists[role])
        if name is None:
            if role in ("actions", "rewards"):
                warnings.append(f"no {role} field")
            continue
        if count != length:
            what = " (a frame is missing)" if role == "frames" and count < length else ""
            warnings.append(f"{name} has {count} entries for {length} steps{what}")
    rewards = [as_float(r) for r in lists["rewards"]]
    excluded = [t for t, r in enumerate(rewards) if not finite(r)]
    for t in excluded[:MAX_LISTED]:
        warnings.append(f"reward is {number_text(rewards[t])} at step {t} (excluded from the return)")
    if len(excluded) > MAX_LISTED:
        warnings.append(f"{len(excluded) - MAX_LISTED} more non-finite rewards excluded from the return")
    returns, total = [], 0.0
    for r in rewards:
        total += r if finite(r) else 0.0  # type: ignore[operator]
        returns.append(total)
    dones = lists["dones"]
    early = [t for t, d in enumerate(dones[:-1]) if d]
    if early:
        warnings.append(f"done at step(s) {_steps_text(early)} before the last step {len(dones) - 1}")
    termination = "done" if dones and dones[-1] else ("not done" if dones else "")
    if record is not None:
        stored_length = record.get("length")
        if isinstance(stored_length, int) and not isinstance(stored_length, bool) and stored_length != length:
            warnings.append(f"the length column says {stored_length}, the lists have {length} steps")
        stored_return = as_float(record.get("return"))
        if (
            stored_return is not None
            and not excluded
            and not (finite(stored_return) and math.isclose(stored_return, total, rel_tol=1e-4, abs_tol=1e-4))
        ):
            warnings.append(f"the return column says {number_text(stored_return)}, the rewards sum to {number_text(total)}")
        if isinstance(record.get("termination"), str):
            termination = record["termination"]
    return EpisodeFacts(
        frames=lists["frames"],
        actions=lists["actions"],
        rewards=rewards,
        dones=dones,
        fields=names,
        length=length,
        returns=returns,
        total_return=total,
        excluded=excluded,
        termination=termination,
        warnings=warnings,
    )


def episode_frame(version: DatasetVersion, key: str, *, column: str | None, t: int) -> bytes:
    """The stored bytes of frame ``t`` of an episode, sliced from the verified row group."""
    chosen = episode_column(version, column)
    shard, row = version.find(key)
    group, offset = version.row_group_of(shard, row)
    value = version.row_group(shard, group).column(chosen)[offset]
    where = f"{version.where(shard, row)} column {chosen!r}"
    if not value.is_valid:
        raise SampleNotFound(f"{where} holds no episode")
    if isinstance(value, pa.StructScalar):
        names = episode_fields([f.name for f in value.type])
        frames = value[names["frames"]] if names["frames"] else None
        frame = frames.values[t] if frames is not None and frames.is_valid and 0 <= t < len(frames) else None
    else:
        steps = value.values if value.is_valid else None
        names = episode_fields([f.name for f in value.type.value_type])
        frame = steps[t][names["frames"]] if steps is not None and names["frames"] and 0 <= t < len(steps) else None
    if frame is None or not frame.is_valid:
        raise SampleNotFound(f"{where} has no frame at step {t}")
    if isinstance(frame, pa.StructScalar):
        data = frame["bytes"].as_py() if "bytes" in [f.name for f in frame.type] else None
        if data is None:
            raise SampleNotFound(f"{where} frame {t} is stored by path, not inline; only inline frame bytes are served")
        return bytes(data)
    data = frame.as_py()
    if not isinstance(data, (bytes, bytearray)):
        raise SampleNotFound(f"{where} frame {t} is a {type(data).__name__}, not encoded image bytes")
    return bytes(data)
