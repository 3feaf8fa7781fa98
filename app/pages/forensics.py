"""Forensics of a step: per-sample token counts and padding, the per-sample values the trainer logged, and sort orders.

The ledger holds what the trainer chose to log with ``reader.log(step, ...)``.
Per-sample values are lists with one entry per sample of the rank's batch:

- ``sample_loss`` — one number per sample (ranks and sorts samples);
- ``token_loss`` or ``token_logprob`` — one list of per-token numbers per
  sample (drawn as heat on the token view).

>>> stats = token_stats({"input_ids": [5, 6, 0, 0], "loss_mask": [1, 1, 0, 0], "padding": 2})
>>> (stats.tokens, stats.trained, stats.padding)
(4, 2, 2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from loaders import Run, Sample

from .. import urls
from ..renderers.inputs import TokenValues
from .common import Link

#: Names of per-sample metrics that hold per-token values, in the order they are preferred.
TOKEN_VALUE_METRICS = ("token_loss", "token_logprob")
#: Metrics that are per-sample lists rather than one number for the rank.
PER_SAMPLE_METRICS = ("sample_loss", *TOKEN_VALUE_METRICS)
#: ``?sort=`` values of the step and step/rank pages, with their labels.
SORTS = {
    "position": "position",
    "loss": "loss (highest first)",
    "length": "length (most real tokens first)",
    "source": "source",
    "reward": "reward (highest first)",
    "advantage": "advantage (highest first)",
}
#: Orders offered only where samples carry a reward (rollouts; episodes, by their return).
RL_SORTS = ("reward", "advantage")
PADDING_SOURCE = "padding"
#: A sequence (or a rank's batch, or a whole step) whose padding is more than this share of its tokens carries a
#: "mostly padding" warning.
PADDING_WARN_SHARE = 0.5


@dataclass(frozen=True)
class TokenStats:
    """Tokens of one sample's ``input_ids``: how many, how many trained, how many are padding."""

    tokens: int
    trained: int
    padding: int

    @property
    def content(self) -> int:
        """Tokens that are not padding."""
        return self.tokens - self.padding


@dataclass(frozen=True)
class SampleStats(TokenStats):
    """A sample's token counts, and the reward and advantage of a rollout (an episode's return as its reward).

    A rollout's tokens are its prompt and completion tokens; the completion tokens are the trained ones (RL
    losses are taken over the completion, the prompt is context).
    """

    reward: float | None = None
    advantage: float | None = None


def sample_stats(run: Run, sample: Sample) -> SampleStats:
    """Token counts of a sample's ``input_ids``, else of its rollout; its reward and advantage when it has them."""
    from loaders.rl.episodes import episode_facts
    from loaders.rl.facts import rollout_facts

    tokens = token_stats(sample.inputs)
    kinds = run.version(sample.documents[0].source).kinds if sample.documents else {}
    for name, value in sample.inputs.items():
        try:
            if kinds.get(name) == "rollout":
                facts = rollout_facts(value)
                if "input_ids" not in sample.inputs:
                    prompt, completion = len(facts.prompt_ids or []), facts.length or 0
                    tokens = TokenStats(prompt + completion, completion, 0)
                return SampleStats(tokens.tokens, tokens.trained, tokens.padding, facts.reward, facts.advantage)
            if kinds.get(name) == "episode":
                return SampleStats(tokens.tokens, tokens.trained, tokens.padding, episode_facts(value, record=sample.record).total_return)
        except ValueError:  # not a rollout or episode after all: the field's own view says what is wrong
            continue
    return SampleStats(tokens.tokens, tokens.trained, tokens.padding)


def token_stats(inputs: dict[str, Any]) -> TokenStats:
    """Counts of a sample's model inputs (all zero for samples without ``input_ids``)."""
    ids = inputs.get("input_ids")
    if ids is None:
        return TokenStats(0, 0, 0)
    mask = inputs.get("loss_mask")
    padding = inputs.get("padding")
    padding = padding if isinstance(padding, int) and not isinstance(padding, bool) else 0
    trained = int(sum(1 for m in mask if m)) if mask is not None else len(ids)
    return TokenStats(len(ids), trained, min(max(0, padding), len(ids)))


def all_padding(sample: Sample) -> bool:
    """True for a packed sequence that holds no document at all (the block's documents ran out)."""
    spans = sample.inputs.get("doc_spans")
    return isinstance(spans, list) and not spans


