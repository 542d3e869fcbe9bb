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
    lines), so the regex engine skips most positions of a line. The anchors are compiled
    as a trie (``warn(?: |ing)``...), twice:

    * over the text itself (:attr:`pattern`), opening with the class of the anchors'
      first characters: the engine tests each character of the line against it, a call
      a character, but starts at once. ``findall`` reports matches that do not overlap:
      an anchor that can start inside a reported one is tested on its own.
    * over the text's UTF-8 bytes with every anchor's first byte folded into one
      (:attr:`folded`, :data:`_FOLD`), for long lines: the regex opens with that one byte,
      which the engine finds by its fast search (on a 900-character line, half the time
      of the other). At each folded byte a look-ahead names the longest folded anchor
      that follows; the anchors it may stand for, and those of the shorter folded
      anchors it begins with, are tested on the text itself.

    Each literal whose anchor is held is tested whole: exactly the literals the text
    holds are returned (``tests/signals/test_functions_hot_path.py``).
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
        self.overlaps = _overlaps(anchors)
        # A first byte of UTF-8 is never a continuation byte: folding first bytes leaves
        # every character's other bytes as they are.
        firsts = bytes(sorted({_utf8(a)[0] for a in anchors}))
        self.fold = bytes.maketrans(firsts, _FOLD * len(firsts))
        # The same, of ASCII text as written: lowered and folded in one translation.
        self.fold_lower = bytes(self.fold[b + 32 if 65 <= b <= 90 else b] for b in range(256))
        shapes: dict[bytes, list[str]] = {}
        for anchor in anchors:
            shapes.setdefault(_utf8(anchor).translate(self.fold), []).append(anchor)
        # Every shape opens with the folded byte: the look-ahead captures the rest.
        rests = _trie_bytes(sorted(shape[1:] for shape in shapes))
        self.folded = re.compile(re.escape(_FOLD) + b"(?=(" + rests + b"))") if anchors else None
        #: The anchors to test for each rest ``folded`` reports: its own shape's, and those
        #: of the shorter shapes it begins with (the same position holds them).
        self.maybe = {
            shape[1:]: tuple(
                sorted({a for other, own in shapes.items() if shape.startswith(other) for a in own})
            )
            for shape in shapes
        }

    def any_in(self, lowered: str) -> bool:
        return bool(self.present(lowered))

    def holds_any(self, text: str) -> bool:
        """:meth:`any_in` of ``text`` as written (this lowers it). A long ASCII line is
        lowered and folded as bytes in one translation: one that holds no anchor (most
        of a job's output) is never lowered as a string."""
        folded = self.folded
        if (
            folded is not None
            and len(text) >= LONG_LINE
            and text.isascii()
            and folded.search(text.encode("ascii").translate(self.fold_lower)) is None
        ):
            return False
        return self.any_in(text.lower())

    def present(self, lowered: str) -> set[str]:
        """The literals the text holds."""
        return {
            lit for a in self.anchors_in(lowered) for lit in self.literals_of[a] if lit in lowered
        }

    def anchors_in(self, lowered: str) -> set[str]:
        """The anchors the text holds: a literal can be in it only if its anchor is."""
        if self.pattern is None or self.folded is None:
            return set()
        if len(lowered) >= LONG_LINE:
            found = self.folded.findall(_utf8(lowered).translate(self.fold))
            if not found:
                return set()  # most lines: one pass, nothing more
            maybe = self.maybe
            return {a for rest in set(found) for a in maybe[rest] if a in lowered}
        hits = self.pattern.findall(lowered)
        if not hits:
            return set()
        anchors = set(hits)
        overlaps = self.overlaps
        for anchor in hits:
            for other in overlaps[anchor]:
                if other in lowered:
                    anchors.add(other)
        return anchors


#: From this length on a line is scanned folded (:class:`LiteralScan`): below it, the
#: encoding and folding cost more than the faster scan saves (measured on the catalog's
#: container rules: even at about 200 characters, folded ahead from about 260).
LONG_LINE = 256


