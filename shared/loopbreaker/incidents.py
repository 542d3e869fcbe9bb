"""Incidents: grouping keys, event-time windows, the state machine, the audit trail (pure).

A signal joins the non-final incident of the same key whose event-time span, widened by
the grouping window, contains the signal's own timestamp; otherwise it opens one. Every
function here takes the time as an argument (``now``) and returns new values.

State machine (``*`` = final)::

    open -> diagnosed -> awaiting_approval -> approved -> remediating -> remediated*
              ^  |  ^          |  |  |                       |
              |  +--+          |  |  +-> rejected*           +-> failed*
              +----------------+  +----> expired*

``diagnosed -> diagnosed`` and the other self-loops record a re-diagnosis. Every transition
is appended to the audit trail with its time, actor and a note. The trail is capped (a
Firestore document holds at most 1 MiB): the first :data:`AUDIT_HEAD` and the last
:data:`AUDIT_TAIL` events are kept, and ``audit_dropped`` counts those in between.

``settle_at`` is when the incident is due: for a live incident, its next diagnosis; for a
final one (never diagnosed again), only the retry of a notification that failed.

Keys and clusters (entity resolution): one failure reaches us through two sinks. GKE
entries (``gke_nodepool``, ``k8s_node``) name the cluster and pool; Compute Engine audit
entries (``gce_instance``: ``compute.instances.preempted``, ``hostError`` ...) name only the
VM. GKE names every VM and node of a pool ``gke-<cluster>-<pool>-<hash>-<suffix>`` and its
managed instance groups ``gke-<cluster>-<pool>-<hash>-grp``, one group (one hash) per zone;
so a node, a VM or a group resolves to the pool's prefix ``gke-<cluster>-<pool>``
(:func:`pool_prefix`), the same in every zone, and a pool-level entry naming no node to
``gke-<cluster>-<pool>`` from its labels. Those are keyed ``Scope.POOL`` without a cluster
(the prefix embeds it, and audit entries name none): a regional pool's storm through
both sinks is one incident. A physical host and a non-GKE node are keyed without a
cluster too; workload names are unique only within a cluster and keep it. An incident
keyed without a cluster learns it (and the cluster's location) from the first signal
that names one; ``Incident.cluster`` is the key's cluster or that one. Limitation: GKE
shortens long cluster and pool names inside node names; a pool-level entry that names no
node then gets the untruncated prefix.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from loopbreaker.approvals import (
    ActionRequest,
    Approval,
    ApprovalRequest,
    Decision,
    Platform,
    Target,
    request_id,
)
from loopbreaker.errors import AlreadyDecided, ApprovalInvalid, LoopbreakerError
from loopbreaker.model import (
    DEFAULT_WINDOW,
    HOST_FAULT_KINDS,
    WORKLOAD_FAULT_KINDS,
    Context,
    Diagnosis,
    HostFailureRecord,
    NodeInfo,
    Signal,
    SignalKind,
    WorkloadKind,
)
from loopbreaker.remediation import RemediationRecord
from loopbreaker.settings import (
    DEFAULT_APPROVAL_TTL,
    DEFAULT_GROUPING_WINDOW,
    DEFAULT_MAX_SIGNALS,
    DEFAULT_SETTLE_TIME,
    DEFAULT_STALE_AFTER,
)
from loopbreaker.timeutil import format_rfc3339, parse_rfc3339

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

# Signals about the application are grouped by workload; everything else by where it ran.
_WORKLOAD_KINDS = WORKLOAD_FAULT_KINDS | {SignalKind.JOB_RESTARTING, SignalKind.UNSCHEDULABLE}


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


FINAL_STATES = frozenset({State.REJECTED, State.EXPIRED, State.REMEDIATED, State.FAILED})

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
    State.REMEDIATED: frozenset(),
    State.FAILED: frozenset(),
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
        return _digest(str(self))

    @classmethod
    def parse(cls, text: str) -> IncidentKey:
        project, cluster, scope, name = text.split("/", 3)
        return cls(
            None if project == "-" else project,
            None if cluster == "-" else cluster,
            Scope(scope),
            name,
        )


def key_for(signal: Signal, default_project: str | None = None) -> IncidentKey | None:
    """The grouping key of a signal, or None when it concerns nothing we can name."""
    if signal.kind is SignalKind.UNRECOGNIZED:
        return None
    project = signal.project or default_project

    def key(scope: Scope, name: str) -> IncidentKey:
        # Audit entries name no cluster: scopes unique without one meet across sinks.
        cluster = signal.cluster if scope in CLUSTER_SCOPES else None
        return IncidentKey(project, cluster, scope, name)

    workload = _workload_name(signal)
    if signal.kind in _WORKLOAD_KINDS and workload:
        return key(Scope.WORKLOAD, workload)
    if signal.physical_host and signal.kind in HOST_FAULT_KINDS:
        return key(Scope.HOST, signal.physical_host)
    node = signal.node or signal.instance
    # Entity resolution: a Compute audit entry names only the VM, a gke_nodepool entry the
    # cluster and pool (and usually a node), a k8s_node entry the node. All of them are
    # resolved to the pool's naming prefix, which every zonal instance group of a
    # regional pool shares: one storm through both sinks, in all zones, is one incident.
    prefix = pool_prefix(node) if node else None
    if prefix is None and signal.node_pool and signal.cluster:
        prefix = f"gke-{signal.cluster}-{signal.node_pool}"
    if signal.node_pool:
        return key(Scope.POOL, prefix) if prefix else key(Scope.NODE_POOL, signal.node_pool)
    if workload:
        return key(Scope.WORKLOAD, workload)
    if prefix:
        return key(Scope.POOL, prefix)
    return key(Scope.NODE, node) if node else None


def instance_group(instance: str) -> str | None:
    """``gke-c-pool-1a2b3c4d-x7k2`` -> ``gke-c-pool-1a2b3c4d`` (GKE node naming)."""
    if not instance.startswith("gke-"):
        return None
    head, _, suffix = instance.rpartition("-")
    group_hash = head.rpartition("-")[2]
    if len(suffix) == 4 and len(group_hash) == 8 and head.count("-") >= 3:
        return head
    return None


def pool_prefix(name: str) -> str | None:
    """``gke-c-pool-1a2b3c4d-x7k2`` (a node or VM) or ``gke-c-pool-1a2b3c4d-grp`` (its
    managed instance group) -> ``gke-c-pool``: the prefix all zones of the pool share."""
    group = instance_group(name)
    if group is None and name.endswith("-grp"):
        head = name[: -len("-grp")]
        group_hash = head.rpartition("-")[2]
        group = head if name.startswith("gke-") and len(group_hash) == 8 else None
    return group.rpartition("-")[0] if group else None


def _workload_name(signal: Signal) -> str | None:
    if not signal.workload:
        return None
    return f"{signal.namespace}/{signal.workload}" if signal.namespace else signal.workload


# --- identities ----------------------------------------------------------------------


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def entry_id(entry: Mapping[str, Any]) -> str:
    """Dedup id of a LogEntry: insertId + logName + timestamp (the whole entry without one)."""
    insert_id = entry.get("insertId")
    if isinstance(insert_id, str) and insert_id:
        stamp = entry.get("timestamp")
        return "e-" + _digest(f"{entry.get('logName')}\n{stamp}\n{insert_id}")
    return "e-" + _digest(json.dumps(entry, sort_keys=True, default=str))


def message_dedup_id(message_id: str) -> str:
    return "m-" + _digest(message_id)


def dedup_ids(entry_id: str, message_id: str | None) -> tuple[str, ...]:
    """The keys one delivery is remembered by: its entry id, and its messageId if any."""
    return (entry_id, message_dedup_id(message_id)) if message_id else (entry_id,)


def new_incident_id(key: IncidentKey, seed: str) -> str:
    """Deterministic, so a replay of the same entries yields the same incident ids."""
    return "inc-" + _digest(f"{key}\n{seed}")[:16]


# --- records -------------------------------------------------------------------------


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
        )


@dataclass(frozen=True)
class IndexEntry:
    """What grouping needs to know about a candidate incident of a key."""

    id: str
    first_event: datetime
    last_event: datetime
    state: State
    #: Something is due (``settle_at`` set): a joining signal need not re-arm the head.
    armed: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "first_event": format_rfc3339(self.first_event),
            "last_event": format_rfc3339(self.last_event),
            "state": self.state.value,
            "armed": self.armed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IndexEntry:
        return cls(
            data["id"],
            parse_rfc3339(data["first_event"]),
            parse_rfc3339(data["last_event"]),
            State(data["state"]),
            bool(data.get("armed", True)),
        )

    @classmethod
    def of(cls, incident: Incident) -> IndexEntry:
        return cls(
            incident.id,
            incident.first_event,
            incident.last_event,
            incident.state,
            incident.settle_at is not None,
        )


@dataclass(frozen=True)
class Arrival:
    """One new, classified, keyed signal on its way into the store."""

    key: IncidentKey
    signal: Signal
    event_time: datetime
    now: datetime
    entry_id: str
    message_id: str | None
    policy: Policy
    #: Join an open incident but never open one (a resolved alert with nothing to resolve
    #: is only remembered, so its redelivery is a duplicate).
    join_only: bool = False

    @property
    def dedup_ids(self) -> tuple[str, ...]:
        return dedup_ids(self.entry_id, self.message_id)


@dataclass(frozen=True)
class Absorbed:
    """The outcome of grouping one arrival."""

    incident: Incident
    created: bool
    #: The signal document to keep beside the incident, or None once the cap is reached.
    kept_signal: Mapping[str, Any] | None


# --- grouping ------------------------------------------------------------------------


#: An incident's span is kept in buckets of ``grouping window / SPAN_BUCKETS``: a store
#: need only rewrite an incident's head and key index when a signal leaves the bucketed
#: span, not at every signal (see :func:`extends`).
SPAN_BUCKETS = 10
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _floor(moment: datetime, bucket: timedelta) -> datetime:
    return _EPOCH + ((moment - _EPOCH) // bucket) * bucket


def _ceil(moment: datetime, bucket: timedelta) -> datetime:
    low = _floor(moment, bucket)
    return low if low == moment else low + bucket


def bucketed_span(first: datetime, last: datetime, window: timedelta) -> tuple[datetime, datetime]:
    """The span ``[first, last]`` widened to whole buckets of ``window / SPAN_BUCKETS``."""
    bucket = window / SPAN_BUCKETS
    return _floor(first, bucket), _ceil(last, bucket)


def extends(entry: IndexEntry, event_time: datetime, window: timedelta) -> bool:
    """Does a signal at ``event_time`` move the incident's bucketed span?"""
    low, high = bucketed_span(entry.first_event, entry.last_event, window)
    at_low, at_high = bucketed_span(event_time, event_time, window)
    return at_low < low or at_high > high


