"""``on_remediation_request``: isolate an approved bad host, step by step, idempotently.

Steps, each recorded on the incident (time, step, outcome, API calls) and posted to the
chat thread: re-check, cordon, drain, delete the VM (or report its host as faulty), file
the support case. A step recorded as done is never run again, so a redelivered request
resumes where the last one stopped; a request that is not the incident's recorded
approval (forged, stale, another instance id) changes nothing at all.

Live runs move the incident ``approved -> remediating -> remediated | failed`` under a
lease, so two deliveries of one request never act at once. A dry run (the default) reads
the same state through the real readers, records every mutating call it *would* make on
the incident, and leaves it ``approved``: the plan is there for a human to read.

While remediation is paused (``loopbreaker pause``, or from chat), every request is
refused before the first mutating call: the refusal is recorded on the incident, which
stays ``approved`` (its request counts as unpublished again, so ``on_schedule`` sends it
once more after ``loopbreaker resume``). Each step taken or refused also writes an
``events.k8s.io/v1`` Event on the node (``LoopbreakerCordoned``, ``LoopbreakerRefused``...);
an Event that cannot be written is logged and never changes the outcome. A remediated
incident is then watched for ``LOOPBREAKER_VERIFY_WINDOW`` (see ``on_schedule``).

This module holds the order of the steps, the live run, the dry run and the pause; the
steps are in ``remediation_steps``, the recording and Events in ``remediation_core``, the
pure changes of the incident in ``remediation_records``.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from loopbreaker import incidents
from loopbreaker.approval.repair import RepairPath
from loopbreaker.approval.requests import Approval
from loopbreaker.errors import TransientError
from loopbreaker.incidents import Incident, PauseRecord, State
from loopbreaker.incidents.remediation import Outcome, RemediationRecord, Step, StepRecord
from loopbreaker.logs import event
from loopbreaker.remediation.changes import (
    ACTOR,
    add_step,
    claim,
    finish,
    mark_delete_sent,
    mark_drain_start,
    mark_path,
    mark_support_case,
    path_taken,
    record_plan,
    release,
    step_event,
    support_case,
)
from loopbreaker.remediation.recorder import (
    ActuatorFactory,
    Actuators,
    Report,
    Result,
    StepAction,
    StepResult,
    Stop,
)
from loopbreaker.remediation.rules import (
    REMEDIATION_LEASE,
    ForgedRequest,
    RemediationRequest,
    approved_path,
    check_request,
)
from loopbreaker.remediation.steps import INVOCATION_BUDGET, RemediationSteps

#: The incident's note when a path finished.
_DONE_NOTE = {
    RepairPath.GKE: "host reported and replaced by GKE's report-and-replace",
    RepairPath.REPORT: "host reported with reportHostAsFaulty",
    RepairPath.DELETE: "host isolated: VM deleted",
}

# Callers import these from here; their homes are the modules split off this one.
__all__ = [
    "ACTOR",
    "INVOCATION_BUDGET",
    "ActuatorFactory",
    "Actuators",
    "Remediator",
    "Report",
    "Result",
    "StepAction",
    "StepResult",
    "add_step",
    "claim",
    "finish",
    "mark_delete_sent",
    "mark_drain_start",
    "mark_support_case",
    "record_plan",
    "release",
    "step_event",
    "support_case",
]


class Remediator(RemediationSteps):
    """The executor; actuators are real or dry-run, chosen by the bootstrap."""

    # --- entry ----------------------------------------------------------------------

    def handle(self, data: object) -> Report:
        """Run (or resume, or plan) the remediation a request asks for.

        InvalidInput: the request is malformed (ack it). TransientError: retry later (a
        drain still in progress, a concurrent delivery holding the lease, a store outage).
        """
        request = RemediationRequest.parse(data)
        incident = self.store.get(request.incident_id)
        if incident is None:
            return self._ignored(request, f"no incident {request.incident_id}")
        try:
            approval = check_request(request, incident.approval)
        except ForgedRequest as exc:
            return self._ignored(request, str(exc))
        if incident.state in (State.REMEDIATED, State.FAILED):
            return Report(Result.DUPLICATE, incident.id, f"already {incident.state.value}")
        if incident.state not in (State.APPROVED, State.REMEDIATING):
            return self._ignored(request, f"incident is {incident.state.value}")
        kit = self.actuators(incident, approval.target)
        # Before anything else that could act: a pause holds every step, dry runs too.
        pause = self.store.current_pause(self.clock())
        if pause is not None:
            return self._refuse_paused(incident, approval, pause, kit)
        if kit.dry_run:
            return self._plan(incident, approval, request, kit)
        return self._run(incident, approval, request, kit)

    def _refuse_paused(
        self, incident: Incident, approval: Approval, pause: PauseRecord, kit: Actuators
    ) -> Report:
        now = self.clock()
        reason = f"remediation is {pause.describe()}"

        def change(current: Incident) -> Incident | None:
            if current.state not in (State.APPROVED, State.REMEDIATING):
                return None
            last = current.audit[-1] if current.audit else None
            if current.state is State.REMEDIATING and last and reason in last.note:
                return None  # a redelivery of the same refusal: say it once
            return incidents.refuse_paused(current, pause, now, ACTOR)

        stored = self.store.update(incident.id, change)
        current = stored.incident or incident
        event(
            self._log,
            logging.WARNING,
            f"remediation of {incident.id} refused: {reason}",
            labels=current.labels(),
            event="remediation_refused_paused",
            reason=reason,
            paused_by=pause.by,
            pause_id=pause.id,
        )
        if stored.changed:
            self._emit(
                kit,
                current,
                approval,
                "LoopbreakerRefused",
                "Refuse",
                f"refused, nothing changed: {reason}",
                warning=True,
            )
            self._post(current, pause)
        if current.state is State.REMEDIATING:
            # Half done (cordoned, maybe drained): Pub/Sub keeps redelivering until resume.
            raise TransientError(f"incident {incident.id} is mid-remediation and {reason}")
        return Report(Result.PAUSED, incident.id, reason)

    def _ignored(self, request: RemediationRequest, reason: str) -> Report:
        event(
            self._log,
            logging.WARNING,
            f"remediation request refused, nothing changed: {reason}",
            labels={"incident_id": request.incident_id},
            event="remediation_request_refused",
            reason=reason,
            approval_id=request.approval_id,
            instance_id=request.target.instance_id,
        )
        return Report(Result.IGNORED, request.incident_id, reason)

    # --- live -----------------------------------------------------------------------

    def _run(
        self, incident: Incident, approval: Approval, request: RemediationRequest, kit: Actuators
    ) -> Report:
        now = self.clock()
        claimed = self.store.update(
            incident.id, lambda i: claim(i, request.dedup_id, now, REMEDIATION_LEASE)
        )
        current = claimed.incident
        if current is None or current.remediation is None:
            raise TransientError(f"incident {incident.id} vanished while claiming it")
        if not claimed.changed:
            raise TransientError(f"incident {incident.id} is being remediated by another delivery")
        started = self.clock()
        try:
            if current.remediation.done(Step.RECHECK) is None:
                (outcome, detail, calls), branch = self._recheck(current, approval, kit)
                if branch is not None:
                    chosen = branch
                    current = (
                        self.store.update(
                            current.id, lambda i: mark_path(i, chosen.path, chosen.why)
                        ).incident
                        or current
                    )
                done = StepRecord(Step.RECHECK, outcome, self.clock(), detail, calls)
                current = self._record(current, done)
                self._emit_step(kit, current, approval, done)
                if outcome is Outcome.FAILED:
                    return self._finish(current, State.FAILED, f"recheck failed: {detail}")
            path = path_taken(self._get(current.id), approved_path(approval.target, self.policy))
            for step, action in self._steps(kit, path):
                current = self._get(current.id)
                record = current.remediation
                assert record is not None
                if record.done(step) is not None:
                    continue
                outcome, detail, calls = action(current, approval, started, kit)
                done = StepRecord(step, outcome, self.clock(), detail, calls)
                current = self._record(current, done)
                self._emit_step(kit, current, approval, done)
                if outcome is Outcome.FAILED and step is not Step.SUPPORT_CASE:
                    return self._finish(current, State.FAILED, f"{step.value} failed: {detail}")
        except TransientError:
            # A planned hand-over (the invocation budget ran out mid-drain) or a passing
            # outage: let the redelivery resume at once instead of waiting out the lease.
            self.store.update(current.id, release)
            raise
        except Stop as stop:
            stopped = StepRecord(stop.step, Outcome.FAILED, self.clock(), stop.reason, stop.calls)
            current = self._record(self._get(current.id), stopped)
            self._emit_step(kit, current, approval, stopped)
            return self._finish(current, State.FAILED, f"{stop.step.value} failed: {stop.reason}")
        support = current.remediation.done(Step.SUPPORT_CASE) if current.remediation else None
        note = _DONE_NOTE[path] + (
            "" if support or not self.support_parent else "; support case failed"
        )
        return self._finish(current, State.REMEDIATED, note)

    def _steps(self, kit: Actuators, path: RepairPath) -> list[tuple[Step, StepAction]]:
        """The steps after the re-check, by the branch it settled on: gke hands the node
        over; report and delete drain it."""
        steps: list[tuple[Step, StepAction]] = []
        if path is RepairPath.GKE:
            steps += [(Step.HAND_TO_GKE, self._hand_to_gke), (Step.AWAIT_GKE, self._await_gke)]
        else:
            vm_step = Step.REPORT_FAULTY if path is RepairPath.REPORT else Step.DELETE_VM
            steps += [
                (Step.CORDON, self._cordon),
                (Step.DRAIN, self._drain),
                (vm_step, self._isolate_vm),
            ]
        if self.support_parent and kit.support is not None:
            steps.append((Step.SUPPORT_CASE, self._support_case))
        return steps

    # --- dry run ----------------------------------------------------------------------

    def _plan(
        self, incident: Incident, approval: Approval, request: RemediationRequest, kit: Actuators
    ) -> Report:
        recorder = kit.recorder
        assert recorder is not None
        now = self.clock()
        record = RemediationRecord(request_id=request.dedup_id, dry_run=True, started_at=now)
        # A dry run lists the mutating calls it would make: the re-check's reads are none.
        (outcome, detail, _), branch = self._recheck(incident, approval, kit)
        steps = [StepRecord(Step.RECHECK, outcome, self.clock(), detail)]
        path = branch.path if branch else approved_path(approval.target, self.policy)
        if branch is not None:
            record = replace(record, path=branch.path, path_why=branch.why)
            planned = replace(incident, remediation=record)
            for step, action in self._steps(kit, path):
                before = len(recorder.calls)
                try:
                    outcome, detail, _ = action(planned, approval, now, kit)
                except Stop as stop:
                    outcome, detail = Outcome.FAILED, stop.reason
                calls = tuple(recorder.calls[before:])
                steps.append(StepRecord(step, outcome, self.clock(), detail, calls))
        final = replace(record, steps=tuple(steps), finished_at=self.clock())
        failed = [s for s in steps if s.outcome is Outcome.FAILED]
        summary = f"dry run, repair path {path.value}: " + (
            f"{len(recorder.calls)} mutating call(s) would be made"
            if not failed
            else f"{failed[0].step.value} would fail: {failed[0].detail}"
        )
        stored = self.store.update(incident.id, lambda i: record_plan(i, final, summary, now))
        if stored.incident is not None:
            self._post(stored.incident)
        event(
            self._log,
            logging.INFO,
            summary,
            labels=incident.labels(),
            event="remediation_planned",
            calls=list(recorder.calls),
        )
        return Report(Result.PLANNED, incident.id, summary, tuple(steps))
