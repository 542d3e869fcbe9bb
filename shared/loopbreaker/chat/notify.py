"""Notifications: one message per incident, replaced in place as the incident changes.

:func:`render` turns an incident into a platform-neutral :class:`Notification` (pure);
a :class:`Notifier` posts it keyed by incident id, so a second post *replaces* the first.
Shipped here: :class:`LogNotifier` (a structured log line; also the dry-run choice) and
:class:`FileNotifier` (one JSON file per incident, used by tests); the Slack and Google
Chat notifiers (:mod:`loopbreaker.chat.clients`) implement the same one-method port and
lay the message out with :mod:`loopbreaker.chat.render`.
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

from loopbreaker.approval.requests import ActionRequest, Target, sign_token
from loopbreaker.chat.promise import button_words, repair_actions
from loopbreaker.diagnosis import cost
from loopbreaker.errors import TransientError
from loopbreaker.incidents import Incident, PauseRecord, State, Verdict
from loopbreaker.incidents.routes import Route
from loopbreaker.logs import event, get_logger
from loopbreaker.model.diagnosis import Cost
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
    State.VERIFIED: "INFO",
    State.RECURRED: "ERROR",
}


@dataclass(frozen=True)
class ApprovalPrompt:
    """The Approve / Reject buttons of an incident awaiting approval."""

    token: str
    request_id: str
    node: str
    instance: str
    instance_id: str
    zone: str
    project: str
    physical_host: str
    expires_at: str
    #: The Approve button's words and what its confirmation says will happen, by the path
    #: (or the rule) the request is for: the button promises no more and no less.
    label: str = "Approve: cordon, drain, delete VM"
    what: str = ""


@dataclass(frozen=True)
class Notification:
    """What a reader sees of an incident, platform-neutral; renderers lay it out."""

    incident_id: str
    title: str
    text: str
    severity: str
    state: str
    fields: Mapping[str, str] = field(default_factory=dict)
    #: ``root_cause -> remediation_path`` once diagnosed.
    verdict: str = ""
    summary: str = ""
    #: (label, value) pairs: cluster, workload, restart increase, interruptions, ...
    facts: tuple[tuple[str, str], ...] = ()
    #: The host/node table: one row per suspect host.
    hosts: tuple[Mapping[str, str], ...] = ()
    excerpts: tuple[str, ...] = ()
    queries: tuple[str, ...] = ()
    ticket: Mapping[str, Any] | None = None
    recommendations: tuple[str, ...] = ()
    approval: ApprovalPrompt | None = None
    #: Why there are no buttons, or what was decided.
    approval_note: str | None = None
    #: The remediation's steps so far ("cordon: done: cordoned"), or its dry-run plan.
    remediation: tuple[str, ...] = ()
    #: Shown on top of every message while remediation is paused.
    banner: str | None = None
    #: The outcome check after remediation ("loop broken: no restart in 2 h since ...").
    verification: tuple[str, ...] = ()
    #: Set on the message of an incident merged into another: the incident that holds the
    #: failure now (``incident``, ``title``) and where its message lives (``platform``,
    #: ``channel``/``ts`` or ``message``/``thread``), so a notifier can link to it.
    merged_into: Mapping[str, str] | None = None
    #: The channel or space a new message goes to (the incident's route); None: the
    #: notifier's own. Where a message goes is not what it says: not in the fingerprint.
    destination: str | None = None

    @property
    def fingerprint(self) -> str:
        """Changes exactly when what a reader sees changes."""
        data = asdict(self)
        del data["destination"]
        # Left out while empty, so messages posted before these existed keep their print.
        for name in ("banner", "verification", "merged_into"):
            if not data[name]:
                del data[name]
        body = json.dumps(data, sort_keys=True, default=str)
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "fields": dict(self.fields),
            "merged_into": dict(self.merged_into) if self.merged_into else None,
            "fingerprint": self.fingerprint,
        }


class Notifier(Protocol):
    def post(
        self, notification: Notification, where: Mapping[str, str] | None = None
    ) -> Mapping[str, str] | None:
        """Create the incident's message, or replace the one at ``where``.

        Returns where the message lives now (stored on the incident for the next post),
        or None when there is nothing to remember. TransientError if it could not post.
        """
        ...


#: Shown in messages: how many queries, excerpts and host rows at most.
MAX_QUERIES = 4
MAX_EXCERPTS = 5
MAX_HOST_ROWS = 5


def render(
    incident: Incident,
    *,
    signing_key: bytes | None = None,
    approvals_off: str | None = None,
    pause: PauseRecord | None = None,
    route: Route | None = None,
) -> Notification:
    """The message for an incident in its current state (pure).

    With ``signing_key``, an open approval request becomes signed Approve / Reject
    buttons; without one (``approvals_off`` says why) the message says approvals are off.
    ``pause`` (the pause in force, if any) puts a banner on top. ``route`` (with
    ``LOOPBREAKER_ROUTES``) names the route, sends the message to its channel, and is who
    may approve: a route without approvers gets no buttons.
    """
    if route is not None and signing_key is not None and not route.approvers:
        signing_key, approvals_off = None, f"route {route.name} names no approvers"
    key = incident.key
    where = f"{key.scope.value.replace('_', ' ')} {key.name}"
    if key.name.endswith("/"):
        # A namespace-wide key (a Kubeflow restart alert names no job): say so.
        where = f"workloads in namespace {key.name[:-1]}"
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
    facts: list[tuple[str, str]] = [("Cluster", cluster)]
    if route is not None:
        facts.append(("Route", route.name))
        fields["route"] = route.name
    if incident.workloads:
        facts.append(("Workload", _short(incident.workloads, 3)))
    elif incident.node_pools:
        facts.append(("Node pool", _short(incident.node_pools, 3)))
    facts.append(("Signals", f"{incident.signal_count} ({counts})" if counts else "0"))
    document: Mapping[str, Any] = diagnosis.document if diagnosis else {}
    increase = document.get("restart_increase")
    if isinstance(increase, int | float):
        total = document.get("restart_total")
        lifetime = f" (lifetime {total:g})" if isinstance(total, int | float) else ""
        facts.append(("Restarts in window", f"+{increase:g}{lifetime}"))
    spent = _cost(document)
    if spent is not None:
        # One line: how bad it is, where people decide.
        facts.append(("Cost", cost.line(spent).removeprefix("cost: ")))
    interruptions = {k: n for k, n in incident.counts.items() if k in _INTERRUPTIONS}
    if interruptions:
        facts.append(
            ("Interruptions", ", ".join(f"{n} {k}" for k, n in sorted(interruptions.items())))
        )
    if diagnosis:
        lines.append(diagnosis.summary)
        lines.append(f"Remediation: {diagnosis.remediation_path}.")
        fields["root_cause"] = diagnosis.root_cause
        fields["remediation_path"] = diagnosis.remediation_path
        if diagnosis.suspect_hosts:
            fields["suspect_hosts"] = ", ".join(diagnosis.suspect_hosts)
        if diagnosis.ticket_draft:
            lines.append(f"Support ticket draft: {diagnosis.ticket_draft.get('title')}.")
    prompt, note = _approval(incident, signing_key, approvals_off)
    if incident.state is State.AWAITING_APPROVAL and incident.expires_at:
        lines.append(f"Needs approval before {format_rfc3339(incident.expires_at)}.")
    if incident.state is State.EXPIRED:
        lines.append("The approval request expired; nothing was changed.")
    if note:
        lines.append(note)
    return Notification(
        incident_id=incident.id,
        title=f"[{incident.state.value}] {cause}: {where} in {cluster}",
        text="\n".join(lines),
        severity=_SEVERITY[incident.state],
        state=incident.state.value,
        fields=fields,
        verdict=f"{diagnosis.root_cause} -> {diagnosis.remediation_path}" if diagnosis else "",
        summary=diagnosis.summary if diagnosis else "",
        facts=tuple(facts),
        hosts=_host_rows(document),
        excerpts=_excerpts(document),
        queries=_queries(document),
        ticket=_ticket(diagnosis.ticket_draft) if diagnosis and diagnosis.ticket_draft else None,
        recommendations=_recommendations(incident, document),
        approval=prompt,
        approval_note=note,
        remediation=_progress(incident),
        banner=pause_banner(pause) if pause else None,
        verification=verification_lines(incident),
        destination=route.destination if route is not None else None,
    )


def render_moved(incident: Incident, route: Route, where: Mapping[str, str] | None) -> Notification:
    """The old message of an incident a re-diagnosis moved to another route, replaced in
    place: no verdict, no buttons, only where its message lives now (pure)."""
    now = render(incident, route=route)
    title = now.title.split("] ", 1)[-1]
    note = (
        f"Moved to route {route.name}: its message there states the verdict and asks for any "
        "decision. Nothing is asked here."
    )
    target = {"incident": incident.id, "title": title, "label": f"Moved to route {route.name}"}
    if where:
        target.update({k: str(v) for k, v in where.items() if isinstance(v, str)})
    return Notification(
        incident_id=incident.id,
        title=f"[moved] {title}: see route {route.name}",
        text=note,
        severity="INFO",
        state="moved",
        fields={"incident": incident.id, "state": "moved", "route": route.name},
        approval_note=note,
        merged_into=target,
    )


def render_merged(incident: Incident, holder: Incident | None) -> Notification:
    """The message of an incident merged into ``holder``, replacing its earlier one in place:
    no verdict, no buttons, only where the failure is handled now (pure).

    One failure, one live message: the holder's message states the verdict and asks for the
    decision; this one points to it.
    """
    held = incident.linked_to or (holder.id if holder else "another incident")
    # The holder's title without its state: the pointer must not go stale as it moves on.
    title = render(holder).title.split("] ", 1)[-1] if holder is not None else held
    key = incident.key
    where = f"{key.scope.value.replace('_', ' ')} {key.name}".rstrip("/")
    note = (
        f"Merged into incident {held}, which holds this failure now: its message states the "
        "verdict and asks for any decision. Nothing is asked here."
    )
    target: dict[str, str] = {"incident": held, "title": title}
    if holder is not None and holder.chat:
        target.update({k: str(v) for k, v in holder.chat.items() if isinstance(v, str)})
    return Notification(
        incident_id=incident.id,
        title=f"[merged] {where} in {incident.cluster or 'unknown cluster'}: see {held}",
        text=f"{note}\n{incident.signal_count} signal(s) of this incident moved with it.",
        severity="INFO",
        state="merged",
        fields={"incident": incident.id, "state": "merged", "merged_into": held},
        approval_note=note,
        merged_into=target,
    )


def _cost(document: Mapping[str, Any]) -> Cost | None:
    found = document.get("cost")
    try:
        return Cost.from_dict(found) if isinstance(found, Mapping) else None
    except (KeyError, TypeError, ValueError):
        return None  # a record from another version: no cost line rather than a wrong one


def pause_banner(pause: PauseRecord) -> str:
    """The line every message carries while remediation is paused."""
    until = f" until {format_rfc3339(pause.until)}" if pause.until else " until resumed"
    return (
        f"Remediation is PAUSED{until} by {pause.by}: {pause.reason}. Diagnosis and "
        "messages go on; approvals are refused and nothing is cordoned, drained or deleted."
    )


def _hours(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours:g} h" if hours >= 1 else f"{seconds / 60:g} min"


def verification_lines(incident: Incident) -> tuple[str, ...]:
    """What the outcome check says: watching, loop broken, or recurred with its evidence."""
    check = incident.verification
    if check is None:
        return ()
    span = _hours((check.until - check.since).total_seconds())
    if check.verdict is Verdict.VERIFIED:
        lines = [f"Loop broken: no restart in {span} since {format_rfc3339(check.since)}."]
    elif check.verdict is Verdict.RECURRED:
        host = f" (host {check.host} is a repeat offender)" if check.host else ""
        lines = [f"RECURRED after remediation{host}; escalate:"]
    else:
        lines = [
            f"Watching for a restart of the same cause until {format_rfc3339(check.until)} "
            f"({check.checks} check(s) so far)."
        ]
    lines += [f"• {f}" for f in check.findings[-5:]]
    if check.other_incident:
        lines.append(f"A restart of another cause opened {check.other_incident}.")
    return tuple(lines)


def _progress(incident: Incident) -> tuple[str, ...]:
    record = incident.remediation
    if record is None:
        return ()
    head = "Dry run (nothing was changed):" if record.dry_run else "Remediation:"
    lines = [head]
    for step in record.steps:
        lines.append(f"{step.step.value}: {step.outcome.value}: {step.detail}")
        lines += [f"  {call}" for call in step.calls if record.dry_run]
    cordoned = any(s.step.value == "cordon" and s.outcome.value == "done" for s in record.steps)
    if incident.state is State.FAILED and cordoned:
        target = incident.approval.target.node if incident.approval else "the node"
        lines.append(f"{target} stays cordoned; uncordon it once it is safe.")
    if record.support_case:
        lines.append(f"Support case: {record.support_case}")
    return tuple(lines)


_INTERRUPTIONS = frozenset(
    {"preemption", "maintenance", "termination", "host_error", "automatic_restart"}
)


def _approval(
    incident: Incident, signing_key: bytes | None, approvals_off: str | None
) -> tuple[ApprovalPrompt | None, str | None]:
    decided = incident.approval
    if decided is not None:
        who = decided.actor_name or decided.actor
        text = (
            f"{decided.decision.value.capitalize()} by {who} via {decided.platform.value} at "
            f"{format_rfc3339(decided.at)}."
        )
        if decided.decision.value == "approved":
            text += (
                " Remediation request published."
                if decided.published_at
                else " Remediation request not published yet (retried every minute)."
            )
        return None, text
    if incident.state is not State.AWAITING_APPROVAL:
        return None, None
    request = incident.approval_request
    if request is None:
        reason = (incident.diagnosis.target_reason if incident.diagnosis else None) or (
            approvals_off
        )
        return None, f"Approvals are off for this incident: {reason or 'no target to approve'}."
    if signing_key is None:
        return None, f"Approvals are off: {approvals_off or 'no signing key is configured'}."
    token = sign_token(ActionRequest.of(incident.id, request), signing_key)
    t = request.target
    label, what = button_words(t)
    prompt = ApprovalPrompt(
        token=token,
        request_id=request.id,
        node=t.node,
        instance=t.instance,
        instance_id=t.instance_id,
        zone=t.zone,
        project=t.project,
        physical_host=t.physical_host,
        expires_at=format_rfc3339(request.expires_at),
        label=label,
        what=what,
    )
    return prompt, None


def _host_rows(document: Mapping[str, Any]) -> tuple[Mapping[str, str], ...]:
    rows = []
    for suspect in _dicts(document.get("suspect_hosts"))[:MAX_HOST_ROWS]:
        rows.append(
            {
                "host": str(suspect.get("host", "")),
                "nodes": ", ".join(str(n) for n in suspect.get("nodes") or ()),
                "failures": str(suspect.get("failures", "")),
                "zone": str(suspect.get("zone") or ""),
                "last_failure": str(suspect.get("last_failure") or ""),
                "gpu_faults": "; ".join(str(f) for f in suspect.get("gpu_faults") or ()),
                "health": _health(suspect.get("health_prediction")),
            }
        )
    return tuple(rows)


def _health(value: object) -> str:
    """GKE's node health prediction per node, as the card shows it beside the failures."""
    if not isinstance(value, Mapping) or not value:
        return ""
    return "GKE health prediction " + ", ".join(f"{n}={v}" for n, v in value.items())


