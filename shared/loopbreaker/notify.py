"""Notifications: one message per incident, replaced in place as the incident changes.

:func:`render` turns an incident into a platform-neutral :class:`Notification` (pure);
a :class:`Notifier` posts it keyed by incident id, so a second post *replaces* the first.
Shipped here: :class:`LogNotifier` (a structured log line; also the dry-run choice) and
:class:`FileNotifier` (one JSON file per incident, used by tests). Chat notifiers come
later and implement the same one-method port.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from loopbreaker.errors import TransientError
from loopbreaker.incidents import Incident, State
from loopbreaker.logs import event, get_logger
from loopbreaker.timeutil import format_rfc3339

_SEVERITY = {
    State.OPEN: "INFO",
    State.DIAGNOSED: "WARNING",
    State.AWAITING_APPROVAL: "WARNING",
    State.APPROVED: "WARNING",
    State.REMEDIATING: "WARNING",
    State.REJECTED: "INFO",
    State.EXPIRED: "INFO",
    State.REMEDIATED: "INFO",
    State.FAILED: "ERROR",
}


@dataclass(frozen=True)
class Notification:
    incident_id: str
    title: str
    text: str
    severity: str
    state: str
    fields: Mapping[str, str] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        """Changes exactly when what a reader sees changes."""
        body = json.dumps(asdict(self), sort_keys=True, default=str)
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fields": dict(self.fields), "fingerprint": self.fingerprint}


class Notifier(Protocol):
    def post(self, notification: Notification) -> None:
        """Create the incident's message, or replace it; TransientError if it could not."""
        ...


def render(incident: Incident) -> Notification:
    """The message for an incident in its current state (pure)."""
    key = incident.key
    where = f"{key.scope.value.replace('_', ' ')} {key.name}"
    cluster = incident.cluster or "unknown cluster"
    counts = ", ".join(f"{n} {kind}" for kind, n in sorted(incident.counts.items()))
    diagnosis = incident.diagnosis
    cause = diagnosis.root_cause if diagnosis else "not diagnosed yet"
    lines = [
        f"{incident.signal_count} signals ({counts}) between "
        f"{format_rfc3339(incident.first_event)} and {format_rfc3339(incident.last_event)}.",
    ]
    if incident.nodes:
        lines.append(f"Nodes: {_short(incident.nodes)}.")
    fields = {
        "incident": incident.id,
        "state": incident.state.value,
        "cluster": cluster,
        "key": str(key),
        "signals": str(incident.signal_count),
    }
    if diagnosis:
        lines.append(diagnosis.summary)
        lines.append(f"Remediation: {diagnosis.remediation_path}.")
        fields["root_cause"] = diagnosis.root_cause
        fields["remediation_path"] = diagnosis.remediation_path
        if diagnosis.suspect_hosts:
            fields["suspect_hosts"] = ", ".join(diagnosis.suspect_hosts)
        if diagnosis.ticket_draft:
            lines.append(f"Support ticket draft: {diagnosis.ticket_draft.get('title')}.")
    if incident.state is State.AWAITING_APPROVAL and incident.expires_at:
        lines.append(f"Needs approval before {format_rfc3339(incident.expires_at)}.")
    if incident.state is State.EXPIRED:
        lines.append("The approval request expired; nothing was changed.")
    return Notification(
        incident_id=incident.id,
        title=f"[{incident.state.value}] {cause}: {where} in {cluster}",
        text="\n".join(lines),
        severity=_SEVERITY[incident.state],
        state=incident.state.value,
        fields=fields,
    )


def _short(names: tuple[str, ...], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"


class LogNotifier:
    """Posts a notification as one structured log line (console, dry run)."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._logger = logger or get_logger("notify")

    def post(self, notification: Notification) -> None:
        event(
            self._logger,
            logging.INFO,
            notification.title,
            labels={"incident_id": notification.incident_id},
            event="notification",
            text=notification.text,
            notification_severity=notification.severity,
            fingerprint=notification.fingerprint,
        )


class FileNotifier:
    """``DIR/<incident_id>.json`` holds the current message; ``DIR/posts.jsonl`` every post.

    Replacing is an atomic rename, so concurrent workers never leave a torn message.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def post(self, notification: Notification) -> None:
        body = json.dumps(notification.to_dict(), indent=2, sort_keys=True)
        line = json.dumps(
            {"incident_id": notification.incident_id, "fingerprint": notification.fingerprint}
        )
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(body)
            os.replace(tmp, self.directory / f"{notification.incident_id}.json")
            # O_APPEND writes of one short line do not interleave between processes.
            with open(self.directory / "posts.jsonl", "a", encoding="utf-8") as log:
                log.write(line + "\n")
        except OSError as exc:
            raise TransientError(
                f"cannot write the message of {notification.incident_id}: {exc}"
            ) from exc

    def messages(self) -> dict[str, dict[str, Any]]:
        """The current message of every incident."""
        out: dict[str, dict[str, Any]] = {}
        for path in sorted(self.directory.glob("inc-*.json")):
            out[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        return out
