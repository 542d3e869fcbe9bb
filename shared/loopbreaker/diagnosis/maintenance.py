"""Host maintenance announced on the nodes: did it restart the workload? (pure)

What is read, and where each name comes from:

- ``cloud.google.com/scheduled-maintenance-time``: GKE 1.31.1-gke.2008000+ labels a node
  whose VM has an upcoming maintenance that is not yet active; its value is the start in
  Unix epoch seconds (``1733083200``). Google Cloud, "Monitor maintenance events"
  (kubernetes-engine/docs/how-to/view-maintenance-events, "View upcoming maintenance on
  GKE") and "Manage AI-optimized GKE clusters" (ai-hypercomputer/docs/manage/
  manage-gke-clusters, "Monitor host maintenance events").
- ``cloud.google.com/active-node-maintenance=ONGOING`` and the taint
  ``cloud.google.com/impending-node-termination:NoSchedule``: GKE is stopping the node's
  workloads for host maintenance. Google's skill
  ``gke-ai-troubleshooting-handle-disruption-gpu-tpu`` (github.com/google/skills,
  skills/cloud/.../SKILL.md, v1.0.1, step 3).
- Compute Engine ``resourceStatus.upcomingMaintenance`` {``type``, ``canReschedule``,
  ``windowStartTime``, ``windowEndTime``, ``latestWindowStartTime``,
  ``maintenanceStatus`` PENDING | ONGOING}: Compute Engine API v1 ``UpcomingMaintenance``
  (google-cloud-compute 1.57.0 ``compute_v1.ResourceStatus.upcoming_maintenance``).

Rules: a maintenance that started inside the window on a node of the workload, with a
restart at its start, is ``maintenance``; one that starts after the restarts (or after the
window) had not started and is ruled out, and a finding says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from loopbreaker.diagnosis.steps.common import Notes, hm, is_workload, short_list
from loopbreaker.errors import InvalidContext
from loopbreaker.model import Context, Evidence, EvidenceKind, RootCause, Signal, SignalKind
from loopbreaker.model.evidence import (
    ACTIVE_MAINTENANCE_LABEL,
    IMPENDING_TERMINATION_TAINT,
    SCHEDULED_MAINTENANCE_LABEL,
    NodeMaintenance,
)
from loopbreaker.timeutil import parse_rfc3339

SCHEDULED_LABEL = SCHEDULED_MAINTENANCE_LABEL
ACTIVE_LABEL = ACTIVE_MAINTENANCE_LABEL
TERMINATION_TAINT = IMPENDING_TERMINATION_TAINT
#: A restart this long after a maintenance start is the maintenance's: GKE terminates the
#: node at the start and the controller restarts the workload once its pods fail.
AFTER_START = timedelta(minutes=10)
#: ... and this long before it: a gauge sample or an Event may be stamped a scrape
#: interval off the second the label gives.
BEFORE_START = timedelta(minutes=2)
#: The advice, after "Manage AI-optimized GKE clusters" ("Manually start host maintenance
#: events": you can "perform maintenance during a period of reduced activity"; GKE's
#: trigger is the node label ``cloud.google.com/perform-maintenance=true``, "Manage GKE
#: node disruption for GPUs and TPUs") and GKE's HostMaintenancePolicy
#: ``opportunisticMaintenanceStrategy`` ("Strategy that will trigger maintenance on behalf
#: of the customer", once a node has been idle for ``nodeIdleTimeWindow``).
ADVICE = (
    "Start the host maintenance manually in a quiet period, before its scheduled time "
    "(label the nodes cloud.google.com/perform-maintenance=true after a checkpoint), so it "
    "no longer lands mid-training.",
    "Or use opportunistic maintenance (node pool hostMaintenancePolicy "
    "opportunisticMaintenanceStrategy): GKE then starts maintenance on nodes left idle.",
)


def from_node(labels: Mapping[str, str], taints: Sequence[Any]) -> NodeMaintenance | None:
    """The labels and taint of one Node object; None when none is set."""
    scheduled = _epoch(labels.get(SCHEDULED_LABEL))
    active = labels.get(ACTIVE_LABEL) or None
    terminating = any(isinstance(t, Mapping) and t.get("key") == TERMINATION_TAINT for t in taints)
    if scheduled is None and active is None and not terminating:
        return None
    return NodeMaintenance(scheduled_at=scheduled, active=active, terminating=terminating)


def from_compute(fields: Mapping[str, Any]) -> NodeMaintenance | None:
    """``upcomingMaintenance`` as camelCase JSON fields; None when it names no window."""
    start = _rfc3339(fields.get("windowStartTime"))
    status = fields.get("maintenanceStatus")
    kind = fields.get("type")
    if start is None and status not in ("PENDING", "ONGOING"):
        return None
    can = fields.get("canReschedule")
    return NodeMaintenance(
        window_start=start,
        window_end=_rfc3339(fields.get("windowEndTime")),
        latest_start=_rfc3339(fields.get("latestWindowStartTime")),
        status=status if isinstance(status, str) and status else None,
        type=kind if isinstance(kind, str) and kind else None,
        can_reschedule=can if isinstance(can, bool) else None,
    )


def merged(
    labels: NodeMaintenance | None, compute: NodeMaintenance | None
) -> NodeMaintenance | None:
    """GKE's labels with Compute's window beside them."""
    if labels is None or compute is None:
        return labels or compute
    return replace(
        labels,
        window_start=compute.window_start,
        window_end=compute.window_end,
        latest_start=compute.latest_start,
        status=compute.status,
        type=compute.type,
        can_reschedule=compute.can_reschedule,
    )


@dataclass(frozen=True)
class Hit:
    node: str
    start: datetime
    restart: datetime


@dataclass(frozen=True)
class Planned:
    """What the nodes' maintenance says of the restarts."""

    #: Maintenance of a workload node that started at a restart: the cause.
    caused: tuple[Hit, ...] = ()
    #: Nodes with maintenance starting inside the window, as (node, start).
    in_window: tuple[tuple[str, datetime], ...] = ()

    def explained_nodes(self) -> dict[str, list[datetime]]:
        out: dict[str, list[datetime]] = {}
        for hit in self.caused:
            out.setdefault(hit.node, []).append(hit.start)
        return out

    def actions(self) -> tuple[str, ...]:
        if not self.caused:
            return ()
        first = self.caused[0]
        return (
            f"Host maintenance of node {first.node} started at {hm(first.start)}; the "
            f"workload restarted at {hm(first.restart)}.",
            *ADVICE,
        )


