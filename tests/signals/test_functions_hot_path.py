"""The per-entry hot path's shortcuts give exactly the slow path's answers.

The classifier skips a signature's regex unless one of the literals derived from it is in
the line (``signals/matching.py``), and builds Signals without the dataclass __init__
(``_new_signal``). Both are checked here against the plain forms.
"""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopbreaker.errors import InvalidLogEntry
from loopbreaker.model import Signal, SignalKind
from loopbreaker.signals import catalog, matching
from loopbreaker.signals import classify as C

FIXTURES = sorted((Path(__file__).parents[1] / "data" / "signals").glob("*.json"))
# Every catalog example's text, cut in two, so the shortcuts meet each signature.
_EXAMPLES = [e.text for s in catalog.load().text() for e in s.examples if e.text]
FRAGMENTS = [
    *(t[: len(t) // 2] for t in _EXAMPLES),
    *(t[len(t) // 2 :] for t in _EXAMPLES),
    *_EXAMPLES,
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
    """The catalog's text signatures in order, each searched: no literal shortcuts."""
    container = resource_type == "k8s_container"
    for sig in catalog.load().text():
        if not sig.applies_to(container) or sig.pattern is None:
            continue
        found = sig.pattern.search(text)
        if found is not None:
            match = matching._text_match(sig, text, found)
            return match.kind, match.line
    return None


def fast_rules(resource_type: str | None, text: str) -> tuple[SignalKind, str] | None:
    found = matching.rules()[resource_type == "k8s_container"].match(text)
    return None if found is None else (found.kind, found.line)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join),
    st.sampled_from([None, "k8s_container", "k8s_node", "gke_nodepool"]),
)
def test_literal_shortcuts_change_no_classification(text: str, resource_type: str) -> None:
    assert fast_rules(resource_type, text) == plain_rules(resource_type, text)


# Long lines take the folded scan (matching.LONG_LINE): pad the fragments past it with
# what real long lines hold (training progress, padding), and with what could confuse a
# scan of UTF-8 bytes (multi-byte characters, the fold byte itself, a lone surrogate).
PADDINGS = st.sampled_from(
    [
        "",
        " " * 300,
        "step 1234 | loss 2.1 | lr 3.0e-04 | grad_norm 0.93 | host gke-a-pool-1a2b3c4d-0012 | " * 4,
        "é" * 130 + "ß" * 130,
        "Step 1234 | Loss 2.1 | Host GKE-A-POOL-1A2B3C4D-0012 | NCCL INFO Channel 00/02 | " * 4,
        "\x01" * 270,
        chr(0xD800) + "x" * 300,
    ]
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=6).map("".join), PADDINGS, st.booleans())
def test_the_scan_finds_exactly_the_literals_a_line_holds(
    text: str, padding: str, pad_first: bool
) -> None:
    line = padding + text if pad_first else text + padding
    lowered = line.lower()
    for rules in matching.rules():
        held = {lit for lit in rules.scan.literals if lit in lowered}
        assert rules.scan.present(lowered) == held
        assert rules.scan.holds_any(line) == bool(held)  # lowered by the scan itself
        anchors = {a for a in rules.scan.literals_of if a in lowered}
        assert rules.scan.anchors_in(lowered) == anchors
        assert rules.scan.any_in(lowered) == bool(held)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=6).map("".join),
    PADDINGS,
    st.booleans(),
    st.sampled_from([None, "k8s_container", "k8s_node"]),
)
def test_long_lines_classify_as_without_shortcuts(
    text: str, padding: str, pad_first: bool, resource_type: str | None
) -> None:
    line = padding + text if pad_first else text + padding
    assert fast_rules(resource_type, line) == plain_rules(resource_type, line)


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


# --- screen(): the entries that match no rule, without their Signal ------------------------

