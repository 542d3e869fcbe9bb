"""The four-step decision engine of the JobSet restart-loop workflow (pure, stdlib only).

Each step lives in :mod:`loopbreaker.diagnosis.steps`; this module runs them and decides.

Step 1 decides whether there is a restart loop at all; steps 2-4 collect findings for
every cause; the first rule that matches, in this order, names the root cause:
spot_preemption, maintenance, faulty_host, host_error (the infrastructure: pods die with
their VM or node); then the first in time of out_of_memory, priority_preemption,
node_pressure_eviction and image_pull (Kubernetes stopped the pods); then capacity,
application, unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from loopbreaker.diagnosis import cost, maintenance, ticket, trainjobs
from loopbreaker.diagnosis.queries import STEP_TITLES, queries_for
from loopbreaker.diagnosis.scope import scope
from loopbreaker.diagnosis.steps import gpu_metrics, workload_faults
from loopbreaker.diagnosis.steps.capacity import Shortage
from loopbreaker.diagnosis.steps.common import (
    COORDINATOR,
    DEFAULT_THRESHOLDS,
    PARTIAL,
    Notes,
    Thresholds,
    covers,
    in_scope,
    read_whole,
    unique,
)
from loopbreaker.diagnosis.steps.hosts import step3
from loopbreaker.diagnosis.steps.interruptions import Interruptions, step2
from loopbreaker.diagnosis.steps.pods import MAINTENANCE_POLICY, step4
from loopbreaker.diagnosis.steps.restarts import Restarts, step1
from loopbreaker.diagnosis.steps.simultaneous import workload_nodes
from loopbreaker.model import (
    Context,
    Diagnosis,
    Evidence,
    EvidenceKind,
    Query,
    Remediation,
    RemediationPath,
    Risk,
    RootCause,
    SourceStatus,
    StepReport,
    StepStatus,
    SuspectHost,
)

_STEP_SOURCES: Mapping[int, tuple[EvidenceKind, ...]] = {
    1: (EvidenceKind.RESTARTS,),
    2: (EvidenceKind.INTERRUPTIONS, EvidenceKind.LOGS),
    3: (EvidenceKind.NODE_CONDITIONS, EvidenceKind.LOGS, EvidenceKind.NODES),
    4: (
        EvidenceKind.POD_PHASES,
        EvidenceKind.UNSCHEDULABLE,
        EvidenceKind.PODS,
        EvidenceKind.LOGS,
        EvidenceKind.POD_REASONS,
        EvidenceKind.MEMORY,
        EvidenceKind.POD_INFO,
    ),
}
#: Evidence a step reads where it exists, whose absence is no gap (a cluster without
#: dcgm-exporter): named among the step's sources when it was read.
_OPTIONAL_SOURCES: Mapping[int, tuple[EvidenceKind, ...]] = {3: (EvidenceKind.GPU_XIDS,)}
#: Evidence a step also reads, which stands in when its own is missing.
_STAND_INS: Mapping[int, tuple[EvidenceKind, ...]] = {
    1: (EvidenceKind.JOBSETS, EvidenceKind.LOGS, EvidenceKind.PODS),
}
#: Causes that explain pods dying with their VM or node, whatever else they show.
_INFRASTRUCTURE = frozenset(
    {RootCause.SPOT_PREEMPTION, RootCause.MAINTENANCE, RootCause.FAULTY_HOST, RootCause.HOST_ERROR}
)
#: The workload's pods stopped by Kubernetes itself, and the path each one takes.
_POD_FAULT_PATHS = {
    RootCause.OUT_OF_MEMORY: RemediationPath.FIX_MEMORY,
    RootCause.GPU_OUT_OF_MEMORY: RemediationPath.FIX_GPU_MEMORY,
    RootCause.PRIORITY_PREEMPTION: RemediationPath.PROTECT_PRIORITY,
    RootCause.NODE_PRESSURE_EVICTION: RemediationPath.RELIEVE_NODE_PRESSURE,
    RootCause.IMAGE_PULL: RemediationPath.FIX_IMAGE,
}


def diagnose(
    context: Context, evidence: Evidence, thresholds: Thresholds = DEFAULT_THRESHOLDS
) -> Diagnosis:
    """Run the four steps over the evidence and decide the root cause."""
    # A TrainJob's Failed condition is cited in step 1 by every caller (CLI, replay, responder).
    return trainjobs.annotate(_diagnose(context, evidence, thresholds), evidence.signals)


def _diagnose(context: Context, evidence: Evidence, thresholds: Thresholds) -> Diagnosis:
    notes = Notes()
    evidence = scope(context, evidence)
    signals = [s for s in unique(evidence.signals or ()) if in_scope(s, context, evidence)]
    # The GPUs' Xids as dcgm-exporter reports them read like the driver's log lines.
    signals += [
        s for s in gpu_metrics.signals(evidence.gpu_xids or ()) if in_scope(s, context, evidence)
    ]
    if evidence.rejected_entries:
        where, why = evidence.rejected_entries[0]
        notes.add(
            4,
            f"{len(evidence.rejected_entries)} log entr(y/ies) skipped as unreadable, "
            f"first {where}: {why}",
        )
    evidence = _read_in_part(context, evidence)
    restarts = step1(context, evidence, signals, notes)
    all_queries = queries_for(context)
    missing = _missing(evidence) + tuple(notes.missing)

    if restarts.loop is False:
        steps = (
            _report(1, evidence, notes, all_queries),
            *(_skipped(n) for n in (2, 3, 4)),
        )
        return Diagnosis(
            context=context,
            restart_loop=False,
            restart_increase=restarts.increase,
            restart_total=restarts.total,
            root_cause=RootCause.NO_RESTART_LOOP,
            remediation=_remediation(RootCause.NO_RESTART_LOOP, (), context, None),
            suspect_hosts=(),
            steps=steps,
            evidence=tuple(notes.by_step[1]),
            ticket_draft=None,
            missing_evidence=tuple(m for m in missing if m.startswith(EvidenceKind.RESTARTS)),
            summary=f"No restart loop: {context.workload} did not restart inside the window.",
            queries_run=_run_count(steps),
        )

    nodes = workload_nodes(context, evidence, signals)
    interruptions = step2(context, evidence, signals, notes, nodes)
    hosts = step3(context, evidence, signals, interruptions, thresholds, notes, nodes)
    faults = workload_faults.collect(context, evidence, signals)
    pods = step4(
        context,
        evidence,
        signals,
        thresholds,
        notes,
        waiting_on_image=faults.image_pods,
        workload_nodes=nodes,
    )

    first = faults.first
    if interruptions.preemptions:
        cause = RootCause.SPOT_PREEMPTION
    elif interruptions.maintenance or interruptions.planned.caused:
        cause = RootCause.MAINTENANCE
    elif hosts.suspects:
        cause = RootCause.FAULTY_HOST
    elif hosts.single:
        cause = RootCause.HOST_ERROR
    elif first is not None:
        cause = first.cause
    elif pods.capacity:
        cause = RootCause.CAPACITY
    elif pods.application or hosts.simultaneous:
        cause = RootCause.APPLICATION
    else:
        cause = RootCause.UNKNOWN
    workload_faults.report(
        context,
        evidence,
        faults,
        notes,
        decided=cause,
        infrastructure=cause in _INFRASTRUCTURE,
    )
    if first is not None and cause is first.cause:
        if pods.application:
            what = "coordinator's NCCL / collective / worker-crash failure"
            workload_faults.consequence_note(first, what, pods.application_at, notes)
        if pods.capacity:
            workload_faults.consequence_note(first, "pods left Pending", None, notes)

    if cause is RootCause.HOST_ERROR:
        suspects = hosts.single
    elif cause is RootCause.FAULTY_HOST:
        suspects = hosts.suspects + hosts.single
    else:
        suspects = hosts.suspects
    steps = tuple(_report(n, evidence, notes, all_queries) for n in (1, 2, 3, 4))
    # Steps 2 and 3 look at the infrastructure: "no infrastructure cause" needs them whole.
    infra_gaps = ", ".join(
        f"step {s.number} {s.status.value}" for s in steps[1:3] if s.status is not StepStatus.DONE
    )
    findings = tuple(f for n in (1, 2, 3, 4) for f in notes.by_step[n])
    spent = cost.estimate(context, evidence, signals, restarts.increase) if restarts.loop else None
    draft = None
    if cause is RootCause.FAULTY_HOST:
        draft = ticket.draft(
            context,
            hosts.suspects[0],
            restarts.increase,
            restarts.total,
            steps,
            interruptions.planned.in_window,
        )
        if spent is not None:
            draft = replace(draft, business_impact=cost.impact(spent))
    return Diagnosis(
        context=context,
        restart_loop=restarts.loop,
        restart_increase=restarts.increase,
        restart_total=restarts.total,
        root_cause=cause,
        remediation=_remediation(
            cause, suspects, context, faults, infra_gaps, interruptions.planned, pods.shortages
        ),
        suspect_hosts=suspects,
        steps=steps,
        evidence=findings,
        ticket_draft=draft,
        missing_evidence=missing,
        summary=_summary(
            cause, context, restarts, suspects, interruptions, faults, infra_gaps, pods.shortages
        ),
        queries_run=_run_count(steps),
        cost=spent,
    )


def _missing(ev: Evidence) -> tuple[str, ...]:
    """Unavailable evidence, and evidence only partly read (a reader's "partial: ..." note)."""
    return tuple(
        f"{kind.value}: {status.reason or 'unavailable'} ({status.source})"
        for kind, status in sorted(ev.sources.items())
        if not status.available or (status.reason or "").startswith("partial")
    )


def _read_in_part(ctx: Context, ev: Evidence) -> Evidence:
    """Mark evidence that was read but cannot rule anything out as read in part, so no
    step claims an absence over it: logs with skipped entries (the skipped one may have
    been the event), node conditions with no sample inside the window (a Ready series of
    another day says nothing of the issue time)."""
    notes: dict[EvidenceKind, str] = {}
    if ev.rejected_entries:
        notes[EvidenceKind.LOGS] = f"{len(ev.rejected_entries)} log entr(y/ies) unreadable"
    # No log entry inside the window is no such sign: the live filters ask for faults only,
    # and a quiet cluster has none. Node conditions are exported for every node all the time.
    if ev.node_conditions is not None and not covers(ev.node_conditions, ctx):
        notes[EvidenceKind.NODE_CONDITIONS] = "no node condition sample inside the window"
    sources = dict(ev.sources)
    for kind, note in notes.items():
        status = sources.get(kind)
        if status is not None and read_whole(ev, kind):
            sources[kind] = SourceStatus(status.source, True, f"{PARTIAL}: {note}")
    return replace(ev, sources=sources) if sources != ev.sources else ev


def _report(number: int, ev: Evidence, notes: Notes, queries: Sequence[Query]) -> StepReport:
    """``done`` when every kind of the step's evidence was read whole, ``partial`` when
    some of it was (the rest missing, read in part, or holding nothing of the workload),
    ``unavailable`` when none was."""
    kinds = _STEP_SOURCES[number]
    statuses = [ev.sources.get(k) for k in kinds]
    available = [s for s in statuses if s is not None and s.available]
    # Step 1 also counts from the JobSet object, its Events and its pods' labels: without
    # the restart metric it is partial on those, not unavailable.
    stand_ins: list[SourceStatus] = [
        s
        for s in (ev.sources.get(k) for k in _STAND_INS.get(number, ()))
        if s is not None and s.available
    ]
    jobsets = ev.sources.get(EvidenceKind.JOBSETS)
    shown = available + [s for s in stand_ins if s is jobsets]
    if not available and stand_ins:
        available, shown = stand_ins, stand_ins
    shown = shown + [
        s
        for s in (ev.sources.get(k) for k in _OPTIONAL_SOURCES.get(number, ()))
        if s is not None and s.available
    ]
    gaps = [
        f"{s.source}: {s.reason or 'unavailable'}"
        for s in statuses
        if s is not None and (not s.available or (s.reason or "").startswith(PARTIAL))
    ]
    gaps += [f"{k.value}: not read" for k, s in zip(kinds, statuses, strict=True) if s is None]
    gaps = list(dict.fromkeys(gaps + notes.gaps[number]))
    if not available:
        status = StepStatus.UNAVAILABLE
    elif gaps:
        status = StepStatus.PARTIAL
    else:
        status = StepStatus.DONE
    reason = "; ".join(gaps) or None
    return StepReport(
        number=number,
        title=STEP_TITLES[number],
        status=status,
        findings=tuple(notes.by_step[number]),
        queries=tuple(q for q in queries if q.step == number),
        sources=tuple(sorted({s.source for s in shown})),
        reason=reason,
    )


def _skipped(number: int) -> StepReport:
    return StepReport(
        number=number,
        title=STEP_TITLES[number],
        status=StepStatus.SKIPPED,
        findings=(),
        queries=(),
        reason="no restart loop: nothing further to query",
    )


def _run_count(steps: Iterable[StepReport]) -> int:
    return sum(
        1
        for step in steps
        if step.status in (StepStatus.DONE, StepStatus.PARTIAL)
        for q in step.queries
        if not q.deprecated
    )


def _remediation(
    cause: RootCause,
    suspects: Sequence[SuspectHost],
    ctx: Context,
    faults: workload_faults.WorkloadFaults | None = None,
    infra_gaps: str = "",
    planned: maintenance.Planned | None = None,
    shortages: Sequence[Shortage] = (),
) -> Remediation:
    target = suspects[0] if suspects else None
    fault = faults.of(cause) if faults is not None else None
    if fault is not None and cause in _POD_FAULT_PATHS:
        # Never a node or host action: Kubernetes stopped the pods for the workload's own
        # configuration or for the cluster's sharing, not for a fault of the machine.
        actions = workload_faults.remediation_actions(fault, ctx)
        return Remediation(_POD_FAULT_PATHS[cause], Risk.LOW, False, actions)
    if cause is RootCause.NO_RESTART_LOOP:
        return Remediation(RemediationPath.NONE, Risk.NONE, False, ("No action needed.",))
    if cause is RootCause.SPOT_PREEMPTION:
        return Remediation(
            RemediationPath.AVOID_PREEMPTION,
            Risk.LOW,
            False,
            (
                "Run long training on reserved or on-demand capacity instead of Spot VMs.",
                "Use a compact placement policy to cut defragmentation interruptions.",
                "Checkpoint more often so each preemption loses less work.",
                "Do not cordon nodes or quarantine hosts for preemptions.",
            ),
        )
    if cause is RootCause.MAINTENANCE:
        return Remediation(
            RemediationPath.PLAN_MAINTENANCE,
            Risk.LOW,
            False,
            (
                *(planned.actions() if planned is not None else ()),
                "Set maintenance windows and exclusions on the cluster for the training period.",
                MAINTENANCE_POLICY[ctx.workload_kind.kubeflow],
                "Watch the cloud.google.com/scheduled-maintenance-time node label and "
                "checkpoint before it.",
            ),
        )
    if cause is RootCause.FAULTY_HOST and target is not None:
        nodes = ", ".join(target.nodes)
        zone = target.zone or "ZONE"
        instances = ", ".join(f"zones/{zone}/instances/{i}" for i in target.instances)
        return Remediation(
            RemediationPath.ISOLATE_HOST,
            Risk.HIGH,
            True,
            (
                f"After human approval: cordon node(s) {nodes}.",
                f"Drain node(s) {nodes} through the Eviction API, respecting PodDisruptionBudgets.",
                f"Delete the GCE VM(s) {instances} so the managed instance group recreates "
                "them on healthy hardware (never shrink the group).",
                f"Open a Google Cloud support case naming physical host {target.host} "
                "(draft attached)."
                if target.host_known
                else f"Find the physical host of node {target.host} (Compute Engine "
                "resourceStatus.physicalHost) before opening a support case.",
            ),
        )
    if cause is RootCause.HOST_ERROR and target is not None:
        return Remediation(
            RemediationPath.WATCH_HOST,
            Risk.LOW,
            False,
            (
                f"Watch host {target.host} ({', '.join(target.nodes)}): one more failure makes "
                "it a faulty host.",
                "No destructive action for a single failure; GKE auto-repair handles the node.",
            ),
        )
    if cause is RootCause.CAPACITY and shortages:
        # The strongest shortage says what to do (a stockout: another zone, a reservation,
        # flex-start); the rest are named after it.
        others = tuple(f"Also: {s.finding()}" for s in shortages[1:3])
        return Remediation(
            RemediationPath.ADD_CAPACITY, Risk.LOW, False, shortages[0].actions() + others
        )
    if cause is RootCause.CAPACITY:
        return Remediation(
            RemediationPath.ADD_CAPACITY,
            Risk.LOW,
            False,
            (
                "Check quota and reservations for the accelerator the pods request.",
                "Scale the node pool or enable node auto-provisioning.",
                "Review placement, topology and affinity constraints of the pods.",
            ),
        )
    return Remediation(
        RemediationPath.INSPECT_APPLICATION,
        Risk.LOW,
        False,
        (
            f"Read the coordinator's logs ({COORDINATOR[ctx.workload_kind.kubeflow]}) and "
            "the tracebacks of the first failing worker.",
            "For NCCL timeouts: rerun with NCCL_DEBUG=INFO and check collective sizes, "
            "timeouts and the network between slices.",
            f"No node action yet: the infrastructure evidence is incomplete ({infra_gaps}); "
            "read what is missing before ruling it out."
            if infra_gaps
            else "No node action: the infrastructure shows no cause.",
        ),
    )


def _summary(
    cause: RootCause,
    ctx: Context,
    restarts: Restarts,
    suspects: Sequence[SuspectHost],
    interruptions: Interruptions,
    faults: workload_faults.WorkloadFaults | None = None,
    infra_gaps: str = "",
    shortages: Sequence[Shortage] = (),
) -> str:
    if restarts.loop and restarts.increase is not None:
        head = f"{ctx.workload} restarted {restarts.increase:g} time(s) inside the window"
    elif restarts.loop:
        head = f"{ctx.workload} is restarting"
    elif ctx.workload:
        head = f"Restart data for {ctx.workload} is unavailable"
    else:  # an incident keyed on a node pool or host names no workload
        head = f"In {ctx.cluster or 'a cluster not yet named by any entry'}"
    tail = {
        RootCause.SPOT_PREEMPTION: f"{interruptions.preemptions} Spot preemption(s) explain it.",
        RootCause.MAINTENANCE: f"{interruptions.maintenance} host maintenance event(s) explain it."
        if interruptions.maintenance
        else _planned_tail(interruptions.planned),
        RootCause.CAPACITY: "pods cannot be scheduled: capacity is missing.",
        RootCause.APPLICATION: "the application itself fails (NCCL / collective / worker crash).",
        RootCause.UNKNOWN: f"no infrastructure cause in the evidence read ({infra_gaps}); "
        "inspect the application and the missing evidence."
        if infra_gaps
        else "no infrastructure cause found; inspect the application.",
    }.get(cause, "")
    if cause is RootCause.CAPACITY and shortages:
        tail = shortages[0].tail()
    fault = faults.of(cause) if faults is not None else None
    if fault is not None and cause in _POD_FAULT_PATHS:
        tail = workload_faults.summary_tail(fault)
    if cause is RootCause.FAULTY_HOST:
        # Without host data the "host" is the node itself: never call it a physical host.
        what = "physical host" if suspects[0].host_known else "node (physical host unknown)"
        tail = f"{what} {suspects[0].host} failed {suspects[0].failures} times."
    elif cause is RootCause.HOST_ERROR:
        tail = f"host {suspects[0].host} failed once."
    return f"{head}; {tail}"


def _planned_tail(planned: maintenance.Planned) -> str:
    if not planned.caused:
        return ""
    first = planned.caused[0]
    return (
        f"host maintenance of node {first.node}, started at {first.start:%H:%M:%SZ}, explains it."
    )
