"""The incident state machine: diagnosis, approval requests, decisions, expiry (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from loopbreaker.approval.requests import (
    ActionRequest,
    Approval,
    ApprovalRequest,
    Decision,
    Platform,
    Target,
    request_id,
)
from loopbreaker.errors import AlreadyDecided, ApprovalInvalid
from loopbreaker.incidents.records import (
    AUDIT_HEAD,
    AUDIT_TAIL,
    DIAGNOSIS_LEASE,
    FINAL_STATES,
    SYSTEM_ACTOR,
    TRANSITIONS,
    AuditEvent,
    DiagnosisRecord,
    IllegalTransition,
    Incident,
    Policy,
    State,
)
from loopbreaker.incidents.remediation import PauseRecord, Verdict, VerificationRecord
from loopbreaker.timeutil import format_rfc3339


def append_audit(
    incident: Incident, event: AuditEvent, *, head: int = AUDIT_HEAD, tail: int = AUDIT_TAIL
) -> Incident:
    """Append ``event`` to the trail, dropping (and counting) events beyond head + tail."""
    audit = (*incident.audit, event)
    dropped = incident.audit_dropped
    excess = len(audit) - (head + tail)
    if excess > 0:
        audit = audit[:head] + audit[head + excess :]
        dropped += excess
    return replace(incident, audit=audit, audit_dropped=dropped)


def transition(
    incident: Incident, to: State, *, actor: str, at: datetime, note: str = ""
) -> Incident:
    """Move to ``to`` (or record a self-loop), appending to the audit trail."""
    if to not in TRANSITIONS[incident.state]:
        raise IllegalTransition(f"incident {incident.id}: {incident.state} -> {to} is not allowed")
    # Only an open approval request expires; whoever opens one sets the deadline.
    expires_at = incident.expires_at if to is State.AWAITING_APPROVAL else None
    moved = replace(
        incident,
        state=to,
        updated_at=max(incident.updated_at, at),
        expires_at=expires_at,
        # A request is only ever open while the incident awaits approval.
        approval_request=incident.approval_request if to is State.AWAITING_APPROVAL else None,
        settle_at=None if to in FINAL_STATES else incident.settle_at,
        revision=incident.revision + 1,
    )
    return append_audit(moved, AuditEvent(at, actor, incident.state, to, note))


def is_due(incident: Incident, now: datetime) -> bool:
    return not incident.final and incident.settle_at is not None and incident.settle_at <= now


def notification_due(incident: Incident, now: datetime) -> bool:
    """A final incident whose notification failed and is to be retried by now."""
    return incident.final and incident.settle_at is not None and incident.settle_at <= now


def claim(incident: Incident, now: datetime, lease: timedelta = DIAGNOSIS_LEASE) -> Incident | None:
    """Hold a due incident for one run; None when it is not due (any more).

    A final incident is only claimed to retry its notification (see :func:`rearm`).
    """
    if not (is_due(incident, now) or notification_due(incident, now)):
        return None
    return replace(incident, settle_at=now + lease, revision=incident.revision + 1)


def settled(incident: Incident) -> Incident | None:
    """A final incident's notification went out: nothing is due any more."""
    if not incident.final or incident.settle_at is None:
        return None
    return replace(incident, settle_at=None, revision=incident.revision + 1)


def give_up(incident: Incident, now: datetime, reason: str) -> Incident | None:
    """Stop retrying an incident whose run failed on bad input, noting why in the trail.

    A new signal makes it due again (:func:`absorb` sets ``settle_at``).
    """
    note = f"not retried until a new signal arrives: {reason}"
    # A signal that arrived while the failing run was under way has re-armed the incident
    # already; keep that re-trigger.
    rearmed = incident.last_signal_at > now
    stopped = replace(
        incident,
        settle_at=incident.settle_at if rearmed else None,
        updated_at=max(incident.updated_at, now),
        revision=incident.revision + 1,
    )
    return append_audit(
        stopped,
        AuditEvent(now, f"{SYSTEM_ACTOR}:settle", incident.state, incident.state, note),
    )


