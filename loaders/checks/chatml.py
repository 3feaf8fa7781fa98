"""ChatML turns in token ids: where each turn starts, its role, and what is wrong with its end-of-turn token and loss mask.

The read path's template (:mod:`loaders.transforms.chat`) writes a turn as ``<|im_start|>{role}\\n{content}<|im_end|>\\n``
and trains, for trained roles (``assistant``), the content and the closing ``<|im_end|>``, nothing else. The lint's
chat checks and the inspector's chat view both judge turns with :func:`turn_problems`.

>>> turn_problems("user", [1, 7, 8, 9, 2, 0], 0, 6, [0, 0, 1, 1, 0, 0], header=2, end_id=2)
['2 token(s) of a user turn are trained']
>>> turn_problems("assistant", [1, 7, 8, 9, 0], 0, 5, [0, 0, 1, 1, 0], header=2, end_id=2)
['no <|im_end|> closes this turn']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from ..transforms.chat import IM_END, IM_START, TRAINED_ROLES

if TYPE_CHECKING:
    from tokenizers import Tokenizer

#: Roles whose header a ChatML turn may start with (others are reported as unknown roles and their mask is not judged).
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class ChatTokens:
    """The ChatML facts of one tokenizer: the ids of ``<|im_start|>`` and ``<|im_end|>`` and the header of each role."""

    start: int
    end: int
    headers: tuple[tuple[str, tuple[int, ...]], ...]

    @classmethod
    def of(cls, tokenizer: "Tokenizer", roles: Sequence[str] = ROLES) -> "ChatTokens | None":
        """The facts of ``tokenizer``, or ``None`` when it lacks ``<|im_start|>`` or ``<|im_end|>`` (it writes no ChatML)."""
        start, end = tokenizer.token_to_id(IM_START), tokenizer.token_to_id(IM_END)
        if start is None or end is None:
            return None
        headers = tuple((role, tuple(tokenizer.encode(f"{role}\n", add_special_tokens=False).ids)) for role in roles)
        return cls(int(start), int(end), tuple(sorted(headers, key=lambda h: -len(h[1]))))

    def role_at(self, ids: Sequence[int], at: int) -> tuple[str | None, int]:
        """The role whose header follows the ``<|im_start|>`` at ``at``, and the header's length with that token (``None``
        and 1 when no known role's header follows)."""
        for role, header in self.headers:
            if tuple(ids[at + 1 : at + 1 + len(header)]) == header:
                return role, 1 + len(header)
        return None, 1


def turn_starts(ids: Sequence[int], start_id: int) -> list[int]:
    """Positions of ``<|im_start|>`` in ``ids``.

    >>> turn_starts([5, 1, 7, 1, 8], 1)
    [1, 3]
    """
    return [i for i, t in enumerate(ids) if t == start_id]


def missing_end(ids: Sequence[int], start: int, end: int, *, end_id: int) -> int | None:
    """The position of the ``<|im_end|>`` closing the turn ``ids[start:end]``, or ``None`` when none does.

    >>> missing_end([1, 7, 8, 2, 0], 0, 5, end_id=2)
    3
    """
    return next((i for i in range(start, end) if ids[i] == end_id), None)


def mask_errors(role: str, start: int, end: int, mask: Sequence[int], *, header: int, close: int | None) -> list[tuple[int, str]]:
    """What is wrong with the loss mask of the turn ``[start, end)`` of ``role`` whose ``<|im_end|>`` is at ``close``: a
    list of ``(tokens, sentence)``.

    A trained role's header and the tokens after its ``<|im_end|>`` are masked and its content and ``<|im_end|>``
    trained; no token of another role is trained.

    >>> mask_errors("assistant", 0, 5, [0, 1, 1, 1, 1], header=2, close=3)
    [(1, '1 header token(s) trained'), (1, '1 token(s) after <|im_end|> trained')]
    """
    errors: list[tuple[int, str]] = []
    head = min(end, start + header)
    stop = close + 1 if close is not None else end
    if close is None:  # no <|im_end|>: the masked separator after the last trained token is not content
        trained = [i for i in range(head, end) if mask[i]]
        stop = trained[-1] + 1 if trained else end
    if role in TRAINED_ROLES:
        header_trained = sum(1 for i in range(start, head) if mask[i])
        content_masked = sum(1 for i in range(head, stop) if not mask[i])
        after_trained = sum(1 for i in range(stop, end) if mask[i])
        if header_trained:
            errors.append((header_trained, f"{header_trained} header token(s) trained"))
        if content_masked:
            errors.append((content_masked, f"{content_masked} of {stop - head} {role} token(s) not trained"))
        if after_trained:
            errors.append((after_trained, f"{after_trained} token(s) after {IM_END} trained"))
    else:
        trained = sum(1 for i in range(start, end) if mask[i])
        if trained:
            errors.append((trained, f"{trained} token(s) of a {role} turn are trained"))
    return errors


def turn_problems(
    role: str, ids: Sequence[int], start: int, end: int, mask: Sequence[int] | None, *, header: int, end_id: int, cut: bool = False
) -> list[str]:
    """What is wrong with the turn ``ids[start:end]`` of ``role`` (header of ``header`` tokens, ``<|im_start|>`` included):
    a missing ``<|im_end|>`` (unless ``cut``: the ids end inside the turn), then :func:`mask_errors` when there is a mask."""
    close = missing_end(ids, start, end, end_id=end_id)
    problems = [f"no {IM_END} closes this turn"] if close is None and not cut else []
    return problems + ([text for _, text in mask_errors(role, start, end, mask, header=header, close=close)] if mask is not None else [])


def expected_mask(ids: Sequence[int], segments: Sequence[tuple[int, int]], headers: Sequence[tuple[str, int]], end_id: int) -> list[int]:
    """The loss mask the template gives ``ids`` cut into turn ``segments`` with their ``(role, header length)``.

    >>> expected_mask([1, 7, 8, 2, 0], [(0, 5)], [("assistant", 2)], 2)
    [0, 0, 1, 1, 0]
    """
    expected = [0] * len(ids)
    for (start, end), (role, header) in zip(segments, headers):
        if role not in TRAINED_ROLES:
            continue
        content = start + header
        close = next((i for i in range(content, end) if ids[i] == end_id), None)
        for i in range(content, close + 1 if close is not None else end):
            expected[i] = 1
    return expected


def mask_shift(expected: Sequence[int], actual: Sequence[int]) -> int | None:
    """+1 or -1 when ``actual`` is ``expected`` moved by one token, else ``None``.

    >>> mask_shift([0, 1, 1, 0], [0, 0, 1, 1])
    1
    """
    for delta in (1, -1):
        moved = [expected[i - delta] if 0 <= i - delta < len(expected) else 0 for i in range(len(expected))]
        if moved == list(actual):
            return delta
    return None
