"""The responder's ingest half: log entries, screened entries and alerts grouped into incidents."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from loopbreaker import incidents
from loopbreaker.errors import InvalidContext, InvalidLogEntry, TransientError
from loopbreaker.incidents import Arrival
from loopbreaker.logs import event
from loopbreaker.model import Signal, SignalKind
from loopbreaker.responder.kubeflow_alerts import namespace_key
from loopbreaker.responder.outcomes import Outcome, Status
from loopbreaker.responder.ports import ResponderState
from loopbreaker.signals.alerts import AlertSignal
from loopbreaker.signals.classify import Identity, Quiet, triage
from loopbreaker.signals.envelope import Delivery
from loopbreaker.timeutil import parse_rfc3339

#: Ignored outcomes without a messageId kept to be shared (one per kind and reason).
MAX_SHARED_OUTCOMES = 64
_IGNORED_WITHOUT_ID: dict[tuple[str, str], Outcome] = {}


class Ingesting(ResponderState):
    """Deliveries in: each one grouped into its incident, or ignored, remembered or rejected."""

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
        served = self.settings.projects
        if served and where.project and where.project not in served:
            return self._foreign(message_id, kind, where.project, where.cluster, where.node)
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
        served = self.settings.projects
        if served and signal.project and signal.project not in served:
            kind = signal.kind.value
            return self._foreign(message_id, kind, signal.project, signal.cluster, signal.node)
        now = self.clock()
        signal = self.pod_workloads.resolve(signal)
        # A Kubeflow restart alert names its namespace, not the job: the namespace's incident.
        key = incidents.key_for(signal, self.settings.project) or namespace_key(
            signal, self.settings.project
        )
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

    def _foreign(
        self,
        message_id: str | None,
        kind: str,
        project: str,
        cluster: str | None,
        node: str | None,
    ) -> Outcome:
        """An entry of a project the responder does not serve (a folder or organization sink
        catches more than intended): no incident, no action; counted and named apart."""
        self._count(Status.FOREIGN)
        reason = f"project {project} is not in LOOPBREAKER_PROJECTS"
        if self._log.isEnabledFor(logging.INFO):
            event(
                self._log,
                logging.INFO,
                f"ignored {kind} from project {project}: not served",
                labels={"message_id": message_id, "cluster": cluster, "node": node},
                event="entry_foreign_project",
                kind=kind,
                project=project,
                reason=reason,
            )
        return Outcome(Status.FOREIGN, message_id, kind=kind, reason=reason, project=project)

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


def _parse_optional(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return parse_rfc3339(value)
    except InvalidContext:
        return None
