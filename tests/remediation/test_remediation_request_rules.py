"""The remediation request and the drain, as the pure rules decide them: a request that is
not exactly the recorded approval is forged; what a drain evicts and leaves; how long
it waits after a refused eviction; what the cordon writes on the node; the delete's
idempotency key.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from loopbreaker.approval.requests import Approval, Decision, Platform, Target
from loopbreaker.errors import InvalidInput, UnsafeToAct
from loopbreaker.remediation.rules import (
    ForgedRequest,
    PodState,
    RemediationRequest,
    backoff,
    check_request,
    cordon_annotations,
    delete_request_id,
    evictable,
    hand_over_annotations,
    refuse,
)

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
INCIDENT = "inc-0123456789abcdef"
TARGET = Target(
    node="gke-a3-pool-x7k2",
    instance="gke-a3-pool-x7k2",
    instance_id="4471936583212201",
    zone="us-central1-a",
    project="proj",
    physical_host="ce876975be10972b",
)
APPROVAL = Approval(
    Decision.APPROVED, "apr-1", "isolate_host", TARGET, "U0APPROVER", Platform.SLACK, NOW,
    expires_at=NOW + timedelta(hours=1),
)  # fmt: skip


def published(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "incident_id": INCIDENT,
        "approval_id": "apr-1",
        "dedup_id": f"{INCIDENT}:apr-1",
        "action": "isolate_host",
        "target": TARGET.to_dict(),
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not ...}


# --- the request ---------------------------------------------------------------------


def test_a_published_request_parses_to_its_fields() -> None:
    assert RemediationRequest.parse(published()) == RemediationRequest(
        INCIDENT, "apr-1", f"{INCIDENT}:apr-1", "isolate_host", TARGET
    )


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (None, "a remediation request must be a JSON object"),
        ([INCIDENT], "a remediation request must be a JSON object"),
        (published(incident_id=...), "remediation request: None is not an incident id"),
        (published(incident_id="inc-1"), "remediation request: 'inc-1' is not an incident id"),
        (
            published(incident_id=INCIDENT + "0"),
            "remediation request: 'inc-0123456789abcdef0' is not an incident id",
        ),
        (
            published(incident_id="INC-0123456789ABCDEF"),
            "remediation request: 'INC-0123456789ABCDEF' is not an incident id",
        ),
        (published(incident_id=7), "remediation request: 7 is not an incident id"),
        (published(approval_id=...), "remediation request lacks 'approval_id'"),
        (published(dedup_id=...), "remediation request lacks 'dedup_id'"),
        (published(action=...), "remediation request lacks 'action'"),
        (published(target=...), "remediation request lacks 'target'"),
        (published(target={"node": "n"}), "remediation request lacks 'instance'"),
        (
            published(target=None),
            "remediation request lacks 'NoneType' object is not subscriptable",
        ),
        (
            published(target="gke-a3-pool-x7k2"),
            "remediation request lacks string indices must be integers, not 'str'",
        ),
    ],
)
def test_a_request_that_is_not_one_says_what_is_wrong(data: object, said: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        RemediationRequest.parse(data)
    assert str(refused.value) == said


def request(**changes: Any) -> RemediationRequest:
    return RemediationRequest.parse(published(**changes))


def test_the_request_for_exactly_the_approval_is_taken() -> None:
    assert check_request(request(), APPROVAL) is APPROVAL


@pytest.mark.parametrize(
    ("approval", "changes", "said"),
    [
        (None, {}, f"incident {INCIDENT} has no approval"),
        (
            Approval(**{**APPROVAL.__dict__, "decision": Decision.REJECTED}),
            {},
            f"incident {INCIDENT} has no approval",
        ),
        (
            APPROVAL,
            {"approval_id": "apr-2"},
            "request names approval apr-2, the incident's is apr-1",
        ),
        (
            APPROVAL,
            {"target": {**TARGET.to_dict(), "instance_id": "1"}},
            "request names VM gke-a3-pool-x7k2 (id 1); the approval is for gke-a3-pool-x7k2 "
            "(id 4471936583212201)",
        ),
        (
            APPROVAL,
            {"target": {**TARGET.to_dict(), "zone": "us-east5-a"}},
            "request names VM gke-a3-pool-x7k2 (id 4471936583212201); the approval is for "
            "gke-a3-pool-x7k2 (id 4471936583212201)",
        ),
        (APPROVAL, {"action": "delete_cluster"}, "request action delete_cluster was not approved"),
    ],
)
def test_a_request_that_is_not_exactly_the_approval_is_forged(
    approval: Approval | None, changes: dict[str, Any], said: str
) -> None:
    with pytest.raises(ForgedRequest) as forged:
        check_request(request(**changes), approval)
    assert str(forged.value) == said


# --- the drain -----------------------------------------------------------------------


def test_a_drain_evicts_workloads_and_leaves_daemons_mirrors_and_finished_pods() -> None:
    pods = [
        PodState("train", "worker-0", ("Job",), phase="Running"),
        PodState("train", "worker-1", ("ReplicaSet",)),
        PodState("train", "pending", (), phase="Pending"),
        PodState("kube-system", "fluentbit", ("DaemonSet",), phase="Running"),
        PodState("kube-system", "kube-proxy", ("Node",), mirror=True),
        PodState("train", "done", ("Job",), phase="Succeeded"),
        PodState("train", "crashed", ("Job",), phase="Failed"),
        PodState("train", "leaving", ("Job",), phase="Running", terminating=True),
        PodState("train", "two-owners", ("Job", "DaemonSet")),
    ]
    evict, skip = evictable(pods)
    assert [p.name for p in evict] == ["worker-0", "worker-1", "pending", "leaving"]
    assert [p.name for p in skip] == ["fluentbit", "kube-proxy", "done", "crashed", "two-owners"]


@pytest.mark.parametrize(
    ("attempt", "seconds"),
    [(-3, 5), (0, 5), (1, 5), (2, 10), (3, 20), (4, 40), (5, 60), (6, 60), (17, 60), (10**9, 60)],
)
def test_the_wait_after_a_refused_eviction_doubles_from_five_seconds_up_to_a_minute(
    attempt: int, seconds: int
) -> None:
    assert backoff(attempt) == timedelta(seconds=seconds)


def test_the_cordon_says_on_the_node_which_incident_who_approved_and_when() -> None:
    assert cordon_annotations(INCIDENT, APPROVAL, NOW) == {
        "loopbreaker.dev/incident": INCIDENT,
        "loopbreaker.dev/reason": "physical host ce876975be10972b failed repeatedly",
        "loopbreaker.dev/approved-by": "U0APPROVER via slack",
        "loopbreaker.dev/cordoned-at": "2026-03-02T10:00:00Z",
    }


def test_the_hand_over_to_gke_says_when_it_was_handed_over_instead() -> None:
    chat = Approval(
        **{**APPROVAL.__dict__, "actor": "alice@example.com", "platform": Platform.GOOGLE_CHAT}
    )
    assert hand_over_annotations(INCIDENT, chat, NOW + timedelta(seconds=5)) == {
        "loopbreaker.dev/incident": INCIDENT,
        "loopbreaker.dev/reason": "physical host ce876975be10972b failed repeatedly",
        "loopbreaker.dev/approved-by": "alice@example.com via google-chat",
        "loopbreaker.dev/handed-to-gke-at": "2026-03-02T10:00:05Z",
    }


def test_the_delete_request_id_is_the_same_for_every_delivery_of_one_approval() -> None:
    made = delete_request_id(INCIDENT, "apr-0123456789abcdef0123")
    assert made == "7a771de2-4e91-5828-a065-eca502dba812"  # uuid5(URL, loopbreaker:inc:apr)
    assert made == str(
        uuid.uuid5(uuid.NAMESPACE_URL, f"loopbreaker:{INCIDENT}:apr-0123456789abcdef0123")
    )
    assert delete_request_id(INCIDENT, "apr-other") != made
    assert delete_request_id("inc-fedcba9876543210", "apr-0123456789abcdef0123") != made


def test_a_refusal_joins_its_reasons() -> None:
    refused = refuse(["the approval expired at 2026-03-02T11:00:00Z", "node n no longer exists"])
    assert isinstance(refused, UnsafeToAct)
    assert str(refused) == "the approval expired at 2026-03-02T11:00:00Z; node n no longer exists"
