"""The responder service: log-sink entries in, incidents out; settling diagnoses them.

``handle_entry`` classifies one LogEntry, keys it and hands it to the store, which
groups it into an incident in one transaction (duplicates change nothing); an entry that
concerns no incident is only remembered, so that its redelivery is a duplicate too. ``settle``
(called every minute) expires stale approval requests and diagnoses incidents whose
settle time has passed: claim, collect evidence within the query budget, run the pure
engine, record the host failures, store the diagnosis, notify once per change. A final
incident whose notification failed is due again only to retry that notification.

``settle`` also checks the outcome of remediated incidents (``verify``): each is due every
``LOOPBREAKER_VERIFY_EVERY`` until it is ``verified`` (no restart of the workload in
``LOOPBREAKER_VERIFY_WINDOW``) or ``recurred`` (a restart on the same physical host, or
the recreated VM on that host). It is claimed like a diagnosis (a lease on ``settle_at``
in one store transaction), so concurrent schedules never check one incident twice, and
at most ``LOOPBREAKER_SETTLE_BATCH`` are looked at per run. While remediation is paused
every message carries a banner, and approved requests are not (re)published.

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
from loopbreaker.approval.requests import Target, choose_target
from loopbreaker.chat import notify
from loopbreaker.chat.notify import Notifier
from loopbreaker.diagnosis import engine, render
from loopbreaker.diagnosis.evidence import EvidenceProvider, QueryBudget
from loopbreaker.diagnosis.steps import restarts
from loopbreaker.diagnosis.steps.common import Notes
from loopbreaker.errors import (
    ConfigError,
    InvalidContext,
    InvalidInput,
    InvalidLogEntry,
    TransientError,
)
from loopbreaker.incidents import (
    Arrival,
    DiagnosisRecord,
    Incident,
    PauseRecord,
    Policy,
    Verdict,
    VerificationRecord,
)
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.logs import event, get_logger
from loopbreaker.model import (
    Context,
    Diagnosis,
    Evidence,
    EvidenceKind,
    HostFailureRecord,
    HostPlace,
    NodeInfo,
    Signal,
    SignalKind,
    SourceStatus,
)
from loopbreaker.remediation.queue import LogQueue, RemediationQueue, publish_approved
from loopbreaker.signals.alerts import AlertSignal
from loopbreaker.signals.classify import Identity, Quiet, triage
from loopbreaker.signals.envelope import Delivery
from loopbreaker.timeutil import format_rfc3339, parse_rfc3339

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


#: Ignored outcomes without a messageId kept to be shared (one per kind and reason).
MAX_SHARED_OUTCOMES = 64
_IGNORED_WITHOUT_ID: dict[tuple[str, str], Outcome] = {}

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
    #: Remediated incidents looked at, and those concluded this run.
    checked: list[str] = field(default_factory=list)
    verified: list[str] = field(default_factory=list)
    recurred: list[str] = field(default_factory=list)

    def add(self, other: SettleReport) -> None:
        """Count ``other``'s run in this one (a replay settles in several passes)."""
        for name in self.__dataclass_fields__:
            mine = getattr(self, name)
            if isinstance(mine, list):
                mine.extend(getattr(other, name))
            else:
                setattr(self, name, mine + getattr(other, name))

    def to_dict(self) -> dict[str, Any]:
        return {
            "diagnosed": self.diagnosed,
            "expired": self.expired,
            "notified": self.notified,
            "published": self.published,
            "failed": self.failed,
            "pruned": self.pruned,
            "checked": self.checked,
            "verified": self.verified,
            "recurred": self.recurred,
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
        reject_level: int = logging.ERROR,
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
        #: The pause in force when this settle began (for the message banner).
        self._pause: PauseRecord | None = None
        self._log = logger or get_logger("responder")
        #: The level of the one line per rejected delivery: ERROR in the functions (an
        #: alert watches it); a replay lists its rejections in the summary instead.
        self.reject_level = reject_level
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
            found = triage(entry)
        except InvalidLogEntry as exc:
            text = str(exc)
            reason = text if text.startswith("not a LogEntry") else f"not a LogEntry: {text}"
            return self.reject(message_id, reason)
        assert isinstance(entry, Mapping)  # triage() accepted it
        entry_id = incidents.entry_id(entry)
        if isinstance(found, Quiet):
            return self.handle_screened(message_id, entry_id, found.identity, found.insert_id)
        return self._ingest(found, entry_id, message_id, fallback_time=fallback_time)

    def handle_screened(
        self, message_id: str | None, entry_id: str, where: Identity, insert_id: str | None
    ) -> Outcome:
        """A LogEntry that :func:`~loopbreaker.signals.classify.screen` found to match no
        rule (here, or in a replay's reader process): ignored, and remembered. Most of a
        job's log lines are such entries: they cost no Signal."""
        kind = SignalKind.UNRECOGNIZED.value
        return self._unkeyed(message_id, entry_id, kind, where.cluster, where.node, insert_id)

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
            kind = signal.kind.value
            return self._unkeyed(
                message_id, entry_id, kind, signal.cluster, signal.node, signal.insert_id
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
            return self._duplicate(message_id, signal.kind.value, signal.insert_id, labels)
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

    def _unkeyed(
        self,
        message_id: str | None,
        entry_id: str,
        kind: str,
        cluster: str | None,
        node: str | None,
        insert_id: str | None,
    ) -> Outcome:
        """An entry that concerns no incident: ignored, and remembered all the same, so a
        redelivery counts as a duplicate, not again."""
        labels = {"message_id": message_id, "cluster": cluster, "node": node}
        if self.store.remember(incidents.dedup_ids(entry_id, message_id), self.clock()):
            return self._duplicate(message_id, kind, insert_id, labels)
        reason = (
            "no known failure signature"
            if kind == SignalKind.UNRECOGNIZED
            else "names no workload, node pool, host or node"
        )
        return self._ignored(message_id, kind, reason, labels, insert_id=insert_id)

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
        if self._log.isEnabledFor(logging.INFO):
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
        if message_id is None:
            # Outcomes are immutable: a replay's many entries without a messageId share
            # one. Alert names are the sender's: only the first few are kept.
            shared = _IGNORED_WITHOUT_ID.get((kind, reason))
            if shared is not None:
                return shared
            outcome = Outcome(Status.IGNORED, None, kind=kind, reason=reason)
            if len(_IGNORED_WITHOUT_ID) < MAX_SHARED_OUTCOMES:
                _IGNORED_WITHOUT_ID[(kind, reason)] = outcome
            return outcome
        return Outcome(Status.IGNORED, message_id, kind=kind, reason=reason)

    def _duplicate(
        self,
        message_id: str | None,
        kind: str,
        insert_id: str | None,
        labels: Mapping[str, object],
    ) -> Outcome:
        self._count(Status.DUPLICATE)
        if self._log.isEnabledFor(logging.INFO):
            event(
                self._log,
                logging.INFO,
                "duplicate delivery ignored",
                labels=labels,
                event="entry_duplicate",
                insert_id=insert_id,
            )
        return Outcome(Status.DUPLICATE, message_id, kind=kind)

    def reject(self, message_id: str | None, reason: str, **fields: Any) -> Outcome:
        """Bad input: one line (ERROR by default) naming the message and the reason."""
        self._count(Status.REJECTED)
        event(
            self._log,
            self.reject_level,
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
        self._pause = self.store.current_pause(now)
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
        holder = self._holder(incident_id, record)
        if holder is None:
            stored = self.store.update(
                incident_id,
                lambda i: incidents.apply_diagnosis(
                    i, record, now=now, policy=self._policy, requested_at=self.approval_clock()
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
            self.store.update(holder, lambda h: incidents.note_linked(h, incident_id, count, now))
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
        if incident.linked_to is not None:
            return  # silenced: the incident it is linked to carries the one message
        message = notify.render(
            incident,
            signing_key=self.approvals.signing_key,
            approvals_off=self.approvals.off_reason,
            pause=self._pause,
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


@dataclass(frozen=True)
class Assessment:
    """What one look at a remediated workload found."""

    verdict: Verdict
    note: str
    findings: tuple[str, ...] = ()
    #: Restarts that are not this incident's (another host): a new, linked incident.
    other: tuple[str, ...] = ()
    other_at: datetime | None = None
    #: Nothing can be decided (no restart data at the window's end): stop looking.
    stop: bool = False


def _same_host(a: str | None, b: str | None) -> bool:
    one, two = HostPlace.parse(a), HostPlace.parse(b)
    return one is not None and two is not None and one.host == two.host


def assess(
    check: VerificationRecord,
    target: Target | None,
    context: Context,
    evidence: Evidence,
    now: datetime,
) -> Assessment:
    """The outcome of a remediation so far (pure): step 1 of the diagnosis (restart series,
    restart Events, conditions) over [since, now], each restart placed on its host, and
    the Compute place of the recreated VM."""
    nodes = {n.name: n for n in evidence.nodes or ()}
    # The recreated VM: same name (its managed instance group keeps it), a new id.
    if target is not None and check.host:
        for node in nodes.values():
            new_vm = node.instance == target.instance or node.name == target.node
            if (
                new_vm
                and node.instance_id
                and node.instance_id != target.instance_id
                and _same_host(node.physical_host, check.host)
            ):
                finding = (
                    f"the recreated VM {target.instance} (id {node.instance_id}) landed on the "
                    f"same physical host {check.host}"
                )
                return Assessment(Verdict.RECURRED, finding, (finding,))
    notes = Notes()
    signals = tuple(
        s for s in evidence.signals or () if s.timestamp is None or s.timestamp > check.since
    )
    seen = restarts.step1(context, evidence, signals, notes)
    if seen.loop:
        where = _restart_places(context, evidence, check.since)
        same = [w for w, node in where if _on_host(node, nodes, check.host, target)]
        others = [w for w, node in where if not _on_host(node, nodes, check.host, target)]
        what = f"+{seen.increase:g} restart(s)" if seen.increase else "a restart"
        if same or not where:
            # Unplaced restarts count against the remediation: the safe reading.
            finding = f"{what} of {context.workload} since the remediation: " + (
                "; ".join(same) if same else "no pod placement known, counted as the same cause"
            )
            return Assessment(Verdict.RECURRED, finding, (finding,))
        other_at = max((s.timestamp for s in signals if s.timestamp), default=None)
        finding = f"{what} of {context.workload} on another host: {'; '.join(others)}"
        if now >= check.until:
            note = f"loop broken on host {check.host or 'the isolated host'}; {finding}"
            return Assessment(Verdict.VERIFIED, note, (finding,), tuple(others), other_at)
        return Assessment(Verdict.WATCHING, finding, (finding,), tuple(others), other_at)
    if now < check.until:
        return Assessment(Verdict.WATCHING, "no restart so far")
    if seen.loop is None:
        finding = (
            "cannot verify: no restart series or restart Events of "
            f"{context.workload or 'the workload'} could be read"
        )
        return Assessment(Verdict.WATCHING, finding, (finding,), stop=True)
    span = (check.until - check.since).total_seconds() / 3600
    note = f"loop broken: no restart in {span:g} h since {format_rfc3339(check.since)}"
    return Assessment(Verdict.VERIFIED, note, (note,))


def _workload_on(target: Target | None, evidence: Evidence) -> dict[str, Any]:
    """The workload (and namespace) whose pods ran on the remediated node, if one did."""
    pods = [p for p in evidence.pods or () if p.workload]
    on_node = [p for p in pods if target is not None and p.node == target.node]
    for pod in on_node or pods[:1]:
        return {"workload": pod.workload, "namespace": pod.namespace}
    return {}


def _on_host(
    node: str | None, nodes: Mapping[str, NodeInfo], host: str | None, target: Target | None
) -> bool:
    if node is None:
        return True  # unplaced: the safe reading
    if target is not None and node == target.node:
        return True
    info = nodes.get(node)
    return info is not None and _same_host(info.physical_host, host)


def _restart_places(
    context: Context, evidence: Evidence, since: datetime
) -> list[tuple[str, str | None]]:
    """(what, node) per pod of the workload that restarted since ``since`` (per-pod restart
    series), else where the workload's pods run now (a JobSet's restarts name no pod)."""
    pod_node = {p.name: p.node for p in evidence.pods or ()}
    for series in evidence.pod_info or ():
        pod, node = series.labels.get("pod"), series.labels.get("node")
        if pod and node:
            pod_node.setdefault(pod, node)
    out = []
    for series in evidence.restarts or ():
        pod = series.labels.get("pod")
        if not pod or not pod.startswith(context.workload):
            continue
        before = [s.value for s in series.samples if s.at <= since]
        after = [s.value for s in series.samples if s.at > since]
        if after and max(after) > (before[-1] if before else after[0]):
            node = pod_node.get(pod)
            out.append((f"pod {pod} restarted on node {node or 'unknown'}", node))
    if out:
        return out
    mine = [
        p
        for p in evidence.pods or ()
        if p.node and (p.workload == context.workload or p.name.startswith(context.workload + "-"))
    ]
    return [(f"pod {p.name} runs on node {p.node}", p.node) for p in mine]


def durations(incident: Incident) -> dict[str, float | None]:
    """Seconds from the first signal to diagnosis, approval, remediated and verified."""
    start = incident.first_event
    marks: dict[str, datetime | None] = {
        "to_diagnosis": incident.diagnosis.at if incident.diagnosis else None,
        "to_approval": incident.approval.at if incident.approval else None,
        "to_remediated": incident.remediation.finished_at if incident.remediation else None,
        "to_verified": incident.verification.decided_at if incident.verification else None,
    }
    return {
        f"seconds_{name}": (at - start).total_seconds() if at else None
        for name, at in marks.items()
    }


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
