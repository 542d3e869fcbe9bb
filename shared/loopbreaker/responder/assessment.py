"""The responder's pure functions: evidence merging, a remediation's assessment, durations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from loopbreaker.approval.repair import RepairPath
from loopbreaker.approval.requests import Target
from loopbreaker.diagnosis.steps import restarts
from loopbreaker.diagnosis.steps.common import Notes
from loopbreaker.incidents import Incident, Verdict, VerificationRecord
from loopbreaker.model import (
    Context,
    Evidence,
    EvidenceKind,
    HostFailureRecord,
    HostPlace,
    NodeInfo,
    Signal,
    SourceStatus,
)
from loopbreaker.timeutil import format_rfc3339


@dataclass(frozen=True)
class Assessment:
    """What one look at a remediated workload found."""

    verdict: Verdict
    note: str
    findings: tuple[str, ...] = ()
    #: Restarts that are not this incident's (another host): a new, linked incident.
    other: tuple[str, ...] = ()
    other_at: datetime | None = None
    #: Nothing can be decided (no restart data at the window's end): stop looking.
    stop: bool = False


def _same_host(a: str | None, b: str | None) -> bool:
    one, two = HostPlace.parse(a), HostPlace.parse(b)
    return one is not None and two is not None and one.host == two.host


def assess(
    check: VerificationRecord,
    target: Target | None,
    context: Context,
    evidence: Evidence,
    now: datetime,
) -> Assessment:
    """The outcome of a remediation so far (pure): step 1 of the diagnosis (restart series,
    restart Events, conditions) over [since, now], each restart placed on its host, and
    the Compute place of the recreated VM."""
    nodes = {n.name: n for n in evidence.nodes or ()}
    repaired = target is not None and target.repair_path in (RepairPath.GKE, RepairPath.REPORT)
    # The recreated VM: same name (its managed instance group keeps it), a new id. A host
    # repair keeps the VM (and may bring it back on the same, repaired host): not this check.
    if target is not None and check.host and not repaired:
        for node in nodes.values():
            new_vm = node.instance == target.instance or node.name == target.node
            if (
                new_vm
                and node.instance_id
                and node.instance_id != target.instance_id
                and _same_host(node.physical_host, check.host)
            ):
                finding = (
                    f"the recreated VM {target.instance} (id {node.instance_id}) landed on the "
                    f"same physical host {check.host}"
                )
                return Assessment(Verdict.RECURRED, finding, (finding,))
    notes = Notes()
    signals = tuple(
        s for s in evidence.signals or () if s.timestamp is None or s.timestamp > check.since
    )
    seen = restarts.step1(context, evidence, signals, notes)
    if seen.loop:
        where = _restart_places(context, evidence, check.since)
        same = [w for w, node in where if _on_host(node, nodes, check.host, target)]
        others = [w for w, node in where if not _on_host(node, nodes, check.host, target)]
        what = f"+{seen.increase:g} restart(s)" if seen.increase else "a restart"
        if same or not where:
            # Unplaced restarts count against the remediation: the safe reading.
            finding = f"{what} of {context.workload} since the remediation: " + (
                "; ".join(same) if same else "no pod placement known, counted as the same cause"
            )
            return Assessment(Verdict.RECURRED, finding, (finding,))
        other_at = max((s.timestamp for s in signals if s.timestamp), default=None)
        finding = f"{what} of {context.workload} on another host: {'; '.join(others)}"
        if now >= check.until:
            note = f"loop broken on host {check.host or 'the isolated host'}; {finding}"
            return Assessment(Verdict.VERIFIED, note, (finding,), tuple(others), other_at)
        return Assessment(Verdict.WATCHING, finding, (finding,), tuple(others), other_at)
    host_now = _repaired_host(target, nodes, check.host) if repaired else None
    if now < check.until:
        return Assessment(Verdict.WATCHING, "no restart so far", (host_now,) if host_now else ())
    if seen.loop is None:
        finding = (
            "cannot verify: no restart series or restart Events of "
            f"{context.workload or 'the workload'} could be read"
        )
        return Assessment(Verdict.WATCHING, finding, (finding,), stop=True)
    span = (check.until - check.since).total_seconds() / 3600
    note = f"loop broken: no restart in {span:g} h since {format_rfc3339(check.since)}"
    if host_now:
        note = f"{note}; {host_now}"
    return Assessment(Verdict.VERIFIED, note, (note,))


def _repaired_host(
    target: Target | None, nodes: Mapping[str, NodeInfo], host: str | None
) -> str | None:
    """Where the repaired node runs now, as GKE's or Compute's repair left it.

    "Report faulty hosts": A4 and A3 Ultra VMs migrate to another host; A3 Mega and A3 High
    are repaired and restarted on the same host. Either is the repair's outcome; the
    restarts since decide the verdict.
    """
    if target is None:
        return None
    node = nodes.get(target.node)
    by = "GKE's report-and-replace" if target.repair_path is RepairPath.GKE else "the host report"
    if node is None or not node.physical_host:
        return f"after {by}, node {target.node}'s host is not known yet"
    if _same_host(node.physical_host, host):
        return f"after {by}, node {target.node} runs on host {host} again (repaired in place)"
    return f"after {by}, node {target.node} moved from host {host} to {node.physical_host}"


def _workload_on(target: Target | None, evidence: Evidence) -> dict[str, Any]:
    """The workload (and namespace) whose pods ran on the remediated node, if one did."""
    pods = [p for p in evidence.pods or () if p.workload]
    on_node = [p for p in pods if target is not None and p.node == target.node]
    for pod in on_node or pods[:1]:
        return {"workload": pod.workload, "namespace": pod.namespace}
    return {}


def _on_host(
    node: str | None, nodes: Mapping[str, NodeInfo], host: str | None, target: Target | None
) -> bool:
    if node is None:
        return True  # unplaced: the safe reading
    if target is not None and node == target.node:
        return True
    info = nodes.get(node)
    return info is not None and _same_host(info.physical_host, host)


def _restart_places(
    context: Context, evidence: Evidence, since: datetime
) -> list[tuple[str, str | None]]:
    """(what, node) per pod of the workload that restarted since ``since`` (per-pod restart
    series), else where the workload's pods run now (a JobSet's restarts name no pod)."""
    pod_node = {p.name: p.node for p in evidence.pods or ()}
    for series in evidence.pod_info or ():
        pod, node = series.labels.get("pod"), series.labels.get("node")
        if pod and node:
            pod_node.setdefault(pod, node)
    out = []
    for series in evidence.restarts or ():
        pod = series.labels.get("pod")
        if not pod or not pod.startswith(context.workload):
            continue
        before = [s.value for s in series.samples if s.at <= since]
        after = [s.value for s in series.samples if s.at > since]
        if after and max(after) > (before[-1] if before else after[0]):
            node = pod_node.get(pod)
            out.append((f"pod {pod} restarted on node {node or 'unknown'}", node))
    if out:
        return out
    mine = [
        p
        for p in evidence.pods or ()
        if p.node and (p.workload == context.workload or p.name.startswith(context.workload + "-"))
    ]
    return [(f"pod {p.name} runs on node {p.node}", p.node) for p in mine]


def durations(incident: Incident) -> dict[str, float | None]:
    """Seconds from the first signal to diagnosis, approval, remediated and verified."""
    start = incident.first_event
    marks: dict[str, datetime | None] = {
        "to_diagnosis": incident.diagnosis.at if incident.diagnosis else None,
        "to_approval": incident.approval.at if incident.approval else None,
        "to_remediated": incident.remediation.finished_at if incident.remediation else None,
        "to_verified": incident.verification.decided_at if incident.verification else None,
    }
    return {
        f"seconds_{name}": (at - start).total_seconds() if at else None
        for name, at in marks.items()
    }


def merge_evidence(
    evidence: Evidence, signals: Iterable[Signal], history: Iterable[HostFailureRecord]
) -> Evidence:
    """Add the incident's own signals and the remembered host failures to the evidence."""
    existing = tuple(evidence.signals or ())
    seen = {(s.insert_id, s.log_name, s.timestamp) for s in existing if s.insert_id}
    extra = tuple(s for s in signals if (s.insert_id, s.log_name, s.timestamp) not in seen)
    sources = dict(evidence.sources)
    logs = sources.get(EvidenceKind.LOGS)
    if extra and (logs is None or not logs.available):
        sources[EvidenceKind.LOGS] = SourceStatus("incident signals", True)
    return replace(
        evidence,
        signals=existing + extra,
        host_history=(*evidence.host_history, *history),
        sources=sources,
    )
