"""The re-check before anything is touched, one guard at a time, at its boundary, with
the reason a person reads (the refusal goes to the incident's audit trail, the chat
message and the node's Event).

Pure: ``recheck`` on node, VM and pool states built here. The approval is for the
delete path (the repair-path choice has its own tests), so every reason below comes
from the guard under test.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from recheckkit import APPROVAL, NOW, TARGET, approved_node, approved_vm

from loopbreaker.model import HostPlace
from loopbreaker.remediation.rules import (
    HOST_LABEL,
    OPT_OUT_LABEL,
    POOL_LABEL,
    InstanceState,
    NodeState,
    RemediationPolicy,
    recheck,
)

POLICY = RemediationPolicy(dry_run=False, max_deletions_per_hour=2, max_unready_share=0.3)
BLOCK = "cloud.google.com/gce-topology-block"
SUBBLOCK = "cloud.google.com/gce-topology-subblock"


def node(labels: dict[str, str] | None = None, **changes: Any) -> NodeState:
    return approved_node(TARGET, labels, **changes)


def vm(**changes: Any) -> InstanceState:
    return approved_vm(TARGET, **changes)


def healthy(count: int = 4) -> list[NodeState]:
    return [NodeState(f"ok-{n}", ready=True) for n in range(count)]


def reasons(**changes: Any) -> list[str]:
    args: dict[str, Any] = {
        "target": TARGET,
        "approval": APPROVAL,
        "now": NOW,
        "node": node(),
        "instance": vm(),
        "pool": [node(), *healthy()],
        "deletions_last_hour": 0,
        "policy": POLICY,
    }
    args.update(changes)
    return recheck(args.pop("target"), args.pop("approval"), **args)


def test_the_approved_node_on_its_host_may_be_remediated() -> None:
    assert reasons() == []


# --- the approval's expiry -----------------------------------------------------------


def test_the_approval_holds_until_the_instant_before_it_expires() -> None:
    assert reasons(now=APPROVAL.expires_at - timedelta(microseconds=1)) == []
    expired = ["the approval expired at 2026-03-02T11:00:00Z"]
    assert reasons(now=APPROVAL.expires_at) == expired
    assert reasons(now=APPROVAL.expires_at + timedelta(hours=3)) == expired


# --- the hourly budget ---------------------------------------------------------------


def test_the_hourly_budget_refuses_at_the_limit_not_below_it() -> None:
    assert reasons(deletions_last_hour=1) == []
    assert reasons(deletions_last_hour=2) == [
        "2 host repair(s) (VM deletions, host reports, hand-overs to GKE) in cluster train "
        "in the last hour (limit 2)"
    ]
    assert reasons(deletions_last_hour=7)[0].startswith("7 host repair(s)")


def test_the_default_budget_is_two_host_repairs_an_hour() -> None:
    policy = RemediationPolicy(dry_run=False)
    assert reasons(policy=policy, deletions_last_hour=1) == []
    assert reasons(policy=policy, deletions_last_hour=2)[0].endswith("(limit 2)")


def test_a_target_without_a_cluster_is_counted_under_a_question_mark() -> None:
    unnamed = replace(TARGET, cluster=None)
    said = reasons(
        target=unnamed, approval=replace(APPROVAL, target=unnamed), deletions_last_hour=3
    )
    assert said == [
        "3 host repair(s) (VM deletions, host reports, hand-overs to GKE) in cluster ? in the "
        "last hour (limit 2)"
    ]


# --- the node ------------------------------------------------------------------------


def test_a_node_that_is_gone_is_not_remediated() -> None:
    assert reasons(node=None) == ["node gke-a3-pool-1a2b-x7k2 no longer exists"]


def test_an_opted_out_node_is_refused_only_for_the_opt_out_value() -> None:
    assert reasons(node=node({OPT_OUT_LABEL: "disabled"})) == [
        "node gke-a3-pool-1a2b-x7k2 opted out (loopbreaker.dev/remediation=disabled)"
    ]
    assert reasons(node=node({OPT_OUT_LABEL: "enabled"})) == []
    assert OPT_OUT_LABEL == "loopbreaker.dev/remediation"  # the label operators set


@pytest.mark.parametrize(
    ("labels", "said"),
    [
        (
            {HOST_LABEL: "another-host"},
            "node gke-a3-pool-1a2b-x7k2 is on host another-host, not the suspect ce876975be10972b",
        ),
        (
            {HOST_LABEL: ""},
            "node gke-a3-pool-1a2b-x7k2 is on host (no cloud.google.com/gce-topology-host "
            "label), not the suspect ce876975be10972b",
        ),
    ],
)
def test_a_node_on_another_host_is_refused(labels: dict[str, str], said: str) -> None:
    assert reasons(node=node(labels)) == [said]


def test_a_node_without_its_host_label_is_refused() -> None:
    bare = node()
    bare = replace(bare, labels={POOL_LABEL: "a3-pool"})
    assert reasons(node=bare) == [
        "node gke-a3-pool-1a2b-x7k2 is on host (no cloud.google.com/gce-topology-host label), "
        "not the suspect ce876975be10972b"
    ]


def test_with_the_host_unknown_the_nodes_host_is_not_compared() -> None:
    unknown = replace(TARGET, host_known=False)
    approval = replace(APPROVAL, target=unknown)
    moved = node({HOST_LABEL: "another-host"})
    assert reasons(target=unknown, approval=approval, node=moved, instance=vm(place=None)) == []


def test_a_node_backed_by_another_vm_is_refused_for_each_identity() -> None:
    assert reasons(node=node(provider_id="gce://proj/us-central1-a/other-vm")) == [
        "node gke-a3-pool-1a2b-x7k2 is backed by gce://proj/us-central1-a/other-vm, not "
        "gce://proj/us-central1-a/gke-a3-pool-1a2b-x7k2"
    ]
    assert reasons(node=node(provider_id=None)) == [
        "node gke-a3-pool-1a2b-x7k2 is backed by None, not "
        "gce://proj/us-central1-a/gke-a3-pool-1a2b-x7k2"
    ]
    assert reasons(node=node(instance_id="999")) == [
        "node gke-a3-pool-1a2b-x7k2 is backed by VM id 999, not 4471936583212201"
    ]


def test_a_pool_out_of_scope_is_refused_and_one_in_scope_is_not() -> None:
    scoped = replace(POLICY, node_pools=frozenset({"other-pool"}))
    assert reasons(policy=scoped) == ["node pool a3-pool is not in LOOPBREAKER_NODE_POOLS"]
    assert reasons(policy=replace(POLICY, node_pools=frozenset({"a3-pool", "x"}))) == []


def test_the_pool_is_read_from_gkes_node_pool_label() -> None:
    assert POOL_LABEL == "cloud.google.com/gke-nodepool"
    scoped = replace(POLICY, node_pools=frozenset({"labelled-pool"}))
    labelled = node({"cloud.google.com/gke-nodepool": "labelled-pool"})
    assert reasons(node=labelled, policy=scoped) == []


def test_the_pool_scope_falls_back_to_the_approved_pool_without_the_label() -> None:
    unlabelled = replace(node(), labels={HOST_LABEL: TARGET.physical_host})
    scoped = replace(POLICY, node_pools=frozenset({"a3-pool"}))
    assert reasons(node=unlabelled, policy=scoped) == []
    scoped = replace(POLICY, node_pools=frozenset({"other"}))
    assert reasons(node=unlabelled, policy=scoped) == [
        "node pool a3-pool is not in LOOPBREAKER_NODE_POOLS"
    ]


def test_without_a_pool_anywhere_the_circuit_breaker_cannot_be_checked() -> None:
    unpooled = replace(TARGET, node_pool=None)
    unlabelled = replace(node(), labels={HOST_LABEL: TARGET.physical_host})
    said = reasons(target=unpooled, approval=replace(APPROVAL, target=unpooled), node=unlabelled)
    assert said == ["the node pool is unknown, so the circuit breaker cannot be checked"]
    gone = reasons(target=unpooled, approval=replace(APPROVAL, target=unpooled), node=None)
    assert "the node pool is unknown, so the circuit breaker cannot be checked" in gone


# --- the VM --------------------------------------------------------------------------


def test_a_vm_that_is_gone_is_not_remediated() -> None:
    assert reasons(instance=None) == ["VM gke-a3-pool-1a2b-x7k2 in us-central1-a no longer exists"]


def test_a_recreated_vm_is_not_the_approved_one() -> None:
    assert reasons(instance=vm(id="1234")) == [
        "VM gke-a3-pool-1a2b-x7k2 now has id 1234, not the approved 4471936583212201: it was "
        "recreated; the approved VM is gone"
    ]


def test_compute_saying_nothing_of_the_host_is_a_doubt() -> None:
    assert reasons(instance=vm(place=None)) == [
        "Compute Engine reports no physical host for VM gke-a3-pool-1a2b-x7k2: the suspect "
        "host ce876975be10972b cannot be confirmed"
    ]


def test_each_part_of_the_place_that_differs_is_named() -> None:
    labelled = node({BLOCK: "b1", SUBBLOCK: "s1"})
    elsewhere = vm(place=HostPlace("other-host", "b2", "s1"))
    assert reasons(node=labelled, instance=elsewhere) == [
        "Compute Engine puts VM gke-a3-pool-1a2b-x7k2 on another place than the approved host "
        "ce876975be10972b: block b2 (expected b1); host other-host (expected ce876975be10972b)"
    ]
    # Parts the node does not label are not compared; the host id always is.
    assert reasons(instance=vm(place=HostPlace(TARGET.physical_host, "b9", "s9"))) == []
    assert reasons(node=labelled, instance=vm(place=HostPlace(TARGET.physical_host, "b1"))) == []


def test_a_vm_compute_is_already_repairing_has_another_owner() -> None:
    assert "Compute Engine is already repairing VM gke-a3-pool-1a2b-x7k2 (REPAIRING)" in reasons(
        instance=vm(status="REPAIRING")
    )


# --- the circuit breaker -------------------------------------------------------------


def pool_of(ready: int, unready: int, *, unknown: int = 0) -> list[NodeState]:
    return (
        [node()]
        + healthy(ready)
        + [NodeState(f"down-{n}", ready=False) for n in range(unready)]
        + [NodeState(f"unknown-{n}", ready=None) for n in range(unknown)]
    )


def test_the_default_share_is_thirty_percent_and_at_it_is_not_refused() -> None:
    policy = RemediationPolicy(dry_run=False)
    assert reasons(policy=policy, pool=pool_of(7, 3)) == []
    assert reasons(policy=policy, pool=pool_of(6, 4)) == [
        "4 of 10 other nodes of pool a3-pool are NotReady (40% > 30%): a fleet-wide problem, "
        "not a bad host; escalate"
    ]


def test_a_node_whose_readiness_is_unknown_counts_as_not_ready() -> None:
    assert reasons(pool=pool_of(2, 0, unknown=2)) == [
        "2 of 4 other nodes of pool a3-pool are NotReady (50% > 30%): a fleet-wide problem, "
        "not a bad host; escalate"
    ]


def test_a_pool_of_the_suspect_alone_has_nothing_to_compare() -> None:
    assert reasons(pool=[node()]) == []
    assert reasons(pool=[]) == []


def test_several_reasons_are_all_given_in_order() -> None:
    said = reasons(
        now=APPROVAL.expires_at,
        node=None,
        instance=None,
        pool=pool_of(0, 2),
        deletions_last_hour=2,
    )
    assert [s.split(" ")[0:2] for s in said] == [
        ["the", "approval"],
        ["node", "gke-a3-pool-1a2b-x7k2"],
        ["VM", "gke-a3-pool-1a2b-x7k2"],
        ["2", "of"],
        ["2", "host"],
    ]