def choose(candidates: Iterable[IndexEntry], event_time: datetime, window: timedelta) -> str | None:
    """The candidate a signal at ``event_time`` joins, or None to open a new incident.

    Eligible: not final, and ``low - window <= event_time <= high + window`` where
    ``[low, high]`` is the incident's span in whole buckets (:func:`bucketed_span`), so
    stores that only keep the bucketed span decide exactly as those that keep the exact
    one. Among several, one whose span contains the time wins, then the nearest, then
    the oldest.
    """
    best: tuple[timedelta, datetime, str] | None = None
    for c in candidates:
        if c.state in FINAL_STATES:
            continue
        low, high = bucketed_span(c.first_event, c.last_event, window)
        if not low - window <= event_time <= high + window:
            continue
        if event_time < low:
            distance = low - event_time
        elif event_time > high:
            distance = event_time - high
        else:
            distance = timedelta(0)
        rank = (distance, low, c.id)
        if best is None or rank < best:
            best = rank
    return best[2] if best else None


def absorb(incident: Incident | None, arrival: Arrival) -> Absorbed:
    """Open an incident for the arrival, or add it to ``incident``."""
    signal, now, policy = arrival.signal, arrival.now, arrival.policy
    if incident is None:
        incident_id = new_incident_id(arrival.key, arrival.entry_id)
        base = Incident(
            id=incident_id,
            key=arrival.key,
            state=State.OPEN,
            opened_at=now,
            updated_at=now,
            first_event=arrival.event_time,
            last_event=arrival.event_time,
            last_signal_at=now,
            settle_at=now + policy.settle_time,
            audit=(
                AuditEvent(now, SYSTEM_ACTOR, None, State.OPEN, f"first signal: {signal.kind}"),
            ),
        )
        created = True
    else:
        if incident.final:
            raise IllegalTransition(f"incident {incident.id} is {incident.state}; cannot join")
        base = incident
        created = False
    keep = base.kept_signals < policy.max_signals
    updated = replace(
        _count(base, signal, arrival.event_time, now, keep),
        updated_at=max(base.updated_at, now),
        # Debounce: wait for the storm to calm down; a diagnosed incident is re-diagnosed.
        settle_at=now + policy.settle_time,
        revision=base.revision + 1,
    )
    kept = None
    if keep:
        kept = {**signal.to_dict(), "seq": base.kept_signals, "entry_id": arrival.entry_id}
        if signal.timestamp is None:
            kept["timestamp"] = format_rfc3339(arrival.event_time)
    return Absorbed(updated, created, kept)


