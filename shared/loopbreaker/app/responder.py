"""The responder service: log-sink entries in, incidents out; settling diagnoses them.

``handle_entry`` classifies one LogEntry, keys it and hands it to the store, which
groups it into an incident in one transaction (duplicates change nothing); an entry that
concerns no incident is only remembered, so that its redelivery is a duplicate too. ``settle``
(called every minute) expires stale approval requests and diagnoses incidents whose
settle time has passed: claim, collect evidence within the query budget, run the pure
engine, record the host failures, store the diagnosis, notify once per change. A final
incident whose notification failed is due again only to retry that notification.

Failures while settling one incident: a TransientError keeps it due (its lease runs out,
or it is re-armed) and the next settle retries; InvalidInput (a broken telemetry file, a
bad setting) stops the retries for that incident, with a note in its audit trail, until
a new signal arrives. Either way it is logged and reported in ``SettleReport.failed``.
Every port comes in through the constructor;
:func:`loopbreaker.app.bootstrap.build_responder` wires them.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import Any

from loopbreaker import incidents
from loopbreaker.app.settings import Settings
from loopbreaker.approval.requests import choose_target
from loopbreaker.chat import notify
from loopbreaker.chat.notify import Notifier
from loopbreaker.diagnosis import engine, render
from loopbreaker.diagnosis.evidence import EvidenceProvider, QueryBudget
from loopbreaker.errors import (
    ConfigError,
    InvalidContext,
    InvalidInput,
    InvalidLogEntry,
    TransientError,
)
from loopbreaker.incidents import Arrival, DiagnosisRecord, Incident, Policy
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.logs import event, get_logger
from loopbreaker.model import (
    Context,
    Diagnosis,
    Evidence,
    EvidenceKind,
    HostFailureRecord,
    Signal,
    SignalKind,
    SourceStatus,
)
from loopbreaker.remediation.queue import LogQueue, RemediationQueue, publish_approved
from loopbreaker.signals.alerts import AlertSignal
from loopbreaker.signals.classify import classify
from loopbreaker.signals.envelope import Delivery
from loopbreaker.timeutil import parse_rfc3339

Clock = Callable[[], datetime]
Diagnose = Callable[[Context, Evidence], Diagnosis]
RenderDiagnosis = Callable[[Diagnosis], dict[str, Any]]


def system_clock() -> datetime:
    return datetime.now(UTC)


class Status(StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"
    IGNORED = "ignored"


@dataclass(frozen=True)
class Outcome:
    """What became of one delivery."""

    status: Status
    message_id: str | None = None
    incident_id: str | None = None
    created: bool = False
    kind: str | None = None
    reason: str | None = None


#: An approval whose remediation request is still unpublished this long after the
#: decision is published by ``settle`` (the chat action had its chance first).
PUBLISH_RETRY_AFTER = timedelta(seconds=30)


@dataclass
class SettleReport:
    diagnosed: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    notified: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)
    failed: list[dict[str, str]] = field(default_factory=list)
    pruned: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "diagnosed": self.diagnosed,
            "expired": self.expired,
            "notified": self.notified,
            "published": self.published,
            "failed": self.failed,
            "pruned": self.pruned,
        }


@dataclass(frozen=True)
class Approvals:
    """How approval buttons are made: the signing key (resolved), or why they are off."""

    signing_key: bytes | None = None
    off_reason: str | None = "LOOPBREAKER_ACTION_SIGNING_KEY is not set"

    @classmethod
    def of(cls, settings: Settings) -> Approvals:
        chat = settings.chatops
        if chat.action_signing_key is None:
            return cls(None, "LOOPBREAKER_ACTION_SIGNING_KEY is not set")
        if not chat.approvers:
            return cls(None, "LOOPBREAKER_APPROVERS is empty")
        return cls(chat.action_signing_key.get().encode(), None)


def policy_of(settings: Settings, approvals: Approvals | None = None) -> Policy:
    enabled = approvals is not None and approvals.signing_key is not None
    return Policy(
        grouping_window=settings.grouping_window,
        settle_time=settings.settle_time,
        stale_after=settings.stale_after,
        max_signals=settings.max_signals,
        approval_ttl=settings.chatops.approval_ttl if enabled else None,
    )


class Responder:
    """The one service behind ``on_log_entry``, ``on_schedule`` and ``loopbreaker replay``."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: IncidentStore,
        notifier: Notifier,
        evidence: EvidenceProvider,
        clock: Clock = system_clock,
        diagnose: Diagnose = engine.diagnose,
        render_diagnosis: RenderDiagnosis = render.diagnosis_to_dict,
        logger: logging.Logger | None = None,
        approvals: Approvals | None = None,
        queue: RemediationQueue | None = None,
        approval_clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.notifier = notifier
        self.evidence = evidence
        self.clock = clock
        self.approvals = approvals or Approvals()
        #: Dates approval requests (humans decide in real time, even during a replay).
        self.approval_clock = approval_clock or clock
        self.queue: RemediationQueue = queue or LogQueue()
        self._diagnose = diagnose
        self._render = render_diagnosis
        self._policy = policy_of(settings, self.approvals)
        self._notifier_misconfigured = False
        self._log = logger or get_logger("responder")
        self._lock = threading.Lock()
        #: Outcome counts since start (accepted, duplicate, rejected, ignored, ...).
        self.stats: Counter[str] = Counter()

    def _count(self, name: str) -> None:
        with self._lock:
            self.stats[name] += 1

    # --- entries --------------------------------------------------------------------

    def handle_delivery(self, delivery: Delivery) -> Outcome:
        fallback = delivery.sink_timestamp or delivery.publish_time
        try:
            return self.handle_entry(delivery.message_id, delivery.entry, fallback_time=fallback)
        except TransientError as exc:
            # Raised on so Pub/Sub redelivers; this line says which message and why, in
            # the same structured form as every other outcome.
            event(
                self._log,
                logging.ERROR,
                f"will retry message {delivery.message_id or '(no messageId)'}: {exc}",
                labels={"message_id": delivery.message_id},
                event="entry_retry",
                message_id=delivery.message_id,
                reason=str(exc),
            )
            raise

    def handle_entry(
        self, message_id: str | None, entry: object, *, fallback_time: str | None = None
    ) -> Outcome:
        """Group one LogEntry into an incident. TransientError propagates (retry)."""
        try:
            signal = classify(entry)
        except InvalidLogEntry as exc:
            text = str(exc)
            reason = text if text.startswith("not a LogEntry") else f"not a LogEntry: {text}"
            return self.reject(message_id, reason)
        assert isinstance(entry, Mapping)  # classify() accepted it
        return self._ingest(
            signal, incidents.entry_id(entry), message_id, fallback_time=fallback_time
        )

    def handle_alert(self, alert: AlertSignal, message_id: str | None = None) -> Outcome:
        """Group one alert's signal like a log entry's; its dedup id is the alert's own
        (fingerprint, start, status), so a re-sent notification is a duplicate.
        A resolved alert joins the open incident of its key and never opens one."""
        if alert.signal is None or alert.reason is not None:
            ids = incidents.dedup_ids(alert.dedup_id, message_id)
            if self.store.remember(ids, self.clock()):
                return Outcome(Status.DUPLICATE, message_id, kind=alert.name)
            reason = alert.reason or "not a loopbreaker alert"
            return self._ignored(
                message_id, alert.name, reason, {"message_id": message_id}, "alert_ignored"
            )
        return self._ingest(
            alert.signal,
            alert.dedup_id,
            message_id,
            join_only=alert.signal.kind is SignalKind.ALERT_RESOLVED,
        )

    def _ingest(
        self,
        signal: Signal,
        entry_id: str,
        message_id: str | None,
        *,
        fallback_time: str | None = None,
        join_only: bool = False,
    ) -> Outcome:
        now = self.clock()
        key = incidents.key_for(signal, self.settings.project)
        labels = {"message_id": message_id, "cluster": signal.cluster, "node": signal.node}
        if key is None:
            # Remembered all the same, so a redelivery counts as a duplicate, not again.
            ids = incidents.dedup_ids(entry_id, message_id)
            if self.store.remember(ids, now):
                return self._duplicate(message_id, signal, labels)
            reason = (
                "no known failure signature"
                if signal.kind.value == "unrecognized"
                else "names no workload, node pool, host or node"
            )
            return self._ignored(
                message_id, signal.kind.value, reason, labels, insert_id=signal.insert_id
            )
        event_time = signal.timestamp or _parse_optional(fallback_time) or now
        arrival = Arrival(
            key=key,
            signal=signal,
            event_time=event_time,
            now=now,
            entry_id=entry_id,
            message_id=message_id,
            policy=self._policy,
            join_only=join_only,
        )
        result = self.store.ingest(arrival)
        incident_id = result.joined
        if result.duplicate:
            return self._duplicate(message_id, signal, labels)
        if incident_id is None:
            # A resolved alert whose incident is gone or final: nothing is left to update.
            return self._ignored(
                message_id, signal.kind.value, "no open incident to update", labels, key=str(key)
            )
        self._count(Status.ACCEPTED)
        incident = result.incident
        event(
            self._log,
            logging.INFO,
            "incident opened" if result.created else "signal added to incident",
            labels={**(incident.labels() if incident else {"incident_id": incident_id}), **labels},
            event="incident_opened" if result.created else "signal_added",
            kind=signal.kind.value,
            key=str(key),
            # Stores that count at settle time do not know the count yet.
            signal_count=incident.signal_count if incident else None,
            insert_id=signal.insert_id,
        )
        return Outcome(
            Status.ACCEPTED,
            message_id,
            incident_id=incident_id,
            created=result.created,
            kind=signal.kind.value,
        )

    def _ignored(
        self,
        message_id: str | None,
        kind: str,
        reason: str,
        labels: Mapping[str, object],
        event_name: str = "entry_ignored",
        **fields: Any,
    ) -> Outcome:
        self._count(Status.IGNORED)
        event(
            self._log,
            logging.INFO,
            f"ignored {kind}: {reason}",
            labels=labels,
            event=event_name,
            kind=kind,
            reason=reason,
            **fields,
        )
        return Outcome(Status.IGNORED, message_id, kind=kind, reason=reason)

    def _duplicate(
        self, message_id: str | None, signal: Signal, labels: Mapping[str, object]
    ) -> Outcome:
        self._count(Status.DUPLICATE)
        event(
            self._log,
            logging.INFO,
            "duplicate delivery ignored",
            labels=labels,
            event="entry_duplicate",
            insert_id=signal.insert_id,
        )
        return Outcome(Status.DUPLICATE, message_id, kind=signal.kind.value)

    def reject(self, message_id: str | None, reason: str, **fields: Any) -> Outcome:
        """Bad input: one ERROR line naming the message and the reason; acknowledged."""
        self._count(Status.REJECTED)
        event(
            self._log,
            logging.ERROR,
            f"rejected message {message_id or '(no messageId)'}: {reason}",
            labels={"message_id": message_id},
            event="entry_rejected",
            message_id=message_id,
            reason=reason,
            **fields,
        )
        return Outcome(Status.REJECTED, message_id, reason=reason)

    # --- settling -------------------------------------------------------------------

    def settle(self, now: datetime | None = None) -> SettleReport:
        """Expire stale approval requests; diagnose incidents whose settle time passed."""
        now = now or self.clock()
        report = SettleReport()
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
        if incident.final:
            # Final incidents are never diagnosed again: only a failed notification is due.
            self._notify(incident, report)
            self.store.update(incident_id, incidents.settled)
            return
        if tallied is not None and self._not_yet(incident, now, report):
            return
        context = incidents.context_for(incident, default_kind=self.settings.workload_kind)
        budget = QueryBudget(self.settings.query_budget)
        evidence = self.evidence.collect(context, budget)
        signals = self.store.signals(incident_id)
        names = incidents.lookup_names(incident, signals)
        names.update(n.physical_host for n in evidence.nodes or () if n.physical_host)
        history = self.store.host_history(names, exclude_incident=incident_id)
        evidence = merge_evidence(evidence, signals, history)
        diagnosis = self._diagnose(context, evidence)
        choice = choose_target(diagnosis, signals, evidence.nodes or (), cluster=incident.cluster)
        record = DiagnosisRecord.from_diagnosis(
            diagnosis,
            self._render(diagnosis),
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
        stored = self.store.update(
            incident_id,
            lambda i: incidents.apply_diagnosis(
                i, record, now=now, policy=self._policy, requested_at=self.approval_clock()
            ),
        )
        if not stored.changed or stored.incident is None:
            return
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
        )
        self._notify(stored.incident, report)

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
        message = notify.render(
            incident,
            signing_key=self.approvals.signing_key,
            approvals_off=self.approvals.off_reason,
        )
        if message.fingerprint == incident.notified_fingerprint:
            return
        try:
            where = self.notifier.post(message, incident.chat)
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
        self.store.update(
            incident.id, lambda i: incidents.mark_notified(i, message.fingerprint, where)
        )
        report.notified.append(incident.id)
        self._count("notified")

    def _publish_pending(self, now: datetime, report: SettleReport) -> None:
        """Publish approvals whose chat action could not (the outbox of on_chat_action)."""
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


def merge_evidence(
    evidence: Evidence, signals: Iterable[Signal], history: Iterable[HostFailureRecord]
) -> Evidence:
    """Add the incident's own signals and the remembered host failures to the evidence."""
    existing = tuple(evidence.signals or ())
    seen = {(s.insert_id, s.log_name, s.timestamp) for s in existing if s.insert_id}
    extra = tuple(s for s in signals if (s.insert_id, s.log_name, s.timestamp) not in seen)
    sources = dict(evidence.sources)
    logs = sources.get(EvidenceKind.LOGS)
    if extra and (logs is None or not logs.available):
        sources[EvidenceKind.LOGS] = SourceStatus("incident signals", True)
    return replace(
        evidence,
        signals=existing + extra,
        host_history=(*evidence.host_history, *history),
        sources=sources,
    )


def _parse_optional(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return parse_rfc3339(value)
    except InvalidContext:
        return None
