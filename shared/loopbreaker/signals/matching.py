"""The catalog's text signatures, compiled for the per-line hot path (pure).

Most lines of a training job's logs match nothing. A line is first searched for the
literals derived from every pattern, all at once (:class:`LiteralScan`); only a line
holding one is searched further, signature by signature in catalog order, and only the
signatures whose literals it holds. ``tests/signals/test_functions_hot_path.py`` checks
that the shortcuts change no classification.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any, NamedTuple

from loopbreaker.model import SignalKind
from loopbreaker.signals import catalog, xid
from loopbreaker.signals.catalog import Signature

#: How each named group of a pattern is written into the signal's reason.
_DETAIL_LABELS = {
    "asked": "asked",
    "free": "free",
    "in_use": "in use",
    "total": "total",
    "memory_space": "memory space",
    "device": "device",
    "rank": "rank",
    "exit_code": "exit code",
    "signal": "signal",
}
_RANK_PREFIX = re.compile(r"\[rank(\d+)\]:")
_XID_KINDS = {
    xid.XidClass.HARDWARE: SignalKind.HARDWARE_FAILURE,
    xid.XidClass.APPLICATION: SignalKind.GPU_APPLICATION_ERROR,
}


class TextMatch(NamedTuple):
    """The signature a line matched: its kind, the line, and the reason it states."""

    kind: SignalKind
    line: str
    reason: str | None
    signature: Signature
    node: str | None = None


class LiteralScan:
    """Which of a set of literals a lowered text holds, in one pass of one regex.

    Each literal is searched by an anchor: its suffix (of 4 or more characters) that
    starts at the character rarest in ordinary lines (``ordinary``, the catalog's quiet
    lines), so the regex engine skips most positions of a line on their first character.
    The anchors are compiled as one trie (``warn(?: |ing)``...). ``findall`` reports
    matches that do not overlap; an anchor that starts inside a reported one is tested on
    its own (:attr:`overlaps`), and each literal whose anchor is found is tested whole:
    exactly the literals the text holds are returned.
    """

    def __init__(self, literals: Iterable[str], ordinary: str = "") -> None:
        self.literals = tuple(sorted(set(literals)))
        counts = Counter(ordinary.lower())
        anchor_of = _anchors(self.literals, counts)
        anchors = tuple(sorted(set(anchor_of.values())))
        self.literals_of = {
            a: tuple(lit for lit, b in anchor_of.items() if b == a) for a in anchors
        }
        self.pattern = re.compile(_trie(anchors)) if anchors else None
        self.overlaps = {
            found: tuple(other for other in anchors if other != found and _overlap(found, other))
            for found in anchors
        }

    def any_in(self, lowered: str) -> bool:
        return bool(self.present(lowered))

    def present(self, lowered: str) -> set[str]:
        """The literals the text holds."""
        return {
            lit for a in self.anchors_in(lowered) for lit in self.literals_of[a] if lit in lowered
        }

    def anchors_in(self, lowered: str) -> set[str]:
        """The anchors the text holds: a literal can be in it only if its anchor is."""
        if self.pattern is None:
            return set()
        found = self.pattern.findall(lowered)
        if not found:
            return set()  # most lines: one pass, nothing more
        anchors = set(found)
        overlaps = self.overlaps
        for anchor in found:
            for other in overlaps[anchor]:
                if other in lowered:
                    anchors.add(other)
        return anchors


_FILLERS = "0123456789x =-._:/,#*|>+~"


def _anchors(literals: Sequence[str], counts: Counter[str]) -> dict[str, str]:
    """Each literal's anchor: its suffix (4+ characters) starting at a character of a
    small set, chosen greedily so that every literal has one and the set is rare in
    ordinary lines (``counts``): the regex then skips most positions at once."""

    def starts(literal: str) -> set[str]:
        return set(literal[: max(1, len(literal) - 3)])

    # Characters that fill whole stretches of real lines (hex dumps, progress bars, padding)
    # are poor anchors whatever the quiet lines say: each occurrence costs an attempt.
    counts = counts.copy()
    for char in _FILLERS:
        counts[char] += 10**6
    uncovered, chosen = set(literals), set()
    while uncovered:
        options = {char for lit in uncovered for char in starts(lit)}
        best = max(
            sorted(options),
            key=lambda ch: sum(ch in starts(lit) for lit in uncovered) / (counts[ch] + 5),
        )
        chosen.add(best)
        uncovered = {lit for lit in uncovered if best not in starts(lit)}
    out = {}
    for literal in literals:
        last = max(1, len(literal) - 3)
        # The earliest such character: the longest anchor is the least often a false hit.
        start = next(i for i in range(last) if literal[i] in chosen)
        out[literal] = literal[start:]
    return out


def _trie(words: Sequence[str]) -> str:
    """A regex of the words as a trie; a longer word is tried before its prefix."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + emit(node[char]) for char in sorted(node) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(root)


