"""The flags of ``batchscope attach FRAMEWORK RUN ...``: an argparse parser whose every error is one line.

Each framework parses its own flags (they are named and meant as the framework's own arguments), so the command line
passes them through untouched; a bad or missing flag is a :class:`~loaders.errors.ReplayError` naming it, which the
command prints as one line and exits 2 with.

>>> parser = Flags("hf")
>>> _ = parser.add_argument("--seed", type=int, required=True)
>>> parser.parse(["--seed", "7"]).seed
7
>>> parser.parse(["--seed", "x"])
Traceback (most recent call last):
...
loaders.errors.ReplayError: attach hf: argument --seed: invalid int value: 'x'
"""

from __future__ import annotations

import argparse
from typing import NoReturn, Sequence

from ..errors import ReplayError


class Flags(argparse.ArgumentParser):
    """A parser for one framework's attach flags."""

    def __init__(self, framework: str, description: str | None = None) -> None:
        super().__init__(prog=f"batchscope attach {framework} RUN", description=description, exit_on_error=False, allow_abbrev=False)
        self.framework = framework

    def error(self, message: str) -> NoReturn:
        raise ReplayError(f"attach {self.framework}: {message}")

    def parse(self, argv: Sequence[str]) -> argparse.Namespace:
        """The flags of ``argv``; unknown ones are refused, naming them."""
        try:
            namespace, extra = self.parse_known_args(list(argv))
        except argparse.ArgumentError as exc:
            self.error(str(exc))
        if extra:
            self.error(f"unrecognized arguments: {' '.join(extra)}")
        return namespace


def positive(text: str) -> int:
    """An integer >= 1 (argparse ``type``)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def natural(text: str) -> int:
    """An integer >= 0 (argparse ``type``)."""
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value