def restart_times(ctx: Context, ev: Evidence, signals: Sequence[Signal]) -> list[datetime]:
    """When the workload restarted inside the window: its restart Events, and the samples
    at which a restart gauge naming it rose."""
    times = [
        s.timestamp
        for s in signals
        if s.kind is SignalKind.JOB_RESTARTING
        and s.timestamp
        and ctx.in_window(s.timestamp)
        and is_workload(s, ctx)
    ]
    for series in ev.restarts or ():
        if ctx.workload is None or ctx.workload not in series.labels.values():
            continue  # the Kubeflow operator's counter names no job: its Events do
        samples = sorted(series.samples, key=lambda x: x.at)
        for before, after in zip(samples, samples[1:], strict=False):
            if after.value != before.value and ctx.in_window(after.at):
                times.append(after.at)
    return sorted(set(times))


def assess(
    ctx: Context,
    ev: Evidence,
    signals: Sequence[Signal],
    workload_nodes: frozenset[str],
    notes: Notes,
) -> Planned:
    """Findings (step 2) for every node whose maintenance the nodes announce."""
    announced = [(n.name, n.maintenance) for n in ev.nodes or () if n.maintenance is not None]
    if not announced:
        return Planned()
    source = ev.source_of(EvidenceKind.NODES) or "nodes"
    restarts = restart_times(ctx, ev, signals)
    caused: list[Hit] = []
    in_window: list[tuple[str, datetime]] = []
    for node, m in sorted(announced, key=lambda a: a[0]):
        start = m.start
        ours = node in workload_nodes
        if start is not None and ctx.in_window(start):
            in_window.append((node, start))
        if m.under_way:
            notes.add(2, f"Node {node}: {_under_way(m)} when the nodes were read.", source=source)
        if start is None or not ours:
            continue
        near = [r for r in restarts if start - BEFORE_START <= r <= start + AFTER_START]
        if ctx.in_window(start) and near:
            caused.append(Hit(node, start, near[0]))
            notes.add(
                2,
                f"Host maintenance of node {node} ({_what(m)}) started at {hm(start)}; the "
                f"workload restarted at {hm(near[0])}: the maintenance restarted it.",
                RootCause.MAINTENANCE,
                source=source,
            )
        elif (restarts and start > restarts[-1]) or start > ctx.end_time:
            notes.add(
                2,
                f"Host maintenance of node {node} ({_what(m)}) is scheduled for "
                f"{_when(start, ctx)}, after the restarts: it had not started, so it did not "
                "cause them; maintenance of this node is ruled out.",
                RootCause.MAINTENANCE,
                supports=False,
                source=source,
            )
        elif restarts:
            notes.add(
                2,
                f"Host maintenance of node {node} ({_what(m)}) starts at {_when(start, ctx)}, "
                "with no restart of the workload at its start: not counted as their cause.",
                RootCause.MAINTENANCE,
                supports=False,
                source=source,
            )
    if in_window:
        named = [f"{node} ({hm(start)})" for node, start in in_window]
        notes.add(
            2,
            f"Nodes with host maintenance scheduled inside the window: {short_list(named)}.",
            source=source,
        )
    return Planned(tuple(caused), tuple(in_window))


def _what(m: NodeMaintenance) -> str:
    if m.window_start is not None:
        parts = [m.type or "maintenance", m.status or "status unknown"]
        return "Compute Engine upcomingMaintenance " + ", ".join(parts)
    return SCHEDULED_LABEL


def _under_way(m: NodeMaintenance) -> str:
    said = []
    if m.active is not None:
        said.append(f"{ACTIVE_LABEL}={m.active}")
    if m.terminating:
        said.append(f"taint {TERMINATION_TAINT}")
    if m.status == "ONGOING":
        said.append("Compute Engine maintenanceStatus ONGOING")
    return "host maintenance under way (" + ", ".join(said) + ")"


def _when(at: datetime, ctx: Context) -> str:
    return hm(at) if at.date() == ctx.end_time.date() else at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(value: str | None) -> datetime | None:
    if not value or not value.strip().isdigit():
        return None  # not the documented epoch seconds: never guess a time
    try:
        return datetime.fromtimestamp(int(value), UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _rfc3339(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_rfc3339(value)
    except (InvalidContext, ValueError):
        return None