def _overlap(found: str, other: str) -> bool:
    """Whether ``other`` can start inside a match of ``found``: it lies within it, or a
    proper suffix of ``found`` begins it."""
    return other in found or any(other.startswith(found[i:]) for i in range(1, len(found)))


class TextRules:
    """The text signatures that apply to one kind of log (container or node)."""

    def __init__(
        self, signatures: Sequence[Signature], container: bool, ordinary: str = ""
    ) -> None:
        """``ordinary``: lines of the same sources that match nothing (anchor choice)."""
        # Each with whether a lead is backed off (see _at_leads), decided once here.
        self.rules = tuple(
            (s, s.pattern, s.requirements, s.leads, any(back for _, back in s.leads))
            for s in signatures
            if s.pattern is not None and s.applies_to(container)
        )
        rules_of: dict[str, list[int]] = {}
        for index, (sig, *_) in enumerate(self.rules):
            for literal in sig.literals:
                rules_of.setdefault(literal, []).append(index)
        self.scan = LiteralScan(rules_of, ordinary)
        # The rules each anchor found may lead to: its own literals', and those of the
        # anchors that can start inside it (findall does not report them). Their
        # requirements then test the literals themselves.
        own = {
            anchor: {i for lit in lits for i in rules_of[lit]}
            for anchor, lits in self.scan.literals_of.items()
        }
        self.rules_of = {
            anchor: tuple(sorted(found.union(*(own[o] for o in self.scan.overlaps[anchor]))))
            for anchor, found in own.items()
        }

    def match(self, text: str, lowered: str | None = None) -> TextMatch | None:
        """The first signature that matches ``text``, or None: in catalog order, each
        signature one of whose literals the text holds."""
        lowered = text.lower() if lowered is None else lowered
        pattern = self.scan.pattern
        anchors = pattern.findall(lowered) if pattern is not None else None
        if not anchors:
            return None  # most lines: one pass of one regex, nothing more
        rules_of = self.rules_of
        order: Iterable[int]
        if len(anchors) == 1:
            order = rules_of[anchors[0]]  # already in catalog order
        else:
            candidates: set[int] = set()
            for anchor in anchors:
                candidates.update(rules_of[anchor])
            order = sorted(candidates)
        # lower() may change the length of non-ASCII text; then offsets do not carry over.
        same_length = len(lowered) == len(text)
        for index in order:
            sig, pattern, requirements, leads, backed = self.rules[index]
            # Every literal set the pattern needs, before its regex (inlined: this loop runs
            # for every line that holds a literal).
            held = True
            for need in requirements:
                for literal in need:
                    if literal in lowered:
                        break
                else:
                    held = False
                    break
            if not held:
                continue
            if leads and same_length:
                found = _at_leads(pattern, text, lowered, leads, backed)
            else:
                found = pattern.search(text)
            if found is not None:
                return _text_match(sig, text, found)
        return None