def apply_diagnosis(
    incident: Incident,
    record: DiagnosisRecord,
    *,
    now: datetime,
    policy: Policy,
    requested_at: datetime | None = None,
) -> Incident | None:
    """Store a diagnosis and move the state on; None when the incident is final by now.

    ``requested_at`` dates an approval request it opens (default ``now``): a replay of
    past entries runs at event time, but the human who decides does so now.
    """
    if incident.final:
        return None
    note = f"{record.root_cause} -> {record.remediation_path}"
    newer = incident.signal_revision - record.signal_revision
    if incident.diagnosis is not None:
        note = f"re-diagnosed: {note}"
    current = incident.state
    actor = f"{SYSTEM_ACTOR}:diagnosis"
    updated = incident
    if current is State.OPEN:
        updated = transition(updated, State.DIAGNOSED, actor=actor, at=now, note=note)
    elif current is State.AWAITING_APPROVAL and not record.requires_approval:
        updated = transition(
            updated, State.DIAGNOSED, actor=actor, at=now, note=f"{note}; no approval needed"
        )
    else:
        updated = transition(updated, current, actor=actor, at=now, note=note)
    if updated.state is State.DIAGNOSED and record.requires_approval:
        updated = transition(
            updated,
            State.AWAITING_APPROVAL,
            actor=actor,
            at=now,
            note=f"{record.remediation_path} needs a human approval",
        )
        updated = replace(updated, expires_at=now + policy.stale_after, approval_request=None)
    if updated.state is State.AWAITING_APPROVAL:
        updated = _open_request(updated, record, now=requested_at or now, policy=policy)
    return replace(
        updated,
        diagnosis=record,
        diagnoses=incident.diagnoses + 1,
        queries_spent=incident.queries_spent + record.queries,
        # Signals that arrived while this diagnosis ran keep the incident due.
        settle_at=incident.settle_at if newer > 0 else None,
    )


def target_keys(target: Target) -> tuple[str, ...]:
    """What one approval covers: the VM by its numeric id, and its physical host when known.
    Two incidents that share any of them are one failure, and ask for one approval."""
    keys = [f"vm:{target.project}/{target.zone}/{target.instance_id}"]
    if target.host_known:
        keys.append(f"host:{target.physical_host}")
    return tuple(keys)


def link(
    incident: Incident,
    holder: str,
    record: DiagnosisRecord,
    *,
    now: datetime,
    policy: Policy,
) -> Incident | None:
    """Store a diagnosis whose target another incident already asks approval for: this
    incident keeps its signals and verdict, opens no request, and is linked and silenced."""
    target = record.target
    what = f"VM {target.instance} (id {target.instance_id})" if target else "the same target"
    quiet = replace(
        record,
        requires_approval=False,
        target=None,
        target_reason=f"linked to {holder}, which holds the approval request for {what}",
    )
    stored = apply_diagnosis(incident, quiet, now=now, policy=policy)
    if stored is None:
        return None
    linked = replace(stored, linked_to=holder, approval_request=None)
    return append_audit(
        linked,
        AuditEvent(
            now,
            f"{SYSTEM_ACTOR}:link",
            stored.state,
            stored.state,
            f"linked to {holder}: one failure ({what}) asks for one approval",
        ),
    )


def note_linked(
    holder: Incident,
    linked_id: str,
    signal_count: int,
    now: datetime,
    cost: Mapping[str, Any] | None = None,
) -> Incident:
    """The holder's side of a link: its audit trail says what was merged into it.

    ``cost``: the linked diagnosis' cost of the loop. A holder whose own diagnosis saw no
    loop (a node-pool incident names no workload) shows it, so the card that asks for the
    approval says how bad the failure is.
    """
    if linked_id in holder.linked:
        return holder
    diagnosis = holder.diagnosis
    if cost and diagnosis is not None and not diagnosis.document.get("cost"):
        document = {**diagnosis.document, "cost": dict(cost), "cost_from": linked_id}
        holder = replace(holder, diagnosis=replace(diagnosis, document=document))
    return append_audit(
        replace(holder, linked=(*holder.linked, linked_id)),
        AuditEvent(
            now,
            f"{SYSTEM_ACTOR}:link",
            holder.state,
            holder.state,
            f"merged {linked_id} ({signal_count} signal(s)): the same failure, one approval",
        ),
    )


def _open_request(
    incident: Incident, record: DiagnosisRecord, *, now: datetime, policy: Policy
) -> Incident:
    """Keep, open or withdraw the approval request after a diagnosis.

    The same target keeps its request (the buttons already posted stay valid); another
    target supersedes it (old buttons are refused), and no target or approvals off means
    no request at all. An open request sets the incident's deadline.
    """
    current = incident.approval_request
    target = record.target
    if current is not None and target == current.target:
        return incident
    if target is None or policy.approval_ttl is None:
        return replace(incident, approval_request=None)
    deadline = now + min(policy.approval_ttl, policy.stale_after)
    request = ApprovalRequest(
        id=request_id(incident.id, target, now),
        action=record.remediation_path,
        target=target,
        issued_at=now,
        expires_at=deadline,
    )
    note = (
        f"approval request {request.id} for node {target.node}, VM {target.instance} "
        f"(id {target.instance_id}), host {target.physical_host}"
    )
    if current is not None:
        note += f"; supersedes {current.id}"
    moved = replace(incident, approval_request=request, expires_at=deadline)
    return append_audit(
        moved,
        AuditEvent(now, f"{SYSTEM_ACTOR}:approval", incident.state, incident.state, note),
    )


