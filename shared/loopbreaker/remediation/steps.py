"""The remediation steps: re-check, cordon, drain, delete the VM (or report its host), file
the support case. Each returns its outcome, a sentence and the API calls it made; the
executor (:mod:`loopbreaker.remediation.executor`) runs them in order and records them.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial

from loopbreaker.approval.repair import (
    FAULT_BEHAVIOR_LABEL,
    GKE_FAULT_BEHAVIOR,
    REPORT_AND_REPLACE_OPERATION_LABEL,
    REPORT_AND_REPLACE_STATUS_LABEL,
    Branch,
    RepairPath,
    describe,
)
from loopbreaker.approval.requests import Approval, Target
from loopbreaker.errors import ActionFailed, TransientError
from loopbreaker.incidents import Incident
from loopbreaker.incidents.remediation import Outcome, Step
from loopbreaker.remediation.actuators import Eviction, HostReport
from loopbreaker.remediation.changes import (
    mark_delete_sent,
    mark_drain_start,
    mark_gke_status,
    mark_handed,
    mark_support_case,
    path_taken,
    support_case,
)
from loopbreaker.remediation.recorder import Actuators, RemediatorCore, StepResult, Stop
from loopbreaker.remediation.rules import (
    POOL_LABEL,
    DrainMode,
    approved_path,
    backoff,
    cordon_annotations,
    delete_request_id,
    evictable,
    hand_over_annotations,
    recheck,
    select_branch,
)

#: One invocation drains at most this long, then hands over to a redelivery (Cloud
#: Functions end event handlers after 9 minutes); the drain timeout spans deliveries.
INVOCATION_BUDGET = timedelta(minutes=7)
#: Node reads one delivery makes while following GKE's report-and-replace (with backoff
#: capped at a minute, the invocation budget ends far sooner).
MAX_FOLLOW_READS = 100
#: ``faultReasons[].description`` is kept short: Compute documents no limit, a case does.
MAX_REPORT_DESCRIPTION = 256


class RemediationSteps(RemediatorCore):
    """Each step of one remediation; live or dry-run by the actuators it is given."""

    def _recheck(
        self, incident: Incident, approval: Approval, kit: Actuators
    ) -> tuple[StepResult, Branch | None]:
        """The re-check, and the branch it settles on when it passes."""
        t = approval.target
        try:
            node = kit.nodes.get_node(t.node)
            instance = kit.vms.get_instance(t.project, t.zone, t.instance)
            pool_name = (node.labels.get(POOL_LABEL) if node else None) or t.node_pool
            pool = list(kit.nodes.pool_nodes(pool_name)) if pool_name else []
        except ActionFailed as exc:
            path = approved_path(t, self.policy)
            return (
                Outcome.FAILED,
                f"repair path {path.value} refused: cannot re-check: {exc}",
                (),
            ), None
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
        approved = approved_path(t, self.policy)
        if reasons or node is None or instance is None:
            # Every refusal names the path it refused (the branch refusal names its own).
            named = [r for r in reasons if r.startswith("repair path ")]
            head = "" if named else f"repair path {approved.value} refused: "
            return (Outcome.FAILED, head + "; ".join(reasons), calls), None
        branch = select_branch(t, node, instance, self.policy)
        why = branch.why
        if branch.path is approved:
            why = t.repair_why or "approved before repair paths were named; as the policy says"
            if t.fallback_path is not None:
                why = f"{branch.why}, so the approved rule selects {approved.value}"
        detail = (
            f"node {t.node} on host {t.physical_host}, VM id {t.instance_id}, limits hold; "
            f"repair path {branch.path.value} ({describe(branch.path)}): {why}"
        )
        return (Outcome.DONE, detail, calls), replace(branch, why=why)

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
        report = path_taken(incident, approved_path(t, self.policy)) is RepairPath.REPORT
        if not kit.dry_run and not self._reserve(incident, t):
            return Outcome.FAILED, self._limit_reached(t), ()
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
                    t.project,
                    t.zone,
                    t.instance,
                    request_id,
                    t.instance_id,
                    self._report(incident, t),
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
        if report:
            call += f" {self._report(incident, t).summary()}"
        if kit.dry_run:
            return Outcome.PLANNED, f"would {verb} VM {t.instance} (id {t.instance_id})", (call,)
        return Outcome.DONE, f"VM {t.instance} {verb}: operation {operation} done", (call,)

    def _reserve(self, incident: Incident, t: Target) -> bool:
        """One slot of the hourly budget every path shares (idempotent per incident)."""
        limit = self.policy.max_deletions_per_hour
        return self.store.reserve_deletion(t.cluster or "", incident.id, self.clock(), limit)

    def _limit_reached(self, t: Target) -> str:
        return (
            f"{self.policy.max_deletions_per_hour} host repair(s) in cluster {t.cluster} in the "
            "last hour; limit reached"
        )

    def _report(self, incident: Incident, t: Target) -> HostReport:
        """``reportHostAsFaulty``'s body: the reason the diagnosis supports, and what it saw."""
        draft = incident.diagnosis.ticket_draft if incident.diagnosis else None
        faults = (draft or {}).get("summary") or f"host {t.physical_host} failed repeatedly"
        text = f"loopbreaker {incident.id}: {faults}"
        return HostReport(
            t.fault_reason, text[:MAX_REPORT_DESCRIPTION], self.policy.disruption_schedule
        )

    # --- the gke path -------------------------------------------------------------------

    def _hand_to_gke(
        self, incident: Incident, approval: Approval, started: datetime, kit: Actuators
    ) -> StepResult:
        """Label the node for GKE's report-and-replace; GKE evicts, reports and replaces."""
        t = approval.target
        value = GKE_FAULT_BEHAVIOR[t.fault_reason]
        if not kit.dry_run and not self._reserve(incident, t):
            return Outcome.FAILED, self._limit_reached(t), ()
        notes = hand_over_annotations(incident.id, approval, self.clock())
        try:
            what = kit.nodes.label(t.node, {FAULT_BEHAVIOR_LABEL: value}, notes)
        except ActionFailed as exc:
            return Outcome.FAILED, f"{exc}; nothing else was changed", ()
        now = self.clock()
        if not kit.dry_run:
            self.store.update(incident.id, lambda i: mark_handed(i, now))
        call = f"PATCH /api/v1/nodes/{t.node} labels {FAULT_BEHAVIOR_LABEL}={value}"
        detail = (
            f"{what} ({t.fault_reason.value}): GKE evicts the node's pods under their "
            f"PodDisruptionBudgets, reports host {t.physical_host} and brings the node back on "
            "a healthy host; loopbreaker evicts and deletes nothing"
        )
        return (Outcome.PLANNED if kit.dry_run else Outcome.DONE), detail, (call,)

    def _await_gke(
        self, incident: Incident, approval: Approval, started: datetime, kit: Actuators
    ) -> StepResult:
        """Follow ``report-and-replace-status`` until OperationDone, an error or no progress."""
        t = approval.target
        timeout, stall = self.policy.gke_repair_timeout, self.policy.gke_repair_stall
        if kit.dry_run:
            return (
                Outcome.PLANNED,
                f"would follow {REPORT_AND_REPLACE_STATUS_LABEL} on node {t.node} until "
                f"OperationDone, for at most {timeout} (unchanged for {stall}: failed); on an "
                "error or no progress the node would be cordoned",
                (),
            )
        record = incident.remediation
        handed = (record.handed_at if record else None) or started
        status = record.gke_status if record else None
        since = (record.gke_status_at if record else None) or handed
        attempt = 0
        while True:
            now = self.clock()
            try:
                node = kit.nodes.get_node(t.node)
            except ActionFailed as exc:
                if now - handed >= timeout:
                    return self._gke_failed(kit, incident, approval, f"cannot read node: {exc}")
                raise TransientError(f"cannot read node {t.node}: {exc}; retrying") from exc
            if node is None:
                return (
                    Outcome.FAILED,
                    f"node {t.node} disappeared during GKE's report-and-replace (last status "
                    f"{status or 'none'}); loopbreaker deleted nothing",
                    (),
                )
            seen = node.labels.get(REPORT_AND_REPLACE_STATUS_LABEL)
            operation = node.labels.get(REPORT_AND_REPLACE_OPERATION_LABEL)
            if seen != status:
                status, since = seen, now
                self.store.update(incident.id, partial(mark_gke_status, status=seen, at=now))
            ended = (status or "").casefold()
            if ended == "operationdone":
                return (
                    Outcome.DONE,
                    f"GKE reported host {t.physical_host} as faulty (operation "
                    f"{operation or 'not labelled'}); GKE brings node {t.node} back on a "
                    "healthy host",
                    (f"GET /api/v1/nodes/{t.node}",),
                )
            if ended == "error":
                return self._gke_failed(
                    kit,
                    incident,
                    approval,
                    f"GKE's report-and-replace ended in {status} (operation "
                    f"{operation or 'not labelled'}); GKE cleared its taint and the "
                    f"{FAULT_BEHAVIOR_LABEL} label",
                )
            if now - handed >= timeout:
                return self._gke_failed(
                    kit,
                    incident,
                    approval,
                    f"GKE's report-and-replace did not finish within {timeout} (status "
                    f"{status or 'none'})",
                )
            if now - since >= stall:
                label = "still set" if FAULT_BEHAVIOR_LABEL in node.labels else "gone"
                return self._gke_failed(
                    kit,
                    incident,
                    approval,
                    f"no progress: {REPORT_AND_REPLACE_STATUS_LABEL} stayed "
                    f"{status or 'unset'} for {stall} (the {FAULT_BEHAVIOR_LABEL} label is "
                    f"{label})",
                )
            # The budget also caps the reads, should the clock stand still (it never spins).
            if now - started >= INVOCATION_BUDGET or attempt >= MAX_FOLLOW_READS:
                raise TransientError(
                    f"GKE's report-and-replace of {t.node} is at {status or 'no status yet'}; "
                    "following it on redelivery"
                )
            attempt += 1
            self._sleep(backoff(attempt).total_seconds())

    def _gke_failed(
        self, kit: Actuators, incident: Incident, approval: Approval, why: str
    ) -> StepResult:
        """An error or no progress: keep the node out of service, and say what to do."""
        t = approval.target
        try:
            cordon = kit.nodes.cordon(
                t.node, cordon_annotations(incident.id, approval, self.clock())
            )
        except ActionFailed as exc:
            cordon = f"could not cordon it: {exc}"
        value = GKE_FAULT_BEHAVIOR[t.fault_reason]
        return (
            Outcome.FAILED,
            f"{why}; node {t.node} {cordon}; loopbreaker evicted and deleted nothing. To retry: "
            f"kubectl label nodes {t.node} {FAULT_BEHAVIOR_LABEL}={value} --overwrite",
            (f"PATCH /api/v1/nodes/{t.node}",),
        )

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
