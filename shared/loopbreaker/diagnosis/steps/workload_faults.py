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

from loopbreaker.diagnosis.steps.common import Notes, hm, short_list, unread
from loopbreaker.diagnosis.steps.pod_faults import (
    CAUSE_NAMES,
    STEP,
    Fault,
    Pods,
    Seen,
    WorkloadFaults,
    at_text,
    collectors,
)
from loopbreaker.diagnosis.steps.pod_faults.remedies import (
    describe,
    remediation_actions,
    summary_tail,
)
from loopbreaker.model import (
    KUBEFLOW_CHIEF_TYPES,
    Context,
    Evidence,
    EvidenceKind,
    RootCause,
    Signal,
)

_LOGS, _PODS, _REASONS = EvidenceKind.LOGS, EvidenceKind.PODS, EvidenceKind.POD_REASONS
#: The evidence that could show each cause (the module docstring): a cause is ruled out
#: only when all of it was read whole. The accelerator's memory shows in logs alone.
SHOWN_BY: dict[RootCause, tuple[EvidenceKind, ...]] = {
    RootCause.OUT_OF_MEMORY: (_PODS, _REASONS, _LOGS),
    RootCause.GPU_OUT_OF_MEMORY: (_LOGS,),
    RootCause.PRIORITY_PREEMPTION: (_LOGS, _PODS),
    RootCause.NODE_PRESSURE_EVICTION: (_LOGS, _REASONS, _PODS),
    RootCause.IMAGE_PULL: (_LOGS, _PODS, _REASONS),
}

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
        _absences(ctx, ev, notes)
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


def _absences(ctx: Context, ev: Evidence, notes: Notes) -> None:
    """None of the five causes was seen: rule out those whose evidence was all read, and
    name the others with the evidence that was not."""
    whose = f"{ctx.workload or 'the workload'}'s pods"
    ruled_out = [c for c, kinds in SHOWN_BY.items() if not unread(ev, kinds)]
    open_ = [c for c in SHOWN_BY if c not in ruled_out]
    if ruled_out:
        notes.add(STEP, f"No {_either(ruled_out)} of {whose}.", ruled_out[0], supports=False)
    every = sorted({k for kinds in SHOWN_BY.values() for k in kinds})
    if open_ and len(unread(ev, every)) < len(every):
        gaps = unread(ev, sorted({k for c in open_ for k in SHOWN_BY[c]}))
        notes.add(
            STEP,
            f"An {_either(open_)} of {whose} not ruled out: none in the evidence read, but "
            f"{'; '.join(gaps)}.",
            supports=False,
        )


def _either(causes: list[RootCause]) -> str:
    names = [CAUSE_NAMES[c] for c in causes]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
