"""Bounded numeric flag types: every numeric flag of every command states its range.

argparse prefixes the message with the flag (``argument --max-log-entries: ...``), so a
refusal names the flag, the value and the range on one line.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Bounded:
    """An argparse ``type=``: a number within ``[low, high]``; the bounds are public so
    the docs and tests can read them."""

    low: float
    high: float
    integer: bool
    what: str

    @property
    def range(self) -> str:
        return f"{self.low:g} to {self.high:g}"

    def __call__(self, text: str) -> int | float:
        value: int | float
        try:
            value = int(text) if self.integer else float(text)
        except ValueError:
            value = math.nan
        if math.isnan(value) or not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(
                f"must be a {self.what} from {self.range}, got {text!r}"
            )
        return value


def bounded_int(low: int, high: int, *, what: str = "whole number") -> Bounded:
    """A whole number from ``low`` to ``high`` inclusive."""
    return Bounded(low, high, True, what)


def bounded_float(low: float, high: float, *, what: str = "number") -> Bounded:
    """A finite number from ``low`` to ``high`` inclusive (nan and inf are refused)."""
    return Bounded(low, high, False, what)


#: Timeout of one live request, in seconds: ``--source-timeout``, ``--timeout``.
TIMEOUT_SECONDS = bounded_float(0.1, 600, what="positive number of seconds")