def sample_documents(sample: Sample) -> list[Any]:
    """The documents whose tokens are in ``sample`` (none for an all-padding sequence)."""
    return [] if all_padding(sample) else list(sample.documents)


def source_label(sample: Sample) -> str:
    """The sample's source (``a+b`` when a packed sequence mixes sources, ``padding`` when it holds none)."""
    names = list(dict.fromkeys(d.source_name for d in sample_documents(sample)))
    return "+".join(names) if names else PADDING_SOURCE


def padding_warning(padding: int, count: int, *, what: str = "sequence") -> str | None:
    """The "mostly padding" warning when ``padding`` exceeds :data:`PADDING_WARN_SHARE` of ``count`` tokens, else ``None``.

    >>> padding_warning(200, 256)
    'mostly padding: 200 of 256 tokens of this sequence (78%) are padding'
    >>> padding_warning(128, 256) is None
    True
    """
    if count <= 0 or padding <= PADDING_WARN_SHARE * count:
        return None
    return f"mostly padding: {padding:,} of {count:,} tokens of this {what} ({padding / count:.0%}) are padding"


def sample_padding_warning(stats: TokenStats) -> str | None:
    """The warning of a sequence that is mostly padding."""
    return padding_warning(stats.padding, stats.tokens)


def step_padding_warning(stats: Sequence[TokenStats], *, what: str = "step") -> str | None:
    """The warning of a step (or one rank's ``batch``) whose tokens are mostly padding."""
    return padding_warning(sum(s.padding for s in stats), sum(s.tokens for s in stats), what=what)


@dataclass(frozen=True)
class Logged:
    """What the ledger holds about each sample of one rank's batch."""

    losses: list[float | None]
    token_values: list[TokenValues | None]

    @classmethod
    def of(cls, metrics: dict[str, Any], size: int) -> "Logged":
        """Per-sample values from a rank's metrics; lists of the wrong length are ignored (they cannot be matched)."""
        losses = metrics.get("sample_loss")
        per_sample = [_number(v) for v in losses] if isinstance(losses, list) and len(losses) == size else [None] * size
        values: list[TokenValues | None] = [None] * size
        for name in TOKEN_VALUE_METRICS:
            logged = metrics.get(name)
            if isinstance(logged, list) and len(logged) == size:
                values = [TokenValues(name, [_number(v) for v in row]) if isinstance(row, list) else None for row in logged]
                break
        return cls(per_sample, values)


def scalar_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """A rank's metrics without the per-sample lists (those are shown on each sample)."""
    return {k: v for k, v in metrics.items() if k not in PER_SAMPLE_METRICS}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if number == number and abs(number) != float("inf") else None


T = TypeVar("T")


def sort_links(url: str, current: str, *, rewards: bool = False) -> list[Link]:
    """One link per ``?sort=`` order of a page (the reward orders only when its samples have ``rewards``), the
    current one marked."""
    return [
        Link(label, urls.with_query(url, sort=name), "current" if name == current else None)
        for name, label in SORTS.items()
        if rewards or name not in RL_SORTS
    ]


def check_sort(sort: str | None, default: str) -> str:
    """``sort`` when it is one of :data:`SORTS`, else ``default``."""
    return sort if sort in SORTS else default


def sort_samples(
    items: list[T],
    sort: str,
    *,
    loss: Callable[[T], float | None],
    length: Callable[[T], int],
    source: Callable[[T], str],
    position: Callable[[T], tuple[int, ...]],
    reward: Callable[[T], float | None] = lambda item: None,
    advantage: Callable[[T], float | None] = lambda item: None,
) -> list[T]:
    """``items`` in the order ``sort`` names; ties (and samples without a loss, reward or advantage) keep the
    position order.

    >>> items = [(0, 1.0), (1, None), (2, 3.0)]
    >>> [i for i, _ in sort_samples(items, "loss", loss=lambda x: x[1], length=lambda x: 0,
    ...                             source=lambda x: "", position=lambda x: (x[0],))]
    [2, 0, 1]
    """
    by_position = sorted(items, key=position)
    numbers = {"loss": loss, "reward": reward, "advantage": advantage}
    if sort in numbers:
        value = numbers[sort]

        def key(item: T) -> tuple[bool, float]:
            number = value(item)
            known = number is not None and math.isfinite(number)
            return (not known, -number if known else 0.0)  # type: ignore[operator]

        return sorted(by_position, key=key)
    if sort == "length":
        return sorted(by_position, key=lambda x: -length(x))
    if sort == "source":
        return sorted(by_position, key=source)
    return by_position
