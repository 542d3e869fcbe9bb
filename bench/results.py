"""One row of ``make bench``'s closing table, and the table."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Result:
    name: str
    value: str
    target: str
    ok: bool


def report(results: list[Result]) -> int:
    """Print the table; 1 when any row missed its target."""
    missed = [r for r in results if not r.ok]
    for r in results:
        print(f"{'ok  ' if r.ok else 'MISS'} {r.name:<24} {r.value:>8}  target {r.target}")
    return 1 if missed else 0
