"""The re-check of an approval for a host repair (GKE's report-and-replace, or
``reportHostAsFaulty``): the path holds only when what the node and Compute Engine say
now still allow it, the approved rule falls back to delete where the card said so, and
an approval from before paths existed keeps the path its card named.

Pure: ``recheck`` on node and VM states built here; the words of each branch are pinned
in tests/approval/test_repair_path_texts.py.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from loopbreaker.approval.repair import RepairPath, RepairPolicy
from loopbreaker.approval.requests import Approval, Decision, Platform, Target
from loopbreaker.model import HostPlace
from loopbreaker.remediation.rules import (
    HOST_LABEL,
    POOL_LABEL,
    InstanceState,
    NodeState,
    RemediationPolicy,
    approved_path,
    recheck,
    select_branch,
)

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
TARGET = Target(
    node="gke-a3-pool-x7k2",
    instance="gke-a3-pool-x7k2",
    instance_id="4471936583212201",
    zone="us-central1-a",
    project="proj",
    physical_host="ce876975be10972b",
    node_pool="a3-pool",
    cluster="train",
    repair_path=RepairPath.GKE,
)
POLICY = RemediationPolicy(dry_run=False)
MACHINE = "node.kubernetes.io/instance-type"
NOT_BOUND = (
    "the VM is not reservation-bound (provisioning model {model}); GKE's report-and-replace "
    "takes only RESERVATION_BOUND VMs (INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED)"
)
GKE_REFUSED = (
    "repair path gke (GKE's report-and-replace) refused: {}; the approval allows no other path"
)


def node(labels: dict[str, str] | None = None, **changes: Any) -> NodeState:
    state = NodeState(
        TARGET.node,
        labels={
            HOST_LABEL: TARGET.physical_host,
            POOL_LABEL: "a3-pool",
            MACHINE: "a3-highgpu-8g",
            **(labels or {}),
        },
        ready=False,
        provider_id=f"gce://{TARGET.project}/{TARGET.zone}/{TARGET.instance}",
        instance_id=TARGET.instance_id,
        kubelet_version="v1.32.4-gke.1767000",
    )
    return replace(state, **changes)


def vm(**changes: Any) -> InstanceState:
    state = InstanceState(
        TARGET.instance,
        TARGET.instance_id,
        status="RUNNING",
        place=HostPlace(TARGET.physical_host),
        machine_type="a3-highgpu-8g",
        provisioning_model="RESERVATION_BOUND",
        reservation_type="SPECIFIC_RESERVATION",
    )
    return replace(state, **changes)


def reasons(
    target: Target = TARGET, policy: RemediationPolicy = POLICY, **changes: Any
) -> list[str]:
    args: dict[str, Any] = {"node": node(), "instance": vm(), "pool": [node()]}
    args.update(changes)
    approval = Approval(
        Decision.APPROVED, "req-1", "isolate_host", target, "U1", Platform.SLACK, NOW,
        expires_at=NOW + timedelta(hours=1),
    )  # fmt: skip
    return recheck(target, approval, now=NOW, deletions_last_hour=0, policy=policy, **args)


def test_a_gke_approval_holds_while_compute_says_reservation_bound() -> None:
    assert reasons() == []
    branch = select_branch(TARGET, node(), vm(), POLICY)
    assert (branch.path, branch.refusal) == (RepairPath.GKE, None)
    assert branch.why == (
        "Compute Engine says provisioning model RESERVATION_BOUND, reservation affinity "
        "SPECIFIC_RESERVATION"
    )


def test_a_gke_approval_is_refused_when_compute_now_says_otherwise() -> None:
    assert reasons(instance=vm(provisioning_model="STANDARD", reservation_type=None)) == [
        GKE_REFUSED.format(NOT_BOUND.format(model="STANDARD"))
    ]


def test_the_vm_must_be_running_for_gke_to_take_it() -> None:
    assert reasons(instance=vm(status="STOPPING")) == [
        GKE_REFUSED.format("Compute Engine says the VM is STOPPING, not RUNNING")
    ]


def test_the_gke_version_is_the_kubelets_now() -> None:
    older = node(kubelet_version="v1.31.6-gke.1020000")
    assert reasons(node=older, pool=[older]) == [
        GKE_REFUSED.format("GKE v1.31.6-gke.1020000 is older than 1.32.3-gke.1057001")
    ]


def test_the_machine_type_is_the_nodes_label_else_computes() -> None:
    unlabelled = replace(node(), labels={HOST_LABEL: TARGET.physical_host, POOL_LABEL: "a3-pool"})
    assert reasons(node=unlabelled, pool=[unlabelled]) == []
    small = vm(machine_type="a2-highgpu-1g")
    assert reasons(node=unlabelled, pool=[unlabelled], instance=small) == [
        GKE_REFUSED.format(
            "machine type a2-highgpu-1g is not one GKE's report-and-replace supports (A4X Max, "
            "A4X, A4, A3 Ultra, A3 Mega, A3 High with 8 GPUs)"
        )
    ]
    # The node's label wins over Compute's answer.
    assert reasons(instance=small) == []


def test_the_approved_rule_falls_back_to_delete_without_a_refusal() -> None:
    rule = replace(TARGET, fallback_path=RepairPath.DELETE)
    standard = vm(provisioning_model="STANDARD", reservation_type=None)
    assert reasons(target=rule, instance=standard) == []
    branch = select_branch(rule, node(), standard, POLICY)
    assert (branch.path, branch.refusal) == (RepairPath.DELETE, None)
    assert branch.why == (
        "the approved rule selects delete (cordon, drain and delete the VM): "
        + NOT_BOUND.format(model="STANDARD")
    )


@pytest.mark.parametrize(
    ("repair", "path"),
    [
        (RepairPolicy.REPORT, RepairPath.REPORT),
        (RepairPolicy.AUTO, RepairPath.DELETE),
        (RepairPolicy.DELETE, RepairPath.DELETE),
        (RepairPolicy.GKE, RepairPath.DELETE),
    ],
)
def test_an_approval_from_before_paths_keeps_what_its_card_said(
    repair: RepairPolicy, path: RepairPath
) -> None:
    old = replace(TARGET, repair_path=None)
    assert approved_path(old, RemediationPolicy(repair=repair)) is path
    assert approved_path(TARGET, RemediationPolicy(repair=RepairPolicy.REPORT)) is RepairPath.GKE


def test_an_old_approval_under_the_report_policy_is_rechecked_as_a_report() -> None:
    old = replace(TARGET, repair_path=None)
    standard = vm(provisioning_model="STANDARD", reservation_type=None)
    report = RemediationPolicy(dry_run=False, repair=RepairPolicy.REPORT)
    assert reasons(target=old, policy=report, instance=standard) == [
        "repair path report (reportHostAsFaulty) refused: the VM is not reservation-bound "
        "(provisioning model STANDARD); reportHostAsFaulty takes only RESERVATION_BOUND VMs "
        "(INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED); the approval allows no other path"
    ]
    assert reasons(target=old, instance=standard) == []  # delete needs nothing more


def test_without_the_node_or_the_vm_there_is_no_branch_to_refuse() -> None:
    assert reasons(instance=None) == [f"VM {TARGET.instance} in {TARGET.zone} no longer exists"]
    assert reasons(node=None, pool=[]) == [f"node {TARGET.node} no longer exists"]


# --- the rest of the re-check, as a host repair sees it ------------------------------


def test_the_circuit_breaker_names_the_pool_from_the_nodes_label() -> None:
    labelled = node({POOL_LABEL: "labelled-pool"})
    down = [NodeState(f"down-{n}", ready=False) for n in range(2)]
    assert reasons(node=labelled, pool=[labelled, *down]) == [
        "2 of 2 other nodes of pool labelled-pool are NotReady (100% > 30%): a fleet-wide "
        "problem, not a bad host; escalate"
    ]


def test_each_differing_part_of_the_place_is_named_subblock_included() -> None:
    labelled = node(
        {
            "cloud.google.com/gce-topology-block": "b1",
            "cloud.google.com/gce-topology-subblock": "s1",
        }
    )
    elsewhere = vm(place=HostPlace(TARGET.physical_host, "b1", "s2"))
    assert reasons(node=labelled, pool=[labelled], instance=elsewhere) == [
        f"Compute Engine puts VM {TARGET.instance} on another place than the approved host "
        f"{TARGET.physical_host}: subblock s2 (expected s1)"
    ]
    unlabelled_subblock = node({"cloud.google.com/gce-topology-subblock": ""})
    assert reasons(node=unlabelled_subblock, pool=[unlabelled_subblock], instance=elsewhere) == []


def test_another_owners_reason_names_the_node() -> None:
    held = node({"cloud.google.com/fault-behavior": "XID"})
    assert reasons(node=held, pool=[held]) == [
        f"node {TARGET.node} is in GKE's report-and-replace (cloud.google.com/fault-behavior=XID): "
        "GKE is evicting, reporting or replacing it"
    ]


def test_a_node_whose_machine_type_nobody_knows_is_named() -> None:
    unlabelled = replace(node(), labels={HOST_LABEL: TARGET.physical_host, POOL_LABEL: "a3-pool"})
    unknown = vm(machine_type=None)
    assert reasons(node=unlabelled, pool=[unlabelled], instance=unknown) == [
        GKE_REFUSED.format(
            f"node {TARGET.node}'s machine type is unknown (node.kubernetes.io/instance-type)"
        )
    ]