def _overlaps(anchors: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """For each anchor, the others that can start inside a match of it: those it holds,
    and those that a proper suffix of it begins."""
    starting: dict[str, list[str]] = {}
    for other in anchors:
        for end in range(1, len(other) + 1):
            starting.setdefault(other[:end], []).append(other)
    out = {}
    for found in anchors:
        inside = {other for other in anchors if other != found and other in found}
        for i in range(1, len(found)):
            inside.update(starting.get(found[i:], ()))
        inside.discard(found)
        out[found] = tuple(sorted(inside))
    return out


#: The byte every anchor's first byte is folded into (a control character: in a log line
#: it costs a spurious attempt at most).
_FOLD = b"\x01"


def _utf8(text: str) -> bytes:
    # JSON can carry lone surrogates ("\\ud800"): they encode as bytes no anchor holds.
    return text.encode("utf-8", "surrogatepass")


def _trie_bytes(words: Sequence[bytes]) -> bytes:
    """:func:`_trie` of byte strings (each byte read as the character of that number)."""
    return _trie([w.decode("latin-1") for w in words]).encode("latin-1")


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
        # The rules each anchor may lead to (their requirements then test the literals):
        # its own, for the anchors a long line's scan finds exactly; for a short line's
        # findall, also those of the anchors that can start inside it (not reported).
        own = {
            anchor: {i for lit in lits for i in rules_of[lit]}
            for anchor, lits in self.scan.literals_of.items()
        }
        self.rules_of = {anchor: tuple(sorted(found)) for anchor, found in own.items()}
        self.rules_near = {
            anchor: tuple(sorted(found.union(*(own[o] for o in self.scan.overlaps[anchor]))))
            for anchor, found in own.items()
        }

    def match(self, text: str, lowered: str | None = None) -> TextMatch | None:
        """The first signature that matches ``text``, or None: in catalog order, each
        signature one of whose literals the text holds."""
        lowered = text.lower() if lowered is None else lowered
        scan = self.scan
        anchors: set[str] | list[str] | tuple[()]
        if len(lowered) >= LONG_LINE:
            anchors, rules_of = scan.anchors_in(lowered), self.rules_of
        else:
            pattern = scan.pattern
            anchors = pattern.findall(lowered) if pattern is not None else ()
            rules_of = self.rules_near
        if not anchors:
            return None  # most lines: one pass of one regex, nothing more
        order: Iterable[int]
        if len(anchors) == 1:
            order = rules_of[next(iter(anchors))]  # already in catalog order
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
    shape = _DETAILS.get(sig.id) or _details(sig)
    if shape is _CAPTURES_NOTHING:
        # Most signatures: tuple.__new__ directly, a NamedTuple's own is a Python call.
        return _new_tuple(
            TextMatch, (sig.kind, line, f"rank {rank[1]}" if rank else None, sig, None)
        )
    groups, details = shape
    kind = sig.kind
    parts: list[str] = []
    number = found["xid"] if "xid" in groups else None
    if number:
        entry = xid.lookup(int(number))
        kind = _XID_KINDS.get(entry.cls, SignalKind.GPU_ERROR)
        parts.append(f"Xid {entry.number} ({entry.cls.value}: {entry.name})")
    for group, label in details:
        value = found[group] or (rank[1] if rank and group == "rank" else None)
        if value:
            parts.append(f"{label} {value.strip()}" if label else value.strip())
    if rank and "rank" not in groups:
        parts.append(f"rank {rank[1]}")
    node = found["node"] if "node" in groups else None
    return _new_tuple(TextMatch, (kind, line, ", ".join(parts) or None, sig, node))


_new_tuple = tuple.__new__
_Shape = tuple[frozenset[str], tuple[tuple[str, str], ...]]
#: The shape of a signature whose pattern names no group.
_CAPTURES_NOTHING: _Shape = (frozenset(), ())


def _details(sig: Signature) -> _Shape:
    """The groups of the signature's pattern, and those written into the reason in reason
    order (the stated reason first, then the numbers) with their labels. Kept by
    signature id: hashing the signature itself would cost more than the match, and each
    read of a pattern's groupindex builds a new proxy of it."""
    names = sig.pattern.groupindex if sig.pattern is not None else {}
    if not names:
        found = _CAPTURES_NOTHING
    else:
        stated = (("reason", ""),) if "reason" in names else ()
        details = stated + tuple((g, lab) for g, lab in _DETAIL_LABELS.items() if g in names)
        found = (frozenset(names), details)
    _DETAILS[sig.id] = found
    return found


_DETAILS: dict[str, _Shape] = {}


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
