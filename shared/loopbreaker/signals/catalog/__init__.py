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
- ``on = "audit"``: an audit entry by ``methods`` (``protoPayload.methodName``).

The literal guards that keep classification fast (most lines match nothing) are derived
from each pattern (:func:`required_literals`), never written by hand.
"""

from __future__ import annotations

import re
import re._parser as _sre  # type: ignore[import-not-found]  # see _required
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from loopbreaker.errors import InvalidInput
from loopbreaker.model import SignalKind

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
)
#: The shortest literal a guard may be: shorter ones are in too many ordinary lines.
MIN_LITERAL = 4
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
    #: Literals every match starts with (the search may begin at the first), or ().
    leads: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    #: Events whose reason is itself a message (JobSet v0.5's "restarting jobset, attempt
    #: N"): the reason must match this instead of being one of ``reasons``.
    reason_pattern: re.Pattern[str] | None = None
    reason_literals: tuple[str, ...] = ()
    objects: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
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


def required_literals(pattern: str, ignore_case: bool = False) -> tuple[str, ...] | None:
    """Lower-case literals such that every match of ``pattern`` contains one of them,
    or None when some match need contain no literal of :data:`MIN_LITERAL` characters."""
    flags = re.IGNORECASE if ignore_case else 0
    found: list[str] = []
    # Each top-level alternative on its own: the parser would factor out a prefix they
    # share ("Bootstrap : x|Bootstrap Root : y"), leaving a guard every ordinary line of
    # that component holds.
    for alternative in _alternatives(pattern):
        part = _required(list(_sre.parse(alternative, flags)))
        if part is None:
            return None
        found.extend(part)
    if not found or min(len(lit) for lit in found) < MIN_LITERAL:
        return None
    # A literal that contains another adds nothing: the shorter one is there whenever it is.
    kept = sorted({lit for lit in found if not any(o != lit and o in lit for o in found)})
    return tuple(kept)


_GLOBAL_FLAGS = re.compile(r"^\(\?[aiLmsux]+\)")


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
    "priority",
    "examples",
    "note",
}
_EXAMPLE_KEYS = {"source", "text", "reason", "object", "method", "kind", "reason_has"}
_QUIET_KEYS = {"on", "source", "text", "reason", "object"}


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
    if on not in (*TEXT_SCOPES, "event", "audit"):
        raise CatalogError(f"{where}: on {on!r} is not container, node, any, event or audit")
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
        if literals is None and on in TEXT_SCOPES:
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
        requirements=_with_guard(required_sets(text, ignore_case) if text else (), literals),
        leads=leading_literals(text, ignore_case) if text else (),
        reasons=reasons,
        reason_pattern=reason_pattern,
        reason_literals=reason_literals or (),
        objects=objects,
        methods=methods,
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
        kind=_kind(kind, where) if kind is not None else None,
        reason_has=_strs(raw, "reason_has", where),
    )


def _quiet(raw: Mapping[str, Any], file: str) -> Quiet:
    where = f"{file}.toml: quiet line {raw.get('text') or raw.get('reason')!r}"
    unknown = set(raw) - _QUIET_KEYS
    if unknown:
        raise CatalogError(f"{where}: unknown key(s) {sorted(unknown)}")
    on = _str(raw, "on", where)
    if on not in (*TEXT_SCOPES, "event"):
        raise CatalogError(f"{where}: on {on!r} is not container, node, any or event")
    return Quiet(
        on=on,
        file=file,
        source=_str(raw, "source", where),
        text=_str(raw, "text", where, required=False),
        reason=_str(raw, "reason", where, required=False),
        object=_str(raw, "object", where, required=False),
    )


# --- literals of a pattern ---------------------------------------------------------------

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


def _with_guard(
    requirements: tuple[tuple[str, ...], ...], literals: tuple[str, ...] | None
) -> tuple[tuple[str, ...], ...]:
    """The requirements with the guard set among them: a line matches only if it holds
    one of the guard's literals, and the classifier tests that too."""
    if literals and literals not in requirements:
        return (*requirements, literals)
    return requirements


def leading_literals(pattern: str, ignore_case: bool = False) -> tuple[str, ...]:
    """Lower-case literals one of which every match *starts* with (after zero-width
    assertions such as ``\\b``), or () when some alternative starts otherwise: a search
    may then begin at the first of them in the line."""
    flags = re.IGNORECASE if ignore_case else 0
    leads: set[str] = set()
    for alternative in _alternatives(pattern):
        run: list[str] = []
        for op, av in _sre.parse(alternative, flags):
            if op is _C.LITERAL and chr(av) not in '"\\':
                run.append(chr(av).lower())
            elif op in _ZERO_WIDTH and not run:
                continue
            else:
                break
        if len(run) < MIN_LITERAL:
            return ()
        leads.add("".join(run))
    return tuple(sorted(leads))


def required_sets(pattern: str, ignore_case: bool = False) -> tuple[tuple[str, ...], ...]:
    """Every set of literals of which each match holds one (all of them hold at once),
    of :data:`MIN_LITERAL` characters or more: the classifier tests them before the
    regex. A pattern of several top-level alternatives gives its one guard set."""
    alternatives = _alternatives(pattern)
    if len(alternatives) > 1:
        guard = required_literals(pattern, ignore_case)
        return (guard,) if guard else ()
    parsed = _sre.parse(pattern, re.IGNORECASE if ignore_case else 0)
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


