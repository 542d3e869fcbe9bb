"""One owner per node, in the pure re-check: a node GKE's report-and-replace, GKE's host
maintenance or another remediator is already handling is refused, and the reason names
the system and its marker; unrelated labels, annotations and taints are not."""

from __future__ import annotations

import re

import pytest
from recheckkit import APPROVAL, NOW, TARGET, approved_node, approved_vm

from loopbreaker.remediation.owners import Marker, MarkerKind, Taint, parse_markers
from loopbreaker.remediation.rules import (
    NodeState,
    RemediationPolicy,
    recheck,
)

#: NVSentinel's markers, as docs/remediation.md gives them for the setting.
NVSENTINEL = parse_markers(
    "NVSentinel:label:dgxc.nvidia.com/nvsentinel-state, NVSentinel:annotation:quarantineHealthEvent"
)


def node(
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
) -> NodeState:
    """The approved node, every identity in place, plus ``labels``, annotations and taints."""
    return approved_node(TARGET, labels, annotations=annotations or {}, taints=taints)


def reasons(state: NodeState, markers: tuple[Marker, ...] = NVSENTINEL) -> list[str]:
    return recheck(
        TARGET,
        APPROVAL,
        now=NOW,
        node=state,
        instance=approved_vm(TARGET),
        pool=[state],
        deletions_last_hour=0,
        policy=RemediationPolicy(foreign_markers=markers),
    )


def test_the_approved_node_with_nothing_on_it_may_be_remediated() -> None:
    assert reasons(node()) == []


@pytest.mark.parametrize(
    ("state", "names"),
    [
        (node({"cloud.google.com/fault-behavior": "XID"}),
         ["GKE's report-and-replace", "cloud.google.com/fault-behavior=XID"]),
        (node({"cloud.google.com/report-and-replace-status": "PodsEvicted"}),
         ["GKE's report-and-replace", "report-and-replace-status=PodsEvicted"]),
        (node({"cloud.google.com/report-and-replace-status": "OperationRUNNING"}),
         ["GKE's report-and-replace", "report-and-replace-status=OperationRUNNING"]),
        (node({"cloud.google.com/active-node-maintenance": "ONGOING"}),
         ["GKE host maintenance", "cloud.google.com/active-node-maintenance=ONGOING"]),
        (node(taints=(Taint("cloud.google.com/impending-node-termination", None, "NoSchedule"),)),
         ["terminated by GKE", "cloud.google.com/impending-node-termination:NoSchedule"]),
        (node({"dgxc.nvidia.com/nvsentinel-state": "draining"}),
         ["NVSentinel", "label dgxc.nvidia.com/nvsentinel-state=draining"]),
        (node(annotations={"quarantineHealthEvent": '{"errorCode":["79"]}'}),
         ["NVSentinel", 'annotation quarantineHealthEvent={"errorCode":["79"]}']),
    ],
    ids=["fault_behavior", "pods_evicted", "operation_running", "maintenance",
         "impending_termination", "nvsentinel_label", "nvsentinel_annotation"],
)  # fmt: skip
def test_a_node_another_system_handles_is_refused_naming_system_and_marker(
    state: NodeState, names: list[str]
) -> None:
    found = reasons(state)
    assert len(found) == 1, found
    assert all(name in found[0] for name in names), found


@pytest.mark.parametrize("status", ["OperationDone", "Error", "ERROR"])
def test_a_report_and_replace_that_ended_no_longer_holds_the_node(status: str) -> None:
    # GKE's documented ends: the fault-behavior label is gone (GKE removes it), the status stays.
    assert reasons(node({"cloud.google.com/report-and-replace-status": status})) == []


def test_an_undocumented_report_and_replace_status_is_a_doubt() -> None:
    found = reasons(node({"cloud.google.com/report-and-replace-status": "Unexpected"}))
    assert len(found) == 1 and "has not ended" in found[0]


def test_unrelated_labels_annotations_and_taints_are_not_refused() -> None:
    state = node(
        {
            "cloud.google.com/scheduled-maintenance-time": "1733296000",  # coming, not active
            "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
            "nvsentinel-state": "quarantined",  # not NVSentinel's prefixed key
        },
        {"container.googleapis.com/instance_id": TARGET.instance_id, "quarantine": "x"},
        (Taint("nvidia.com/gpu", "present", "NoSchedule"),),
    )
    assert reasons(state) == []


def test_a_taint_or_label_marker_with_a_value_matches_that_value_only() -> None:
    markers = parse_markers("taint:example.com/repair=on, label:example.com/owner=medik8s")
    on = node({"example.com/owner": "medik8s"}, taints=(Taint("example.com/repair", "on"),))
    off = node({"example.com/owner": "someone"}, taints=(Taint("example.com/repair", "off"),))
    found = reasons(on, markers)
    assert [r.split("(")[-1] for r in found] == [
        "taint example.com/repair=on)",
        "label example.com/owner=medik8s)",
    ]
    assert all("another remediator" in r for r in found)
    assert reasons(off, markers) == []


def test_a_long_annotation_is_clipped_in_the_reason() -> None:
    found = reasons(node(annotations={"quarantineHealthEvent": "x" * 500}))
    assert len(found) == 1 and found[0].endswith("...)") and len(found[0]) < 200


def test_markers_parse_with_and_without_a_system() -> None:
    assert parse_markers(" NVSentinel:label:dgxc.nvidia.com/nvsentinel-state ,taint:a/b=c,") == (
        Marker(MarkerKind.LABEL, "dgxc.nvidia.com/nvsentinel-state", None, "NVSentinel"),
        Marker(MarkerKind.TAINT, "a/b", "c", None),
    )
    assert parse_markers("") == ()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("node:a/b", "the kind must be"),
        ("label", "is not [SYSTEM:]"),
        ("a:b:label:c", "is not [SYSTEM:]"),
        ("label:Bad_Prefix/x", "is not a Kubernetes"),
        ("label:a/b=", "an empty value"),
        ("-x:label:a/b", "is not a system name"),
    ],
)
def test_a_malformed_marker_is_named(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_markers(text)
