"""Another system's marks on a node, read exactly: which marks hold the node, the reason
each one gives (it goes to the audit trail and the node's Event), and the
``LOOPBREAKER_FOREIGN_REMEDIATION_MARKERS`` setting entry by entry.

Pure: ``owner_reasons`` and ``parse_markers``. test_owners.py covers the same marks
through the whole re-check.
"""

from __future__ import annotations

import pytest

from loopbreaker.remediation.owners import (
    REPORT_AND_REPLACE_ENDED,
    Marker,
    MarkerKind,
    Taint,
    owner_reasons,
    parse_markers,
)

NODE = "gke-a3-pool-x7k2"
FAULT = "cloud.google.com/fault-behavior"
STATUS = "cloud.google.com/report-and-replace-status"
MAINTENANCE = "cloud.google.com/active-node-maintenance"
TERMINATION = "cloud.google.com/impending-node-termination"
LABEL, ANNOTATION, TAINT = MarkerKind.LABEL, MarkerKind.ANNOTATION, MarkerKind.TAINT


def reasons(
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    markers: tuple[Marker, ...] = (),
) -> list[str]:
    return owner_reasons(NODE, labels or {}, annotations or {}, taints, markers)


def test_a_node_without_marks_has_no_other_owner() -> None:
    assert reasons() == []


@pytest.mark.parametrize("value", ["XID", "unspecified", ""])
def test_gkes_fault_behavior_label_holds_the_node_whatever_its_value(value: str) -> None:
    assert reasons({FAULT: value}) == [
        f"node {NODE} is in GKE's report-and-replace ({FAULT}={value}): GKE is evicting, "
        "reporting or replacing it"
    ]


@pytest.mark.parametrize("value", ["PodsEvicted", "OperationRUNNING", "Unexpected", ""])
def test_a_report_and_replace_status_before_its_end_holds_the_node(value: str) -> None:
    assert reasons({STATUS: value}) == [
        f"node {NODE} is in GKE's report-and-replace ({STATUS}={value}): the operation has "
        "not ended"
    ]


@pytest.mark.parametrize("value", ["OperationDone", "operationdone", "Error", "ERROR", "error"])
def test_the_two_ends_let_go_of_the_node_in_any_case(value: str) -> None:
    assert reasons({STATUS: value}) == []


def test_the_ends_are_the_two_gke_documents() -> None:
    assert {"operationdone", "error"} == REPORT_AND_REPLACE_ENDED


@pytest.mark.parametrize("value", ["ONGOING", ""])
def test_gkes_host_maintenance_label_holds_the_node(value: str) -> None:
    assert reasons({MAINTENANCE: value}) == [
        f"node {NODE} is under GKE host maintenance ({MAINTENANCE}={value}): GKE is stopping "
        "its workloads"
    ]


def test_the_impending_termination_taint_holds_the_node_with_or_without_effect() -> None:
    assert reasons(taints=(Taint(TERMINATION, None, "NoSchedule"),)) == [
        f"node {NODE} is about to be terminated by GKE (taint {TERMINATION}:NoSchedule)"
    ]
    assert reasons(taints=(Taint(TERMINATION),)) == [
        f"node {NODE} is about to be terminated by GKE (taint {TERMINATION})"
    ]


def test_each_mark_gives_its_own_reason_in_a_fixed_order() -> None:
    found = reasons(
        {FAULT: "XID", STATUS: "PodsEvicted", MAINTENANCE: "ONGOING"},
        taints=(Taint("other"), Taint(TERMINATION, None, "NoExecute")),
    )
    assert [r.split(" (")[0] for r in found] == [
        f"node {NODE} is in GKE's report-and-replace",
        f"node {NODE} is in GKE's report-and-replace",
        f"node {NODE} is under GKE host maintenance",
        f"node {NODE} is about to be terminated by GKE",
    ]


# --- markers of other remediators ----------------------------------------------------


def test_a_label_marker_without_value_matches_the_key_with_any_value() -> None:
    marker = Marker(LABEL, "example.com/owner", None, "medik8s")
    assert reasons({"example.com/owner": "x"}, markers=(marker,)) == [
        f"node {NODE} is being handled by medik8s (label example.com/owner=x)"
    ]
    assert reasons({"example.com/other": "x"}, markers=(marker,)) == []
    # The key on an annotation is not the label.
    assert reasons(annotations={"example.com/owner": "x"}, markers=(marker,)) == []


def test_a_marker_with_a_value_matches_only_that_value() -> None:
    marker = Marker(ANNOTATION, "quarantine", "yes", None)
    assert reasons(annotations={"quarantine": "yes"}, markers=(marker,)) == [
        f"node {NODE} is being handled by another remediator (annotation quarantine=yes)"
    ]
    assert reasons(annotations={"quarantine": "no"}, markers=(marker,)) == []
    assert reasons({"quarantine": "yes"}, markers=(marker,)) == []


