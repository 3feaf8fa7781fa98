"""Every check, once: its name, family, severity, rule and thresholds, and the function that evaluates it.

``docs/lint.md`` lists the same table with the false-positive rate each rule measured on clean data.

>>> [c.name for c in CHECKS if c.family == "rl"]
['rl-nonfinite', 'rl-logprob-positive', 'rl-reward-range', 'rl-zero-variance']
>>> CHECK["repetition"].defaults()["min_repeats"]
32
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from .chats import chat_turns
from .media import media
from .rl import rollout_values
from .spec import Check, Param
from .steps import step_checks
from .tokens import empty_document, no_trained_token, repetition, unknown_tokens
from .trend import OUTLIER_K, OUTLIER_WINDOW, WARMUP_K

if TYPE_CHECKING:
    from .context import Context as ReadContext
    from .context import StepRead
    from .reads import SampleRead

CHECKS: tuple[Check, ...] = (
    Check(
        "empty-document",
        "tokens",
        "warning",
        "read",
        "a document whose text is empty or whitespace, or (without text) has fewer than min_tokens tokens",
        (Param("min_tokens", 1, "fewest tokens a document without text may have", minimum=0),),
    ),
    Check(
        "no-trained-token",
        "tokens",
        "error",
        "read",
        "a document read whole (of at least min_tokens tokens) none of whose tokens is trained, or a sample none of whose "
        "tokens (padding aside) is trained",
        (Param("min_tokens", 1, "shortest document judged", minimum=1),),
    ),
    Check(
        "chat-mask",
        "tokens",
        "error",
        "read",
        "a ChatML chat whose loss mask trains a system, user or tool turn, a header or the tokens after <|im_end|>, or "
        "misses assistant content or its <|im_end|>, in more than max_wrong tokens",
        (Param("max_wrong", 0, "wrongly masked tokens tolerated per document", minimum=0),),
    ),
    Check(
        "end-of-turn",
        "tokens",
        "warning",
        "read",
        "a ChatML chat with more than max_unclosed turns that have no <|im_end|> before the next turn or the chat's end",
        (Param("max_unclosed", 0, "turns without <|im_end|> tolerated per document", minimum=0),),
    ),
    Check(
        "repetition",
        "tokens",
        "warning",
        "read",
        "a piece of at least min_tokens tokens (words without tokens) repeating an n-gram of up to max_period tokens "
        "min_repeats times in a row, or with a token entropy below min_entropy bits",
        (
            Param("min_tokens", 64, "shortest piece judged", minimum=1),
            Param("max_period", 13, "longest repeated n-gram looked for", minimum=1, maximum=64),
            Param("min_repeats", 32, "back-to-back repeats that make a finding", minimum=2),
            Param("min_entropy", 2.0, "bits of token entropy below which a piece is repetitive", minimum=0),
        ),
    ),
    Check(
        "duplicate",
        "tokens",
        "warning",
        "run",
        "the same content (a hash of the content columns) read under more than max_keys keys in the run, or read more "
        "than max_per_step times in one step; every such read is a finding",
        (
            Param("max_keys", 1, "distinct keys one content may be read under", minimum=1),
            Param("max_per_step", 1, "reads of one content allowed in one step", minimum=1),
        ),
    ),
    Check(
        "length-outlier",
        "tokens",
        "info",
        "run",
        "a document whose log length (tokens, else characters) is more than k robust standard deviations from its "
        "source's median over the run (sources with at least min_reads reads)",
        (Param("k", 6.0, "robust standard deviations", minimum=0), Param("min_reads", 50, "fewest reads of a source judged", minimum=3)),
    ),
    Check(
        "unknown-tokens",
        "tokens",
        "warning",
        "read",
        "a piece whose share of the tokenizer's unknown token, or a text whose share of U+FFFD characters, is above max_share",
        (Param("max_share", 0.01, "largest tolerated share", minimum=0, maximum=1),),
    ),
    Check("decode-failure", "media", "error", "read", "a media value, or a batch, that cannot be decoded (the decoder's message)"),
    Check(
        "blank-image",
        "media",
        "warning",
        "read",
        "an image (the model's pixels, else the stored image) whose channels vary by at most min_std, or whose mean "
        "brightness is at most max_mean of 255",
        (
            Param("min_std", 1.0, "largest channel standard deviation of a constant image", minimum=0),
            Param("max_mean", 8.0, "brightest mean of a near-black image", minimum=0),
        ),
    ),
    Check(
        "frozen-video",
        "media",
        "warning",
        "read",
        "a video whose consecutive sampled frames (or frames decoded evenly) differ by at most max_diff per pixel",
        (
            Param("max_diff", 0.0, "mean absolute difference (0-255) of frames counted as the same", minimum=0),
            Param("frames", 4, "frames decoded evenly when no transform sampled them", minimum=2, maximum=64),
        ),
    ),
    Check(
        "silent-audio",
        "media",
        "warning",
        "read",
        "an audio clip whose peak level is at most max_dbfs",
        (Param("max_dbfs", -60.0, "loudest peak (dBFS) of a silent clip", maximum=0),),
    ),
    Check(
        "rl-nonfinite",
        "rl",
        "error",
        "read",
        "a rollout with more than max_entries NaN or infinite values among its reward, advantage, log-probabilities and "
        "reference log-probabilities (or an episode among its rewards)",
        (Param("max_entries", 0, "non-finite values tolerated per rollout or episode", minimum=0),),
    ),
    Check(
        "rl-logprob-positive",
        "rl",
        "error",
        "read",
        "a log-probability or reference log-probability above max_logprob",
        (Param("max_logprob", 1e-6, "largest log-probability tolerated (0 plus rounding)"),),
    ),
    Check(
        "rl-reward-range",
        "rl",
        "warning",
        "read",
        "a reward below min or above max (runs only when a bound is declared)",
        (Param("min", None, "lowest valid reward"), Param("max", None, "highest valid reward")),
    ),
    Check(
        "rl-zero-variance",
        "rl",
        "info",
        "run",
        "a group of which at least min_group rollouts were read (over all the steps linted), all with the same reward; every "
        "rollout read is a finding",
        (Param("min_group", 2, "fewest rollouts of a group judged", minimum=2),),
    ),
    Check(
        "mostly-padding",
        "steps",
        "warning",
        "step",
        "a step whose global batch is more than max_share padding",
        (Param("max_share", 0.5, "largest padding share", minimum=0, maximum=1),),
    ),
    Check(
        "mix-off-plan",
        "steps",
        "warning",
        "step",
        "a step whose count of some source (samples, sequences or documents) is more than z binomial standard deviations "
        "plus one from the plan's share",
        (Param("z", 4.0, "standard deviations", minimum=0),),
    ),
    Check(
        "loss-spike",
        "steps",
        "warning",
        "run",
        "a logged step whose loss is more than k robust standard deviations from the rolling median of window steps, "
        "after the warm-up (the run chart's outlier rule)",
        (
            Param("k", OUTLIER_K, "robust standard deviations", minimum=0),
            Param("window", OUTLIER_WINDOW, "logged steps of the rolling median", minimum=3),
            Param("warmup_k", WARMUP_K, "noise deviations that still count as warm-up", minimum=0),
        ),
    ),
)
CHECK: dict[str, Check] = {c.name: c for c in CHECKS}
if len(CHECK) != len(CHECKS):
    raise ValueError("a check is listed twice in CHECKS")

ReadEvaluator = Callable[["SampleRead", "ReadContext"], Iterator[tuple[str, Any, str]]]
StepEvaluator = Callable[["StepRead", "ReadContext"], Iterator[tuple[str, Any, Any, Any, str]]]
#: Functions judging one sample, the checks each reports, and what a sample must hold for it to apply: ``text`` (token
#: ids, or text or chat columns), ``ids`` (token ids), ``chat`` (token ids of a ChatML tokenizer), ``media`` or ``rl``
#: (rollout or episode columns).
READ_EVALUATORS: tuple[tuple[tuple[str, ...], ReadEvaluator, str], ...] = (
    (("empty-document",), empty_document, "text"),
    (("no-trained-token",), no_trained_token, "ids"),
    (("chat-mask", "end-of-turn"), chat_turns, "chat"),
    (("repetition",), repetition, "text"),
    (("unknown-tokens",), unknown_tokens, "text"),
    (("decode-failure", "blank-image", "frozen-video", "silent-audio"), media, "media"),
    (("rl-nonfinite", "rl-logprob-positive", "rl-reward-range"), rollout_values, "rl"),
)
#: Functions judging one step's global batch, and the checks each reports.
STEP_EVALUATORS: tuple[tuple[tuple[str, ...], StepEvaluator], ...] = ((("mostly-padding", "mix-off-plan"), step_checks),)


def _covered(evaluators: Iterable[tuple[Any, ...]]) -> set[str]:
    return {name for names, *_ in evaluators for name in names}


_RUN_WIDE = {c.name for c in CHECKS if c.scope == "run"}
if _covered(READ_EVALUATORS) | _covered(STEP_EVALUATORS) | _RUN_WIDE != set(CHECK):
    raise ValueError("every check needs exactly one way to be evaluated")