def all_literals(signatures: Iterable[Signature]) -> set[str]:
    return {lit for s in signatures for lit in s.literals}


def main(argv: Sequence[str] | None = None) -> int:
    """Check the shipped catalog (or the given files): schema, patterns, examples;
    ``--markdown`` prints docs/signals.md."""
    import sys
    from pathlib import Path

    args = list(argv if argv is not None else sys.argv[1:])
    if args == ["--markdown"]:
        sys.stdout.write(markdown(load()))
        return 0
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
            if sig.pattern is not None and sig.on != "audit":
                text = example.text or ""
                if sig.on == "event" and not text:
                    continue
                if not sig.pattern.search(text):
                    print(f"{sig.id}: example does not match: {text[:120]!r}", file=sys.stderr)
                    bad += 1
                elif sig.on in TEXT_SCOPES and not any(g in text.lower() for g in sig.literals):
                    print(f"{sig.id}: guard {sig.literals} misses {text[:80]!r}", file=sys.stderr)
                    bad += 1
    for q in catalog.quiet:
        for sig in catalog.text():
            if q.text and sig.pattern is not None and sig.pattern.search(q.text):
                print(f"quiet line matches {sig.id}: {q.text[:120]!r}", file=sys.stderr)
                bad += 1
    n = len(catalog.signatures)
    print(f"{n} signature(s), {len(catalog.quiet)} quiet line(s), {bad} problem(s)")
    return 1 if bad else 0


# --- docs/signals.md ------------------------------------------------------------------------

DOC_FILE = "docs/signals.md"
_TITLES = {
    "compute_gke": "Compute Engine and GKE",
    "jobset_kubeflow": "JobSet and Kubeflow",
    "scheduler": "The scheduler and the cluster autoscaler",
    "kubelet": "The kubelet",
    "node_problem_detector": "node-problem-detector and the kernel",
    "nvidia": "The NVIDIA driver and the CUDA runtime",
    "pytorch": "PyTorch and torchrun",
    "nccl": "NCCL",
    "xla_tpu": "JAX, XLA and the TPU runtime",
    "tensorflow": "TensorFlow",
}


def markdown(cat: Catalog) -> str:
    """The catalog as ``docs/signals.md`` lists it (a test keeps the file current)."""
    out = [
        "# Signals: the signature catalog",
        "",
        "<!-- Generated by `python -m loopbreaker.signals.catalog --markdown > docs/signals.md`"
        " from shared/loopbreaker/signals/catalog/*.toml; tests/test_docs.py keeps it current."
        " -->",
        "",
        "Every log line, Kubernetes Event and audit method loopbreaker recognises is a"
        " signature in the catalog (`shared/loopbreaker/signals/catalog/`, one TOML file per"
        " source family). Each names its signal kind, the component and versions whose"
        " wording it matches, and verbatim examples with their source; the classifier, the"
        " Cloud Logging sink filters and the diagnosis' log queries are derived from it, and"
        " the tests run every example through the classifier and the sink filters."
        " Signatures are tried in order (priority, then file, then position): the first that"
        " matches names the kind. Lines that match none are `unrecognized`.",
        "",
        f"{len(cat.signatures)} signatures, {len(cat.quiet)} ordinary lines that must stay quiet.",
        "",
        "To add a signature: copy the wording from the emitting project's code at a named"
        " version, its vendor's documentation or a log a user posted, add it with its"
        " `source`, then run `python -m loopbreaker.signals.catalog` (checks the files),"
        " `python -m loopbreaker.signals.sink_filters` (rewrites the sink filters) and this"
        " page's command.",
    ]
    by_file: dict[str, list[Signature]] = {}
    for sig in cat.signatures:
        by_file.setdefault(sig.file, []).append(sig)
    for name in FILES:
        sigs = by_file.get(name, [])
        if not sigs:
            continue
        out += [
            "",
            f"## {_TITLES.get(name, name)} (`{name}.toml`)",
            "",
            "| signature | kind | component, versions | matches | first example's source |",
            "|---|---|---|---|---|",
        ]
        for sig in sigs:
            out.append(
                f"| `{sig.id}` | `{sig.kind.value}` | {_cell(sig.component)}, "
                f"{_cell(sig.versions)} | {_cell(_matches(sig))} | "
                f"{_cell(sig.examples[0].source)} |"
            )
    return "\n".join(out) + "\n"


def _matches(sig: Signature) -> str:
    if sig.on == "audit":
        return "audit " + ", ".join(f"`{m}`" for m in sig.methods)
    if sig.on == "event":
        reasons = (
            ", ".join(f"`{r}`" for r in sig.reasons)
            or f"reason `{_pattern_text(sig.reason_pattern)}`"
        )
        about = f" on {', '.join(sig.objects)}" if sig.objects else ""
        message = f", message `{_pattern_text(sig.pattern)}`" if sig.pattern is not None else ""
        return f"Event {reasons}{about}{message}"
    return f"{sig.on} line `{_pattern_text(sig.pattern)}`"


def _pattern_text(pattern: re.Pattern[str] | None) -> str:
    text = pattern.pattern if pattern is not None else ""
    return text if len(text) <= 90 else text[:89] + "…"


def _cell(text: str) -> str:
    """Markdown table cell text: pipes escaped, on one line."""
    return text.replace("|", "\\|").replace("\n", " ")
