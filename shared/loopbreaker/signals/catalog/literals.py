"""The literals a regex's every match holds, read off Python's own regex parser (pure).

The classifier tests them before a pattern's regex (most lines hold none), and the sink
filters search for them: derived from each pattern here, never written by hand.
"""

from __future__ import annotations

import re

# The standard library's regex parser is the one complete reader of Python's regex
# syntax: private, so used in this module only; tests cover the opcodes read here.
import re._parser as _sre  # type: ignore[import-not-found]
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

#: The shortest literal a guard may be: shorter ones are in too many ordinary lines.
MIN_LITERAL = 4


def required_literals(pattern: str, ignore_case: bool = False) -> tuple[str, ...] | None:
    """Lower-case literals such that every match of ``pattern`` contains one of them,
    or None when some match need contain no literal of :data:`MIN_LITERAL` characters."""
    flags = re.IGNORECASE if ignore_case else 0
    found: list[str] = []
    # Each top-level alternative on its own: the parser would factor out a prefix they
    # share ("Bootstrap : x|Bootstrap Root : y"), leaving a guard every ordinary line of
    # that component holds.
    for alternative in _alternatives(pattern):
        part = _required(list(_parse(alternative, flags)))
        if part is None:
            return None
        found.extend(part)
    if not found or min(len(lit) for lit in found) < MIN_LITERAL:
        return None
    # A literal that contains another adds nothing: the shorter one is there whenever it is.
    kept = sorted({lit for lit in found if not any(o != lit and o in lit for o in found)})
    return tuple(kept)


_GLOBAL_FLAGS = re.compile(r"^\(\?[aiLmsux]+\)")


@lru_cache(maxsize=1024)
def _parse(pattern: str, flags: int) -> Any:
    """The parser's tree of a pattern: each pattern's is read three times (its required
    literals, its requirement sets, its leads), and every process that classifies reads
    the catalog at its start. The trees are only read, never changed."""
    return _sre.parse(pattern, flags)


