"""The per-entry hot path's shortcuts in classify.py give exactly the slow path's answers.

classify() skips a rule's regex unless one of its literals is present and starts the
search at the first literal (``_search_start``), and builds Signals without the
dataclass __init__ (``_new_signal``). Both are checked here against the plain forms.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopbreaker.model import Signal, SignalKind
from loopbreaker.signals import classify as C

FIXTURES = sorted((Path(__file__).parents[1] / "data" / "signals").glob("*.json"))
FRAGMENTS = [
    "PreemptionEvent",
    "xPreemptionEvent",
    "MaintenanceEvent",
    "TerminationEvent: terminated due to: Spot VM preempted.",
    "Watchdog caught collective operation timeout",
    "Some NCCL operations have failed or timed out",
    "NCCL WARN",
    "NCCL",
    "nccl",
    "collective",
    "Collective Operation Timeout",
    "timed out",
    "timed-out",
    "timeout",
    "time",
    "megascale",
    "Mega Scale",
    "hang",
    "deadline",
    "DistBackendError",
    "ChildFailedError",
    "Child process 12 died with exit code 1",
    "died with exit code",
    "connection reset by peer",
    "Connection Reset By Peer",
    "FailedScheduling",
    "0/8 nodes are available: 8 Insufficient google.com/tpu",
    "nodes are available",
    "NodeNotReady",
    "Kernel panic - not syncing",
    "BUG: unable to handle page fault",
    "hardware error",
    "Machine Check Exception",
    "NVRM: Xid 79",
    "host error",
    "host_error",
    "node-problem-detector.service: Main process exited",
    "\n",
    " ",
    ": ",
    "İ",  # lower() makes this two characters: offsets stop carrying over
    "ß",
    "x",
    "12",
]


def plain_rules(resource_type: str | None, text: str) -> tuple[SignalKind, str] | None:
    """The rule loop without the literal shortcuts."""
    for kind, pattern, for_containers in C._TEXT_RULES:
        if resource_type == "k8s_container" and not for_containers:
            continue
        match = pattern.search(text)
        if match is not None:
            return kind, C._line_around(text, match.start())
    return None


def fast_rules(resource_type: str | None, text: str) -> tuple[SignalKind, str] | None:
    kind, line, _ = C._classify_payload(resource_type, text, None, None, _blank())
    return None if kind is SignalKind.UNRECOGNIZED else (_base_kind(kind, text), line)


def _blank() -> dict[str, object]:
    return {"node": None, "zone": None, "location": None, "pod": None, "workload": None}


def _base_kind(kind: SignalKind, text: str) -> SignalKind:
    # A TerminationEvent stating a preemption is reported as that; the plain loop does not
    # know that rule, so map back for the comparison.
    if kind in (SignalKind.PREEMPTION, SignalKind.MAINTENANCE) and "TerminationEvent" in text:
        plain = plain_rules(None, text)
        if plain and plain[0] is SignalKind.TERMINATION:
            return SignalKind.TERMINATION
    return kind


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join),
    st.sampled_from([None, "k8s_container", "k8s_node", "gke_nodepool"]),
)
def test_literal_shortcuts_change_no_classification(text: str, resource_type: str) -> None:
    assert fast_rules(resource_type, text) == plain_rules(resource_type, text)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_texts_classify_as_without_shortcuts(path: Path) -> None:
    entry = json.loads(path.read_text())["entry"]
    text = entry.get("textPayload") or (
        C._json_text(entry["jsonPayload"]) if "jsonPayload" in entry else ""
    )
    resource_type = entry["resource"]["type"]
    assert fast_rules(resource_type, text) == plain_rules(resource_type, text)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fast_signals_equal_constructed_ones(path: Path) -> None:
    fast = C.classify(json.loads(path.read_text())["entry"])
    slow = Signal(**{f.name: getattr(fast, f.name) for f in fields(Signal)})
    assert fast == slow
    assert vars(fast) == vars(slow)
    assert hash(fast) == hash(slow)
    with pytest.raises(AttributeError):
        fast.kind = SignalKind.UNRECOGNIZED  # type: ignore[misc]
