"""Grouping keys and dedup ids: which incident a signal may join (pure).

Every identifier is hashed and stored as valid UTF-8: the decoders refuse lone
surrogates, and whatever text reaches this module another way is escaped the one
consistent way (:func:`loopbreaker.signals.decode.escape_surrogates`) first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from loopbreaker.incidents.records import CLUSTER_SCOPES, IncidentKey, Scope
from loopbreaker.incidents.remediation import digest
from loopbreaker.model import (
    ACCELERATOR_MEMORY_KINDS,
    HOST_FAULT_KINDS,
    WORKLOAD_FAULT_KINDS,
    Signal,
    SignalKind,
)
from loopbreaker.signals.decode import escape_surrogates

# Signals about the application are grouped by workload; everything else by where it ran.
_WORKLOAD_KINDS = (
    WORKLOAD_FAULT_KINDS
    | ACCELERATOR_MEMORY_KINDS
    | {SignalKind.JOB_RESTARTING, SignalKind.UNSCHEDULABLE}
)


def key_for(signal: Signal, default_project: str | None = None) -> IncidentKey | None:
    """The grouping key of a signal, or None when it concerns nothing we can name."""
    if signal.kind is SignalKind.UNRECOGNIZED:
        return None
    project = signal.project or default_project

    def key(scope: Scope, name: str) -> IncidentKey:
        # Audit entries name no cluster: scopes unique without one meet across sinks.
        cluster = signal.cluster if scope in CLUSTER_SCOPES else None
        return IncidentKey(_text(project), _text(cluster), scope, escape_surrogates(name))

    workload = workload_name(signal)
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


def workload_name(signal: Signal) -> str | None:
    if not signal.workload:
        return None
    return f"{signal.namespace}/{signal.workload}" if signal.namespace else signal.workload


def entry_id(entry: Mapping[str, Any]) -> str:
    """Dedup id of a LogEntry: insertId + logName + timestamp (the whole entry without one)."""
    insert_id = entry.get("insertId")
    if isinstance(insert_id, str) and insert_id:
        return keyed_entry_id(entry.get("logName"), entry.get("timestamp"), insert_id)
    # ASCII (ensure_ascii): lone surrogates come out as escapes, never raw.
    return "e-" + digest(json.dumps(entry, sort_keys=True, default=str))


def keyed_entry_id(log_name: object, timestamp: object, insert_id: str) -> str:
    """:func:`entry_id` of an entry with an insertId, from the fields it is made of."""
    return "e-" + digest(escape_surrogates(f"{log_name}\n{timestamp}\n{insert_id}"))


def message_dedup_id(message_id: str) -> str:
    return "m-" + digest(escape_surrogates(message_id))


def dedup_ids(entry_id: str, message_id: str | None) -> tuple[str, ...]:
    """The keys one delivery is remembered by: its entry id, and its messageId if any."""
    return (entry_id, message_dedup_id(message_id)) if message_id else (entry_id,)


def new_incident_id(key: IncidentKey, seed: str) -> str:
    """Deterministic, so a replay of the same entries yields the same incident ids."""
    return "inc-" + digest(escape_surrogates(f"{key}\n{seed}"))[:16]


def _text(value: str | None) -> str | None:
    """A project or cluster as a key component: "/" separates the components of a
    stored key (IncidentKey.parse), so a name holding one is escaped, as URLs do."""
    if value is None:
        return None
    return escape_surrogates(value).replace("%", "%25").replace("/", "%2F")
