"""What a diagnosis of an incident needs: its context and the host history (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta

from loopbreaker.incidents.records import HOST_FAILURE_MERGE, Incident, Scope
from loopbreaker.incidents.remediation import digest
from loopbreaker.model import (
    DEFAULT_WINDOW,
    HOST_FAULT_KINDS,
    Context,
    Diagnosis,
    HostFailureRecord,
    NodeInfo,
    Signal,
    WorkloadKind,
)


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
    return merge_host_failures(raw)


def merge_host_failures(records: Iterable[HostFailureRecord]) -> list[HostFailureRecord]:
    """One record per failure: observations of a host within HOST_FAILURE_MERGE of the last
    one kept are the same failure (also when two incidents remember it)."""
    merged: list[HostFailureRecord] = []
    for record in sorted(records, key=lambda r: (r.host, r.at)):
        last = merged[-1] if merged else None
        if last and last.host == record.host and record.at - last.at <= HOST_FAILURE_MERGE:
            continue
        merged.append(record)
    return merged


def host_failure_id(record: HostFailureRecord) -> str:
    return "h-" + digest(f"{record.host}\n{record.node}\n{record.incident_id}\n{record.at}")
