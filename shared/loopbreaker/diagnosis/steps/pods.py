"""Step 4: the workload's pods: capacity, and worker or coordinator failures (pure)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from loopbreaker.diagnosis.steps.capacity import Shortage, is_shortage, shortages
from loopbreaker.diagnosis.steps.common import (
    COORDINATOR,
    Notes,
    Thresholds,
    is_workload,
    labels_match,
    short_list,
    with_role,
)
from loopbreaker.model import (
    WORKLOAD_FAULT_KINDS,
    Context,
    Evidence,
    EvidenceKind,
    RootCause,
    Series,
    Signal,
    SignalKind,
)


@dataclass(frozen=True)
class Pods:
    capacity: bool
    application: bool
    #: The first deciding application fault line (for the order of causes).
    application_at: datetime | None = None
    #: What Compute or the autoscaler could not create, strongest first.
    shortages: tuple[Shortage, ...] = ()


class PodOwner:
    """Decides whether a pod belongs to the workload.

    Names alone are ambiguous (``train-eval-w-0-0-x`` may be a pod of ``train``), so pods
    that pods.json labels with another workload are excluded, and labelled pods of ours
    are included whatever their name.
    """

    def __init__(self, ctx: Context, ev: Evidence) -> None:
        self.workload = ctx.workload
        self.ev = ev
        self.ours = {p.name for p in ev.pods or () if p.workload == ctx.workload}
        self.others = {p.name for p in ev.pods or () if p.workload and p.workload != ctx.workload}

    def observed(self, ctx: Context) -> int:
        """How many of the workload's pods the pod evidence shows inside the window."""
        seen = {p.name for p in self.ev.pods or () if self(p.name)}
        for s in (*(self.ev.pod_phases or ()), *(self.ev.unschedulable or ())):
            pod = s.labels.get("pod") or s.labels.get("pod_name") or ""
            if self(pod) and any(ctx.in_window(x.at) for x in s.samples):
                seen.add(pod)
        return len(seen)

    def __call__(self, pod: str | None) -> bool:
        if not pod:
            return False
        if pod in self.ours:
            return True
        return pod not in self.others and pod.startswith(self.workload + "-")


