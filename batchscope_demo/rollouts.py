"""The demo's ``rl-rollouts`` dataset: GRPO-style groups of sampled answers to arithmetic prompts."""

from __future__ import annotations

import random
import re
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from loaders import Catalog

from .common import DemoChanges, register_pair
from .tokenizer import NAME as TOKENIZER
from .tokenizer import ensure_tokenizer

if TYPE_CHECKING:
    from tokenizers import Tokenizer

NAME = "rl-rollouts"
GROUPS = 150
#: Groups per RL step: ``step = group // GROUPS_PER_STEP``.
GROUPS_PER_STEP = 10
#: The sampler's length limit; longer completions stop with ``finish_reason="length"``.
MAX_COMPLETION_TOKENS = 48
#: Added to the group standard deviation when normalizing advantages.
ADVANTAGE_EPS = 1e-6
MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
ROLLOUT = pa.struct(
    [
        ("prompt", pa.string()),
        ("completion", pa.string()),
        ("prompt_ids", pa.list_(pa.int32())),
        ("completion_ids", pa.list_(pa.int32())),
        ("logprobs", pa.list_(pa.float32())),
        ("ref_logprobs", pa.list_(pa.float32())),
        ("reward", pa.float64()),
        ("advantage", pa.float64()),
        ("group_id", pa.string()),
        ("finish_reason", pa.string()),
        ("turns", pa.list_(MESSAGE)),
    ]
)
SCHEMA = pa.schema([("id", pa.string()), ("step", pa.int32()), ("rollout", ROLLOUT)])
PROMPT = re.compile(r"^What is (-?\d+) ([+\-×]) (-?\d+)\?$")


@dataclass(frozen=True)
class _Difficulty:
    name: str
    weight: float
    p_correct: float
    p_truncate: float


_DIFFICULTIES = (
    _Difficulty("trivial", 0.06, 1.00, 0.00),
    _Difficulty("easy", 0.27, 0.75, 0.04),
    _Difficulty("medium", 0.37, 0.60, 0.08),
    _Difficulty("hard", 0.22, 0.35, 0.12),
    _Difficulty("impossible", 0.08, 0.00, 0.15),
)


def answer_of(prompt: str) -> int:
    """The true answer of a demo prompt.

    >>> answer_of("What is 37 - 58?")
    -21
    """
    match = PROMPT.match(prompt)
    if match is None:
        raise ValueError(f"not a demo arithmetic prompt: {prompt!r}")
    a, op, b = int(match.group(1)), match.group(2), int(match.group(3))
    return a + b if op == "+" else a - b if op == "-" else a * b


def reward(prompt: str, completion: str, finish_reason: str, *, fixed: bool = True) -> float:
    """1.0 when the completion stopped and its last integer is the answer, else 0.0.

    ``fixed=False`` is v1's buggy reward: it read integers without their sign,
    so ``-21`` was read as ``21``.

    >>> reward("What is 3 - 5?", "The answer is -2.", "stop"), reward("What is 3 - 5?", "The answer is -2.", "stop", fixed=False)
    (1.0, 0.0)
    """
    numbers = re.findall(r"-?\d+" if fixed else r"\d+", completion)
    return 1.0 if finish_reason == "stop" and numbers and int(numbers[-1]) == answer_of(prompt) else 0.0


def advantages(rewards: list[float]) -> list[float]:
    """Group-normalized advantages: (reward − group mean) / (group sample std + 1e-6)."""
    mean = statistics.fmean(rewards)
    std = statistics.stdev(rewards) if len(rewards) > 1 else 0.0
    return [(r - mean) / (std + ADVANTAGE_EPS) for r in rewards]


def _prompt(difficulty: _Difficulty, rng: random.Random) -> str:
    if difficulty.name == "trivial":
        a, op, b = rng.randint(1, 9), "+", rng.randint(1, 9)
    elif difficulty.name == "easy":
        a, op, b = rng.randint(10, 99), "+", rng.randint(10, 99)
    elif difficulty.name == "medium":
        a, op, b = rng.randint(10, 99), "-", rng.randint(10, 99)
    elif difficulty.name == "hard":
        a, op, b = rng.randint(12, 99), "×", rng.randint(12, 99)
    else:
        a, op, b = rng.randint(123, 999), "×", rng.randint(123, 999)
    return f"What is {a} {op} {b}?"


def _wrong(truth: int, rng: random.Random) -> int:
    options = [truth + rng.choice((-10, -2, -1, 1, 2, 10)), -truth if truth else 1]
    text = str(abs(truth))
    if len(text) > 1 and text[-1] != text[-2]:
        swapped = int(text[:-2] + text[-1] + text[-2])
        options.append(-swapped if truth < 0 else swapped)
    return rng.choice(options)


