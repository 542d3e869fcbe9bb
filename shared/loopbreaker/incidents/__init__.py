"""Incidents: grouping keys, event-time windows, the state machine, the audit trail (pure).

The package's API is re-exported here; each part lives in its own module:
``records`` (the types), ``keys`` (grouping keys, dedup ids), ``grouping`` (windows,
joining), ``lifecycle`` (the state machine), ``context`` (what a diagnosis needs).
``store/`` holds the SQLite and Firestore stores.

A signal joins the non-final incident of the same key whose event-time span, widened by
the grouping window, contains the signal's own timestamp; otherwise it opens one. Every
function here takes the time as an argument (``now``) and returns new values.

State machine (``*`` = final)::

    open -> diagnosed -> awaiting_approval -> approved -> remediating -> remediated*
              ^  |  ^          |  |  |                       |             |
              |  +--+          |  |  +-> rejected*           +-> failed*   +-> verified*
              +----------------+  +----> expired*                          +-> recurred*

``remediated -> verified | recurred`` is the outcome check (``verification``): a remediated
incident stays final for grouping and diagnosis, and is due only for that check.

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

from loopbreaker.incidents.context import (
    context_for,
    host_failure_id,
    host_failures,
    lookup_names,
    merge_host_failures,
)
from loopbreaker.incidents.grouping import (
    SPAN_BUCKETS,
    Absorbed,
    Arrival,
    IndexEntry,
    Tallied,
    absorb,
    bucketed_span,
    choose,
    extends,
    postpone,
    quiet,
    recount,
    reindex,
    touch,
)
from loopbreaker.incidents.keys import (
    dedup_ids,
    entry_id,
    instance_group,
    key_for,
    keyed_entry_id,
    message_dedup_id,
    new_incident_id,
    pool_prefix,
    workload_name,
)
from loopbreaker.incidents.lifecycle import (
    VERIFY_ACTOR,
    append_audit,
    apply_diagnosis,
    claim,
    conclude,
    decide,
    expire,
    give_up,
    is_due,
    link,
    mark_notified,
    mark_published,
    note_check,
    note_linked,
    notification_due,
    rearm,
    refuse_paused,
    settled,
    start_verification,
    target_keys,
    transition,
    unpublished,
    verifying,
)
from loopbreaker.incidents.records import (
    AUDIT_HEAD,
    AUDIT_TAIL,
    CLUSTER_SCOPES,
    DEFAULT_APPROVAL_TTL,
    DEFAULT_DEDUP_RETENTION,
    DEFAULT_GROUPING_WINDOW,
    DEFAULT_MAX_SIGNALS,
    DEFAULT_SETTLE_TIME,
    DEFAULT_STALE_AFTER,
    DIAGNOSIS_LEASE,
    FINAL_STATES,
    HOST_FAILURE_MERGE,
    INDEX_RETENTION,
    MAX_NAMES,
    SYSTEM_ACTOR,
    TRANSITIONS,
    AuditEvent,
    DiagnosisRecord,
    IllegalTransition,
    Incident,
    IncidentKey,
    Policy,
    Scope,
    State,
    evolve,
)
from loopbreaker.incidents.remediation import (
    MAX_PAUSE_REASON,
    Outcome,
    PauseRecord,
    RemediationRecord,
    Step,
    StepRecord,
    Verdict,
    VerificationRecord,
    digest,
    new_pause,
)

__all__ = [
    "MAX_PAUSE_REASON",
    "PauseRecord",
    "VERIFY_ACTOR",
    "VerificationRecord",
    "Verdict",
    "conclude",
    "new_pause",
    "note_check",
    "refuse_paused",
    "start_verification",
    "verifying",
    "link",
    "note_linked",
    "target_keys",
    "AUDIT_HEAD",
    "AUDIT_TAIL",
    "Absorbed",
    "Arrival",
    "AuditEvent",
    "CLUSTER_SCOPES",
    "DEFAULT_APPROVAL_TTL",
    "DEFAULT_DEDUP_RETENTION",
    "DEFAULT_GROUPING_WINDOW",
    "DEFAULT_MAX_SIGNALS",
    "DEFAULT_SETTLE_TIME",
    "DEFAULT_STALE_AFTER",
    "DIAGNOSIS_LEASE",
    "DiagnosisRecord",
    "FINAL_STATES",
    "HOST_FAILURE_MERGE",
    "INDEX_RETENTION",
    "IllegalTransition",
    "Incident",
    "IncidentKey",
    "IndexEntry",
    "MAX_NAMES",
    "Outcome",
    "Policy",
    "RemediationRecord",
    "SPAN_BUCKETS",
    "SYSTEM_ACTOR",
    "Scope",
    "State",
    "Step",
    "StepRecord",
    "TRANSITIONS",
    "Tallied",
    "absorb",
    "append_audit",
    "apply_diagnosis",
    "bucketed_span",
    "choose",
    "claim",
    "context_for",
    "decide",
    "dedup_ids",
    "digest",
    "entry_id",
    "evolve",
    "expire",
    "extends",
    "give_up",
    "host_failure_id",
    "host_failures",
    "merge_host_failures",
    "instance_group",
    "is_due",
    "key_for",
    "keyed_entry_id",
    "lookup_names",
    "mark_notified",
    "mark_published",
    "message_dedup_id",
    "new_incident_id",
    "notification_due",
    "pool_prefix",
    "postpone",
    "quiet",
    "rearm",
    "recount",
    "reindex",
    "settled",
    "touch",
    "transition",
    "unpublished",
    "workload_name",
]