def _at_leads(
    pattern: re.Pattern[str],
    text: str,
    lowered: str,
    leads: tuple[tuple[str, int], ...],
    backed: bool,
) -> re.Match[str] | None:
    """``pattern.search(text)``, tried only where a match can start: at the occurrences of
    the literals every match starts with (``back`` 0), else from the first of them backed
    off. A pattern that opens with ``\\b`` or alternatives gets no fast scan from the
    regex engine; this is it."""
    if backed:  # some lead is backed off: search once, from the first of them
        first = -1
        for literal, back in leads:
            at = lowered.find(literal)
            if at >= 0:
                at = max(0, at - back)
                if first < 0 or at < first:
                    first = at
        return pattern.search(text, first) if first >= 0 else None
    if len(leads) == 1:
        # One literal (most patterns): its occurrences come in order, no list to sort.
        literal = leads[0][0]
        at = lowered.find(literal)
        while at >= 0:
            found = pattern.match(text, at)
            if found is not None:
                return found
            at = lowered.find(literal, at + 1)
        return None
    places: list[int] = []
    for literal, _ in leads:
        at = lowered.find(literal)
        while at >= 0:
            places.append(at)
            at = lowered.find(literal, at + 1)
    for at in sorted(places) if len(places) > 1 else places:
        found = pattern.match(text, at)
        if found is not None:
            return found
    return None


def _text_match(sig: Signature, text: str, found: re.Match[str]) -> TextMatch:
    line = text if "\n" not in text else line_around(text, found.start())
    # PyTorch 2.3+ prefixes every line of a rank's stderr with "[rankN]:": the rank of
    # any signature's line, without each pattern searching for it.
    rank = _RANK_PREFIX.match(line) if line.startswith("[rank") else None
    # Read once: each read of groupindex builds a new proxy of it.
    groups = sig.pattern.groupindex if sig.pattern is not None else None
    if not groups:
        # Most signatures capture nothing.
        return TextMatch(sig.kind, line, f"rank {rank[1]}" if rank else None, sig)
    kind = sig.kind
    parts: list[str] = []
    number = found["xid"] if "xid" in groups else None
    if number:
        entry = xid.lookup(int(number))
        kind = _XID_KINDS.get(entry.cls, SignalKind.GPU_ERROR)
        parts.append(f"Xid {entry.number} ({entry.cls.value}: {entry.name})")
    for group, label in _details(sig):
        value = found[group] or (rank[1] if rank and group == "rank" else None)
        if value:
            parts.append(f"{label} {value.strip()}" if label else value.strip())
    if rank and "rank" not in groups:
        parts.append(f"rank {rank[1]}")
    node = found["node"] if "node" in groups else None
    return TextMatch(kind, line, ", ".join(parts) or None, sig, node)


def _details(sig: Signature) -> tuple[tuple[str, str], ...]:
    """The groups of the signature's pattern written into the reason, in reason order
    (the stated reason first, then the numbers), with their labels. Kept by signature
    id: hashing the signature itself would cost more than the match."""
    found = _DETAILS.get(sig.id)
    if found is None:
        assert sig.pattern is not None
        names = sig.pattern.groupindex
        stated = (("reason", ""),) if "reason" in names else ()
        found = stated + tuple((g, label) for g, label in _DETAIL_LABELS.items() if g in names)
        _DETAILS[sig.id] = found
    return found


_DETAILS: dict[str, tuple[tuple[str, str], ...]] = {}


def line_around(text: str, index: int) -> str:
    start = text.rfind("\n", 0, index) + 1
    end = text.find("\n", index)
    return text[start : end if end != -1 else len(text)]


@cache
def rules() -> tuple[TextRules, TextRules]:
    """(the rules for node and other non-container logs, the rules for container logs)."""
    found = catalog.load()
    ordinary = "\n".join(q.text for q in found.quiet if q.text)
    signatures = found.text()
    return (
        TextRules(signatures, container=False, ordinary=ordinary),
        TextRules(signatures, container=True, ordinary=ordinary),
    )