def _sample(prompt: str, difficulty: _Difficulty, tools: bool, rng: random.Random, tokenizer: "Tokenizer") -> dict[str, Any]:
    """One completion from the demo 'policy': text, ids, finish reason, turns and log-probabilities."""
    match = PROMPT.match(prompt)
    assert match is not None
    expression = f"{match.group(1)} {match.group(2).replace('×', '*')} {match.group(3)}"
    truth = answer_of(prompt)
    turns = None
    if rng.random() < difficulty.p_truncate:
        thinking = f"Let me think step by step. I need to compute {expression} carefully, digit by digit. " * 6
        ids = tokenizer.encode(thinking, add_special_tokens=False).ids[:MAX_COMPLETION_TOKENS]
        completion, finish, confidence = tokenizer.decode(ids), "length", 1.5
    else:
        correct = rng.random() < (0.95 if tools else difficulty.p_correct)
        answer = truth if correct else _wrong(truth, rng)
        if tools:
            call = f"calculator({expression})"
            turns = [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": call},
                {"role": "tool", "content": str(truth)},
                {"role": "assistant", "content": f"The answer is {answer}."},
            ]
            completion = f"<tool_call>{call}</tool_call>\n<tool_result>{truth}</tool_result>\nThe answer is {answer}."
        else:
            completion = rng.choice(
                (
                    f"{expression} = {answer}. The answer is {answer}.",
                    f"First, {expression} is {answer}. So the answer is {answer}.",
                    f"The answer is {answer}.",
                    f"{answer}",
                )
            )
        ids = tokenizer.encode(completion, add_special_tokens=False).ids
        finish, confidence = "stop", 6.0 if correct else 2.5
    logprobs = [min(-1e-4, -rng.expovariate(confidence)) for _ in ids]
    ref = [min(-1e-4, lp + rng.gauss(0.0, 0.1)) for lp in logprobs]
    return {
        "prompt": prompt,
        "completion": completion,
        "prompt_ids": tokenizer.encode(prompt, add_special_tokens=False).ids,
        "completion_ids": ids,
        "logprobs": logprobs,
        "ref_logprobs": ref,
        "finish_reason": finish,
        "turns": turns,
    }


def _group(number: int, rng: random.Random, tokenizer: "Tokenizer") -> list[dict[str, Any]]:
    difficulty = rng.choices(_DIFFICULTIES, weights=[d.weight for d in _DIFFICULTIES])[0]
    prompt = _prompt(difficulty, rng)
    tools = rng.random() < 0.08
    size = rng.choice((4, 6, 8, 8))
    return [
        {**_sample(prompt, difficulty, tools and rng.random() < 0.5, rng, tokenizer), "group_id": f"g{number:03d}"} for _ in range(size)
    ]


def _table(groups: dict[int, list[dict[str, Any]]], *, fixed: bool) -> tuple[pa.Table, list[str]]:
    """Score every group with the v1 (``fixed=False``) or v2 reward; returns the table and its zero-variance groups."""
    rows, flat = [], []
    for number in sorted(groups):
        completions = groups[number]
        rewards = [reward(c["prompt"], c["completion"], c["finish_reason"], fixed=fixed) for c in completions]
        if len(set(rewards)) == 1:
            flat.append(f"g{number:03d}")
        for j, (completion, r, a) in enumerate(zip(completions, rewards, advantages(rewards))):
            rollout = {**completion, "reward": r, "advantage": a}
            rows.append({"id": f"g{number:03d}-{j}", "step": number // GROUPS_PER_STEP, "rollout": rollout})
    return pa.Table.from_pylist(rows, schema=SCHEMA), flat


def build(catalog: Catalog, *, seed: int) -> None:
    """Register ``rl-rollouts`` v1 and v2.

    v2 fixes v1's reward bug (signs of answers were ignored), so the rewards
    and advantages of every group touched by it change (edited); it also drops
    5 groups and adds 5 groups of a new step.
    """
    tokenizer = ensure_tokenizer(catalog)
    rng = random.Random(f"rl-rollouts/{seed}")
    extra = 5
    groups = {number: _group(number, rng, tokenizer) for number in range(GROUPS + extra)}
    dropped = set(rng.sample(range(GROUPS), extra))
    v1, flat_v1 = _table({n: g for n, g in groups.items() if n < GROUPS}, fixed=False)
    v2, flat_v2 = _table({n: g for n, g in groups.items() if n not in dropped}, fixed=True)
    changes = DemoChanges.between(
        v1.to_pylist(),
        v2.to_pylist(),
        notes={
            "reward": "1.0 when finish_reason is 'stop' and the last integer of the completion equals the answer, else 0.0",
            "reward_fix": "v1 read answers without their sign ('-21' as 21); v2 reads the sign",
            "advantage": "(reward - group mean) / (group sample standard deviation + 1e-6)",
            "max_completion_tokens": MAX_COMPLETION_TOKENS,
            "zero_variance_groups": {"v1": flat_v1, "v2": flat_v2},
        },
    )
    register_pair(catalog, NAME, v1, v2, changes, key="id", rows_per_shard=300, tokenizer=TOKENIZER)