def _excerpts(document: Mapping[str, Any]) -> tuple[str, ...]:
    ticket = document.get("ticket_draft")
    if isinstance(ticket, Mapping) and ticket.get("excerpts"):
        return tuple(str(e) for e in ticket["excerpts"][:MAX_EXCERPTS])
    found = [str(f.get("message")) for f in _dicts(document.get("evidence")) if f.get("supports")]
    return tuple(found[:MAX_EXCERPTS])


def _queries(document: Mapping[str, Any]) -> tuple[str, ...]:
    texts: list[str] = []
    for step in _dicts(document.get("steps")):
        for query in _dicts(step.get("queries")):
            if not query.get("deprecated") and isinstance(query.get("text"), str):
                texts.append(f"{query.get('language', '')}: {query['text']}")
    return tuple(texts[:MAX_QUERIES])


def _recommendations(incident: Incident, document: Mapping[str, Any]) -> tuple[str, ...]:
    remediation = document.get("remediation")
    if not isinstance(remediation, Mapping):
        return ()
    target = _target(incident)
    path = incident.diagnosis.remediation_path if incident.diagnosis else None
    if path != "isolate_host" or target is None:
        return tuple(str(a) for a in remediation.get("actions") or ())
    # What the buttons approve, and nothing more: the diagnosis may name every VM of every
    # suspect, but one approval covers one node and one VM.
    actions = list(repair_actions(target))
    if target.host_known:
        actions.append(f"Open a support case naming physical host {target.physical_host}.")
    others = [
        f"{row.get('host')} ({', '.join(str(n) for n in row.get('nodes') or ())})"
        for row in _dicts(document.get("suspect_hosts"))
        if target.node not in (row.get("nodes") or ())
    ]
    if others:
        actions.append(
            f"Other suspect host(s), not part of this approval: {', '.join(others[:3])}."
        )
    return tuple(actions)