def _count(
    base: Incident, signal: Signal, event_time: datetime, arrived: datetime, keep: bool
) -> Incident:
    """``base`` with one more signal counted: counts, span, names, location."""
    counts = Counter(base.counts)
    counts[signal.kind.value] += 1
    host = signal.physical_host if signal.kind in HOST_FAULT_KINDS else None
    # The location of the first signal naming the cluster is the cluster's (an audit
    # entry's is its VM's zone); until one arrives, the first location seen.
    if base.cluster is None and signal.cluster:
        location = signal.location or base.location
    else:
        location = base.location or signal.location
    return replace(
        base,
        first_event=min(base.first_event, event_time),
        last_event=max(base.last_event, event_time),
        last_signal_at=max(base.last_signal_at, arrived),
        signal_count=base.signal_count + 1,
        kept_signals=base.kept_signals + (1 if keep else 0),
        counts=dict(counts),
        nodes=_add_name(base.nodes, signal.node or signal.instance),
        hosts=_add_name(base.hosts, host),
        node_pools=_add_name(base.node_pools, signal.node_pool),
        workloads=_add_name(base.workloads, _workload_name(signal)),
        clusters=_add_first(base.clusters, signal.cluster),
        workload_kinds=_add_first(base.workload_kinds, signal.workload_kind),
        location=location,
        signal_revision=base.signal_revision + 1,
    )


