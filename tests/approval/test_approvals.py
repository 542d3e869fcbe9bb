"""The approval core: signed action requests, targets, and single-use decisions (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from builders import ctx
from chatkit import tamper

from loopbreaker import incidents
from loopbreaker.approval.repair import RepairPath
from loopbreaker.approval.requests import (
    MAX_TOKEN_LENGTH,
    ActionRequest,
    Decision,
    Platform,
    Target,
    choose_target,
    is_approver,
    parse_approvers,
    sign_token,
    verify_token,
)
from loopbreaker.errors import AlreadyDecided, ApprovalInvalid
from loopbreaker.incidents import (
    DiagnosisRecord,
    Incident,
    IncidentKey,
    Policy,
    Scope,
    State,
)
from loopbreaker.model import (
    Diagnosis,
    FailureEpisode,
    NodeInfo,
    Remediation,
    RemediationPath,
    Risk,
    RootCause,
    Signal,
    SignalKind,
    SuspectHost,
)

KEY = b"unit-test-signing-key-0123456789"
T0 = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)
NODE = "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-x7k2"
TARGET = Target(
    node=NODE,
    instance=NODE,
    instance_id="5464165239889847435",
    zone="us-east5-a",
    project="proj",
    physical_host="b7a3c1e2f4d5a6b7c8d9e0f1a2b3c4d5",
    node_pool="tpu-pool",
    cluster="tpu-cluster-prod",
)
POLICY = Policy(stale_after=timedelta(hours=6), approval_ttl=timedelta(minutes=30))


def request(**overrides: object) -> ActionRequest:
    values: dict[str, object] = {
        "incident_id": "inc-1",
        "approval_id": "apr-1",
        "action": "isolate_host",
        "node": NODE,
        "instance": NODE,
        "instance_id": TARGET.instance_id,
        "zone": TARGET.zone,
        "project": TARGET.project,
        "expires_at": T0 + timedelta(minutes=30),
    }
    values.update(overrides)
    return ActionRequest(**values)  # type: ignore[arg-type]


# --- tokens --------------------------------------------------------------------------


def test_a_signed_request_verifies_and_round_trips() -> None:
    token = sign_token(request(), KEY)
    assert token.startswith("lb1.") and len(token) < MAX_TOKEN_LENGTH
    assert verify_token(token, KEY, T0) == request()
    assert sign_token(request(), KEY) == token  # deterministic: the message fingerprint holds


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (None, "no action request"),
        ("", "no action request"),
        ("incident-123", "not a lb1 token"),
        ("lb2.e30.AAAA", "not a lb1 token"),
        ("lb1.e30.!!!", "not base64url"),
        ("x" * (MAX_TOKEN_LENGTH + 1), "too long"),
    ],
)
def test_malformed_tokens_are_refused(token: object, reason: str) -> None:
    with pytest.raises(ApprovalInvalid, match=reason):
        verify_token(token, KEY, T0)


@pytest.mark.parametrize(
    "changes",
    [
        {"instance_id": "1111111111111111111"},
        {"instance": "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-zzzz"},
        {"incident_id": "inc-2"},
        {"expires_at": "2027-01-01T00:00:00Z"},
    ],
)
def test_any_change_to_the_signed_payload_breaks_the_signature(changes: dict[str, str]) -> None:
    forged = tamper(sign_token(request(), KEY), **changes)
    with pytest.raises(ApprovalInvalid, match="signature does not verify"):
        verify_token(forged, KEY, T0)


@pytest.mark.parametrize(
    "cut",
    [
        lambda sig: "",  # no signature at all
        lambda sig: sig[:-4],  # truncated
        lambda sig: sig[:1],  # one character of it
    ],
    ids=["empty", "truncated", "one-character"],
)
def test_a_token_with_an_empty_or_truncated_signature_is_refused(cut: Any) -> None:
    version, payload, signature = sign_token(request(), KEY).split(".")
    with pytest.raises(ApprovalInvalid, match="signature"):
        verify_token(f"{version}.{payload}.{cut(signature)}", KEY, T0)


def test_a_token_signed_with_another_key_is_refused() -> None:
    with pytest.raises(ApprovalInvalid, match="signature does not verify"):
        verify_token(sign_token(request(), b"another-key-0123456789abcdef"), KEY, T0)


def test_an_expired_token_is_refused_at_its_expiry() -> None:
    token = sign_token(request(), KEY)
    verify_token(token, KEY, T0 + timedelta(minutes=29, seconds=59))
    with pytest.raises(ApprovalInvalid, match="expired"):
        verify_token(token, KEY, T0 + timedelta(minutes=30))


# --- approvers -----------------------------------------------------------------------


def test_approvers_are_slack_ids_and_emails() -> None:
    approvers = parse_approvers(" U0123ABC ,W0SLACK9, Alice@Example.com ,")
    assert approvers == {"U0123ABC", "W0SLACK9", "alice@example.com"}
    assert is_approver(approvers, Platform.SLACK, "U0123ABC")
    assert not is_approver(approvers, Platform.SLACK, "u0123abc")  # Slack ids are exact
    assert is_approver(approvers, Platform.GOOGLE_CHAT, "ALICE@example.com")
    assert not is_approver(approvers, Platform.GOOGLE_CHAT, "")


@pytest.mark.parametrize("bad", ["alice", "U", "@example.com", "a b@example.com"])
def test_a_malformed_approver_is_named(bad: str) -> None:
    with pytest.raises(ValueError, match=repr(bad)):
        parse_approvers(f"U0123ABC,{bad}")


# --- targets -------------------------------------------------------------------------


def diagnosis(
    path: RemediationPath = RemediationPath.ISOLATE_HOST, *, suspects: tuple[SuspectHost, ...]
) -> Diagnosis:
    return Diagnosis(
        context=ctx(),
        restart_loop=True,
        restart_increase=2,
        restart_total=8,
        root_cause=RootCause.FAULTY_HOST,
        remediation=Remediation(path, Risk.HIGH, True, ()),
        suspect_hosts=suspects,
        steps=(),
        evidence=(),
        ticket_draft=None,
        missing_evidence=(),
        summary="host failed twice",
    )


def suspect(*episodes: tuple[str, int]) -> SuspectHost:
    return SuspectHost(
        host=TARGET.physical_host,
        nodes=tuple(sorted({n for n, _ in episodes})),
        failures=len(episodes),
        zone="us-east5-a",
        node_pool="tpu-pool",
        episodes=tuple(
            FailureEpisode(n, TARGET.physical_host, T0 + timedelta(minutes=m), ("host_error",))
            for n, m in episodes
        ),
    )


def test_the_target_is_the_node_that_failed_last_with_its_numeric_id() -> None:
    older = "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-aaaa"
    nodes = (
        NodeInfo(
            NODE,
            "tpu-pool",
            TARGET.physical_host,
            "us-east5-a",
            NODE,
            "proj",
            instance_id="5464165239889847435",
        ),
        NodeInfo(
            older, "tpu-pool", TARGET.physical_host, "us-east5-a", older, "proj", instance_id="42"
        ),
    )
    choice = choose_target(
        diagnosis(suspects=(suspect((older, 0), (NODE, 20)),)),
        (),
        nodes,
        cluster="tpu-cluster-prod",
    )
    assert choice.reason is None and choice.target is not None
    # No machine type or GKE version is known: GKE's report-and-replace cannot be chosen.
    assert choice.target.repair_path is RepairPath.DELETE
    assert "machine type is unknown" in (choice.target.repair_why or "")
    assert replace(choice.target, repair_path=None, repair_why=None) == TARGET


def test_the_numeric_id_may_come_from_the_incidents_audit_entries() -> None:
    audit = Signal(
        SignalKind.HOST_ERROR,
        T0,
        project="proj",
        instance=NODE,
        instance_id="77",
        zone="us-east5-a",
    )
    choice = choose_target(diagnosis(suspects=(suspect((NODE, 0), (NODE, 20)),)), (audit,))
    assert choice.target is not None
    assert (choice.target.instance_id, choice.target.zone) == ("77", "us-east5-a")


@pytest.mark.parametrize(
    ("instance_id", "reason"),
    [(None, "numeric instance id"), ("gke-abc", "numeric instance id")],
)
def test_without_a_numeric_id_there_is_no_target_and_the_reason_says_why(
    instance_id: str | None, reason: str
) -> None:
    nodes = (NodeInfo(NODE, zone="us-east5-a", project="proj", instance_id=instance_id),)
    choice = choose_target(diagnosis(suspects=(suspect((NODE, 0), (NODE, 5)),)), (), nodes)
    assert choice.target is None and choice.reason is not None and reason in choice.reason
    assert NODE in choice.reason


def test_only_isolate_host_verdicts_have_targets() -> None:
    choice = choose_target(
        diagnosis(RemediationPath.WATCH_HOST, suspects=(suspect((NODE, 0)),)), ()
    )
    assert choice == type(choice)(None, None)
    assert choose_target(diagnosis(suspects=()), ()).reason == "the diagnosis names no suspect host"


# --- requests and decisions on the incident ------------------------------------------


def incident() -> Incident:
    return Incident(
        id="inc-1",
        key=IncidentKey(
            "proj", None, Scope.INSTANCE_GROUP, "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c"
        ),
        state=State.OPEN,
        opened_at=T0,
        updated_at=T0,
        first_event=T0,
        last_event=T0,
        last_signal_at=T0,
        settle_at=T0,
        signal_count=3,
        signal_revision=3,
    )


def record(target: Target | None = TARGET, reason: str | None = None) -> DiagnosisRecord:
    return DiagnosisRecord(
        at=T0,
        root_cause="faulty_host",
        remediation_path="isolate_host",
        requires_approval=True,
        summary="",
        suspect_hosts=(TARGET.physical_host,),
        signal_revision=3,
        queries=0,
        target=target,
        target_reason=reason,
    )


def awaiting(policy: Policy = POLICY) -> Incident:
    done = incidents.apply_diagnosis(incident(), record(), now=T0, policy=policy)
    assert done is not None
    return done


def test_a_request_opens_with_the_diagnosis_and_sets_the_deadline() -> None:
    asked = awaiting()
    assert asked.state is State.AWAITING_APPROVAL and asked.approval_request is not None
    assert asked.approval_request.target == TARGET
    assert asked.expires_at == asked.approval_request.expires_at == T0 + timedelta(minutes=30)
    assert "approval request" in asked.audit[-1].note and TARGET.instance_id in asked.audit[-1].note
    assert Incident.from_dict(asked.to_dict()) == asked


def test_the_deadline_never_outlives_the_stale_time() -> None:
    short = replace(POLICY, stale_after=timedelta(minutes=10))
    assert awaiting(short).expires_at == T0 + timedelta(minutes=10)


def test_approvals_off_or_no_target_open_no_request() -> None:
    off = awaiting(replace(POLICY, approval_ttl=None))
    assert off.state is State.AWAITING_APPROVAL and off.approval_request is None
    assert off.expires_at == T0 + timedelta(hours=6)
    none = incidents.apply_diagnosis(incident(), record(None, "no id"), now=T0, policy=POLICY)
    assert none is not None and none.approval_request is None


def test_a_re_diagnosis_keeps_the_request_of_the_same_target_and_supersedes_another() -> None:
    asked = awaiting()
    later = T0 + timedelta(minutes=5)
    same = incidents.apply_diagnosis(asked, record(), now=later, policy=POLICY)
    assert same is not None and same.approval_request == asked.approval_request
    other = replace(TARGET, instance_id="999")
    moved = incidents.apply_diagnosis(asked, record(other), now=later, policy=POLICY)
    assert moved is not None and moved.approval_request is not None
    assert moved.approval_request.id != asked.approval_request.id  # type: ignore[union-attr]
    assert moved.approval_request.target == other and "supersedes" in moved.audit[-1].note


def open_request(asked: Incident) -> ActionRequest:
    assert asked.approval_request is not None
    return ActionRequest.of(asked.id, asked.approval_request)


def decide(asked: Incident, req: ActionRequest, at: datetime = T0, **kw: object) -> Incident:
    values: dict[str, object] = {
        "decision": Decision.APPROVED,
        "actor": "U0APPROVER",
        "actor_name": "alice",
        "platform": Platform.SLACK,
        "now": at,
    }
    values.update(kw)
    return incidents.decide(asked, req, **values)  # type: ignore[arg-type]


def test_an_approval_is_recorded_with_who_when_and_where() -> None:
    asked = awaiting()
    approved = decide(asked, open_request(asked), T0 + timedelta(minutes=1))
    assert approved.state is State.APPROVED and approved.approval_request is None
    a = approved.approval
    assert a is not None and a.decision is Decision.APPROVED and a.target == TARGET
    assert (a.actor, a.actor_name, a.platform) == ("U0APPROVER", "alice", Platform.SLACK)
    assert a.at == T0 + timedelta(minutes=1) and a.expires_at == T0 + timedelta(minutes=30)
    assert (
        approved.audit[-1].actor == "slack:U0APPROVER"
        and approved.audit[-1].to_state is State.APPROVED
    )
    assert Incident.from_dict(approved.to_dict()) == approved
    assert incidents.unpublished(approved)
    published = incidents.mark_published(approved, T0, "msg-1")
    assert published is not None and not incidents.unpublished(published)
    assert incidents.mark_published(published, T0, "msg-2") is None


def test_a_rejection_is_final_and_publishes_nothing() -> None:
    asked = awaiting()
    rejected = decide(asked, open_request(asked), decision=Decision.REJECTED)
    assert rejected.state is State.REJECTED and rejected.final
    assert not incidents.unpublished(rejected)
    assert incidents.mark_published(rejected, T0, "x") is None


def test_a_decision_is_single_use() -> None:
    asked = awaiting()
    req = open_request(asked)
    approved = decide(asked, req)
    for again in (Decision.APPROVED, Decision.REJECTED):
        with pytest.raises(AlreadyDecided, match="already approved by alice"):
            decide(approved, req, decision=again)


def test_a_superseded_request_is_a_conflict_and_a_mismatched_one_invalid() -> None:
    asked = awaiting()
    old = open_request(asked)
    other = incidents.apply_diagnosis(
        asked, record(replace(TARGET, instance_id="999")), now=T0, policy=POLICY
    )
    assert other is not None
    with pytest.raises(AlreadyDecided, match="superseded"):
        decide(other, old)
    with pytest.raises(ApprovalInvalid, match="does not match"):
        decide(asked, replace(old, instance_id="999"))
    with pytest.raises(ApprovalInvalid, match="for incident inc-2"):
        decide(asked, replace(old, incident_id="inc-2"))


def test_an_expired_request_or_incident_cannot_be_decided() -> None:
    asked = awaiting()
    with pytest.raises(ApprovalInvalid, match="expired"):
        decide(asked, open_request(asked), T0 + timedelta(minutes=30))
    expired = incidents.expire(asked, T0 + timedelta(minutes=30))
    assert expired is not None and expired.approval_request is None
    with pytest.raises(AlreadyDecided, match="expired, not awaiting approval"):
        decide(expired, open_request(asked))


def test_leaving_awaiting_approval_withdraws_the_request() -> None:
    asked = awaiting()
    cleared = incidents.apply_diagnosis(
        asked, replace(record(), requires_approval=False), now=T0, policy=POLICY
    )
    assert cleared is not None and cleared.state is State.DIAGNOSED
    assert cleared.approval_request is None
    with pytest.raises(AlreadyDecided):
        decide(cleared, open_request(asked))
