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
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from loopbreaker import incidents
from loopbreaker.approval.requests import Approval, Target
from loopbreaker.chat import notify
from loopbreaker.chat.notify import Notifier
from loopbreaker.errors import ActionFailed, InvalidInput, TransientError
from loopbreaker.incidents import Incident, PauseRecord, State
from loopbreaker.incidents.records import Outcome, RemediationRecord, Step, StepRecord
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.logs import event, get_logger
from loopbreaker.remediation.actuators import (
    Eviction,
    NodeEvent,
    NodeEvents,
    Nodes,
    Recorder,
    SupportCases,
    Vms,
)
from loopbreaker.remediation.rules import (
    POOL_LABEL,
    REMEDIATION_LEASE,
    DrainMode,
    ForgedRequest,
    HostAction,
    RemediationPolicy,
    RemediationRequest,
    backoff,
    check_request,
    cordon_annotations,
    delete_request_id,
    evictable,
    recheck,
)
from loopbreaker.timeutil import format_rfc3339

ACTOR = "system:remediation"
#: What a step did: its outcome, a sentence for humans, and the API calls it made.
StepResult = tuple[Outcome, str, tuple[str, ...]]
StepAction = Callable[[Incident, Approval, datetime, "Actuators"], StepResult]


@dataclass(frozen=True)
class Actuators:
    """What one remediation acts through: real, or dry-run with its recorder."""

    nodes: Nodes
    vms: Vms
    support: SupportCases | None = None
    #: Set for dry-run actuators: the mutating calls they would have made.
    recorder: Recorder | None = None
    #: Where the Events about the node go (none: not written).
    events: NodeEvents | None = None

    @property
    def dry_run(self) -> bool:
        return self.recorder is not None


#: Builds the actuators for one incident's target (the cluster endpoint depends on it).
ActuatorFactory = Callable[[Incident, Target], Actuators]
#: One invocation drains at most this long, then hands over to a redelivery (Cloud
#: Functions end event handlers after 9 minutes); the drain timeout spans deliveries.
INVOCATION_BUDGET = timedelta(minutes=7)


class Result(StrEnum):
    REMEDIATED = "remediated"
    FAILED = "failed"
    PLANNED = "planned"
    #: A redelivery of a finished remediation: nothing done.
    DUPLICATE = "duplicate"
    #: Not the incident's approval (or no such incident): nothing changed.
    IGNORED = "ignored"
    #: Remediation is paused: refused before any mutating call, the incident unchanged.
    PAUSED = "paused"


@dataclass(frozen=True)
class Report:
    result: Result
    incident_id: str | None
    reason: str = ""
    steps: tuple[StepRecord, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "result": self.result.value,
            "incident_id": self.incident_id,
            "reason": self.reason,
            "steps": [s.to_dict() for s in self.steps],
        }


