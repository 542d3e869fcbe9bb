"""The evidence of the workload's pods stopped by Kubernetes itself, as step 4 collects it:
what was seen, of which cause, in which pods (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from loopbreaker.diagnosis.steps.common import hm
from loopbreaker.diagnosis.steps.pods import PodOwner
from loopbreaker.model import (
    Context,
    Evidence,
    RootCause,
    Signal,
)

STEP = 4


#: Working set at this share of the limit or more: the container was at its limit.
AT_LIMIT = 0.9


OOM_KILLED = "OOMKilled"


#: DisruptionTarget condition reasons (Kubernetes 1.26+).
PREEMPTED_BY_SCHEDULER = "PreemptionByScheduler"


TERMINATED_BY_KUBELET = "TerminationByKubelet"


CAUSE_NAMES = {
    RootCause.OUT_OF_MEMORY: "OOM kill",
    RootCause.GPU_OUT_OF_MEMORY: "accelerator out of memory",
    RootCause.PRIORITY_PREEMPTION: "priority preemption",
    RootCause.NODE_PRESSURE_EVICTION: "node-pressure eviction",
    RootCause.IMAGE_PULL: "image pull failure",
}


@dataclass(frozen=True)
class Seen:
    """One piece of evidence of a fault: which pod, when, what it says, where from."""

    pod: str | None
    at: datetime | None
    text: str
    source: str | None
    container: str | None = None
    node: str | None = None


@dataclass
class Fault:
    """Everything found for one of the four causes."""

    cause: RootCause
    seen: list[Seen] = field(default_factory=list)
    #: Cause-specific details for the remediation (container, limit, preemptor...).
    details: dict[str, str] = field(default_factory=dict)

    @property
    def first(self) -> datetime | None:
        times = [s.at for s in self.seen if s.at is not None]
        return min(times) if times else None

    @property
    def pods(self) -> list[str]:
        return sorted({s.pod for s in self.seen if s.pod})

    def sources(self) -> str | None:
        found = sorted({s.source for s in self.seen if s.source})
        return ",".join(found) or None


@dataclass(frozen=True)
class WorkloadFaults:
    """The four causes found, first in time first (an unknown time sorts last)."""

    faults: tuple[Fault, ...]
    #: Pods that wait on an image pull while scheduled: not a capacity problem.
    image_pods: frozenset[str] = frozenset()
    #: The coordinators among the pods (a Kubeflow Chief or Master, JobSet worker 0 of
    #: slice 0): findings name them first.
    coordinators: frozenset[str] = frozenset()

    @property
    def first(self) -> Fault | None:
        return self.faults[0] if self.faults else None

    def of(self, cause: RootCause) -> Fault | None:
        return next((f for f in self.faults if f.cause is cause), None)


class Pods:
    """The workload's pods as every source names them: name, uid, node."""

    def __init__(self, ctx: Context, ev: Evidence) -> None:
        self.owner = PodOwner(ctx, ev)
        self.everyone = not ctx.workload  # an incident keyed on a node pool names no workload
        self.by_uid: dict[str, str] = {}
        self.node_of: dict[str, str] = {}
        for pod in ev.pods or ():
            if pod.uid:
                self.by_uid[pod.uid] = pod.name
            if pod.node:
                self.node_of[pod.name] = pod.node
        for s in (*(ev.pod_reasons or ()), *(ev.pod_info or ()), *(ev.memory or ())):
            name, uid = pod_label(s.labels), s.labels.get("uid")
            if name and uid:
                self.by_uid.setdefault(uid, name)
            if name and s.labels.get("node"):
                self.node_of.setdefault(name, s.labels["node"])

    def __call__(self, pod: str | None) -> bool:
        return self.everyone or self.owner(pod)

    def named(self, sig: Signal) -> str | None:
        """The pod a signal is about: its pod, or the pod its uid resolves to."""
        if sig.pod:
            return sig.pod
        return self.by_uid.get(sig.pod_uid) if sig.pod_uid else None

    def signal(self, sig: Signal, ctx: Context) -> bool:
        if sig.workload is not None and ctx.workload:
            return sig.workload == ctx.workload
        pod = self.named(sig)
        return self(pod) if pod else self.everyone


def pod_label(labels: Mapping[str, str]) -> str | None:
    return labels.get("pod") or labels.get("pod_name")


def at_text(fault: Fault) -> str:
    return f"at {hm(fault.first)} " if fault.first else ""


def size_text(value: float) -> str:
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value >= size:
            return f"{value / size:.1f}".rstrip("0").rstrip(".") + unit
    return f"{value:.0f}B"


def int_text(value: int | None) -> str:
    return "" if value is None else str(value)


def class_text(name: str, *, default: str = "") -> str:
    if name:
        return f" PriorityClass {name}"
    return f" {default}" if default else ""


def priority_text(d: Mapping[str, str]) -> str:
    if d.get("preemptor_priority") and d.get("victim_priority"):
        return f" (priority {d['preemptor_priority']} > {d['victim_priority']})"
    return ""


def limit_text(d: Mapping[str, str]) -> str:
    if d.get("limit") and d.get("peak"):
        return f" at its {d['limit']} limit (peak {d['peak']})"
    return f" (limit {d['limit']})" if d.get("limit") else ""