@dataclass(frozen=True)
class Tallied:
    """One stored signal of an incident, as a store that does not count on ingest keeps it."""

    signal: Signal
    event_time: datetime
    arrived_at: datetime
    entry_id: str


def recount(
    incident: Incident, tallied: Sequence[Tallied], max_signals: int = DEFAULT_MAX_SIGNALS
) -> Incident | None:
    """The incident's counts, span and names derived from all its stored signals.

    Stores that write nothing shared per arrival (Firestore) call this when settling;
    folding the signals in arrival order gives exactly what counting on every arrival
    gives. None when nothing changed.
    """
    if not tallied:
        return None
    ordered = sorted(tallied, key=lambda t: (t.arrived_at, t.entry_id))
    first = ordered[0]
    base = replace(
        incident,
        first_event=first.event_time,
        last_event=first.event_time,
        last_signal_at=first.arrived_at,
        signal_count=0,
        kept_signals=0,
        counts={},
        nodes=(),
        hosts=(),
        node_pools=(),
        workloads=(),
        clusters=(),
        workload_kinds=(),
        location=None,
        signal_revision=0,
    )
    for t in ordered:
        base = _count(base, t.signal, t.event_time, t.arrived_at, base.kept_signals < max_signals)
    if base == incident:
        return None
    return replace(base, revision=incident.revision + 1)


