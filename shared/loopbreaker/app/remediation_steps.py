"""The remediation steps: re-check, cordon, drain, delete the VM (or report its host), file
the support case. Each returns its outcome, a sentence and the API calls it made; the
executor (:mod:`loopbreaker.app.remediation_executor`) runs them in order and records them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from loopbreaker.app.remediation_core import Actuators, RemediatorCore, StepResult, Stop
from loopbreaker.app.remediation_records import (
    mark_delete_sent,
    mark_drain_start,
    mark_support_case,
    support_case,
)
from loopbreaker.approval.requests import Approval
from loopbreaker.errors import ActionFailed, TransientError
from loopbreaker.incidents import Incident
from loopbreaker.incidents.records_remediation import Outcome, Step
from loopbreaker.remediation.actuators import Eviction
from loopbreaker.remediation.rules import (
    POOL_LABEL,
    DrainMode,
    HostAction,
    backoff,
    cordon_annotations,
    delete_request_id,
    evictable,
    recheck,
)

#: One invocation drains at most this long, then hands over to a redelivery (Cloud
#: Functions end event handlers after 9 minutes); the drain timeout spans deliveries.
INVOCATION_BUDGET = timedelta(minutes=7)


class RemediationSteps(RemediatorCore):
    """Each step of one remediation; live or dry-run by the actuators it is given."""

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
                raise Stop(
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