class Remediator:
    """The executor; actuators are real or dry-run, chosen by the bootstrap."""

    def __init__(
        self,
        *,
        store: IncidentStore,
        actuators: ActuatorFactory,
        support_parent: str | None,
        notifier: Notifier,
        clock: Callable[[], datetime],
        policy: RemediationPolicy,
        sleep: Callable[[float], None] | None = None,
        logger: logging.Logger | None = None,
        verify_window: timedelta = timedelta(hours=2),
        verify_every: timedelta = timedelta(minutes=10),
    ) -> None:
        import time

        self.store = store
        self.actuators = actuators
        self.support_parent = support_parent
        self.notifier = notifier
        self.clock = clock
        self.policy = policy
        self._sleep = sleep or time.sleep
        self._log = logger or get_logger("remediation")
        self.verify_window = verify_window
        self.verify_every = verify_every

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

    # --- Events -------------------------------------------------------------------------

    def _emit(
        self,
        kit: Actuators,
        incident: Incident,
        approval: Approval,
        reason: str,
        action: str,
        what: str,
        *,
        warning: bool = False,
    ) -> None:
        """Write one Event on the approved node; a failure is logged, never raised."""
        if kit.events is None:
            return
        name = approval.actor_name
        who = f"{name} ({approval.actor})" if name and name != approval.actor else approval.actor
        note = (
            f"{what} | incident {incident.id}, approved by {who} via "
            f"{approval.platform.value}{_chat_link(incident)}"
        )
        try:
            record = NodeEvent(
                approval.target.node, reason, action, note, self.clock(), warning=warning
            )
            kit.events.node_event(record)
        except (ActionFailed, TransientError, InvalidInput, OSError, ValueError) as exc:
            event(
                self._log,
                logging.WARNING,
                f"could not write Event {reason} on node {approval.target.node}: {exc}",
                labels=incident.labels(),
                event="node_event_failed",
                reason=reason,
                error=type(exc).__name__,
            )

    def _emit_step(
        self, kit: Actuators, incident: Incident, approval: Approval, step: StepRecord
    ) -> None:
        found = step_event(step)
        if found is not None:
            reason, action, warning = found
            self._emit(kit, incident, approval, reason, action, step.detail, warning=warning)

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
            for step, action in self._steps(kit):
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
        except _Stop as stop:
            stopped = StepRecord(stop.step, Outcome.FAILED, self.clock(), stop.reason, stop.calls)
            current = self._record(self._get(current.id), stopped)
            self._emit_step(kit, current, approval, stopped)
            return self._finish(current, State.FAILED, f"{stop.step.value} failed: {stop.reason}")
        support = current.remediation.done(Step.SUPPORT_CASE) if current.remediation else None
        note = "host isolated" + (
            "" if support or not self.support_parent else "; support case failed"
        )
        return self._finish(current, State.REMEDIATED, note)

    def _steps(self, kit: Actuators) -> list[tuple[Step, StepAction]]:
        report = self.policy.host_action is HostAction.REPORT_FAULTY
        vm_step = Step.REPORT_FAULTY if report else Step.DELETE_VM
        steps: list[tuple[Step, StepAction]] = [
            (Step.RECHECK, self._recheck),
            (Step.CORDON, self._cordon),
            (Step.DRAIN, self._drain),
            (vm_step, self._isolate_vm),
        ]
        if self.support_parent and kit.support is not None:
            steps.append((Step.SUPPORT_CASE, self._support_case))
        return steps

    def _get(self, incident_id: str) -> Incident:
        found = self.store.get(incident_id)
        if found is None:
            raise TransientError(f"incident {incident_id} vanished")
        return found

    # --- the steps --------------------------------------------------------------------

    def _recheck(
        self, incident: Incident, approval: Approval, started: datetime, kit: Actuators
    ) -> StepResult:
        t = approval.target
        try:
            node = kit.nodes.get_node(t.node)
            instance = kit.vms.get_instance(t.project, t.zone, t.instance)
            pool_name = (node.labels.get(POOL_LABEL) if node else None) or t.node_pool
            pool = list(kit.nodes.pool_nodes(pool_name)) if pool_name else []
        except ActionFailed as exc:
            return Outcome.FAILED, f"cannot re-check: {exc}", ()
        since = self.clock() - timedelta(hours=1)
        deletions = self.store.deletions_since(t.cluster or "", since)
        reasons = recheck(
            t,
            approval,
            now=self.clock(),
            node=node,
            instance=instance,
            pool=pool,
            deletions_last_hour=deletions,
            policy=self.policy,
        )
        calls = (
            f"GET /api/v1/nodes/{t.node}",
            f"GET /compute/v1/projects/{t.project}/zones/{t.zone}/instances/{t.instance}",
        )
        if reasons:
            return Outcome.FAILED, "; ".join(reasons), calls
        return (
            Outcome.DONE,
            f"node {t.node} on host {t.physical_host}, VM id {t.instance_id}, limits hold",
            calls,
        )

    def _cordon(
        self, incident: Incident, approval: Approval, started: datetime, kit: Actuators
    ) -> StepResult:
        t = approval.target
        try:
            what = kit.nodes.cordon(t.node, cordon_annotations(incident.id, approval, self.clock()))
        except ActionFailed as exc:
            return Outcome.FAILED, str(exc), ()
        outcome = Outcome.PLANNED if kit.dry_run and what != "already cordoned" else Outcome.DONE
        return outcome, what, (f"PATCH /api/v1/nodes/{t.node}",)

    def _drain(
        self, incident: Incident, approval: Approval, started: datetime, kit: Actuators
    ) -> StepResult:
        t = approval.target
        record = incident.remediation
        drain_start = record.drain_started_at if record and record.drain_started_at else None
        if drain_start is None and not kit.dry_run:
            drain_start = self.clock()
            self.store.update(incident.id, lambda i: mark_drain_start(i, drain_start))
        deadline = (drain_start or self.clock()) + self.policy.drain_timeout
        attempt = 0
        evicted: set[str] = set()
        while True:
            try:
                pods = kit.nodes.pods_on(t.node)
            except ActionFailed as exc:
                return Outcome.FAILED, f"cannot list the node's pods: {exc}", ()
            to_evict, skipped = evictable(pods)
            # Evicted pods that are still shutting down (deletionTimestamp set) are waited
            # for, as kubectl drain does, never evicted again.
            terminating = [p for p in to_evict if p.terminating]
            to_evict = [p for p in to_evict if not p.terminating]
            if not to_evict and not terminating:
                detail = f"drained: {len(evicted)} pod(s) evicted, {len(skipped)} left alone"
                return Outcome.DONE, detail, tuple(f"evict {p}" for p in sorted(evicted))
            blocked = []
            batch: list[str] = []
            for pod in to_evict:
                try:
                    result = kit.nodes.evict(pod)
                except ActionFailed as exc:
                    # 500: misconfiguration (e.g. several PDBs select the pod); no retry fixes it.
                    return Outcome.FAILED, f"{exc}; the node stays cordoned", ()
                if result is Eviction.BLOCKED:
                    blocked.append(pod)
                elif result is Eviction.EVICTED:
                    evicted.add(f"{pod.namespace}/{pod.name}")
                    batch.append(f"{pod.namespace}/{pod.name}")
            if batch and not kit.dry_run:
                self._emit(
                    kit,
                    incident,
                    approval,
                    "LoopbreakerEvicted",
                    "Evict",
                    f"evicted {len(batch)} pod(s): {', '.join(batch)}"
                    + (f"; {len(blocked)} blocked by a PodDisruptionBudget" if blocked else ""),
                )
            if kit.dry_run:
                names = ", ".join(f"{p.namespace}/{p.name}" for p in to_evict)
                return Outcome.PLANNED, f"would evict {len(to_evict)} pod(s): {names}", ()
            waiting = blocked + terminating
            now = self.clock()
            names = ", ".join(f"{p.namespace}/{p.name}" for p in waiting)
            if waiting and now >= deadline:
                if self.policy.drain_mode is DrainMode.DELETE_AFTER_TIMEOUT:
                    for pod in waiting:
                        try:
                            kit.nodes.delete_pod(pod)
                        except ActionFailed as exc:
                            return Outcome.FAILED, f"{exc}; the node stays cordoned", ()
                    return (
                        Outcome.DONE,
                        f"drain timed out; deleted {len(waiting)} pod(s) that would not go: "
                        f"{names}",
                        (),
                    )
                raise _Stop(
                    Step.DRAIN,
                    f"drain timed out after {self.policy.drain_timeout}; pods that could not "
                    f"be evicted: {names}; the node stays cordoned",
                )
            if waiting and now - started >= INVOCATION_BUDGET:
                raise TransientError(
                    f"drain of {t.node} still waiting for {names}; resuming on redelivery"
                )
            if waiting:
                # Every pass that waits for something waits a little longer; never a spin.
                attempt += 1
                wait = min(backoff(attempt), deadline - now)
                self._sleep(max(wait.total_seconds(), 0.0))

    def _isolate_vm(
        self, incident: Incident, approval: Approval, started: datetime, kit: Actuators
    ) -> StepResult:
        t = approval.target
        request_id = delete_request_id(incident.id, approval.request_id)
        record = incident.remediation
        sent_before = record is not None and record.delete_request_id == request_id
        report = self.policy.host_action is HostAction.REPORT_FAULTY
        limit = self.policy.max_deletions_per_hour
        reserve = not report and not kit.dry_run
        if reserve and not self.store.reserve_deletion(
            t.cluster or "", incident.id, self.clock(), limit
        ):
            reason = f"{limit} VM deletion(s) in cluster {t.cluster} in the last hour"
            return Outcome.FAILED, f"{reason}; limit reached", ()
        if not kit.dry_run:
            self.store.update(incident.id, lambda i: mark_delete_sent(i, request_id))
        # Re-read as the very last thing before the irreversible call (after the store
        # writes): never touch a recreated VM.
        try:
            instance = kit.vms.get_instance(t.project, t.zone, t.instance)
        except ActionFailed as exc:
            return Outcome.FAILED, f"cannot re-read VM {t.instance}: {exc}", ()
        if instance is None:
            if sent_before:
                return Outcome.DONE, f"VM {t.instance} is deleted", ()
            return Outcome.FAILED, f"VM {t.instance} no longer exists; nothing deleted", ()
        if instance.id != t.instance_id:
            if sent_before:
                return (
                    Outcome.DONE,
                    f"VM {t.instance} was deleted and recreated as {instance.id}",
                    (),
                )
            return (
                Outcome.FAILED,
                f"VM {t.instance} now has id {instance.id}, not the approved {t.instance_id}; "
                "nothing deleted",
                (),
            )
        try:
            if report:
                operation = kit.vms.report_host_faulty(
                    t.project, t.zone, t.instance, request_id, t.instance_id
                )
            else:
                operation = kit.vms.delete_instance(
                    t.project, t.zone, t.instance, request_id, t.instance_id
                )
        except ActionFailed as exc:
            if exc.status == 404 and not report:
                # The approved VM (its id checked just now) is gone: what we wanted.
                return Outcome.DONE, f"VM {t.instance} was already gone (404)", ()
            return Outcome.FAILED, f"{exc}; the node stays cordoned", ()
        verb = "reportHostAsFaulty" if report else "delete"
        call = f"{verb} {t.project}/{t.zone}/{t.instance} requestId={request_id}"
        if kit.dry_run:
            return Outcome.PLANNED, f"would {verb} VM {t.instance} (id {t.instance_id})", (call,)
        return Outcome.DONE, f"VM {t.instance} {verb}: operation {operation} done", (call,)

    def _support_case(
        self, incident: Incident, approval: Approval, started: datetime, kit: Actuators
    ) -> StepResult:
        assert kit.support is not None and self.support_parent is not None
        case = support_case(incident, approval)
        try:
            name = kit.support.create_case(self.support_parent, case)
        except ActionFailed as exc:
            hint = " (the Support API needs a support plan and cloudsupport.cases.create)"
            return Outcome.FAILED, f"{exc}{hint if exc.status == 403 else ''}", ()
        if not kit.dry_run:
            self.store.update(incident.id, lambda i: mark_support_case(i, name))
        outcome = Outcome.PLANNED if kit.dry_run else Outcome.DONE
        return outcome, f"support case {name}", (f"POST /v2/{self.support_parent}/cases",)

    # --- dry run ----------------------------------------------------------------------

    def _plan(
        self, incident: Incident, approval: Approval, request: RemediationRequest, kit: Actuators
    ) -> Report:
        recorder = kit.recorder
        assert recorder is not None
        now = self.clock()
        record = RemediationRecord(request_id=request.dedup_id, dry_run=True, started_at=now)
        planned = replace(incident, remediation=record)
        steps: list[StepRecord] = []
        for step, action in self._steps(kit):
            before = len(recorder.calls)
            try:
                outcome, detail, _ = action(planned, approval, now, kit)
            except _Stop as stop:
                outcome, detail = Outcome.FAILED, stop.reason
            calls = tuple(recorder.calls[before:])
            steps.append(StepRecord(step, outcome, self.clock(), detail, calls))
            if outcome is Outcome.FAILED and step is Step.RECHECK:
                break
        final = replace(record, steps=tuple(steps), finished_at=self.clock())
        failed = [s for s in steps if s.outcome is Outcome.FAILED]
        summary = (
            f"dry run: {len(recorder.calls)} mutating call(s) would be made"
            if not failed
            else f"dry run: {failed[0].step.value} would fail: {failed[0].detail}"
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

    # --- recording --------------------------------------------------------------------

    def _record(self, incident: Incident, step: StepRecord) -> Incident:
        updated = self.store.update(incident.id, lambda i: add_step(i, step))
        current = updated.incident or incident
        event(
            self._log,
            logging.WARNING if step.outcome is Outcome.FAILED else logging.INFO,
            f"{step.step.value}: {step.outcome.value}: {step.detail}",
            labels=current.labels(),
            event="remediation_step",
            step=step.step.value,
            outcome=step.outcome.value,
            calls=list(step.calls),
        )
        self._post(current)
        return current

    def _finish(self, incident: Incident, to: State, note: str) -> Report:
        now = self.clock()
        done = self.store.update(incident.id, lambda i: finish(i, to, note, now))
        current = done.incident or incident
        if to is State.REMEDIATED:
            # on_schedule checks the outcome from now on (see responder.verify).
            first = now + self.verify_every
            watched = self.store.update(
                incident.id,
                lambda i: incidents.start_verification(i, now, self.verify_window, first),
            )
            current = watched.incident or current
        self._post(current)
        steps = current.remediation.steps if current.remediation else ()
        result = Result.REMEDIATED if to is State.REMEDIATED else Result.FAILED
        return Report(result, current.id, note, steps)

    def _post(self, incident: Incident, pause: PauseRecord | None = None) -> None:
        message = notify.render(incident, pause=pause)
        if message.fingerprint == incident.notified_fingerprint:
            return
        try:
            where = self.notifier.post(message, incident.chat)
        except (TransientError, InvalidInput) as exc:
            # The chat thread is informational; a failed post never stops a remediation.
            event(
                self._log,
                logging.WARNING,
                f"could not post the remediation progress of {incident.id}: {exc}",
                labels=incident.labels(),
                event="chat_update_failed",
            )
            return
        self.store.update(
            incident.id, lambda i: incidents.mark_notified(i, message.fingerprint, where)
        )


def _chat_link(incident: Incident) -> str:
    """Where the incident's thread is, for an Event note (platform ids, not a secret)."""
    where = incident.chat or {}
    if where.get("message"):
        return f"; chat {where['message']}"
    if where.get("channel") and where.get("ts"):
        return f"; chat {where.get('platform', 'slack')} {where['channel']}/{where['ts']}"
    return ""


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
    (Step.SUPPORT_CASE, Outcome.DONE): ("LoopbreakerSupportCaseFiled", "SupportCase", False),
    (Step.SUPPORT_CASE, Outcome.FAILED): ("LoopbreakerSupportCaseFailed", "SupportCase", True),
}


