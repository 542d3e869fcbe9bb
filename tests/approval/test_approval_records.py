"""The approval records as the store keeps them: the target, the open request and the
recorded decision, field by field, and what a record written by an older version reads
as.

The dictionaries are the stored format (SQLite and Firestore documents, the remediation
request on Pub/Sub): their keys are pinned, and each record reads back as itself.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from loopbreaker.approval.repair import FaultReason, RepairPath
from loopbreaker.approval.requests import (
    Approval,
    ApprovalRequest,
    Decision,
    Platform,
    Target,
    request_id,
)

T0 = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)
FULL = Target(
    node="gke-a3-pool-x7k2",
    instance="gke-a3-pool-x7k2-vm",
    instance_id="5464165239889847435",
    zone="us-east5-a",
    project="proj",
    physical_host="b7a3c1e2f4d5",
    host_known=False,
    node_pool="a3-pool",
    cluster="train-prod",
    repair_path=RepairPath.GKE,
    repair_why="GKE's report-and-replace takes a3-megagpu-8g nodes",
    fault_reason=FaultReason.UNRECOVERABLE_GPU_ERROR,
    fallback_path=RepairPath.DELETE,
)
STORED_TARGET = {
    "node": "gke-a3-pool-x7k2",
    "instance": "gke-a3-pool-x7k2-vm",
    "instance_id": "5464165239889847435",
    "zone": "us-east5-a",
    "project": "proj",
    "physical_host": "b7a3c1e2f4d5",
    "host_known": False,
    "node_pool": "a3-pool",
    "cluster": "train-prod",
    "repair_path": "gke",
    "repair_why": "GKE's report-and-replace takes a3-megagpu-8g nodes",
    "fault_reason": "UNRECOVERABLE_GPU_ERROR",
    "fallback_path": "delete",
}
OLDEST = {
    "node": "n1",
    "instance": "n1",
    "instance_id": 5464165239889847435,
    "zone": "us-east5-a",
    "project": "proj",
    "physical_host": "h1",
}


def test_a_target_is_stored_under_these_keys_and_reads_back_as_itself() -> None:
    assert FULL.to_dict() == STORED_TARGET
    assert Target.from_dict(STORED_TARGET) == FULL


def test_a_target_from_before_paths_existed_reads_with_the_defaults() -> None:
    target = Target.from_dict(OLDEST)
    assert target == Target(
        node="n1",
        instance="n1",
        instance_id="5464165239889847435",  # a number in the oldest records
        zone="us-east5-a",
        project="proj",
        physical_host="h1",
    )
    assert target.host_known is True and target.fault_reason is FaultReason.BEHAVIOR_UNSPECIFIED
    assert (target.repair_path, target.fallback_path, target.repair_why) == (None, None, None)
    assert target.to_dict() == {
        **OLDEST,
        "instance_id": "5464165239889847435",
        "host_known": True,
        "node_pool": None,
        "cluster": None,
        "repair_path": None,
        "repair_why": None,
        "fault_reason": "BEHAVIOR_UNSPECIFIED",
        "fallback_path": None,
    }


@pytest.mark.parametrize(
    ("stored", "path", "reason"),
    [
        ({"repair_path": "teleport", "fault_reason": "COSMIC_RAY"}, None, "BEHAVIOR_UNSPECIFIED"),
        ({"repair_path": "", "fault_reason": ""}, None, "BEHAVIOR_UNSPECIFIED"),
        ({"repair_path": 3, "fault_reason": 3}, None, "BEHAVIOR_UNSPECIFIED"),
        ({"repair_path": "report", "fault_reason": "PERFORMANCE"}, "report", "PERFORMANCE"),
    ],
)
def test_a_value_another_version_wrote_reads_as_unknown_not_as_an_error(
    stored: dict[str, Any], path: str | None, reason: str
) -> None:
    target = Target.from_dict({**OLDEST, **stored, "fallback_path": stored["repair_path"]})
    assert target.repair_path == (RepairPath(path) if path else None)
    assert target.fallback_path == target.repair_path
    assert target.fault_reason == FaultReason(reason)


@pytest.mark.parametrize(
    "stored",
    ["BEHAVIOR_UNSPECIFIED", "PERFORMANCE", "SILENT_DATA_CORRUPTION", "UNRECOVERABLE_GPU_ERROR"],
)
def test_every_fault_reason_reads_back_by_computes_name(stored: str) -> None:
    # reportHostAsFaulty's faultReasons[].behavior values, as Compute spells them.
    target = Target.from_dict({**OLDEST, "fault_reason": stored})
    assert target.fault_reason.value == stored and target.to_dict()["fault_reason"] == stored


def test_a_falsy_host_known_is_false() -> None:
    assert Target.from_dict({**OLDEST, "host_known": 0}).host_known is False
    assert Target.from_dict({**OLDEST, "host_known": None}).host_known is False


def test_the_open_request_is_stored_under_these_keys() -> None:
    request = ApprovalRequest(
        "apr-1", "isolate_host", FULL, T0, T0 + timedelta(minutes=30, microseconds=5)
    )
    stored = request.to_dict()
    assert stored == {
        "id": "apr-1",
        "action": "isolate_host",
        "target": STORED_TARGET,
        "issued_at": "2026-05-20T08:00:00Z",
        "expires_at": "2026-05-20T08:30:00.000005Z",
    }
    assert ApprovalRequest.from_dict(stored) == request


def approval(**changes: Any) -> Approval:
    values: dict[str, Any] = {
        "decision": Decision.APPROVED,
        "request_id": "apr-1",
        "action": "isolate_host",
        "target": FULL,
        "actor": "U0APPROVER",
        "platform": Platform.SLACK,
        "at": T0 + timedelta(minutes=2),
        "expires_at": T0 + timedelta(minutes=30),
        "actor_name": "alice",
        "published_at": T0 + timedelta(minutes=2, seconds=1),
        "published_id": "msg-42",
    }
    values.update(changes)
    return Approval(**values)


def test_the_decision_is_stored_under_these_keys_and_reads_back_as_itself() -> None:
    stored = approval().to_dict()
    assert stored == {
        "decision": "approved",
        "request_id": "apr-1",
        "action": "isolate_host",
        "target": STORED_TARGET,
        "by": "U0APPROVER",
        "by_name": "alice",
        "platform": "slack",
        "at": "2026-05-20T08:02:00Z",
        "expires_at": "2026-05-20T08:30:00Z",
        "published_at": "2026-05-20T08:02:01Z",
        "published_id": "msg-42",
    }
    assert Approval.from_dict(stored) == approval()


def test_a_rejection_never_published_reads_back_without_publication() -> None:
    rejected = approval(
        decision=Decision.REJECTED,
        platform=Platform.GOOGLE_CHAT,
        actor="alice@example.com",
        actor_name=None,
        published_at=None,
        published_id=None,
    )
    stored = rejected.to_dict()
    assert (stored["decision"], stored["platform"]) == ("rejected", "google-chat")
    assert (stored["published_at"], stored["published_id"], stored["by_name"]) == (None,) * 3
    assert Approval.from_dict(stored) == rejected
    del stored["published_at"], stored["published_id"], stored["by_name"]
    assert Approval.from_dict(stored) == rejected


def test_the_request_id_is_derived_from_incident_vm_node_and_time() -> None:
    made = request_id("inc-1", FULL, T0)
    # sha256 of "inc-1\n{instance}\n{instance_id}\n{node}\n{issued_at}", 20 hex digits:
    # a replay of the same input finds the request it stored before.
    assert made == "apr-6f5cdc2d6fcf939ac611"
    others = {
        request_id("inc-2", FULL, T0),
        request_id("inc-1", Target.from_dict({**STORED_TARGET, "instance": "other"}), T0),
        request_id("inc-1", Target.from_dict({**STORED_TARGET, "instance_id": "1"}), T0),
        request_id("inc-1", Target.from_dict({**STORED_TARGET, "node": "other"}), T0),
        request_id("inc-1", FULL, T0 + timedelta(seconds=1)),
    }
    assert made not in others and len(others) == 5
    # What else the target says does not change which request it is.
    assert request_id("inc-1", Target.from_dict({**STORED_TARGET, "zone": "z"}), T0) == made