def test_a_taint_marker_shows_the_taints_value_and_effect() -> None:
    anyvalue = Marker(TAINT, "example.com/repair", None, "SRE")
    exact = Marker(TAINT, "example.com/repair", "on", "SRE")
    tainted = (Taint("unrelated", "on"), Taint("example.com/repair", "on", "NoSchedule"))
    said = f"node {NODE} is being handled by SRE (taint example.com/repair=on:NoSchedule)"
    assert reasons(taints=tainted, markers=(anyvalue,)) == [said]
    assert reasons(taints=tainted, markers=(exact,)) == [said]
    assert reasons(taints=(Taint("example.com/repair", "off"),), markers=(exact,)) == []
    assert reasons(taints=(Taint("example.com/repair"),), markers=(anyvalue,)) == [
        f"node {NODE} is being handled by SRE (taint example.com/repair)"
    ]
    # A label of the same key is not the taint.
    assert reasons({"example.com/repair": "on"}, markers=(exact,)) == []


def test_the_first_matching_taint_is_the_one_shown() -> None:
    marker = Marker(TAINT, "k", None, "SRE")
    found = reasons(taints=(Taint("k", "first"), Taint("k", "second")), markers=(marker,))
    assert found == [f"node {NODE} is being handled by SRE (taint k=first)"]


@pytest.mark.parametrize(
    ("length", "shown"),
    [(79, "a" * 79), (80, "a" * 80), (81, "a" * 77 + "..."), (500, "a" * 77 + "...")],
)
def test_a_long_value_is_clipped_to_eighty_characters(length: int, shown: str) -> None:
    marker = Marker(ANNOTATION, "quarantineHealthEvent", None, "NVSentinel")
    found = reasons(annotations={"quarantineHealthEvent": "a" * length}, markers=(marker,))
    assert found == [
        f"node {NODE} is being handled by NVSentinel (annotation quarantineHealthEvent={shown})"
    ]


def test_a_marker_reads_as_its_kind_key_and_value() -> None:
    assert str(Marker(LABEL, "k", "v", "sys")) == "label k=v"
    assert str(Marker(TAINT, "example.com/k")) == "taint example.com/k"
    assert str(Marker(ANNOTATION, "k", "")) == "annotation k"


# --- the setting ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "markers"),
    [
        ("", ()),
        (" , ,", ()),
        ("label:a, , label:b", (Marker(LABEL, "a"), Marker(LABEL, "b"))),
        ("label:k", (Marker(LABEL, "k", None, None),)),
        ("taint:k=v", (Marker(TAINT, "k", "v", None),)),
        (
            " NVSentinel : annotation : quarantineHealthEvent ",
            (Marker(ANNOTATION, "quarantineHealthEvent", None, "NVSentinel"),),
        ),
        (
            "my sys.v2-x:label:example.com/a_b.c=x=y",
            (Marker(LABEL, "example.com/a_b.c", "x=y", "my sys.v2-x"),),
        ),
        (
            "a:label:k, b:taint:t=1",
            (Marker(LABEL, "k", None, "a"), Marker(TAINT, "t", "1", "b")),
        ),
        ("s" * 63 + ":label:" + "k" * 63, (Marker(LABEL, "k" * 63, None, "s" * 63),)),
        ("label:a", (Marker(LABEL, "a", None, None),)),
        (
            "label:sub.example.com/" + "k" * 63,
            (Marker(LABEL, "sub.example.com/" + "k" * 63, None, None),),
        ),
    ],
)
def test_entries_parse_with_and_without_a_system(text: str, markers: tuple[Marker, ...]) -> None:
    assert parse_markers(text) == markers


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("label", "'label' is not [SYSTEM:]label|annotation|taint:KEY[=VALUE]"),
        ("a:b:label:k", "'a:b:label:k' is not [SYSTEM:]label|annotation|taint:KEY[=VALUE]"),
        ("sys:node:k", "'sys:node:k': the kind must be label, annotation or taint, not 'node'"),
        ("Label:k", "'Label:k': the kind must be label, annotation or taint, not 'Label'"),
        ("label:-k", "'label:-k': '-k' is not a Kubernetes label/annotation/taint key"),
        ("label:k-", "'label:k-': 'k-' is not a Kubernetes label/annotation/taint key"),
        ("label:", "'label:': '' is not a Kubernetes label/annotation/taint key"),
        (
            "label:" + "k" * 64,
            f"'label:{'k' * 64}': '{'k' * 64}' is not a Kubernetes label/annotation/taint key",
        ),
        (
            "label:Example.com/k",
            "'label:Example.com/k': 'Example.com/k' is not a Kubernetes label/annotation/taint key",
        ),
        ("label:k=", "'label:k=': an empty value after '='; leave '=' out to match any"),
        ("-sys:label:k", "'-sys:label:k': '-sys' is not a system name"),
        (":label:k", "':label:k': '' is not a system name"),
        ("s" * 64 + ":label:k", f"'{'s' * 64}:label:k': '{'s' * 64}' is not a system name"),
    ],
)
def test_a_malformed_entry_is_named_with_what_is_wrong(entry: str, said: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_markers(f"label:good, {entry}")
    assert str(refused.value) == said


def test_gkes_report_and_replace_labels_by_their_documented_names() -> None:
    # "Report faulty hosts through GKE": the labels GKE reads and writes on the node.
    from loopbreaker.approval import repair

    assert repair.FAULT_BEHAVIOR_LABEL == FAULT
    assert repair.REPORT_AND_REPLACE_STATUS_LABEL == STATUS
    assert repair.REPORT_AND_REPLACE_OPERATION_LABEL == (
        "cloud.google.com/report-and-replace-operation"
    )