ENTRIES = [json.loads(p.read_text())["entry"] for p in FIXTURES]
LABEL_SETS = [
    {},
    {
        "k8s-pod/jobset_sigs_k8s_io/jobset-name": "llama",
        "k8s-pod/jobset_sigs_k8s_io/job-index": "0",
    },
    {"k8s-pod/jobset_sigs_k8s_io/jobset-name": "", "k8s-pod/training_kubeflow_org/job-name": "tf"},
    {
        "k8s-pod/training_kubeflow_org/job-name": "mnist",
        "k8s-pod/training_kubeflow_org/operator-name": "pytorchjob-controller",
        "k8s-pod/training_kubeflow_org/replica-type": "Worker",
    },
    {
        "k8s-pod/training_kubeflow_org/job-name": "t",
        "k8s-pod/training_kubeflow_org/replica-type": "PS",
    },
    {"compute.googleapis.com/resource_name": "gke-c-pool-1a2b3c4d-x0y1"},
    {"k8s-pod/jobset_sigs_k8s_io/jobset-name": 3},
]
VARIATIONS = st.fixed_dictionaries(
    {},
    optional={
        "textPayload": st.lists(
            st.sampled_from(FRAGMENTS + ["Node 'gke-a-b' x", "NCCL INFO"]), max_size=5
        ).map("".join)
        | st.integers(),
        "jsonPayload": st.fixed_dictionaries(
            {},
            optional={
                "message": st.sampled_from(FRAGMENTS),
                "reason": st.sampled_from(["Evicted", "Preempted", "BackOff"]),
                "involvedObject": st.just({"kind": "Pod", "name": "p"}),
                "n": st.integers(),
            },
        ),
        "labels": st.sampled_from(LABEL_SETS),
        "severity": st.sampled_from(["info", "ERROR", "bogus", 400, True, None]),
        "insertId": st.sampled_from(["abc", 7, None]),
        "timestamp": st.sampled_from(
            ["2026-05-20T08:11:54.727716594Z", "2026-05-20T08:11:54+02:00", "yesterday", 5, None]
        ),
        "resource.type": st.sampled_from(
            ["k8s_container", "k8s_node", "gke_nodepool", "k8s_cluster", 9, None]
        ),
        "resource.labels": st.sampled_from(
            [
                {},
                {"node_name": "n-1", "cluster_name": "c"},
                {"pod_name": "p", "namespace_name": "ns"},
                {"project_id": 5},
            ]
        ),
        "logName": st.sampled_from(["projects/p1/logs/stdout", "organizations/o/logs/x", 3, None]),
        "drop": st.sampled_from(["resource", "protoPayload", "textPayload"]),
    },
)


def _vary(entry: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    varied = json.loads(json.dumps(entry))
    resource = varied.setdefault("resource", {})
    for key, value in changes.items():
        if key == "drop":
            varied.pop(value, None)
        elif key.startswith("resource.") and isinstance(resource, dict):
            resource[key.split(".", 1)[1]] = value
        else:
            varied[key] = value
    return varied


def _classified(entry: object) -> Signal | str:
    try:
        return C.classify(entry)
    except InvalidLogEntry as exc:
        return f"refused: {exc}"


@settings(max_examples=500, deadline=None, derandomize=True)
@given(st.sampled_from(ENTRIES), VARIATIONS)
def test_screen_agrees_with_classify(entry: dict[str, Any], changes: dict[str, Any]) -> None:
    varied = _vary(entry, changes)
    full = _classified(varied)
    try:
        quiet = C.screen(varied)
    except InvalidLogEntry as exc:
        assert full == f"refused: {exc}"  # the same refusal, word for word
        with pytest.raises(InvalidLogEntry, match=re.escape(str(exc))):
            C.triage(varied)
        return
    assert not isinstance(full, str), full
    if quiet is not None:
        assert full.kind is SignalKind.UNRECOGNIZED, (varied, full.kind)
        assert quiet == (C.identity(full), full.timestamp, full.insert_id)
    assert C.triage(varied) == (quiet if quiet is not None else full)


@pytest.mark.parametrize(
    "entry",
    [
        {
            "resource": {"type": "k8s_container", "labels": {"cluster_name": "c", "pod_name": "p"}},
            "labels": LABEL_SETS[3],
            "textPayload": "step 12: loss=0.3 tokens/s=182734",
            "timestamp": "2026-05-20T08:11:54Z",
        },
        {
            "resource": {"type": "k8s_container", "labels": {"namespace_name": "ml"}},
            "jsonPayload": {"message": "epoch 3 done", "step": 12},
            "logName": "projects/p1/logs/stderr",
        },
        {"resource": {"type": "k8s_node", "labels": {}}, "textPayload": "Node 'gke-a-b' is fine"},
    ],
)
def test_ordinary_lines_take_the_quiet_path(entry: dict[str, Any]) -> None:
    # Not vacuous: what most log lines are is screened without a Signal.
    quiet = C.screen(entry)
    assert quiet is not None
    full = C.classify(entry)
    assert quiet == (C.identity(full), full.timestamp, full.insert_id)