def _target(incident: Incident) -> Target | None:
    if incident.approval is not None:
        return incident.approval.target
    if incident.approval_request is not None:
        return incident.approval_request.target
    return incident.diagnosis.target if incident.diagnosis else None


def _ticket(draft: Mapping[str, Any]) -> Mapping[str, Any]:
    return {
        "title": str(draft.get("title", "")),
        "summary": str(draft.get("summary", "")),
        "physical_host": str(draft.get("physical_host", "")),
        "requested_action": str(draft.get("requested_action", "")),
    }


def _dicts(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _short(names: tuple[str, ...], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"


class LogNotifier:
    """Posts a notification as one structured log line (console, dry run)."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._logger = logger or get_logger("notify")

    def post(
        self, notification: Notification, where: Mapping[str, str] | None = None
    ) -> Mapping[str, str] | None:
        event(
            self._logger,
            logging.INFO,
            notification.title,
            labels={"incident_id": notification.incident_id},
            event="notification",
            text=notification.text,
            notification_severity=notification.severity,
            fingerprint=notification.fingerprint,
            approval_note=notification.approval_note,
            banner=notification.banner,
            verification=list(notification.verification),
            approval_request=notification.approval.request_id if notification.approval else None,
        )
        return None


class FileNotifier:
    """``DIR/<incident_id>.json`` holds the current message; ``DIR/posts.jsonl`` every post.

    Replacing is an atomic rename, so concurrent workers never leave a torn message.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def post(
        self, notification: Notification, where: Mapping[str, str] | None = None
    ) -> Mapping[str, str] | None:
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
        return None

    def messages(self) -> dict[str, dict[str, Any]]:
        """The current message of every incident."""
        out: dict[str, dict[str, Any]] = {}
        for path in sorted(self.directory.glob("inc-*.json")):
            out[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        return out
