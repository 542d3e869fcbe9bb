"""Step 2: Spot preemptions and host maintenance of the workload's VMs (pure)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from loopbreaker.diagnosis import maintenance
from loopbreaker.diagnosis.maintenance import Planned
from loopbreaker.diagnosis.steps.common import Notes, increase, labels_match, short_list
from loopbreaker.model import (
    INTERRUPTION_KINDS,
    Context,
    Evidence,
    EvidenceKind,
    RootCause,
    Signal,
    SignalKind,
)


@dataclass(frozen=True)
class Interruptions:
    preemptions: int
    maintenance: int
    explained_nodes: Mapping[str, list[datetime]]
    #: Host maintenance the nodes announce (labels, taint, Compute's upcomingMaintenance).
    planned: Planned = field(default_factory=Planned)


def step2(
    ctx: Context,
    ev: Evidence,
    signals: Sequence[Signal],
    notes: Notes,
    workload_nodes: frozenset[str] = frozenset(),
) -> Interruptions:
    """``workload_nodes``: where the workload's pods ran (whose maintenance counts)."""
    counts: dict[tuple[str, str, str], float] = defaultdict(float)
    metric_source = ev.source_of(EvidenceKind.INTERRUPTIONS)
    for series in ev.interruptions or ():
        if not labels_match(series.labels, {"cluster_name": ctx.cluster}):
            continue
        value = increase(series, ctx.start_time, ctx.end_time, from_zero=True)
        if value > 0:
            key = (
                series.labels.get("interruption_type", "unknown"),
                series.labels.get("interruption_reason", "unknown"),
                series.labels.get("node_pool_name", "unknown"),
            )
            counts[key] += value
    by_type: dict[str, float] = defaultdict(float)
    for (kind, reason, pool), value in sorted(counts.items()):
        by_type[kind] += value
        notes.add(
            2,
            f"{value:g} {kind} interruption(s) in node pool {pool} (reason {reason}).",
            _interruption_cause(kind),
            source=metric_source,
        )

    log_source = ev.source_of(EvidenceKind.LOGS)
    explained: dict[str, list[datetime]] = defaultdict(list)
    log_counts: dict[SignalKind, int] = defaultdict(int)
    for sig in signals:
        if sig.kind not in INTERRUPTION_KINDS:
            continue
        log_counts[sig.kind] += 1
        if sig.node and sig.timestamp:
            explained[sig.node].append(sig.timestamp)
    for kind, number in sorted(log_counts.items()):
        cause = (
            RootCause.SPOT_PREEMPTION if kind is SignalKind.PREEMPTION else RootCause.MAINTENANCE
        )
        nodes = sorted({s.node for s in signals if s.kind is kind and s.node})
        where = f" on {short_list(nodes)}" if nodes else ""
        notes.add(2, f"{number} {kind.value} log signal(s){where}.", cause, source=log_source)

    preemptions = int(by_type.get("PreemptionEvent", 0)) + log_counts[SignalKind.PREEMPTION]
    maintenance_events = (
        int(by_type.get("MaintenanceEvent", 0)) + log_counts[SignalKind.MAINTENANCE]
    )
    if by_type.get("TerminationEvent"):
        notes.add(
            2,
            f"{by_type['TerminationEvent']:g} TerminationEvent interruption(s): host failures; "
            "step 3 attributes them to hosts.",
            RootCause.FAULTY_HOST,
            source=metric_source,
        )
    planned = maintenance.assess(ctx, ev, signals, workload_nodes, notes)
    for node, starts in planned.explained_nodes().items():
        explained[node].extend(starts)
    # Only claim an absence where all the evidence that could have shown the event was read:
    # the interruption metric and the gke_nodepool / Compute Engine log entries.
    kinds = (EvidenceKind.INTERRUPTIONS, EvidenceKind.LOGS)
    if not preemptions:
        notes.absence(
            2,
            ev,
            kinds,
            "No preemption inside the window.",
            "A preemption",
            RootCause.SPOT_PREEMPTION,
        )
    if not maintenance_events and not planned.caused:
        notes.absence(
            2,
            ev,
            kinds,
            "No host maintenance inside the window.",
            "Host maintenance",
            RootCause.MAINTENANCE,
        )
    return Interruptions(preemptions, maintenance_events, explained, planned)


def _interruption_cause(kind: str) -> RootCause | None:
    return {
        "PreemptionEvent": RootCause.SPOT_PREEMPTION,
        "MaintenanceEvent": RootCause.MAINTENANCE,
        "TerminationEvent": RootCause.FAULTY_HOST,
    }.get(kind)