def touch(incident: Incident, arrival: Arrival) -> Incident:
    """What an arrival changes on the head of a store that counts at settle time.

    Only the span (when it leaves its buckets) and, for an incident that is not due, the
    settle time (so a new signal re-triggers its diagnosis).
    """
    settle_at = incident.settle_at
    if settle_at is None and not incident.final:
        settle_at = arrival.now + arrival.policy.settle_time
    return replace(
        incident,
        first_event=min(incident.first_event, arrival.event_time),
        last_event=max(incident.last_event, arrival.event_time),
        last_signal_at=max(incident.last_signal_at, arrival.now),
        updated_at=max(incident.updated_at, arrival.now),
        settle_at=settle_at,
        revision=incident.revision + 1,
    )


def quiet(incident: Incident) -> Incident | None:
    """Nothing is due for a live incident until a new signal arrives (and re-arms it)."""
    if incident.final or incident.settle_at is None:
        return None
    return replace(incident, settle_at=None, revision=incident.revision + 1)


def postpone(incident: Incident, at: datetime) -> Incident | None:
    """Make a live incident due at ``at`` (later than now: it is still receiving signals)."""
    if incident.final or incident.settle_at == at:
        return None
    return replace(incident, settle_at=at, revision=incident.revision + 1)


def _add_name(names: tuple[str, ...], name: str | None) -> tuple[str, ...]:
    if not name or name in names or len(names) >= MAX_NAMES:
        return names
    return tuple(sorted((*names, name)))


def _add_first(names: tuple[str, ...], name: str | None) -> tuple[str, ...]:
    """Like _add_name, but in arrival order: the first name stays first."""
    if not name or name in names or len(names) >= MAX_NAMES:
        return names
    return (*names, name)


def reindex(entries: Iterable[IndexEntry], incident: Incident) -> list[IndexEntry]:
    """The key index after ``incident`` changed: finals and long-past incidents drop out."""
    others = [e for e in entries if e.id != incident.id]
    if not incident.final:
        others.append(IndexEntry.of(incident))
    if not others:
        return []
    newest = max(e.last_event for e in others)
    kept = [e for e in others if e.last_event >= newest - INDEX_RETENTION]
    return sorted(kept, key=lambda e: (e.first_event, e.id))


# --- state machine -------------------------------------------------------------------


def append_audit(
    incident: Incident, event: AuditEvent, *, head: int = AUDIT_HEAD, tail: int = AUDIT_TAIL
) -> Incident:
    """Append ``event`` to the trail, dropping (and counting) events beyond head + tail."""
    audit = (*incident.audit, event)
    dropped = incident.audit_dropped
    excess = len(audit) - (head + tail)
    if excess > 0:
        audit = audit[:head] + audit[head + excess :]
        dropped += excess
    return replace(incident, audit=audit, audit_dropped=dropped)


def transition(
    incident: Incident, to: State, *, actor: str, at: datetime, note: str = ""
) -> Incident:
    """Move to ``to`` (or record a self-loop), appending to the audit trail."""
    if to not in TRANSITIONS[incident.state]:
        raise IllegalTransition(f"incident {incident.id}: {incident.state} -> {to} is not allowed")
    # Only an open approval request expires; whoever opens one sets the deadline.
    expires_at = incident.expires_at if to is State.AWAITING_APPROVAL else None
    moved = replace(
        incident,
        state=to,
        updated_at=max(incident.updated_at, at),
        expires_at=expires_at,
        # A request is only ever open while the incident awaits approval.
        approval_request=incident.approval_request if to is State.AWAITING_APPROVAL else None,
        settle_at=None if to in FINAL_STATES else incident.settle_at,
        revision=incident.revision + 1,
    )
    return append_audit(moved, AuditEvent(at, actor, incident.state, to, note))


def is_due(incident: Incident, now: datetime) -> bool:
    return not incident.final and incident.settle_at is not None and incident.settle_at <= now


def notification_due(incident: Incident, now: datetime) -> bool:
    """A final incident whose notification failed and is to be retried by now."""
    return incident.final and incident.settle_at is not None and incident.settle_at <= now


