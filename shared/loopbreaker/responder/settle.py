"""The responder's settle half: expire, diagnose, notify, publish, and verify remediations."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from loopbreaker import incidents
from loopbreaker.approval.requests import choose_target
from loopbreaker.chat import notify
from loopbreaker.diagnosis.evidence import QueryBudget
from loopbreaker.errors import ConfigError, InvalidInput, TransientError
from loopbreaker.incidents import Arrival, DiagnosisRecord, Incident, Policy, Verdict
from loopbreaker.incidents.routes import Route, RouteFacts
from loopbreaker.incidents.routes import facts_of as routes_facts
from loopbreaker.logs import event
from loopbreaker.model import Context, Diagnosis, Evidence, HostFailureRecord, Signal, SignalKind
from loopbreaker.remediation.queue import publish_approved
from loopbreaker.responder import kubeflow_alerts
from loopbreaker.responder.assessment import (
    Assessment,
    _workload_on,
    assess,
    durations,
    merge_evidence,
)
from loopbreaker.responder.outcomes import SettleReport
from loopbreaker.responder.ports import ResponderState

#: An approval whose remediation request is still unpublished this long after the
#: decision is published by ``settle`` (the chat action had its chance first).
PUBLISH_RETRY_AFTER = timedelta(seconds=30)
#: The most recent incidents a Kubeflow alert's incident looks among for its jobs' own.
JOB_INCIDENTS = 100


class Settling(ResponderState):
    """``settle``, which the schedule runs every minute, and all it does per incident."""

    def settle(self, now: datetime | None = None) -> SettleReport:
        """Expire stale approval requests; diagnose incidents whose settle time passed."""
        now = now or self.clock()
        report = SettleReport()
        self._pause = self.store.current_pause(now)
        self._diagnosed, self._owners = set(), {}
        batch = self.settings.settle_batch
        for incident_id in self.store.expiring(now, batch):
            work = partial(self._expire_one, incident_id, now, report)
            self._isolated(incident_id, report, work, now)
        for incident_id in self.store.due(now, batch):
            work = partial(self._settle_one, incident_id, now, report)
            self._isolated(incident_id, report, work, now)
        self._publish_pending(now, report)
        report.pruned = self.store.prune(now - self.settings.dedup_retention)
        return report

    def _isolated(
        self, incident_id: str, report: SettleReport, work: Callable[[], None], now: datetime
    ) -> None:
        """One incident's failure must not starve the others: log it, report it, go on.

        After a TransientError the incident keeps its lease (settle_at) and is retried once
        it runs out. After InvalidInput, which no retry can fix, it is not retried: its
        settle_at is cleared and the reason noted in its audit trail; a new signal makes
        it due again.
        """
        try:
            work()
        except TransientError as exc:
            self._failed(incident_id, report, exc, retry=True)
        except InvalidInput as exc:
            self._failed(incident_id, report, exc, retry=False)
            reason = f"{type(exc).__name__}: {exc}"
            try:
                self.store.update(incident_id, lambda i: incidents.give_up(i, now, reason))
            except TransientError as again:
                # Not noted this time: the lease runs out and the next settle fails again.
                event(
                    self._log,
                    logging.WARNING,
                    f"could not stop retrying {incident_id}: {again}",
                    labels={"incident_id": incident_id},
                    event="settle_give_up_failed",
                    error=type(again).__name__,
                )

    def _failed(
        self, incident_id: str, report: SettleReport, exc: Exception, *, retry: bool
    ) -> None:
        report.failed.append({"incident_id": incident_id, "reason": str(exc)})
        self._count("settle_failed")
        event(
            self._log,
            logging.ERROR,
            f"settling {incident_id} failed: {exc}"
            + ("" if retry else " (not retried until a new signal arrives)"),
            labels={"incident_id": incident_id},
            event="settle_failed",
            error=type(exc).__name__,
            retry=retry,
        )

    def _expire_one(self, incident_id: str, now: datetime, report: SettleReport) -> None:
        expired = self.store.update(incident_id, lambda i: incidents.expire(i, now))
        if not expired.changed or expired.incident is None:
            return
        report.expired.append(incident_id)
        self._count("expired")
        event(
            self._log,
            logging.INFO,
            "approval request expired",
            labels=expired.incident.labels(),
            event="incident_expired",
        )
        self._notify(expired.incident, report)

    def _settle_one(self, incident_id: str, now: datetime, report: SettleReport) -> None:
        # A store that writes nothing shared per arrival (Firestore) is counted now, once.
        tallied = self.store.tally(incident_id)
        if tallied is not None:
            cap = self.settings.max_signals
            self.store.update(incident_id, lambda i: incidents.recount(i, tallied, cap))
        claimed = self.store.update(incident_id, lambda i: incidents.claim(i, now))
        if not claimed.changed or claimed.incident is None:
            return  # someone else holds it, or it is no longer due
        incident = claimed.incident
        if incidents.verifying(incident):
            self._verify_one(incident, now, report)
            return
        if incident.final:
            # Final incidents are never diagnosed again: only a failed notification is due.
            self._notify(incident, report)
            self.store.update(incident_id, incidents.settled)
            return
        if tallied is not None and self._not_yet(incident, now, report):
            return
        context = incidents.context_for(incident, default_kind=self.settings.workload_kind)
        budget = QueryBudget(self.settings.query_budget)
        by_namespace = kubeflow_alerts.namespace_incident(incident)
        # A Kubeflow alert's incident names no job yet: its namespace, over the rule's hour.
        wide = kubeflow_alerts.widened(context) if by_namespace else context
        evidence = self.evidence.collect(wide, budget)
        signals = self.store.signals(incident_id)
        # The job incidents' Events (log sink) are evidence of which job the alert meant.
        signals += self._job_events(incident) if by_namespace else []
        names = incidents.lookup_names(incident, signals)
        names.update(n.physical_host for n in evidence.nodes or () if n.physical_host)
        history = self.store.host_history(names, exclude_incident=incident_id)
        history = self._own_project(history, incident)
        evidence = merge_evidence(evidence, signals, history)
        extra: Mapping[str, Any] = {}
        if by_namespace:

            def collect(job: Context) -> Evidence:
                return merge_evidence(self.evidence.collect(job, budget), signals, history)

            found = kubeflow_alerts.diagnose_namespace(
                context,
                kubeflow_alerts.kinds_of(incident, signals),
                evidence,
                collect,
                self._diagnose,
            )
            diagnosis, extra = found.diagnosis, found.document
        else:
            diagnosis = self._diagnose(context, evidence)
        self._diagnosed.add(incident_id)
        if self.settings.chatops.routes is not None and context.namespace is None:
            owner = self.pod_workloads.owner_of_failure(signals, evidence)
            if owner is not None:
                self._owners[incident_id] = owner
        choice = choose_target(
            diagnosis,
            signals,
            evidence.nodes or (),
            cluster=incident.cluster,
            repair=self.settings.remediation.policy.repair,
            compute=self.compute,
        )
        record = DiagnosisRecord.from_diagnosis(
            diagnosis,
            {**self._render(diagnosis), **extra},
            at=now,
            signal_revision=incident.signal_revision,
            queries=budget.spent,
            target=choice.target,
            target_reason=choice.reason,
        )
        # Before the diagnosis is stored (which ends the lease): if this fails, the lease
        # runs out and the next settle does it all again. Record ids are deterministic,
        # so writing them twice stores them once.
        self.store.record_host_failures(
            incidents.host_failures(incident_id, diagnosis, signals, evidence.nodes or ())
        )
        holder = self._holder(incident_id, record)
        policy = self._approving(incident, record)
        if holder is None:
            stored = self.store.update(
                incident_id,
                lambda i: incidents.apply_diagnosis(
                    i, record, now=now, policy=policy, requested_at=self.approval_clock()
                ),
            )
        else:
            stored = self.store.update(
                incident_id,
                lambda i: incidents.link(i, holder, record, now=now, policy=self._policy),
            )
        if not stored.changed or stored.incident is None:
            return
        if holder is not None:
            count = stored.incident.signal_count
            spent = record.document.get("cost")
            held = self.store.update(
                holder, lambda h: incidents.note_linked(h, incident_id, count, now, spent)
            )
            if held.changed and held.incident is not None and spent:
                # The approval card now says what the failure costs: post it again.
                self._notify(held.incident, report)
        if tallied is not None and stored.incident.settle_at is None:
            # Signals that arrived during the diagnosis did not touch the head: look once
            # more after the settle time, and diagnose again only if there are any.
            check = now + self.settings.settle_time
            self.store.update(incident_id, lambda i: incidents.postpone(i, check))
        report.diagnosed.append(incident_id)
        self._count("diagnosed")
        event(
            self._log,
            logging.INFO,
            f"incident diagnosed: {record.root_cause} -> {record.remediation_path}",
            labels=stored.incident.labels(),
            event="incident_diagnosed",
            state=stored.incident.state.value,
            root_cause=record.root_cause,
            remediation_path=record.remediation_path,
            queries=budget.spent,
            queries_refused=budget.refused,
            signal_count=stored.incident.signal_count,
            # The log-based metric loopbreaker/accelerator_hours_lost sums the hours added.
            **_cost_fields(diagnosis, incident),
        )
        self._notify(stored.incident, report)

    def _job_events(self, incident: Incident) -> list[Signal]:
        """The restart signals of the incidents of the namespace's jobs."""
        others = self.store.list_incidents(limit=JOB_INCIDENTS)
        return [
            s
            for other in kubeflow_alerts.job_incidents(incident, others)
            for s in self.store.signals(other.id)
            if s.kind is SignalKind.JOB_RESTARTING and s.workload
        ]

    def _holder(self, incident_id: str, record: DiagnosisRecord) -> str | None:
        """The incident already asking approval for this diagnosis' target, if any: one
        failure seen through several incidents (two nodes of one host, the workload's own
        errors) asks once. The claim is one store transaction, so racing settles agree."""
        if record.target is None or not record.requires_approval:
            return None
        # Also with approvals off: one failure is still one message.
        return self.store.claim_target(incidents.target_keys(record.target), incident_id)

    def _not_yet(self, incident: Incident, now: datetime, report: SettleReport) -> bool:
        """For a store that counts at settle: still receiving, or nothing new? Then wait."""
        quiet = incident.last_signal_at + self.settings.settle_time
        if quiet > now:
            self.store.update(incident.id, lambda i: incidents.postpone(i, quiet))
            return True
        diagnosis = incident.diagnosis
        if diagnosis is not None and diagnosis.signal_revision >= incident.signal_revision:
            # The look after a diagnosis found no new signal: settled until one arrives.
            self._notify(incident, report)
            self.store.update(incident.id, incidents.quiet)
            return True
        return False

    def _notify(self, incident: Incident, report: SettleReport) -> None:
        route = None
        if incident.linked_to is not None:
            if incident.notified_fingerprint is None:
                return  # never posted: the incident it is linked to carries the one message
            # Posted before the merge: its message is replaced in place by one that points
            # to the holder's, so it states no verdict and asks for nothing any more.
            message = notify.render_merged(incident, self.store.get(incident.linked_to))
        else:
            route = self._route(incident)
            message = notify.render(
                incident,
                signing_key=self.approvals.signing_key,
                approvals_off=self.approvals.off_reason,
                pause=self._pause,
                route=route,
            )
        moving = (
            route is not None
            and incident.route is not None
            and route.name != incident.route
            and incident.chat is not None
        )
        if message.fingerprint == incident.notified_fingerprint and not moving:
            return
        try:
            # A move posts in the new route's channel first; the old message is pointed
            # there only once the new one is stored, so a retry never posts it twice.
            where = self.notifier.post(message, None if moving else incident.chat)
        except TransientError:
            # Keep the incident due, so a later settle notifies again (the diagnosis is
            # stored either way; only the message is missing). A live incident is then
            # diagnosed again as well; a final one only has its message retried.
            retry_at = self.clock() + self.settings.settle_time
            self.store.update(incident.id, lambda i: incidents.rearm(i, retry_at))
            raise
        except ConfigError as exc:
            # A bad token or channel: every post fails the same way until the settings
            # are fixed. Say so once per instance; the diagnosis itself is stored.
            if not self._notifier_misconfigured:
                self._notifier_misconfigured = True
                event(
                    self._log,
                    logging.ERROR,
                    f"notifier misconfigured, messages are not sent: {exc}",
                    event="notifier_misconfigured",
                    reason=str(exc),
                )
            report.failed.append({"incident_id": incident.id, "reason": str(exc)})
            return
        name = route.name if route is not None else None
        now = self.clock()
        self.store.update(
            incident.id,
            lambda i: incidents.mark_notified(i, message.fingerprint, where, route=name, at=now),
        )
        report.notified.append(incident.id)
        self._count("notified")
        if moving and route is not None:
            self._point_old_message(incident, route, where)

    def _approving(self, incident: Incident, record: DiagnosisRecord) -> Policy:
        """The policy this diagnosis applies: with routes, a verdict whose route names no
        approvers opens no approval request (nobody could decide it; the card says so)."""
        routes = self.settings.chatops.routes
        if routes is None or self._policy.approval_ttl is None:
            return self._policy
        facts = replace(self._route_facts(incident), cause=record.root_cause)
        if routes.choose(facts).approvers:
            return self._policy
        return replace(self._policy, approval_ttl=None)

    def _own_project(
        self, history: list[HostFailureRecord], incident: Incident
    ) -> list[HostFailureRecord]:
        """One project's evidence never joins another's verdict: a host's failures that
        incidents of another project remember are left out (a physical host may run VMs of
        several projects). A record whose incident is gone is kept, as before projects."""
        projects: dict[str, str | None] = {}
        kept = []
        for record in history:
            other = record.incident_id
            if other is not None and other not in projects:
                found = self.store.get(other)
                projects[other] = found.key.project if found is not None else incident.key.project
            if other is None or projects[other] == incident.key.project:
                kept.append(record)
        return kept

    def _route(self, incident: Incident) -> Route | None:
        """The incident's route: chosen at its first post from what it says then; chosen
        again only when it was just diagnosed, so a re-diagnosis whose cause another route
        owns moves it there once, and a later post keeps it where it is."""
        routes = self.settings.chatops.routes
        if routes is None:
            return None
        if incident.route is not None and incident.id not in self._diagnosed:
            kept = routes.named(incident.route)
            if kept is not None:
                return kept
        return routes.choose(self._route_facts(incident))

    def _route_facts(self, incident: Incident) -> RouteFacts:
        """What routes match on: the incident's own facts, and for a node-pool incident the
        one workload whose pods its failure names (found at its diagnosis in this pass)."""
        facts = routes_facts(incident)
        owner = self._owners.get(incident.id)
        if facts.namespace is not None or owner is None:
            return facts
        namespace, workload = owner
        return replace(facts, namespace=namespace, workload=workload)

    def _point_old_message(
        self, incident: Incident, route: Route, where: Mapping[str, str] | None
    ) -> None:
        """Replace the message in the old route's channel by a pointer to the new one."""
        try:
            self.notifier.post(notify.render_moved(incident, route, where), incident.chat)
        except (TransientError, ConfigError) as exc:
            # The new message is out and stored; the old one only keeps its last words.
            event(
                self._log,
                logging.WARNING,
                f"incident {incident.id} moved to route {route.name}; its old message was "
                f"not updated: {exc}",
                labels=incident.labels(),
                event="route_pointer_failed",
                reason=str(exc),
            )
            return
        event(
            self._log,
            logging.INFO,
            f"incident {incident.id} moved from route {incident.route} to {route.name}",
            labels=incident.labels(),
            event="incident_rerouted",
            route=route.name,
            previous_route=incident.route,
        )

    def _publish_pending(self, now: datetime, report: SettleReport) -> None:
        """Publish approvals whose chat action could not (the outbox of on_chat_action).

        Not while paused: the executor would refuse them; after the resume they go out."""
        if self._pause is not None:
            return
        for incident in self.store.list_incidents(states={incidents.State.APPROVED}):
            if not incidents.unpublished(incident) or incident.approval is None:
                continue
            if incident.approval.at > now - PUBLISH_RETRY_AFTER:
                continue
            message_id, updated = publish_approved(self.store, self.queue, incident, now, self._log)
            if message_id is None:
                report.failed.append(
                    {"incident_id": incident.id, "reason": "remediation request not published"}
                )
                continue
            report.published.append(incident.id)
            self._notify(updated, report)

    # --- outcome verification ---------------------------------------------------------

    def _verify_one(self, incident: Incident, now: datetime, report: SettleReport) -> None:
        """Look at a remediated workload once: verified, recurred, or look again later."""
        check = incident.verification
        assert check is not None
        base = incidents.context_for(incident, default_kind=self.settings.workload_kind)
        # The window the check looks at: from the remediation until now.
        half = max(now - check.since, timedelta(seconds=1)) / 2
        context = replace(base, issue_time=check.since + half, window=half)
        budget = QueryBudget(self.settings.query_budget)
        evidence = self.evidence.collect(context, budget)
        target = incident.approval.target if incident.approval else None
        if not context.cluster and target is not None and target.cluster:
            context = replace(context, cluster=target.cluster)
        if not context.workload:
            # A host or pool incident names no workload: watch the one that ran on the node.
            context = replace(context, **_workload_on(target, evidence))
        taken = incident.remediation.path if incident.remediation else None
        if target is not None and taken is not None:
            # The branch the re-check settled on decides how the outcome is read.
            target = replace(target, repair_path=taken)
        found = assess(check, target, context, evidence, now)
        report.checked.append(incident.id)
        event(
            self._log,
            logging.INFO,
            f"verification of {incident.id}: {found.verdict.value}",
            labels=incident.labels(),
            event="incident_verification",
            verdict=found.verdict.value,
            findings=list(found.findings),
            queries=budget.spent,
        )
        if found.verdict is Verdict.WATCHING:
            other = self._other_cause(incident, found, now, context) if found.other else None
            next_at = None if found.stop else now + self.settings.verify_every
            stored = self.store.update(
                incident.id,
                lambda i: incidents.note_check(i, now, next_at, found.findings, other),
            )
            if stored.incident is not None and stored.changed:
                self._notify(stored.incident, report)
            return
        other = self._other_cause(incident, found, now, context) if found.other else None
        concluded = self.store.update(
            incident.id,
            lambda i: incidents.conclude(i, found.verdict, now, found.note, found.findings, other),
        )
        if not concluded.changed or concluded.incident is None:
            return
        done = concluded.incident
        if found.verdict is Verdict.RECURRED:
            report.recurred.append(incident.id)
            self._count("recurred")
            if check.host:
                # The host stays in the host memory: a repeat offender on its next failure.
                self.store.record_host_failures(
                    [
                        HostFailureRecord(
                            check.host, target.node if target else None, now, incident.id
                        )
                    ]
                )
        else:
            report.verified.append(incident.id)
            self._count("verified")
        event(
            self._log,
            logging.WARNING if found.verdict is Verdict.RECURRED else logging.INFO,
            f"incident {incident.id} {found.verdict.value}: {found.note}",
            labels=done.labels(),
            event=f"incident_{found.verdict.value}",
            verdict=found.verdict.value,
            root_cause=done.diagnosis.root_cause if done.diagnosis else None,
            physical_host=check.host,
            durations=durations(done),
        )
        self._notify(done, report)

    def _other_cause(
        self, incident: Incident, found: Assessment, now: datetime, context: Context
    ) -> str | None:
        """Open (once) a new incident for a restart that is not this incident's cause."""
        check = incident.verification
        if check is not None and check.other_incident:
            return check.other_incident
        namespace, workload = context.namespace, context.workload
        if not workload or not context.cluster:
            return None
        signal = Signal(
            kind=SignalKind.JOB_RESTARTING,
            timestamp=found.other_at or now,
            project=incident.key.project,
            cluster=context.cluster,
            location=incident.location,
            namespace=namespace or None,
            workload=workload,
            reason=f"restart after the remediation of {incident.id}: {found.other[0]}"[:500],
            insert_id=f"verify-{incident.id}",
        )
        key = incidents.IncidentKey(
            incident.key.project,
            context.cluster,
            incidents.Scope.WORKLOAD,
            f"{namespace}/{workload}" if namespace else workload,
        )
        arrival = Arrival(
            key=key,
            signal=signal,
            event_time=signal.timestamp or now,
            now=now,
            # One new incident per verification, however often the check runs.
            entry_id=incidents.digest(f"verify-other/{incident.id}"),
            message_id=None,
            policy=self._policy,
        )
        result = self.store.ingest(arrival)
        return result.joined


def _cost_fields(diagnosis: Diagnosis, before: Incident) -> dict[str, Any]:
    """The restart loop's cost as JSON log fields (none without a loop).

    An incident is diagnosed again as signals come in, its loop's cost growing each time:
    ``accelerator_hours_added`` is what this diagnosis adds to the last one's, so a sum
    over the log lines counts every loop once.
    """
    spent = diagnosis.cost
    if spent is None:
        return {}
    earlier = before.diagnosis.document.get("cost") if before.diagnosis else None
    was = earlier.get("accelerator_hours") if isinstance(earlier, Mapping) else None
    # As the stored document holds it (two decimals), so the additions sum to it exactly.
    now = spent.to_dict()["accelerator_hours"]
    added = None
    if now is not None:
        added = max(now - (was if isinstance(was, int | float) else 0.0), 0.0)
    return {
        "accelerator_hours": now,
        "accelerator_hours_added": added,
        "accelerator": spent.accelerator,
        "accelerators": spent.accelerators,
        "downtime_s": spent.downtime_s,
        "lost_progress_s": spent.lost_progress_s,
        "physical_host": diagnosis.suspect_hosts[0].host if diagnosis.suspect_hosts else None,
        "workload": diagnosis.context.workload,
    }
