"""The remediation's pure changes of the incident, and the Event each recorded step writes.

No I/O: a change takes an incident and returns the changed one (or None: nothing to
change), for ``IncidentStore.update``; ``support_case`` builds the support case body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from loopbreaker import incidents
from loopbreaker.approval.repair import RepairPath
from loopbreaker.approval.requests import Approval
from loopbreaker.incidents import Incident, State
from loopbreaker.incidents.remediation import Outcome, RemediationRecord, Step, StepRecord
from loopbreaker.timeutil import format_rfc3339

ACTOR = "system:remediation"
_Path = TypeVar("_Path", RepairPath, RepairPath | None)

#: (step, outcome) -> (Event reason, action, warning?)
_STEP_EVENTS: Mapping[tuple[Step, Outcome], tuple[str, str, bool]] = {
    (Step.RECHECK, Outcome.FAILED): ("LoopbreakerRefused", "Recheck", True),
    (Step.CORDON, Outcome.DONE): ("LoopbreakerCordoned", "Cordon", False),
    (Step.CORDON, Outcome.FAILED): ("LoopbreakerCordonFailed", "Cordon", True),
    (Step.DRAIN, Outcome.DONE): ("LoopbreakerDrained", "Drain", False),
    (Step.DRAIN, Outcome.FAILED): ("LoopbreakerDrainFailed", "Drain", True),
    (Step.DELETE_VM, Outcome.DONE): ("LoopbreakerVMDeleted", "DeleteVM", False),
    (Step.DELETE_VM, Outcome.FAILED): ("LoopbreakerVMDeleteFailed", "DeleteVM", True),
    (Step.REPORT_FAULTY, Outcome.DONE): ("LoopbreakerHostReported", "ReportHostAsFaulty", False),
    (Step.REPORT_FAULTY, Outcome.FAILED): (
        "LoopbreakerHostReportFailed",
        "ReportHostAsFaulty",
        True,
    ),
    (Step.HAND_TO_GKE, Outcome.DONE): ("LoopbreakerHandedToGKE", "ReportAndReplace", False),
    (Step.HAND_TO_GKE, Outcome.FAILED): ("LoopbreakerHandToGKEFailed", "ReportAndReplace", True),
    (Step.AWAIT_GKE, Outcome.DONE): ("LoopbreakerGKERepaired", "ReportAndReplace", False),
    (Step.AWAIT_GKE, Outcome.FAILED): ("LoopbreakerGKERepairFailed", "ReportAndReplace", True),
    (Step.SUPPORT_CASE, Outcome.DONE): ("LoopbreakerSupportCaseFiled", "SupportCase", False),
    (Step.SUPPORT_CASE, Outcome.FAILED): ("LoopbreakerSupportCaseFailed", "SupportCase", True),
}


def step_event(step: StepRecord) -> tuple[str, str, bool] | None:
    """The Event a recorded step writes on the node, if any.

    A passed re-check writes ``LoopbreakerRemediationStarted``: its note names the repair
    path and why it was chosen, so ``kubectl describe node`` says what comes next.
    """
    if step.step is Step.DRAIN and "timed out" in step.detail:
        return "LoopbreakerDrainTimedOut", "Drain", True
    if step.step is Step.RECHECK and step.outcome is Outcome.DONE:
        return "LoopbreakerRemediationStarted", "Recheck", False
    return _STEP_EVENTS.get((step.step, step.outcome))


def claim(incident: Incident, request_id: str, now: datetime, lease: timedelta) -> Incident | None:
    """Take (or, after a crashed delivery, re-take) the remediation lease; None if held."""
    record = incident.remediation
    if incident.state is State.APPROVED:
        fresh = RemediationRecord(
            request_id=request_id, dry_run=False, started_at=now, lease_until=now + lease
        )
        moved = incidents.transition(
            incident, State.REMEDIATING, actor=ACTOR, at=now, note=f"remediation of {request_id}"
        )
        return replace(moved, remediation=fresh)
    if incident.state is State.REMEDIATING and record is not None:
        if record.lease_until is not None and record.lease_until > now:
            return None
        resumed = replace(record, lease_until=now + lease)
        moved = incidents.transition(
            incident, State.REMEDIATING, actor=ACTOR, at=now, note="resumed by a redelivery"
        )
        return replace(moved, remediation=resumed)
    return None


def release(incident: Incident) -> Incident | None:
    """Give the remediation lease back (the steps done so far stay recorded)."""
    if incident.state is not State.REMEDIATING or incident.remediation is None:
        return None
    return _with_record(incident, lambda r: replace(r, lease_until=None))


def _with_record(
    incident: Incident, change: Callable[[RemediationRecord], RemediationRecord]
) -> Incident | None:
    if incident.remediation is None:
        return None
    return replace(
        incident, remediation=change(incident.remediation), revision=incident.revision + 1
    )


def add_step(incident: Incident, step: StepRecord) -> Incident | None:
    updated = _with_record(incident, lambda r: r.with_step(step))
    if updated is None:
        return None
    note = f"{step.step.value}: {step.outcome.value}: {step.detail}"
    return incidents.append_audit(
        updated, incidents.AuditEvent(step.at, ACTOR, incident.state, incident.state, note[:1000])
    )


def mark_drain_start(incident: Incident, at: datetime) -> Incident | None:
    return _with_record(
        incident, lambda r: r if r.drain_started_at else replace(r, drain_started_at=at)
    )


def mark_path(incident: Incident, path: RepairPath, why: str) -> Incident | None:
    """The branch the re-check settled on; once set it stays (a redelivery resumes it)."""
    return _with_record(incident, lambda r: r if r.path else replace(r, path=path, path_why=why))


def path_taken(incident: Incident, approved: _Path) -> RepairPath | _Path:
    """The branch this remediation takes: the re-check's, else the approved path."""
    record = incident.remediation
    return record.path if record is not None and record.path else approved