def claim(incident: Incident, now: datetime, lease: timedelta = DIAGNOSIS_LEASE) -> Incident | None:
    """Hold a due incident for one run; None when it is not due (any more).

    A final incident is only claimed to retry its notification (see :func:`rearm`).
    """
    if not (is_due(incident, now) or notification_due(incident, now)):
        return None
    return replace(incident, settle_at=now + lease, revision=incident.revision + 1)


def settled(incident: Incident) -> Incident | None:
    """A final incident's notification went out: nothing is due any more."""
    if not incident.final or incident.settle_at is None:
        return None
    return replace(incident, settle_at=None, revision=incident.revision + 1)


def give_up(incident: Incident, now: datetime, reason: str) -> Incident | None:
    """Stop retrying an incident whose run failed on bad input, noting why in the trail.

    A new signal makes it due again (:func:`absorb` sets ``settle_at``).
    """
    note = f"not retried until a new signal arrives: {reason}"
    # A signal that arrived while the failing run was under way has re-armed the incident
    # already; keep that re-trigger.
    rearmed = incident.last_signal_at > now
    stopped = replace(
        incident,
        settle_at=incident.settle_at if rearmed else None,
        updated_at=max(incident.updated_at, now),
        revision=incident.revision + 1,
    )
    return append_audit(
        stopped,
        AuditEvent(now, f"{SYSTEM_ACTOR}:settle", incident.state, incident.state, note),
    )


def apply_diagnosis(
    incident: Incident,
    record: DiagnosisRecord,
    *,
    now: datetime,
    policy: Policy,
    requested_at: datetime | None = None,
) -> Incident | None:
    """Store a diagnosis and move the state on; None when the incident is final by now.

    ``requested_at`` dates an approval request it opens (default ``now``): a replay of
    past entries runs at event time, but the human who decides does so now.
    """
    if incident.final:
        return None
    note = f"{record.root_cause} -> {record.remediation_path}"
    newer = incident.signal_revision - record.signal_revision
    if incident.diagnosis is not None:
        note = f"re-diagnosed: {note}"
    current = incident.state
    actor = f"{SYSTEM_ACTOR}:diagnosis"
    updated = incident
    if current is State.OPEN:
        updated = transition(updated, State.DIAGNOSED, actor=actor, at=now, note=note)
    elif current is State.AWAITING_APPROVAL and not record.requires_approval:
        updated = transition(
            updated, State.DIAGNOSED, actor=actor, at=now, note=f"{note}; no approval needed"
        )
    else:
        updated = transition(updated, current, actor=actor, at=now, note=note)
    if updated.state is State.DIAGNOSED and record.requires_approval:
        updated = transition(
            updated,
            State.AWAITING_APPROVAL,
            actor=actor,
            at=now,
            note=f"{record.remediation_path} needs a human approval",
        )
        updated = replace(updated, expires_at=now + policy.stale_after, approval_request=None)
    if updated.state is State.AWAITING_APPROVAL:
        updated = _open_request(updated, record, now=requested_at or now, policy=policy)
    return replace(
        updated,
        diagnosis=record,
        diagnoses=incident.diagnoses + 1,
        queries_spent=incident.queries_spent + record.queries,
        # Signals that arrived while this diagnosis ran keep the incident due.
        settle_at=incident.settle_at if newer > 0 else None,
    )


def _open_request(
    incident: Incident, record: DiagnosisRecord, *, now: datetime, policy: Policy
) -> Incident:
    """Keep, open or withdraw the approval request after a diagnosis.

    The same target keeps its request (the buttons already posted stay valid); another
    target supersedes it (old buttons are refused), and no target or approvals off means
    no request at all. An open request sets the incident's deadline.
    """
    current = incident.approval_request
    target = record.target
    if current is not None and target == current.target:
        return incident
    if target is None or policy.approval_ttl is None:
        return replace(incident, approval_request=None)
    deadline = now + min(policy.approval_ttl, policy.stale_after)
    request = ApprovalRequest(
        id=request_id(incident.id, target, now),
        action=record.remediation_path,
        target=target,
        issued_at=now,
        expires_at=deadline,
    )
    note = (
        f"approval request {request.id} for node {target.node}, VM {target.instance} "
        f"(id {target.instance_id}), host {target.physical_host}"
    )
    if current is not None:
        note += f"; supersedes {current.id}"
    moved = replace(incident, approval_request=request, expires_at=deadline)
    return append_audit(
        moved,
        AuditEvent(now, f"{SYSTEM_ACTOR}:approval", incident.state, incident.state, note),
    )


