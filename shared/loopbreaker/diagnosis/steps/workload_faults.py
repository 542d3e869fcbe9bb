"""Step 4, continued: the workload's pods stopped by Kubernetes itself or by their own
accelerator memory, not by their VM (pure).

Five causes, each from any of its kinds of evidence, scoped to the workload's pods and to
the window like every other finding:

- ``out_of_memory``: a container terminated ``OOMKilled`` (pod status, kube-state-metrics
  ``..._last_terminated_reason`` / ``..._terminated_reason``, the Kubernetes audit log, a
  kernel ``oom-kill`` line whose memory cgroup names the pod), with the container's memory
  against its limit as support. Exit code 137 alone is a SIGKILL, not an OOM kill.
- ``gpu_out_of_memory``: the accelerator's own memory ran out (PyTorch's CUDA out of memory,
  NCCL's ``Cuda failure 'out of memory'``, XLA's ``RESOURCE_EXHAUSTED`` on device or HBM
  memory), with the numbers the message gives (asked, free, total, device, rank).
- ``priority_preemption``: ``Preempted`` Events of the scheduler (the preemptor in
  ``related``), the ``DisruptionTarget`` condition ``PreemptionByScheduler``.
- ``node_pressure_eviction``: ``Evicted`` Events, ``kube_pod_status_reason{reason=
  "Evicted"}``, ``status.reason: Evicted``; node pressure Events and conditions support it.
- ``image_pull``: ``ErrImagePull`` / ``ImagePullBackOff`` / ``Failed to pull image`` of the
  workload's pods, also for pods that are scheduled and Pending on the pull.

The first of them in time is the cause; the later ones are its consequences.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from loopbreaker.diagnosis.steps import fault_collectors as collectors
from loopbreaker.diagnosis.steps.common import Notes, hm, short_list
from loopbreaker.diagnosis.steps.fault_remedies import describe, remediation_actions, summary_tail
from loopbreaker.diagnosis.steps.faults import (
    CAUSE_NAMES,
    STEP,
    Fault,
    Pods,
    Seen,
    WorkloadFaults,
    at_text,
)
from loopbreaker.model import (
    KUBEFLOW_CHIEF_TYPES,
    Context,
    Evidence,
    RootCause,
    Signal,
)

__all__ = [
    "Fault",
    "Seen",
    "WorkloadFaults",
    "collect",
    "consequence_note",
    "remediation_actions",
    "report",
    "summary_tail",
]


def collect(ctx: Context, ev: Evidence, signals: Sequence[Signal]) -> WorkloadFaults:
    """Find the evidence of each of the five causes (no findings written yet)."""
    pods = Pods(ctx, ev)
    ours = [p for p in ev.pods or () if pods(p.name)]
    found = [
        collectors.oom(ctx, ev, signals, pods, ours),
        collectors.gpu_oom(ctx, ev, signals, pods),
        collectors.preemption(ctx, ev, signals, pods, ours),
        collectors.eviction(ctx, ev, signals, pods, ours),
        collectors.image(ctx, ev, signals, pods, ours),
    ]
    faults = [f for f in found if f.seen]
    faults.sort(key=lambda f: (f.first is None, f.first or ctx.end_time))
    image = next((f for f in faults if f.cause is RootCause.IMAGE_PULL), None)
    coordinators = {
        p.name for p in ours if p.coordinator or p.replica_type in KUBEFLOW_CHIEF_TYPES
    } | {s.pod for s in signals if s.coordinator and s.pod}
    return WorkloadFaults(
        tuple(faults),
        frozenset(image.pods) if image else frozenset(),
        frozenset(coordinators),
    )


def report(
    ctx: Context,
    ev: Evidence,
    faults: WorkloadFaults,
    notes: Notes,
    *,
    decided: RootCause,
    infrastructure: bool,
) -> None:
    """Write the findings: each cause's evidence, then what the verdict makes of it."""
    for fault in faults.faults:
        describe(fault, notes, faults.coordinators)
    first = faults.first
    if first is None:
        if ev.signals is not None or ev.pods is not None or ev.pod_reasons is not None:
            notes.add(
                STEP,
                "No OOM kill, accelerator out of memory, priority preemption, node-pressure "
                "eviction or image pull "
                f"failure of {ctx.workload or 'the workload'}'s pods.",
                RootCause.OUT_OF_MEMORY,
                supports=False,
            )
        return
    if infrastructure:
        for fault in faults.faults:
            notes.add(
                STEP,
                f"The {CAUSE_NAMES[fault.cause]}(s) of {short_list(fault.pods) or 'the pods'} "
                f"{at_text(fault)}do not explain the loop: {decided.value} does, and pods "
                "that die with their node or VM show such signs too.",
                fault.cause,
                supports=False,
            )
        return
    for later in faults.faults[1:]:
        notes.add(
            STEP,
            f"The {CAUSE_NAMES[later.cause]}(s) {at_text(later)}followed the "
            f"{CAUSE_NAMES[first.cause]} {at_text(first).rstrip()}: a consequence, not the cause.",
            later.cause,
            supports=False,
        )


def consequence_note(first: Fault, what: str, at: datetime | None, notes: Notes) -> None:
    """Say that an application fault (or a capacity sign) came after the first fault."""
    name = CAUSE_NAMES[first.cause]
    if at is not None and first.first is not None and at < first.first:
        notes.add(
            STEP,
            f"The {what} at {hm(at)} came before the {name} at {hm(first.first)}; the "
            f"{name} still decides: Kubernetes stopped the pods for it.",
            first.cause,
        )
        return
    since = f" {at_text(first).rstrip()}" if first.first else ""
    notes.add(
        STEP,
        f"The {what}{f' at {hm(at)}' if at else ''} followed the {name}{since}: its "
        "consequence, not the cause.",
        first.cause,
    )