def _alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of a pattern (``a|b(c|d)`` -> ``a``, ``b(c|d)``), each
    with the pattern's leading inline flags."""
    flags = _GLOBAL_FLAGS.match(pattern)
    head = flags.group(0) if flags else ""
    body = pattern[len(head) :]
    parts: list[str] = []
    depth, start, i, in_class = 0, 0, 0, False
    while i < len(body):
        char = body[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if body[i + 1 : i + 2] == "^":
                i += 1
            if body[i + 1 : i + 2] == "]":
                i += 1  # a "]" first in a class is a literal
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(body[start:i])
            start = i + 1
        i += 1
    parts.append(body[start:])
    return [head + part for part in parts]


# The standard library's regex parser (re._parser) is the one complete reader of Python's
# regex syntax: private, so used in this module only; tests cover the opcodes read here.
_C = _sre  # the parser re-exports the opcodes


_ZERO_WIDTH = {_C.AT, _C.ASSERT, _C.ASSERT_NOT}


def _required(items: Sequence[tuple[Any, Any]]) -> list[str] | None:
    """Alternatives of which every match of the sequence contains one, the best set."""
    best: list[str] | None = None
    for candidate in _needs(items):
        if best is None or _better(candidate, best):
            best = candidate
    return best


def _needs(items: Sequence[tuple[Any, Any]]) -> list[list[str]]:
    """Every set of alternatives of which each match of the sequence contains one."""
    found: list[list[str]] = []
    run: list[str] = []

    def close_run() -> None:
        if run:
            found.append(["".join(run)])
            run.clear()

    for op, av in items:
        if op is _C.LITERAL:
            char = chr(av)
            if char in '"\\':  # not in a quoted LQL string as it is: end the run
                close_run()
                continue
            run.append(char.lower())
            continue
        if op in _ZERO_WIDTH:
            continue
        close_run()
        if op is _C.SUBPATTERN:
            found.extend(_needs(list(av[-1])))
        elif op is _C.BRANCH:
            branches = [_required(list(b)) for b in av[1]]
            if all(b is not None for b in branches):
                found.append(sorted({lit for b in branches if b for lit in b}))
        elif op in (_C.MAX_REPEAT, _C.MIN_REPEAT, _C.POSSESSIVE_REPEAT) and av[0] >= 1:
            found.extend(_needs(list(av[2])))
        elif op is _C.ATOMIC_GROUP:
            found.extend(_needs(list(av)))
    close_run()
    return found


def with_guard(
    requirements: tuple[tuple[str, ...], ...], literals: tuple[str, ...] | None
) -> tuple[tuple[str, ...], ...]:
    """The requirements with the guard set among them: a line matches only if it holds
    one of the guard's literals, and the classifier tests that too."""
    if literals and literals not in requirements:
        return (*requirements, literals)
    return requirements


#: The widest prefix a search may back off over before a pattern's leading literal.
MAX_BACK_OFF = 64


def leading_literals(pattern: str, ignore_case: bool = False) -> tuple[tuple[str, int], ...]:
    """``(literal, back)`` pairs such that every match starts at most ``back`` characters
    before an occurrence of one of the lower-case literals (``back`` 0: it starts with
    it), or () when some alternative has no such literal: a search may then begin at the
    first occurrence, backed off, instead of at the start of the line."""
    flags = re.IGNORECASE if ignore_case else 0
    leads: set[tuple[str, int]] = set()
    for alternative in _alternatives(pattern):
        parsed = _parse(alternative, flags)
        found = _leads_of(list(parsed), parsed.state)
        if found is None:
            return ()
        leads.update(found)
    return tuple(sorted(leads))


def _leads_of(items: list[tuple[Any, Any]], state: Any) -> set[tuple[str, int]] | None:
    """The leads of a sequence: a group of alternatives it opens with (after zero-width
    items such as ``\\b``) is read alternative by alternative, each followed by the rest,
    so that ``(?:hardware error|machine check)...`` is searched at its two literals, not
    scanned from the start of the line."""
    start = 0
    while start < len(items) and items[start][0] in _ZERO_WIDTH:
        start += 1
    # Zero-width items keep their place: "\b(?:a|b)" is "\ba" or "\bb".
    head, rest = items[:start], items[start + 1 :]
    if start < len(items) and items[start][0] is _C.SUBPATTERN:
        # A capturing group (the parser flattens the others into their parent).
        return _leads_of([*head, *items[start][1][-1], *rest], state)
    if start < len(items) and items[start][0] is _C.BRANCH:
        leads: set[tuple[str, int]] = set()
        for branch in items[start][1][1]:
            found = _leads_of([*head, *branch, *rest], state)
            if found is None:
                return None
            leads.update(found)
        return leads
    lead = _lead(items, state)
    return None if lead is None else {lead}


def _lead(items: list[tuple[Any, Any]], state: Any) -> tuple[str, int] | None:
    """The first literal run of MIN_LITERAL+ characters at the top level, with the widest
    the items before it can be; None when that is unbounded or past MAX_BACK_OFF."""
    run: list[str] = []
    run_start = 0
    for index, (op, av) in enumerate(items):
        if op is _C.LITERAL and chr(av) not in '"\\':
            if not run:
                run_start = index
            run.append(chr(av).lower())
            if len(run) >= MIN_LITERAL:
                # Take the longest run from here (it is no weaker).
                end = index + 1
                while end < len(items) and items[end][0] is _C.LITERAL:
                    if chr(items[end][1]) in '"\\':
                        break
                    run.append(chr(items[end][1]).lower())
                    end += 1
                back = _sre.SubPattern(state, items[:run_start]).getwidth()[1] if run_start else 0
                return ("".join(run), back) if back <= MAX_BACK_OFF else None
            continue
        run = []
    return None


def required_sets(pattern: str, ignore_case: bool = False) -> tuple[tuple[str, ...], ...]:
    """Every set of literals of which each match holds one (all of them hold at once),
    of :data:`MIN_LITERAL` characters or more: the classifier tests them before the
    regex. A pattern of several top-level alternatives gives its one guard set."""
    alternatives = _alternatives(pattern)
    if len(alternatives) > 1:
        guard = required_literals(pattern, ignore_case)
        return (guard,) if guard else ()
    parsed = _parse(pattern, re.IGNORECASE if ignore_case else 0)
    return tuple(
        dict.fromkeys(
            tuple(sorted(set(n))) for n in _needs(list(parsed)) if min(map(len, n)) >= MIN_LITERAL
        )
    )


def _better(a: list[str], b: list[str]) -> bool:
    """Fewer, longer literals make a sharper guard."""
    return (min(map(len, a)) >= MIN_LITERAL, -len(a), min(map(len, a))) > (
        min(map(len, b)) >= MIN_LITERAL,
        -len(b),
        min(map(len, b)),
    )
