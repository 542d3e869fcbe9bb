"""The failure-signature catalog: every wording the classifier knows, kept as data (pure).

One TOML file per source family (``pytorch.toml``, ``nccl.toml``...) lists signatures,
each with its signal kind, the component and versions whose wording it matches, a
pattern, and verbatim examples that name their source. ``quiet`` entries are ordinary
lines of the same sources that must never become a signal. The classifier, the sink
filters and ``docs/signals.md`` are all derived from this one catalog, so they cannot
disagree; ``python -m loopbreaker.signals.catalog`` checks the files.

A signature matches one of three things:

- ``on = "container" | "node" | "any"``: a ``pattern`` (Python ``re``) searched in the text
  of a container's log line, of a node's log line (journal, kernel, node-pool and Compute
  notices), or of either;
- ``on = "event"``: a Kubernetes Event by ``reasons``, the ``object`` kinds it is about, and
  optionally a ``pattern`` its message must match;
- ``on = "audit"``: an audit entry by ``methods`` (``protoPayload.methodName``), and
  optionally a ``pattern`` its ``protoPayload.status.message`` must match (Compute's
  errors when it cannot create a VM);
- ``on = "autoscaler"``: an entry of GKE's cluster autoscaler visibility log by the
  ``message_ids`` of its results and decisions (``scale.up.error.out.of.resources``); an
  example's ``text`` is the entry's ``jsonPayload``.

``cause`` is the reason a signature states when its pattern captures none (``stockout``).

The literal guards that keep classification fast (most lines match nothing) are derived
from each pattern (:func:`required_literals`), never written by hand.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from loopbreaker.errors import InvalidInput
from loopbreaker.model import SignalKind
from loopbreaker.signals.catalog.literals import (
    MIN_LITERAL,
    leading_literals,
    required_literals,
    required_sets,
    with_guard,
)

#: Files in the order their signatures are tried (then ``priority``, then file order).
FILES = (
    "compute_gke",
    "jobset_kubeflow",
    "scheduler",
    "kubelet",
    "node_problem_detector",
    "nvidia",
    "pytorch",
    "nccl",
    "xla_tpu",
    "tensorflow",
)
FAMILIES = ("interruption", "host_fault", "workload_fault", "pod_fault", "scheduling", "restart")
TEXT_SCOPES = ("container", "node", "any")
#: Structured scopes: matched by a field of the entry, not by its text.
SCOPES = (*TEXT_SCOPES, "event", "audit", "autoscaler")
#: Named groups a pattern may capture; the classifier writes them into the reason.
DETAIL_GROUPS = (
    "xid",
    "rank",
    "device",
    "asked",
    "free",
    "total",
    "in_use",
    "memory_space",
    "exit_code",
    "signal",
    "reason",
    "node",
    "zone",
    "machine_type",
    "accelerator",
)
#: What a capacity signature may say is missing (its ``cause``), strongest first: a
#: stockout of the machine type, then the project's quota, then the subnet's IP space,
#: then no node pool whose nodes would fit.
CAUSES = ("stockout", "quota exceeded", "IP space exhausted", "no fitting node pool")
DEFAULT_PRIORITY = 100


class CatalogError(InvalidInput):
    """A catalog file that does not follow the schema above."""


@dataclass(frozen=True)
class Example:
    """A verbatim line (or Event, or audit method) and where it was copied from."""

    source: str
    text: str = ""
    reason: str = ""
    object: str = ""
    method: str = ""
    #: A cluster autoscaler visibility message id (``on = "autoscaler"``).
    message_id: str = ""
    #: The kind expected when it differs from the signature's (an Xid's class decides).
    kind: SignalKind | None = None
    #: Words the classified signal's reason must contain (the numbers a message gives).
    reason_has: tuple[str, ...] = ()


@dataclass(frozen=True)
class Signature:
    id: str
    kind: SignalKind
    family: str
    component: str
    versions: str
    on: str
    file: str
    pattern: re.Pattern[str] | None
    #: Lower-case literals one of which is in every match (text and event patterns).
    literals: tuple[str, ...]
    #: Every such set of literals a match holds (one of each): tested before the regex.
    requirements: tuple[tuple[str, ...], ...] = ()
    #: ``(literal, back)``: every match starts at most ``back`` characters before one of
    #: the literals (the search may begin there), or () when not known.
    leads: tuple[tuple[str, int], ...] = ()
    reasons: tuple[str, ...] = ()
    #: Events whose reason is itself a message (JobSet v0.5's "restarting jobset, attempt
    #: N"): the reason must match this instead of being one of ``reasons``.
    reason_pattern: re.Pattern[str] | None = None
    reason_literals: tuple[str, ...] = ()
    objects: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    #: GKE cluster autoscaler visibility message ids (``on = "autoscaler"``).
    message_ids: tuple[str, ...] = ()
    #: The reason a match states when the pattern captures none (one of CAUSES).
    cause: str = ""
    priority: int = DEFAULT_PRIORITY
    examples: tuple[Example, ...] = ()
    note: str = ""

    def applies_to(self, container: bool) -> bool:
        return self.on == "any" or self.on == ("container" if container else "node")


@dataclass(frozen=True)
class Quiet:
    """An ordinary line of a source that must never become a signal."""

    on: str
    file: str
    source: str
    text: str = ""
    reason: str = ""
    object: str = ""
    method: str = ""
    message_id: str = ""


@dataclass(frozen=True)
class Catalog:
    signatures: tuple[Signature, ...]
    quiet: tuple[Quiet, ...]

    def text(self) -> tuple[Signature, ...]:
        return tuple(s for s in self.signatures if s.on in TEXT_SCOPES)

    def events(self) -> tuple[Signature, ...]:
        return tuple(s for s in self.signatures if s.on == "event")

    def audits(self) -> tuple[Signature, ...]:
        return tuple(s for s in self.signatures if s.on == "audit")

    def autoscaler(self) -> tuple[Signature, ...]:
        return tuple(s for s in self.signatures if s.on == "autoscaler")


@cache
def load() -> Catalog:
    """The catalog shipped with the package, checked and ordered."""
    root = resources.files(__package__)
    texts = {name: (root / f"{name}.toml").read_text(encoding="utf-8") for name in FILES}
    return parse(texts)


def parse(texts: Mapping[str, str]) -> Catalog:
    """Parse and check catalog files given as ``{name: TOML text}``."""
    signatures: list[tuple[int, int, int, Signature]] = []
    quiet: list[Quiet] = []
    seen: set[str] = set()
    for file_no, (name, text) in enumerate(texts.items()):
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise CatalogError(f"{name}.toml: {exc}") from exc
        unknown = set(data) - {"signature", "quiet"}
        if unknown:
            raise CatalogError(f"{name}.toml: unknown top-level key(s) {sorted(unknown)}")
        for position, raw in enumerate(_tables(data, "signature", name)):
            sig = _signature(raw, name)
            if sig.id in seen:
                raise CatalogError(f"{name}.toml: signature id {sig.id!r} appears twice")
            seen.add(sig.id)
            signatures.append((sig.priority, file_no, position, sig))
        quiet.extend(_quiet(raw, name) for raw in _tables(data, "quiet", name))
    ordered = tuple(s for *_, s in sorted(signatures, key=lambda t: t[:3]))
    return Catalog(ordered, tuple(quiet))


# --- parsing ---------------------------------------------------------------------------

_SIG_KEYS = {
    "id",
    "kind",
    "family",
    "component",
    "versions",
    "on",
    "pattern",
    "ignore_case",
    "reasons",
    "reason_pattern",
    "object",
    "methods",
    "message_ids",
    "cause",
    "priority",
    "examples",
    "note",
}
_EXAMPLE_KEYS = {
    "source",
    "text",
    "reason",
    "object",
    "method",
    "message_id",
    "kind",
    "reason_has",
}
_QUIET_KEYS = {"on", "source", "text", "reason", "object", "method", "message_id"}


def _tables(data: Mapping[str, Any], key: str, file: str) -> list[Mapping[str, Any]]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise CatalogError(f"{file}.toml: '{key}' must be an array of tables ([[{key}]])")
    return value


def _str(raw: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = raw.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise CatalogError(f"{where}: '{key}' must be a non-empty string")
    return value


def _strs(raw: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise CatalogError(f"{where}: '{key}' must be a string or a list of strings")
    return tuple(value)


def _kind(value: object, where: str) -> SignalKind:
    try:
        return SignalKind(str(value))
    except ValueError:
        raise CatalogError(f"{where}: kind {value!r} is not a signal kind") from None


def _signature(raw: Mapping[str, Any], file: str) -> Signature:
    where = f"{file}.toml: signature {raw.get('id', '?')!r}"
    unknown = set(raw) - _SIG_KEYS
    if unknown:
        raise CatalogError(f"{where}: unknown key(s) {sorted(unknown)}")
    sig_id = _str(raw, "id", where)
    if not sig_id.startswith(f"{file}."):
        raise CatalogError(f"{where}: ids of {file}.toml start with '{file}.'")
    family = _str(raw, "family", where)
    if family not in FAMILIES:
        raise CatalogError(f"{where}: family {family!r} is not one of {', '.join(FAMILIES)}")
    on = _str(raw, "on", where)
    if on not in SCOPES:
        raise CatalogError(f"{where}: on {on!r} is not one of {', '.join(SCOPES)}")
    priority = raw.get("priority", DEFAULT_PRIORITY)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise CatalogError(f"{where}: 'priority' must be an integer")
    ignore_case = raw.get("ignore_case", False)
    if not isinstance(ignore_case, bool):
        raise CatalogError(f"{where}: 'ignore_case' must be true or false")
    text = _str(raw, "pattern", where, required=on in TEXT_SCOPES)
    pattern = literals = None
    if text:
        try:
            pattern = re.compile(text, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise CatalogError(f"{where}: pattern does not compile: {exc}") from exc
        groups = set(pattern.groupindex) - set(DETAIL_GROUPS)
        if groups:
            raise CatalogError(f"{where}: unknown named group(s) {sorted(groups)}")
        literals = required_literals(text, ignore_case)
        if literals is None and on in (*TEXT_SCOPES, "audit"):
            raise CatalogError(
                f"{where}: every match of the pattern must contain a literal of "
                f"{MIN_LITERAL}+ characters (the classifier's guard is derived from it)"
            )
    reasons, objects = _strs(raw, "reasons", where), _strs(raw, "object", where)
    methods = _strs(raw, "methods", where)
    reason_text = _str(raw, "reason_pattern", where, required=False)
    reason_pattern, reason_literals = None, None
    if reason_text:
        try:
            reason_pattern = re.compile(reason_text)
        except re.error as exc:
            raise CatalogError(f"{where}: reason_pattern does not compile: {exc}") from exc
        reason_literals = required_literals(reason_text)
        if reason_literals is None:
            raise CatalogError(
                f"{where}: reason_pattern needs a literal of {MIN_LITERAL}+ characters"
            )
    if on == "event" and not reasons and reason_pattern is None:
        raise CatalogError(f"{where}: an event signature names its 'reasons' or 'reason_pattern'")
    if on == "audit" and not methods:
        raise CatalogError(f"{where}: an audit signature names its 'methods'")
    message_ids = _strs(raw, "message_ids", where)
    if (on == "autoscaler") != bool(message_ids):
        raise CatalogError(f"{where}: an autoscaler signature (and only one) names 'message_ids'")
    cause = _str(raw, "cause", where, required=False)
    if cause and cause not in CAUSES:
        raise CatalogError(f"{where}: cause {cause!r} is not one of {', '.join(CAUSES)}")
    kind = _kind(raw.get("kind"), where)
    examples = tuple(_example(e, where) for e in _tables(raw, "examples", where))
    if not examples:
        raise CatalogError(f"{where}: a signature needs at least one cited example")
    return Signature(
        id=sig_id,
        kind=kind,
        family=family,
        component=_str(raw, "component", where),
        versions=_str(raw, "versions", where),
        on=on,
        file=file,
        pattern=pattern,
        literals=literals or (),
        requirements=with_guard(required_sets(text, ignore_case) if text else (), literals),
        leads=leading_literals(text, ignore_case) if text else (),
        reasons=reasons,
        reason_pattern=reason_pattern,
        reason_literals=reason_literals or (),
        objects=objects,
        methods=methods,
        message_ids=message_ids,
        cause=cause,
        priority=priority,
        examples=examples,
        note=_str(raw, "note", where, required=False),
    )


def _example(raw: Mapping[str, Any], where: str) -> Example:
    unknown = set(raw) - _EXAMPLE_KEYS
    if unknown:
        raise CatalogError(f"{where}: example has unknown key(s) {sorted(unknown)}")
    kind = raw.get("kind")
    return Example(
        source=_str(raw, "source", f"{where} example"),
        text=_str(raw, "text", where, required=False),
        reason=_str(raw, "reason", where, required=False),
        object=_str(raw, "object", where, required=False),
        method=_str(raw, "method", where, required=False),
        message_id=_str(raw, "message_id", where, required=False),
        kind=_kind(kind, where) if kind is not None else None,
        reason_has=_strs(raw, "reason_has", where),
    )


def _quiet(raw: Mapping[str, Any], file: str) -> Quiet:
    shown = raw.get("text") or raw.get("reason") or raw.get("message_id")
    where = f"{file}.toml: quiet line {shown!r}"
    unknown = set(raw) - _QUIET_KEYS
    if unknown:
        raise CatalogError(f"{where}: unknown key(s) {sorted(unknown)}")
    on = _str(raw, "on", where)
    if on not in SCOPES:
        raise CatalogError(f"{where}: on {on!r} is not one of {', '.join(SCOPES)}")
    return Quiet(
        on=on,
        file=file,
        source=_str(raw, "source", where),
        text=_str(raw, "text", where, required=False),
        reason=_str(raw, "reason", where, required=False),
        object=_str(raw, "object", where, required=False),
        method=_str(raw, "method", where, required=False),
        message_id=_str(raw, "message_id", where, required=False),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Check the shipped catalog (or the given files): schema, patterns, examples.

    ``python -m loopbreaker.signals.catalog --markdown`` (``__main__``) prints docs/signals.md
    instead, so that this module never imports the docs renderer that imports it."""
    import sys
    from pathlib import Path

    args = list(argv if argv is not None else sys.argv[1:])
    paths = [Path(p) for p in args]
    try:
        texts = {p.stem: p.read_text(encoding="utf-8") for p in paths}
        catalog = parse(texts) if paths else load()
    except (CatalogError, OSError) as exc:
        print(f"catalog: {exc}", file=sys.stderr)
        return 2
    bad = 0
    for sig in catalog.signatures:
        for example in sig.examples:
            if sig.pattern is not None:
                text = example.text or ""
                if sig.on in ("event", "audit") and not text:
                    continue
                if not sig.pattern.search(text):
                    print(f"{sig.id}: example does not match: {text[:120]!r}", file=sys.stderr)
                    bad += 1
                elif sig.on != "event" and not any(g in text.lower() for g in sig.literals):
                    print(f"{sig.id}: guard {sig.literals} misses {text[:80]!r}", file=sys.stderr)
                    bad += 1
    for q in catalog.quiet:
        for sig in catalog.text():
            structured = q.on in ("audit", "autoscaler")
            if q.text and not structured and sig.pattern is not None and sig.pattern.search(q.text):
                print(f"quiet line matches {sig.id}: {q.text[:120]!r}", file=sys.stderr)
                bad += 1
    n = len(catalog.signatures)
    print(f"{n} signature(s), {len(catalog.quiet)} quiet line(s), {bad} problem(s)")
    return 1 if bad else 0