def decide(
    incident: Incident,
    request: ActionRequest,
    *,
    decision: Decision,
    actor: str,
    platform: Platform,
    now: datetime,
    actor_name: str | None = None,
) -> Incident:
    """Record a human decision on the incident's open approval request (single use).

    Raises AlreadyDecided (nothing to decide any more: decided, expired, superseded) or
    ApprovalInvalid (the request is not this incident's, or has expired). Run it inside
    one store transaction: of concurrent clicks, exactly one finds the request open.
    """
    if request.incident_id != incident.id:
        raise ApprovalInvalid(
            f"the action request is for incident {request.incident_id}, not {incident.id}"
        )
    if incident.approval is not None:
        who = incident.approval.actor_name or incident.approval.actor
        raise AlreadyDecided(
            f"incident {incident.id} was already {incident.approval.decision.value} by {who} "
            f"via {incident.approval.platform.value} at {format_rfc3339(incident.approval.at)}"
        )
    if incident.state is not State.AWAITING_APPROVAL:
        raise AlreadyDecided(
            f"incident {incident.id} is {incident.state.value}, not awaiting approval"
        )
    open_request = incident.approval_request
    if open_request is None:
        raise AlreadyDecided(f"incident {incident.id} has no open approval request")
    if request.approval_id != open_request.id:
        raise AlreadyDecided(
            f"approval request {request.approval_id} was superseded by {open_request.id} "
            "(the diagnosis changed); use the buttons of the current message"
        )
    if not request.matches(incident.id, open_request):
        raise ApprovalInvalid(
            f"the action request does not match approval request {open_request.id}"
        )
    if open_request.expires_at <= now:
        raise ApprovalInvalid(
            f"approval request {open_request.id} expired at "
            f"{format_rfc3339(open_request.expires_at)}; nothing was changed"
        )
    to = State.APPROVED if decision is Decision.APPROVED else State.REJECTED
    target = open_request.target
    who = f"{actor_name} ({actor})" if actor_name and actor_name != actor else actor
    note = (
        f"{decision.value} by {who} via {platform.value}: {open_request.action} of node "
        f"{target.node}, VM {target.instance} (id {target.instance_id}), "
        f"host {target.physical_host}"
    )
    moved = transition(incident, to, actor=f"{platform.value}:{actor}", at=now, note=note)
    approval = Approval(
        decision=decision,
        request_id=open_request.id,
        action=open_request.action,
        target=target,
        actor=actor,
        actor_name=actor_name,
        platform=platform,
        at=now,
        expires_at=open_request.expires_at,
    )
    return replace(moved, approval=approval)


def mark_published(incident: Incident, at: datetime, message_id: str) -> Incident | None:
    """The approved remediation request is on its topic; None when nothing to record."""
    approval = incident.approval
    if approval is None or approval.decision is not Decision.APPROVED:
        return None
    if approval.published_at is not None:
        return None
    note = f"remediation request published (message {message_id})"
    published = replace(
        incident,
        approval=replace(approval, published_at=at, published_id=message_id),
        updated_at=max(incident.updated_at, at),
        revision=incident.revision + 1,
    )
    return append_audit(
        published, AuditEvent(at, f"{SYSTEM_ACTOR}:approval", incident.state, incident.state, note)
    )


def unpublished(incident: Incident) -> bool:
    """Approved, but its remediation request is not known to be on the topic yet."""
    approval = incident.approval
    return (
        incident.state is State.APPROVED
        and approval is not None
        and approval.decision is Decision.APPROVED
        and approval.published_at is None
    )