def step_event(step: StepRecord) -> tuple[str, str, bool] | None:
    """The Event a recorded step writes on the node, if any (a passed re-check writes none)."""
    if step.step is Step.DRAIN and "timed out" in step.detail:
        return "LoopbreakerDrainTimedOut", "Drain", True
    return _STEP_EVENTS.get((step.step, step.outcome))


class _Stop(Exception):  # noqa: N818 - control flow inside this module only
    def __init__(self, step: Step, reason: str, calls: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.step = step
        self.reason = reason
        self.calls = calls


# --- pure changes of the incident ----------------------------------------------------


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


def support_case(incident: Incident, approval: Approval) -> dict[str, Any]:
    """The case body from the ticket draft (``displayName``, ``description``, ``priority``)."""
    t = approval.target
    draft: Mapping[str, Any] = (
        incident.diagnosis.ticket_draft
        if incident.diagnosis and incident.diagnosis.ticket_draft
        else {}
    )
    lines = [
        str(draft.get("summary") or f"Physical host {t.physical_host} failed repeatedly."),
        "",
        f"Physical host: {t.physical_host}",
        f"Project: {t.project}  Zone: {t.zone}  Cluster: {t.cluster or '-'}  "
        f"Node pool: {t.node_pool or '-'}",
        f"VM: {t.instance} (id {t.instance_id}), node {t.node}",
        f"Approved by {approval.actor} via {approval.platform.value} at "
        f"{format_rfc3339(approval.at)}; the VM was isolated by loopbreaker "
        f"(incident {incident.id}).",
    ]
    excerpts = [str(e) for e in draft.get("excerpts") or ()]
    if excerpts:
        lines += ["", "Log excerpts:", *excerpts]
    return {
        "displayName": str(draft.get("title") or f"GKE node host errors: {t.physical_host}"),
        "description": "\n".join(lines),
        "priority": "P2",
    }