def mark_handed(incident: Incident, at: datetime) -> Incident | None:
    return _with_record(incident, lambda r: r if r.handed_at else replace(r, handed_at=at))


def mark_gke_status(incident: Incident, status: str | None, at: datetime) -> Incident | None:
    """The report-and-replace status seen now, if it changed (its first sighting is kept)."""
    return _with_record(
        incident,
        lambda r: r if r.gke_status == status else replace(r, gke_status=status, gke_status_at=at),
    )


def mark_delete_sent(incident: Incident, request_id: str) -> Incident | None:
    return _with_record(incident, lambda r: replace(r, delete_request_id=request_id))


def mark_support_case(incident: Incident, name: str) -> Incident | None:
    return _with_record(incident, lambda r: replace(r, support_case=name))


def finish(incident: Incident, to: State, note: str, now: datetime) -> Incident | None:
    if incident.state is not State.REMEDIATING:
        return None
    moved = incidents.transition(incident, to, actor=ACTOR, at=now, note=note)
    if moved.remediation is None:
        return moved
    return replace(moved, remediation=replace(moved.remediation, finished_at=now, lease_until=None))


def record_plan(
    incident: Incident, record: RemediationRecord, summary: str, now: datetime
) -> Incident | None:
    if incident.state is not State.APPROVED:
        return None
    moved = incidents.transition(incident, State.APPROVED, actor=ACTOR, at=now, note=summary)
    return replace(moved, remediation=record)


_PATH_DONE = {
    RepairPath.GKE: "handed to GKE's report-and-replace (node label cloud.google.com/"
    "fault-behavior), which reported the host through instances.reportHostAsFaulty",
    RepairPath.REPORT: "cordoned, drained, host reported with instances.reportHostAsFaulty",
    RepairPath.DELETE: "cordoned, drained, VM deleted",
    None: "cordoned, drained, VM deleted or its host reported",
}


def support_case(incident: Incident, approval: Approval) -> dict[str, Any]:
    """The case body from the ticket draft (``displayName``, ``description``, ``priority``)."""
    t = approval.target
    draft: Mapping[str, Any] = (
        incident.diagnosis.ticket_draft
        if incident.diagnosis and incident.diagnosis.ticket_draft
        else {}
    )
    done = _PATH_DONE.get(path_taken(incident, t.repair_path), _PATH_DONE[None])
    lines = [
        str(draft.get("summary") or f"Physical host {t.physical_host} failed repeatedly."),
        "",
        f"Physical host: {t.physical_host}",
        f"Project: {t.project}  Zone: {t.zone}  Cluster: {t.cluster or '-'}  "
        f"Node pool: {t.node_pool or '-'}",
        f"VM: {t.instance} (id {t.instance_id}), node {t.node}",
        f"Approved by {approval.actor} via {approval.platform.value} at "
        f"{format_rfc3339(approval.at)}; loopbreaker took it out of service "
        f"(incident {incident.id}): {done}.",
        f"Fault reason: {t.fault_reason.value}.",
    ]
    excerpts = [str(e) for e in draft.get("excerpts") or ()]
    if excerpts:
        lines += ["", "Log excerpts:", *excerpts]
    return {
        "displayName": str(draft.get("title") or f"GKE node host errors: {t.physical_host}"),
        "description": "\n".join(lines),
        "priority": "P2",
    }