def expire(incident: Incident, now: datetime) -> Incident | None:
    """Expire an approval request older than the stale time; None when not stale."""
    if incident.state is not State.AWAITING_APPROVAL:
        return None
    if incident.expires_at is None or incident.expires_at > now:
        return None
    return transition(
        incident,
        State.EXPIRED,
        actor=f"{SYSTEM_ACTOR}:expiry",
        at=now,
        note="no decision before the approval request went stale",
    )


def rearm(incident: Incident, at: datetime) -> Incident | None:
    """Make the incident due again at ``at`` (its notification could not be sent).

    A live incident is then diagnosed again; a final one only has its notification retried.
    """
    if incident.settle_at is not None and incident.settle_at <= at:
        return None
    return replace(incident, settle_at=at, revision=incident.revision + 1)


def mark_notified(
    incident: Incident, fingerprint: str, chat: Mapping[str, str] | None = None
) -> Incident | None:
    """The message went out; ``chat`` is where it lives now (kept when None)."""
    where = dict(chat) if chat else incident.chat
    if incident.notified_fingerprint == fingerprint and where == incident.chat:
        return None
    return replace(
        incident,
        notified_fingerprint=fingerprint,
        notifications=incident.notifications + 1,
        revision=incident.revision + 1,
        chat=where,
    )


# --- diagnosis inputs and outputs ----------------------------------------------------


def context_for(
    incident: Incident,
    window: timedelta = DEFAULT_WINDOW,
    default_kind: WorkloadKind = WorkloadKind.JOBSET,
) -> Context:
    """The diagnosis context: centred on the incident, wide enough to cover all of it.

    The workload kind is the first one its signals named, else ``default_kind``."""
    half_span = (incident.last_event - incident.first_event) / 2
    namespace = None
    workload = ""
    if incident.key.scope is Scope.WORKLOAD:
        namespace, _, workload = incident.key.name.rpartition("/")
    elif incident.workloads:
        namespace, _, workload = incident.workloads[0].rpartition("/")
    return Context(
        cluster=incident.cluster or "",
        workload=workload,
        issue_time=incident.first_event + half_span,
        project=incident.key.project,
        location=incident.location,
        namespace=namespace or None,
        window=window + half_span,
        workload_kind=next(
            (WorkloadKind(k) for k in incident.workload_kinds if k in _KIND_VALUES), default_kind
        ),
    )


_KIND_VALUES = frozenset(k.value for k in WorkloadKind)


def lookup_names(incident: Incident, signals: Iterable[Signal]) -> set[str]:
    """Host and node names whose remembered failures matter to this incident."""
    names = set(incident.nodes) | set(incident.hosts)
    for s in signals:
        names.update(n for n in (s.node, s.physical_host, s.instance) if n)
    return names


def host_failures(
    incident_id: str,
    diagnosis: Diagnosis,
    signals: Sequence[Signal],
    nodes: Sequence[NodeInfo] = (),
) -> list[HostFailureRecord]:
    """Failures of hosts this incident saw, one record per failure, to remember."""
    host_of = {n.name: n.physical_host for n in nodes if n.physical_host}
    raw: list[HostFailureRecord] = []
    for suspect in diagnosis.suspect_hosts:
        for e in suspect.episodes:
            raw.append(HostFailureRecord(suspect.host, e.node, e.start, incident_id))
            # The engine knew this node's host; later log lines about it count there too.
            host_of.setdefault(e.node, suspect.host)
    for s in signals:
        if s.kind in HOST_FAULT_KINDS and s.node and s.timestamp:
            host = s.physical_host or host_of.get(s.node) or s.node
            raw.append(HostFailureRecord(host, s.node, s.timestamp, incident_id))
    merged: list[HostFailureRecord] = []
    for record in sorted(raw, key=lambda r: (r.host, r.at)):
        last = merged[-1] if merged else None
        if last and last.host == record.host and record.at - last.at <= HOST_FAILURE_MERGE:
            continue
        merged.append(record)
    return merged


def host_failure_id(record: HostFailureRecord) -> str:
    return "h-" + _digest(f"{record.host}\n{record.node}\n{record.incident_id}\n{record.at}")