def step4(
    ctx: Context,
    ev: Evidence,
    signals: Sequence[Signal],
    th: Thresholds,
    notes: Notes,
    *,
    waiting_on_image: Collection[str] = (),
    workload_nodes: Collection[str] = (),
) -> Pods:
    """``waiting_on_image``: pods scheduled and Pending on an image pull, not on capacity;
    ``workload_nodes``: where its pods ran, whose own logs (a GPU fault in the node's
    journal names no pod) speak for the workload too."""
    owns = PodOwner(ctx, ev)
    sched = [
        s for s in signals if s.kind is SignalKind.UNSCHEDULABLE and (s.pod is None or owns(s.pod))
    ]
    # Compute's and the autoscaler's own word on what they could not create comes first:
    # the scheduler's failures and the pods' state only echo it.
    short = shortages(sched, ev)
    for shortage in short[:3]:
        notes.add(4, shortage.finding(), RootCause.CAPACITY, source=ev.source_of(EvidenceKind.LOGS))
    unschedulable: set[str] = set()
    for series in ev.unschedulable or ():
        pod = series.labels.get("pod_name", "")
        if not owns(pod) or not labels_match(
            series.labels, {"cluster_name": ctx.cluster, "namespace_name": ctx.namespace}
        ):
            continue
        if any(ctx.in_window(s.at) and s.value > 0 for s in series.samples):
            unschedulable.add(pod)
    if unschedulable:
        notes.add(
            4,
            f"{len(unschedulable)} pod(s) unschedulable inside the window: "
            f"{short_list(sorted(unschedulable))}.",
            RootCause.CAPACITY,
            source=ev.source_of(EvidenceKind.UNSCHEDULABLE),
        )

    long_pending = _long_pending(ctx, ev.pod_phases or (), th.pending_for, owns)
    long_pending -= set(waiting_on_image)
    if long_pending:
        notes.add(
            4,
            f"{len(long_pending)} pod(s) stayed Pending for {th.pending_for} or longer: "
            f"{short_list(sorted(long_pending))}.",
            RootCause.CAPACITY,
            source=ev.source_of(EvidenceKind.POD_PHASES),
        )

    echoes = [s for s in sched if not is_shortage(s)]
    if echoes:
        notes.add(
            4,
            f"{len(echoes)} scheduling failure(s), e.g. {echoes[0].excerpt!r}.",
            RootCause.CAPACITY,
            source=ev.source_of(EvidenceKind.LOGS),
        )
    pending_pods = [p for p in ev.pods or () if owns(p.name) and p.unschedulable]
    if pending_pods:
        notes.add(
            4,
            f"{len(pending_pods)} pod(s) not scheduled now: {pending_pods[0].message or '-'}",
            RootCause.CAPACITY,
            source=ev.source_of(EvidenceKind.PODS),
        )
    capacity = bool(unschedulable or long_pending or sched or pending_pods)
    observed = owns.observed(ctx)
    if not capacity and observed:
        # Unschedulable pods show in the metric, pod phases, pod status and the
        # FailedScheduling Events: all of them read, or no claim.
        notes.absence(
            4,
            ev,
            (
                EvidenceKind.UNSCHEDULABLE,
                EvidenceKind.POD_PHASES,
                EvidenceKind.PODS,
                EvidenceKind.LOGS,
            ),
            f"Every pod of the workload was scheduled ({observed} pod(s) seen).",
            "An unschedulable or long-Pending pod",
            RootCause.CAPACITY,
        )
    elif not capacity and any(e is not None for e in (ev.unschedulable, ev.pod_phases, ev.pods)):
        notes.no_data(
            4,
            f"pods: no pod of {ctx.workload} in the pod status or pod phase evidence",
            ev.source_of(EvidenceKind.PODS) or ev.source_of(EvidenceKind.POD_PHASES),
        )

    faults = [
        with_role(s, ctx, ev, signals)
        for s in signals
        if s.kind in WORKLOAD_FAULT_KINDS
        and (is_workload(s, ctx) or (s.pod is None and s.node in workload_nodes))
    ]
    coordinator = [s for s in faults if s.coordinator is True]
    unknown_role = [s for s in faults if s.coordinator is None]
    deciding = coordinator or unknown_role
    source = ev.source_of(EvidenceKind.LOGS)
    if coordinator:
        kinds = sorted({s.kind.value for s in coordinator})
        notes.add(
            4,
            f"The coordinator ({COORDINATOR[ctx.workload_kind.kubeflow]}, "
            f"{coordinator[0].pod}) logged "
            f"{', '.join(kinds)}: {coordinator[0].excerpt}",
            RootCause.APPLICATION,
            source=source,
        )
    elif unknown_role:
        kinds = sorted({s.kind.value for s in unknown_role})
        notes.add(
            4,
            f"Workers logged {', '.join(kinds)} (worker role unknown): {unknown_role[0].excerpt}",
            RootCause.APPLICATION,
            source=source,
        )
    others = [s for s in faults if s.coordinator is False]
    if others:
        pods = sorted({s.pod for s in others if s.pod})
        notes.add(
            4,
            f"{len(others)} fault line(s) from other workers ({short_list(pods)}).",
            RootCause.APPLICATION if deciding else None,
            supports=bool(deciding),
            source=source,
        )
    if not deciding:
        notes.absence(
            4,
            ev,
            (EvidenceKind.LOGS,),
            "No NCCL, collective or worker-crash signal in the coordinator's logs.",
            "An NCCL, collective or worker-crash signal",
            RootCause.APPLICATION,
        )
    times = [s.timestamp for s in deciding if s.timestamp is not None]
    return Pods(capacity, bool(deciding), min(times) if times else None, short)


MAINTENANCE_POLICY = {
    False: "Add a JobSet failurePolicy rule with action RestartJobSetAndIgnoreMaxRestarts "
    "for disruption failures, so maintenance does not use up maxRestarts.",
    True: "Use restartPolicy ExitCode so disruption exits (128-255) are retried without "
    "counting as permanent failures, and size backoffLimit for planned maintenance.",
}


def _long_pending(
    ctx: Context, series: Iterable[Series], minimum: timedelta, owns: PodOwner
) -> set[str]:
    found: set[str] = set()
    for s in series:
        pod = s.labels.get("pod", "")
        if s.labels.get("phase") != "Pending" or not owns(pod):
            continue
        if not labels_match(s.labels, {"cluster": ctx.cluster, "namespace": ctx.namespace}):
            continue
        run_start: datetime | None = None
        for sample in s.samples:
            if sample.value > 0 and ctx.in_window(sample.at):
                run_start = run_start or sample.at
                if sample.at - run_start >= minimum:
                    found.add(pod)
                    break
            else:
                run_start = None
    return found