def decide(
    incident: Incident,
    request: ActionRequest,
    *,
    decision: Decision,
    actor: str,
    platform: Platform,
    now: datetime,
    actor_name: str | None = None,
) -> Incident:
    """Record a human decision on the incident's open approval request (single use).

    Raises AlreadyDecided (nothing to decide any more: decided, expired, superseded) or
    ApprovalInvalid (the request is not this incident's, or has expired). Run it inside
    one store transaction: of concurrent clicks, exactly one finds the request open.
    """
    if request.incident_id != incident.id:
        raise ApprovalInvalid(
            f"the action request is for incident {request.incident_id}, not {incident.id}"
        )
    if incident.approval is not None:
        who = incident.approval.actor_name or incident.approval.actor
        raise AlreadyDecided(
            f"incident {incident.id} was already {incident.approval.decision.value} by {who} "
            f"via {incident.approval.platform.value} at {format_rfc3339(incident.approval.at)}"
        )
    if incident.state is not State.AWAITING_APPROVAL:
        raise AlreadyDecided(
            f"incident {incident.id} is {incident.state.value}, not awaiting approval"
        )
    open_request = incident.approval_request
    if open_request is None:
        raise AlreadyDecided(f"incident {incident.id} has no open approval request")
    if request.approval_id != open_request.id:
        raise AlreadyDecided(
            f"approval request {request.approval_id} was superseded by {open_request.id} "
            "(the diagnosis changed); use the buttons of the current message"
        )
    if not request.matches(incident.id, open_request):
        raise ApprovalInvalid(
            f"the action request does not match approval request {open_request.id}"
        )
    if open_request.expires_at <= now:
        raise ApprovalInvalid(
            f"approval request {open_request.id} expired at "
            f"{format_rfc3339(open_request.expires_at)}; nothing was changed"
        )
    to = State.APPROVED if decision is Decision.APPROVED else State.REJECTED
    target = open_request.target
    who = f"{actor_name} ({actor})" if actor_name and actor_name != actor else actor
    note = (
        f"{decision.value} by {who} via {platform.value}: {open_request.action} of node "
        f"{target.node}, VM {target.instance} (id {target.instance_id}), "
        f"host {target.physical_host}"
    )
    moved = transition(incident, to, actor=f"{platform.value}:{actor}", at=now, note=note)
    approval = Approval(
        decision=decision,
        request_id=open_request.id,
        action=open_request.action,
        target=target,
        actor=actor,
        actor_name=actor_name,
        platform=platform,
        at=now,
        expires_at=open_request.expires_at,
    )
    return replace(moved, approval=approval)


def mark_published(incident: Incident, at: datetime, message_id: str) -> Incident | None:
    """The approved remediation request is on its topic; None when nothing to record."""
    approval = incident.approval
    if approval is None or approval.decision is not Decision.APPROVED:
        return None
    if approval.published_at is not None:
        return None
    note = f"remediation request published (message {message_id})"
    published = replace(
        incident,
        approval=replace(approval, published_at=at, published_id=message_id),
        updated_at=max(incident.updated_at, at),
        revision=incident.revision + 1,
    )
    return append_audit(
        published, AuditEvent(at, f"{SYSTEM_ACTOR}:approval", incident.state, incident.state, note)
    )


def unpublished(incident: Incident) -> bool:
    """Approved, but its remediation request is not known to be on the topic yet."""
    approval = incident.approval
    return (
        incident.state is State.APPROVED
        and approval is not None
        and approval.decision is Decision.APPROVED
        and approval.published_at is None
    )


def expire(incident: Incident, now: datetime) -> Incident | None:
    """Expire an approval request older than the stale time; None when not stale."""
    if incident.state is not State.AWAITING_APPROVAL:
        return None
    if incident.expires_at is None or incident.expires_at > now:
        return None
    return transition(
        incident,
        State.EXPIRED,
        actor=f"{SYSTEM_ACTOR}:expiry",
        at=now,
        note="no decision before the approval request went stale",
    )


def rearm(incident: Incident, at: datetime) -> Incident | None:
    """Make the incident due again at ``at`` (its notification could not be sent).

    A live incident is then diagnosed again; a final one only has its notification retried.
    """
    if incident.settle_at is not None and incident.settle_at <= at:
        return None
    return replace(incident, settle_at=at, revision=incident.revision + 1)


