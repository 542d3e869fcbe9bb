"""The executor's re-check through the real clients: the node, the VM and the pool must
still be exactly what was approved, or nothing changes.

Split off ``test_remediation_executor.py``; the same lab (``remedkit``) and fake servers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
import remedkit as R

from loopbreaker.incidents import State
from loopbreaker.remediation.executor import Result
from loopbreaker.remediation.rules import RemediationPolicy

LIVE = RemediationPolicy(dry_run=False)


def test_an_expired_approval_fails_before_anything_changes(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    approval = lab.incident(request_["incident_id"]).approval
    assert approval is not None
    lab.clock.set(approval.expires_at + timedelta(seconds=1))
    lab.remediator(LIVE).handle(request_)
    incident = lab.incident(request_["incident_id"])
    assert incident.state is State.FAILED and "approval expired" in incident.audit[-1].note
    assert R.mutations(lab) == []


@pytest.mark.parametrize(
    ("prepare", "reason"),
    [
        (lambda n: n["metadata"]["labels"].update({"loopbreaker.dev/remediation": "disabled"}),
         "opted out"),
        (lambda n: n["metadata"]["labels"].update(
            {"cloud.google.com/gce-topology-host": "another-host"}), "not the suspect"),
        (lambda n: n["spec"].update({"providerID": "gce://p/z/other-vm"}), "is backed by"),
    ],
    ids=["opt_out", "moved_host", "other_vm"],
)  # fmt: skip
def test_the_node_must_still_be_the_approved_one(
    lab: R.Lab, request_: dict[str, Any], prepare: Callable[[dict[str, Any]], None], reason: str
) -> None:
    prepare(lab.node())
    lab.remediator(LIVE).handle(request_)
    incident = lab.incident(request_["incident_id"])
    assert incident.state is State.FAILED and reason in incident.audit[-1].note
    assert R.mutations(lab) == []


def test_a_node_pool_out_of_scope_is_refused(lab: R.Lab, request_: dict[str, Any]) -> None:
    lab.remediator(replace(LIVE, node_pools=frozenset({"gpu-pool"}))).handle(request_)
    assert "not in LOOPBREAKER_NODE_POOLS" in lab.incident(request_["incident_id"]).audit[-1].note
    assert R.mutations(lab) == []


def test_the_circuit_breaker_refuses_when_much_of_the_pool_is_not_ready(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    for node in lab.kube.nodes[:2]:
        for cond in node["status"]["conditions"]:
            if cond["type"] == "Ready":
                cond["status"] = "Unknown"
    lab.remediator(LIVE).handle(request_)
    note = lab.incident(request_["incident_id"]).audit[-1].note
    assert "2 of 3 other nodes" in note and "fleet-wide" in note and R.mutations(lab) == []


@pytest.mark.parametrize(
    "strip",
    [
        lambda n: n["metadata"]["labels"].pop("cloud.google.com/gce-topology-host"),
        lambda n: n["spec"].pop("providerID"),
        lambda n: n["metadata"]["annotations"].pop("container.googleapis.com/instance_id"),
    ],
    ids=["no_host_label", "no_provider_id", "no_instance_id"],
)
def test_a_node_missing_an_identity_is_not_touched(
    lab: R.Lab, request_: dict[str, Any], strip: Callable[[dict[str, Any]], None]
) -> None:
    strip(lab.node())
    lab.remediator(LIVE).handle(request_)
    assert lab.incident(request_["incident_id"]).state is State.FAILED
    assert R.mutations(lab) == [] and lab.compute.deletes == []


def test_a_vm_compute_places_on_another_host_is_not_touched(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    lab.compute.instances[(R.PROJECT, R.ZONE, R.NODE)]["physicalHost"] = "a-healthy-host"
    lab.remediator(LIVE).handle(request_)
    incident = lab.incident(request_["incident_id"])
    assert incident.state is State.FAILED and "host a-healthy-host" in incident.audit[-1].note
    assert R.mutations(lab) == []


def test_the_documented_three_part_physical_host_matches_the_node_labels(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    record = lab.compute.instances[(R.PROJECT, R.ZONE, R.NODE)]
    assert record["physicalHost"].count("/") == 3 and record["physicalHost"].endswith(R.HOST)
    assert lab.remediator(LIVE).handle(request_).result is Result.REMEDIATED
    assert lab.compute.deletes != []


def test_a_vm_in_another_block_of_the_same_host_id_is_not_touched(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    record = lab.compute.instances[(R.PROJECT, R.ZONE, R.NODE)]
    _, block, subblock, host = record["physicalHost"].split("/")
    record["physicalHost"] = f"/another-block/{subblock}/{host}"
    lab.remediator(LIVE).handle(request_)
    incident = lab.incident(request_["incident_id"])
    assert incident.state is State.FAILED
    assert f"block another-block (expected {block})" in incident.audit[-1].note
    assert "subblock" not in incident.audit[-1].note and R.mutations(lab) == []


def test_a_vm_compute_reports_no_host_for_is_not_touched(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    del lab.compute.instances[(R.PROJECT, R.ZONE, R.NODE)]["physicalHost"]
    lab.remediator(LIVE).handle(request_)
    incident = lab.incident(request_["incident_id"])
    assert incident.state is State.FAILED and "reports no physical host" in incident.audit[-1].note
    assert R.mutations(lab) == [] and lab.compute.deletes == []


def test_the_suspect_node_itself_does_not_trip_the_circuit_breaker(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    lab.kube.nodes = [n for n in lab.kube.nodes if n["metadata"]["name"] in (R.NODE,)] + [
        n for n in lab.kube.nodes if n["metadata"]["name"] != R.NODE
    ][:2]
    for cond in lab.node()["status"]["conditions"]:
        if cond["type"] == "Ready":
            cond["status"] = "Unknown"
    assert lab.remediator(LIVE).handle(request_).result is Result.REMEDIATED
