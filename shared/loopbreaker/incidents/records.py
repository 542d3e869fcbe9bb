"""What an incident is: its key, states, audit trail and the records it keeps (pure)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from loopbreaker.approval.requests import (
    Approval,
    ApprovalRequest,
    Target,
)
from loopbreaker.errors import LoopbreakerError
from loopbreaker.incidents.remediation import (
    RemediationRecord,
    VerificationRecord,
    digest,
)
from loopbreaker.model import (
    Diagnosis,
)
from loopbreaker.timeutil import format_rfc3339, parse_rfc3339

#: Signals of one key whose event times are at most this far apart form one incident.
DEFAULT_GROUPING_WINDOW = timedelta(minutes=30)


#: An incident is diagnosed once no new signal has arrived for this long (debounce).
DEFAULT_SETTLE_TIME = timedelta(seconds=60)


#: An incident awaiting approval for longer than this expires.
DEFAULT_STALE_AFTER = timedelta(hours=6)


#: Signals kept verbatim per incident; counts per kind stay exact beyond it.
DEFAULT_MAX_SIGNALS = 500


#: How long dedup keys are remembered: Pub/Sub keeps unacked messages up to 7 days.
DEFAULT_DEDUP_RETENTION = timedelta(days=8)


#: How long an approval request (and the signed action request in its buttons) is valid.
DEFAULT_APPROVAL_TTL = timedelta(minutes=30)


#: Distinct node, host, pool and workload names remembered per incident (for display
#: and host-history look-ups); the signal counts stay exact beyond it.
MAX_NAMES = 64


#: How long a finished-looking incident stays a grouping candidate in the key index,
#: measured from the newest event of its key; older ones can no longer be joined.
INDEX_RETENTION = timedelta(days=7)


#: A diagnosis in progress holds its incident this long before another run may retry it.
DIAGNOSIS_LEASE = timedelta(minutes=5)


#: Observations of one host this close together are one failure (as the engine merges them).
HOST_FAILURE_MERGE = timedelta(minutes=10)


SYSTEM_ACTOR = "system"


#: The audit trail keeps its first AUDIT_HEAD and last AUDIT_TAIL events (the opening and
#: the recent history); the events between are dropped and counted in ``audit_dropped``.
AUDIT_HEAD = 10


AUDIT_TAIL = 40


class IllegalTransition(LoopbreakerError):
    """A state change the incident state machine does not allow."""


class State(StrEnum):
    OPEN = "open"
    DIAGNOSED = "diagnosed"
    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    REMEDIATING = "remediating"
    REMEDIATED = "remediated"
    FAILED = "failed"
    #: After ``remediated``: no restart of the workload within the verify window.
    VERIFIED = "verified"
    #: After ``remediated``: the loop came back on the same physical host, or the
    #: recreated VM landed on it again.
    RECURRED = "recurred"


#: Final: never diagnosed again, no longer a grouping candidate. A ``remediated``
#: incident is still watched (its ``verification``) until it is verified or recurred.
FINAL_STATES = frozenset(
    {
        State.REJECTED,
        State.EXPIRED,
        State.REMEDIATED,
        State.FAILED,
        State.VERIFIED,
        State.RECURRED,
    }
)


TRANSITIONS: Mapping[State, frozenset[State]] = {
    State.OPEN: frozenset({State.DIAGNOSED}),
    State.DIAGNOSED: frozenset({State.DIAGNOSED, State.AWAITING_APPROVAL}),
    State.AWAITING_APPROVAL: frozenset(
        {
            State.AWAITING_APPROVAL,
            State.DIAGNOSED,
            State.APPROVED,
            State.REJECTED,
            State.EXPIRED,
        }
    ),
    State.APPROVED: frozenset({State.APPROVED, State.REMEDIATING, State.FAILED}),
    State.REMEDIATING: frozenset({State.REMEDIATING, State.REMEDIATED, State.FAILED}),
    State.REJECTED: frozenset(),
    State.EXPIRED: frozenset(),
    # The outcome check of a remediation (see ``verification``), not a re-diagnosis.
    State.REMEDIATED: frozenset({State.VERIFIED, State.RECURRED}),
    State.FAILED: frozenset(),
    State.VERIFIED: frozenset(),
    State.RECURRED: frozenset(),
}


class Scope(StrEnum):
    """What an incident is about, besides its project and cluster."""

    WORKLOAD = "workload"
    #: A GKE node pool, by the naming prefix ``gke-<cluster>-<pool>`` that all its VMs,
    #: nodes and (zonal) managed instance groups share, in every zone.
    POOL = "pool"
    #: A node pool named by an entry that names no cluster and no GKE node (rare).
    NODE_POOL = "node_pool"
    HOST = "host"
    #: Kept for incidents stored before pools were keyed by their prefix.
    INSTANCE_GROUP = "instance_group"
    NODE = "node"


#: Scopes whose names are unique only within a cluster; the others are keyed without one.
CLUSTER_SCOPES = frozenset({Scope.WORKLOAD, Scope.NODE_POOL})


@dataclass(frozen=True)
class Policy:
    """The grouping and debounce limits (from Settings)."""

    grouping_window: timedelta = DEFAULT_GROUPING_WINDOW
    settle_time: timedelta = DEFAULT_SETTLE_TIME
    stale_after: timedelta = DEFAULT_STALE_AFTER
    max_signals: int = DEFAULT_MAX_SIGNALS
    #: How long an approval request (and its signed buttons) stays valid; None when
    #: approvals are off (no signing key), so no request is ever opened.
    approval_ttl: timedelta | None = DEFAULT_APPROVAL_TTL


@dataclass(frozen=True, order=True)
class IncidentKey:
    """(project, cluster, scope, name): signals with equal keys may share an incident."""

    project: str | None
    cluster: str | None
    scope: Scope
    name: str

    def __str__(self) -> str:
        return f"{self.project or '-'}/{self.cluster or '-'}/{self.scope.value}/{self.name}"

    @property
    def digest(self) -> str:
        return digest(str(self))

    @classmethod
    def parse(cls, text: str) -> IncidentKey:
        project, cluster, scope, name = text.split("/", 3)
        return cls(
            None if project == "-" else project,
            None if cluster == "-" else cluster,
            Scope(scope),
            name,
        )


@dataclass(frozen=True)
class AuditEvent:
    at: datetime
    actor: str
    from_state: State | None
    to_state: State
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": format_rfc3339(self.at),
            "actor": self.actor,
            "from": self.from_state.value if self.from_state else None,
            "to": self.to_state.value,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AuditEvent:
        return cls(
            at=parse_rfc3339(data["at"]),
            actor=data["actor"],
            from_state=State(data["from"]) if data.get("from") else None,
            to_state=State(data["to"]),
            note=data.get("note", ""),
        )


@dataclass(frozen=True)
class DiagnosisRecord:
    """What one diagnosis concluded, as stored on the incident."""

    at: datetime
    root_cause: str
    remediation_path: str
    requires_approval: bool
    summary: str
    suspect_hosts: tuple[str, ...]
    #: The signal revision the diagnosis saw; newer signals re-trigger a diagnosis.
    signal_revision: int
    queries: int
    document: Mapping[str, Any] = field(default_factory=dict)
    ticket_draft: Mapping[str, Any] | None = None
    #: The node and VM an approval would act on (``isolate_host`` only), or why none.
    target: Target | None = None
    target_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target.to_dict() if self.target else None,
            "target_reason": self.target_reason,
            "at": format_rfc3339(self.at),
            "root_cause": self.root_cause,
            "remediation_path": self.remediation_path,
            "requires_approval": self.requires_approval,
            "summary": self.summary,
            "suspect_hosts": list(self.suspect_hosts),
            "signal_revision": self.signal_revision,
            "queries": self.queries,
            "document": dict(self.document),
            "ticket_draft": dict(self.ticket_draft) if self.ticket_draft else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DiagnosisRecord:
        return cls(
            at=parse_rfc3339(data["at"]),
            root_cause=data["root_cause"],
            remediation_path=data["remediation_path"],
            requires_approval=bool(data["requires_approval"]),
            summary=data.get("summary", ""),
            suspect_hosts=tuple(data.get("suspect_hosts", ())),
            signal_revision=int(data["signal_revision"]),
            queries=int(data.get("queries", 0)),
            document=data.get("document") or {},
            ticket_draft=data.get("ticket_draft"),
            target=Target.from_dict(data["target"]) if data.get("target") else None,
            target_reason=data.get("target_reason"),
        )

    @classmethod
    def from_diagnosis(
        cls,
        diagnosis: Diagnosis,
        document: Mapping[str, Any],
        *,
        at: datetime,
        signal_revision: int,
        queries: int,
        target: Target | None = None,
        target_reason: str | None = None,
    ) -> DiagnosisRecord:
        ticket = document.get("ticket_draft")
        return cls(
            at=at,
            root_cause=diagnosis.root_cause.value,
            remediation_path=diagnosis.remediation.path.value,
            requires_approval=diagnosis.remediation.requires_approval,
            summary=diagnosis.summary,
            suspect_hosts=tuple(s.host for s in diagnosis.suspect_hosts),
            signal_revision=signal_revision,
            queries=queries,
            document=document,
            ticket_draft=ticket if isinstance(ticket, Mapping) else None,
            target=target,
            target_reason=target_reason,
        )


@dataclass(frozen=True)
class Incident:
    """The head record of an incident; the kept signals are stored beside it."""

    id: str
    key: IncidentKey
    state: State
    opened_at: datetime
    updated_at: datetime
    first_event: datetime
    last_event: datetime
    last_signal_at: datetime
    settle_at: datetime | None
    expires_at: datetime | None = None
    signal_count: int = 0
    kept_signals: int = 0
    counts: Mapping[str, int] = field(default_factory=dict)
    nodes: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    node_pools: tuple[str, ...] = ()
    workloads: tuple[str, ...] = ()
    #: Clusters its signals named, the first first: it stands in for a key without one.
    clusters: tuple[str, ...] = ()
    #: Workload kinds its signals named (JobSet labels, Kubeflow Events...), the first first.
    workload_kinds: tuple[str, ...] = ()
    location: str | None = None
    revision: int = 0
    signal_revision: int = 0
    diagnosis: DiagnosisRecord | None = None
    diagnoses: int = 0
    queries_spent: int = 0
    notified_fingerprint: str | None = None
    notifications: int = 0
    audit: tuple[AuditEvent, ...] = ()
    #: Audit events dropped between the kept head and tail of the trail.
    audit_dropped: int = 0
    #: The open approval request (state ``awaiting_approval`` only).
    approval_request: ApprovalRequest | None = None
    #: The decision on it, once made: approved or rejected, by whom, when, where.
    approval: Approval | None = None
    #: Where the incident's chat message lives (platform, channel and ts, or space and
    #: message name), so every later post replaces it.
    chat: Mapping[str, str] | None = None
    #: What the remediation executor did (or, in a dry run, would do), step by step.
    remediation: RemediationRecord | None = None
    #: The incident that holds the approval for the same failure (same VM or physical
    #: host): this one is linked to it and silenced, so one failure asks once.
    linked_to: str | None = None
    #: Incidents linked to this one, for the message and ``incidents show``.
    linked: tuple[str, ...] = ()
    #: The outcome check after ``remediated`` (see :data:`Verdict`).
    verification: VerificationRecord | None = None
    #: The route its message went to (``LOOPBREAKER_ROUTES``), decided at its first post.
    route: str | None = None

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def cluster(self) -> str | None:
        """The key's cluster, else the one learned from the first signal that named one."""
        return self.key.cluster or (self.clusters[0] if self.clusters else None)

    def labels(self) -> dict[str, str | None]:
        """Correlation labels for structured logs."""
        return {
            "incident_id": self.id,
            "cluster": self.cluster,
            "project": self.key.project,
            self.key.scope.value: self.key.name,
        }

    def to_dict(self) -> dict[str, Any]:
        def ts(value: datetime | None) -> str | None:
            return format_rfc3339(value) if value else None

        return {
            "id": self.id,
            "key": str(self.key),
            "state": self.state.value,
            "opened_at": ts(self.opened_at),
            "updated_at": ts(self.updated_at),
            "first_event": ts(self.first_event),
            "last_event": ts(self.last_event),
            "last_signal_at": ts(self.last_signal_at),
            "settle_at": ts(self.settle_at),
            "expires_at": ts(self.expires_at),
            "signal_count": self.signal_count,
            "kept_signals": self.kept_signals,
            "counts": dict(sorted(self.counts.items())),
            "nodes": list(self.nodes),
            "hosts": list(self.hosts),
            "node_pools": list(self.node_pools),
            "workloads": list(self.workloads),
            "clusters": list(self.clusters),
            "workload_kinds": list(self.workload_kinds),
            "location": self.location,
            "revision": self.revision,
            "signal_revision": self.signal_revision,
            "diagnosis": self.diagnosis.to_dict() if self.diagnosis else None,
            "diagnoses": self.diagnoses,
            "queries_spent": self.queries_spent,
            "notified_fingerprint": self.notified_fingerprint,
            "notifications": self.notifications,
            "audit": [a.to_dict() for a in self.audit],
            "audit_dropped": self.audit_dropped,
            "approval_request": self.approval_request.to_dict() if self.approval_request else None,
            "approval": self.approval.to_dict() if self.approval else None,
            "chat": dict(self.chat) if self.chat else None,
            "remediation": self.remediation.to_dict() if self.remediation else None,
            "linked_to": self.linked_to,
            "linked": list(self.linked),
            "verification": self.verification.to_dict() if self.verification else None,
            "route": self.route,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Incident:
        def ts(name: str) -> datetime | None:
            value = data.get(name)
            return parse_rfc3339(value) if value else None

        def req(name: str) -> datetime:
            return parse_rfc3339(data[name])

        diagnosis = data.get("diagnosis")
        return cls(
            id=data["id"],
            key=IncidentKey.parse(data["key"]),
            state=State(data["state"]),
            opened_at=req("opened_at"),
            updated_at=req("updated_at"),
            first_event=req("first_event"),
            last_event=req("last_event"),
            last_signal_at=req("last_signal_at"),
            settle_at=ts("settle_at"),
            expires_at=ts("expires_at"),
            signal_count=int(data.get("signal_count", 0)),
            kept_signals=int(data.get("kept_signals", 0)),
            counts={str(k): int(v) for k, v in (data.get("counts") or {}).items()},
            nodes=tuple(data.get("nodes", ())),
            hosts=tuple(data.get("hosts", ())),
            node_pools=tuple(data.get("node_pools", ())),
            workloads=tuple(data.get("workloads", ())),
            clusters=tuple(data.get("clusters", ())),
            workload_kinds=tuple(data.get("workload_kinds", ())),
            location=data.get("location"),
            revision=int(data.get("revision", 0)),
            signal_revision=int(data.get("signal_revision", 0)),
            diagnosis=DiagnosisRecord.from_dict(diagnosis) if diagnosis else None,
            diagnoses=int(data.get("diagnoses", 0)),
            queries_spent=int(data.get("queries_spent", 0)),
            notified_fingerprint=data.get("notified_fingerprint"),
            notifications=int(data.get("notifications", 0)),
            audit=tuple(AuditEvent.from_dict(a) for a in data.get("audit", ())),
            audit_dropped=int(data.get("audit_dropped", 0)),
            approval_request=(
                ApprovalRequest.from_dict(data["approval_request"])
                if data.get("approval_request")
                else None
            ),
            approval=Approval.from_dict(data["approval"]) if data.get("approval") else None,
            chat={str(k): str(v) for k, v in data["chat"].items()} if data.get("chat") else None,
            remediation=(
                RemediationRecord.from_dict(data["remediation"])
                if data.get("remediation")
                else None
            ),
            linked_to=data.get("linked_to"),
            linked=tuple(data.get("linked", ())),
            verification=(
                VerificationRecord.from_dict(data["verification"])
                if data.get("verification")
                else None
            ),
            route=data.get("route"),
        )


# Every field of Incident is set by its __init__ (no init=False, no __post_init__, no
# __slots__): a copy of the instance's __dict__ with the changes is what replace() would
# build, for a tenth of its cost (it calls __init__, which sets forty fields one by one
# through object.__setattr__). Grouping evolves an incident on every signal of a storm.
_INCIDENT_FIELDS = frozenset(f.name for f in dataclasses.fields(Incident))
_EVOLVE_FAST = (
    not hasattr(Incident, "__slots__")
    and not hasattr(Incident, "__post_init__")
    and all(f.init for f in dataclasses.fields(Incident))
)


def evolve(incident: Incident, **changes: Any) -> Incident:
    """``dataclasses.replace(incident, **changes)``, faster."""
    if not _EVOLVE_FAST or type(incident) is not Incident:
        return replace(incident, **changes)
    unknown = changes.keys() - _INCIDENT_FIELDS
    if unknown:
        raise TypeError(f"Incident has no field {sorted(unknown)[0]!r}")
    evolved: Incident = object.__new__(Incident)
    evolved.__dict__.update(incident.__dict__)
    evolved.__dict__.update(changes)
    return evolved