def mark_notified(
    incident: Incident,
    fingerprint: str,
    chat: Mapping[str, str] | None = None,
    *,
    route: str | None = None,
    at: datetime | None = None,
) -> Incident | None:
    """The message went out; ``chat`` is where it lives now (kept when None), ``route`` the
    route it went to (kept when None). A change of route is written in the audit trail."""
    where = dict(chat) if chat else incident.chat
    routed = route or incident.route
    if (
        incident.notified_fingerprint == fingerprint
        and where == incident.chat
        and routed == incident.route
    ):
        return None
    if incident.route is not None and routed != incident.route:
        note = f"moved from route {incident.route} to route {routed}"
        moment = at or incident.updated_at
        incident = append_audit(
            incident, AuditEvent(moment, "loopbreaker", incident.state, incident.state, note)
        )
    return replace(
        incident,
        notified_fingerprint=fingerprint,
        notifications=incident.notifications + 1,
        revision=incident.revision + 1,
        chat=where,
        route=routed,
    )


# --- pause ------------------------------------------------------------------------------


def refuse_paused(incident: Incident, pause: PauseRecord, now: datetime, actor: str) -> Incident:
    """The executor refused to act while paused: say so in the trail, and leave the
    incident where it was. An ``approved`` incident's request counts as unpublished
    again, so ``on_schedule`` sends it once more after the resume."""
    note = f"remediation refused, nothing changed: remediation is {pause.describe()}"
    moved = transition(incident, incident.state, actor=actor, at=now, note=note[:1000])
    approval = moved.approval
    if incident.state is State.APPROVED and approval is not None:
        moved = replace(moved, approval=replace(approval, published_at=None, published_id=None))
    return moved


# --- verification -------------------------------------------------------------------------

VERIFY_ACTOR = f"{SYSTEM_ACTOR}:verify"


def verifying(incident: Incident) -> bool:
    """A remediated incident whose outcome is still being watched."""
    check = incident.verification
    return (
        incident.state is State.REMEDIATED
        and check is not None
        and check.verdict is Verdict.WATCHING
    )


def start_verification(
    incident: Incident, now: datetime, window: timedelta, first_check: datetime
) -> Incident | None:
    """Begin watching a just-remediated incident until ``now + window``; idempotent."""
    if incident.state is not State.REMEDIATED or incident.verification is not None:
        return None
    target = incident.approval.target if incident.approval else None
    record = VerificationRecord(
        since=now,
        until=now + window,
        host=target.physical_host if target and target.host_known else None,
        workloads=incident.workloads,
    )
    watched = replace(
        incident,
        verification=record,
        settle_at=min(first_check, record.until),
        revision=incident.revision + 1,
    )
    hours = window.total_seconds() / 3600
    note = (
        f"watching the workload for {hours:g} h (until {format_rfc3339(record.until)}) "
        "for a restart of the same cause"
    )
    return append_audit(
        watched, AuditEvent(now, VERIFY_ACTOR, incident.state, incident.state, note)
    )


def note_check(
    incident: Incident,
    now: datetime,
    next_at: datetime | None,
    findings: tuple[str, ...] = (),
    other_incident: str | None = None,
) -> Incident | None:
    """One check found nothing decisive: look again at ``next_at`` (never past the end of
    the window), or, with None, stop looking (nothing could be read: it stays unverified)."""
    check = incident.verification
    if not verifying(incident) or check is None:
        return None
    kept = tuple(dict.fromkeys((*check.findings, *findings)))[-20:]
    updated = replace(
        check,
        checks=check.checks + 1,
        last_check=now,
        findings=kept,
        other_incident=other_incident or check.other_incident,
    )
    checked = replace(
        incident,
        verification=updated,
        settle_at=None if next_at is None else min(next_at, check.until),
        revision=incident.revision + 1,
    )
    return _link_other(checked, other_incident, now)


def _link_other(incident: Incident, other: str | None, now: datetime) -> Incident:
    if other is None or other in incident.linked:
        return incident
    linked = replace(incident, linked=(*incident.linked, other))
    note = f"a restart of another cause after the remediation opened {other} (linked, not merged)"
    return append_audit(linked, AuditEvent(now, VERIFY_ACTOR, incident.state, incident.state, note))


def conclude(
    incident: Incident,
    verdict: Verdict,
    now: datetime,
    note: str,
    findings: tuple[str, ...] = (),
    other_incident: str | None = None,
) -> Incident | None:
    """``remediated -> verified | recurred``; None when already concluded (a race lost)."""
    check = incident.verification
    if not verifying(incident) or check is None or verdict is Verdict.WATCHING:
        return None
    to = State.VERIFIED if verdict is Verdict.VERIFIED else State.RECURRED
    moved = transition(incident, to, actor=VERIFY_ACTOR, at=now, note=note[:1000])
    decided = replace(
        check,
        verdict=verdict,
        checks=check.checks + 1,
        last_check=now,
        decided_at=now,
        findings=tuple(dict.fromkeys((*check.findings, *findings)))[-20:],
        other_incident=other_incident or check.other_incident,
    )
    return _link_other(replace(moved, verification=decided), other_incident, now)
