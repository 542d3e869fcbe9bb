"""Step 4, continued: the workload's pods stopped by Kubernetes itself, not by their VM (pure).

Four causes, each from any of its kinds of evidence, scoped to the workload's pods and to
the window like every other finding:

- ``out_of_memory``: a container terminated ``OOMKilled`` (pod status, kube-state-metrics
  ``..._last_terminated_reason`` / ``..._terminated_reason``, the Kubernetes audit log, a
  kernel ``oom-kill`` line whose memory cgroup names the pod), with the container's memory
  against its limit as support. Exit code 137 alone is a SIGKILL, not an OOM kill.
- ``priority_preemption``: ``Preempted`` Events of the scheduler (the preemptor in
  ``related``), the ``DisruptionTarget`` condition ``PreemptionByScheduler``.
- ``node_pressure_eviction``: ``Evicted`` Events, ``kube_pod_status_reason{reason=
  "Evicted"}``, ``status.reason: Evicted``; node pressure Events and conditions support it.
- ``image_pull``: ``ErrImagePull`` / ``ImagePullBackOff`` / ``Failed to pull image`` of the
  workload's pods, also for pods that are scheduled and Pending on the pull.

The first of them in time is the cause; the later ones are its consequences.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from loopbreaker.diagnosis.kube_objects import parse_quantity
from loopbreaker.diagnosis.queries import (
    IMAGE_WAITING_REASONS,
    LAST_TERMINATED_METRIC,
    LIMITS_METRIC,
    POD_REASON_METRIC,
    TERMINATED_METRIC,
    WAITING_METRIC,
    WORKING_SET_METRIC,
)
from loopbreaker.diagnosis.steps.common import Notes, hm, short_list
from loopbreaker.diagnosis.steps.pods import PodOwner
from loopbreaker.model import (
    KUBEFLOW_CHIEF_TYPES,
    Context,
    Evidence,
    EvidenceKind,
    NodeCondition,
    NodeInfo,
    PodInfo,
    RootCause,
    Series,
    Signal,
    SignalKind,
)

STEP = 4
#: Working set at this share of the limit or more: the container was at its limit.
AT_LIMIT = 0.9
OOM_KILLED = "OOMKilled"
#: DisruptionTarget condition reasons (Kubernetes 1.26+).
PREEMPTED_BY_SCHEDULER = "PreemptionByScheduler"
TERMINATED_BY_KUBELET = "TerminationByKubelet"
_PRESSURE_RESOURCE = {
    "MemoryPressure": "memory",
    "DiskPressure": "ephemeral-storage",
    "PIDPressure": "pids",
    "NodeHasInsufficientMemory": "memory",
    "NodeHasDiskPressure": "ephemeral-storage",
    "NodeHasInsufficientPID": "pids",
}
_LOW_ON = re.compile(r"low on resource: (?P<resource>[a-z0-9.-]+)", re.I)
_RECLAIM = re.compile(r"reclaim (?P<resource>[a-z0-9.-]+)", re.I)
_PREEMPTED_BY = re.compile(r"Preempted by (?:pod )?(?P<who>\S+) on node (?P<node>\S+)")
_IMAGE = re.compile(r'image "(?P<image>[^"]+)"')
#: What the classifier writes of an audited pod's spec: "container X (memory limit 72Gi)".
_LIMIT_IN_TEXT = re.compile(r"\(memory limit (?P<limit>[0-9.]+[A-Za-z]*)\)")
_PULL_ERROR = re.compile(r'Failed to pull image "[^"]+": (?P<error>.+)$')
_CAUSE_NAMES = {
    RootCause.OUT_OF_MEMORY: "OOM kill",
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


class _Pods:
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
            name, uid = _pod_label(s.labels), s.labels.get("uid")
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


def collect(ctx: Context, ev: Evidence, signals: Sequence[Signal]) -> WorkloadFaults:
    """Find the evidence of each of the four causes (no findings written yet)."""
    pods = _Pods(ctx, ev)
    ours = [p for p in ev.pods or () if pods(p.name)]
    found = [
        _oom(ctx, ev, signals, pods, ours),
        _preemption(ctx, ev, signals, pods, ours),
        _eviction(ctx, ev, signals, pods, ours),
        _image(ctx, ev, signals, pods, ours),
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
        _describe(fault, notes, faults.coordinators)
    first = faults.first
    if first is None:
        if ev.signals is not None or ev.pods is not None or ev.pod_reasons is not None:
            notes.add(
                STEP,
                "No OOM kill, priority preemption, node-pressure eviction or image pull "
                f"failure of {ctx.workload or 'the workload'}'s pods.",
                RootCause.OUT_OF_MEMORY,
                supports=False,
            )
        return
    if infrastructure:
        for fault in faults.faults:
            notes.add(
                STEP,
                f"The {_CAUSE_NAMES[fault.cause]}(s) of {short_list(fault.pods) or 'the pods'} "
                f"{_when(fault)}do not explain the loop: {decided.value} does, and pods "
                "that die with their node or VM show such signs too.",
                fault.cause,
                supports=False,
            )
        return
    for later in faults.faults[1:]:
        notes.add(
            STEP,
            f"The {_CAUSE_NAMES[later.cause]}(s) {_when(later)}followed the "
            f"{_CAUSE_NAMES[first.cause]} {_when(first).rstrip()}: a consequence, not the cause.",
            later.cause,
            supports=False,
        )


def consequence_note(first: Fault, what: str, at: datetime | None, notes: Notes) -> None:
    """Say that an application fault (or a capacity sign) came after the first fault."""
    name = _CAUSE_NAMES[first.cause]
    if at is not None and first.first is not None and at < first.first:
        notes.add(
            STEP,
            f"The {what} at {hm(at)} came before the {name} at {hm(first.first)}; the "
            f"{name} still decides: Kubernetes stopped the pods for it.",
            first.cause,
        )
        return
    since = f" {_when(first).rstrip()}" if first.first else ""
    notes.add(
        STEP,
        f"The {what}{f' at {hm(at)}' if at else ''} followed the {name}{since}: its "
        "consequence, not the cause.",
        first.cause,
    )


# --- the four collectors ---------------------------------------------------------------------


def _oom(
    ctx: Context, ev: Evidence, signals: Sequence[Signal], pods: _Pods, ours: Sequence[PodInfo]
) -> Fault:
    fault = Fault(RootCause.OUT_OF_MEMORY)
    src = ev.source_of(EvidenceKind.PODS)
    for pod in ours:
        for c in pod.containers:
            for state, term in (("state", c.terminated), ("lastState", c.last_terminated)):
                if term is None or term.reason != OOM_KILLED:
                    continue
                if term.finished_at is not None and not ctx.in_window(term.finished_at):
                    continue
                fault.seen.append(
                    Seen(
                        pod.name,
                        term.finished_at,
                        f"container {c.name} of {pod.name}: {state}.terminated.reason "
                        f"OOMKilled (exit code {term.exit_code})",
                        src,
                        c.name,
                        pod.node,
                    )
                )
    for s in ev.pod_reasons or ():
        if s.metric not in (LAST_TERMINATED_METRIC, TERMINATED_METRIC):
            continue
        if s.labels.get("reason") != OOM_KILLED or not pods(_pod_label(s.labels)):
            continue
        began = _began(s, ctx)
        if began is not None:
            name = _pod_label(s.labels)
            fault.seen.append(
                Seen(
                    name,
                    began,
                    f'{s.metric}{{pod="{name}", container="{s.labels.get("container")}", '
                    'reason="OOMKilled"}',
                    ev.source_of(EvidenceKind.POD_REASONS),
                    s.labels.get("container"),
                )
            )
    logs = ev.source_of(EvidenceKind.LOGS)
    for sig in signals:
        if sig.kind is not SignalKind.OOM_KILLED:
            continue
        named = pods.named(sig)
        if named is None and not pods.everyone:
            continue  # a kernel line that names no pod of ours: another container's OOM
        if not pods.signal(sig, ctx):
            continue
        fault.seen.append(Seen(named, sig.timestamp, sig.excerpt, logs, sig.container, sig.node))
    if not fault.seen:
        return fault
    container = next((s.container for s in fault.seen if s.container), None)
    pod_names = {s.pod for s in fault.seen if s.pod}
    if container is None:
        # A kernel line names the pod, not the container: a pod of one container says it.
        names = {c.name for p in ours if p.name in pod_names for c in p.containers}
        container = next(iter(names)) if len(names) == 1 else None
    limit, peak = _memory(ev, ours, pods, pod_names, container, ctx)
    if limit is None:
        # Only the audit log read: the deleted pod's spec named the limit.
        quoted = [
            q
            for s in fault.seen
            if (m := _LIMIT_IN_TEXT.search(s.text))
            for q in (parse_quantity(m["limit"]),)
            if q
        ]
        limit = max(quoted) if quoted else None
    fault.details.update(
        {
            "container": container or "the training container",
            "limit": _bytes(limit) if limit else "",
            "peak": _bytes(peak) if peak else "",
        }
    )
    if limit and peak:
        share = peak / limit
        fault.details["share"] = f"{share:.0%}"
        fault.details["at_limit"] = "yes" if share >= AT_LIMIT else ""
    return fault


def _memory(
    ev: Evidence,
    ours: Sequence[PodInfo],
    pods: _Pods,
    pod_names: set[str],
    container: str | None,
    ctx: Context,
) -> tuple[float | None, float | None]:
    """The container's memory limit and its peak working set inside the window."""

    def the_one(pod: str | None) -> bool:
        # The OOM-killed pods; their replacements (a Kubeflow replica keeps its name).
        return pods(pod) and (not pod_names or pod in pod_names)

    limits = [
        c.memory_limit
        for p in ours
        if the_one(p.name)
        for c in p.containers
        if c.memory_limit and (container is None or c.name == container)
    ]
    peaks: list[float] = []
    for s in ev.memory or ():
        if not the_one(_pod_label(s.labels)):
            continue
        if container and s.labels.get("container") != container:
            continue
        values = [x.value for x in s.samples if ctx.in_window(x.at)]
        if not values:
            continue
        if s.metric == WORKING_SET_METRIC:
            peaks.append(max(values))
        elif s.metric == LIMITS_METRIC and s.labels.get("resource", "memory") == "memory":
            limits.append(max(values))
    return (max(limits) if limits else None), (max(peaks) if peaks else None)


def _preemption(
    ctx: Context, ev: Evidence, signals: Sequence[Signal], pods: _Pods, ours: Sequence[PodInfo]
) -> Fault:
    fault = Fault(RootCause.PRIORITY_PREEMPTION)
    logs = ev.source_of(EvidenceKind.LOGS)
    events = sorted(
        (s for s in signals if s.kind is SignalKind.PRIORITY_PREEMPTED and pods.signal(s, ctx)),
        key=lambda s: (s.timestamp is None, s.timestamp or ctx.end_time),
    )
    preemptors: list[tuple[str | None, str | None]] = []  # (namespace/name, uid), in order
    for sig in events:
        match = _PREEMPTED_BY.search(sig.excerpt)
        uid = sig.related_uid or (match["who"] if match else None)
        if (sig.related_pod, uid) not in preemptors:
            preemptors.append((sig.related_pod, uid))
        node = sig.node or (match["node"] if match else None)
        fault.seen.append(Seen(pods.named(sig), sig.timestamp, sig.excerpt, logs, node=node))
    for pod in ours:
        if pod.disruption_reason == PREEMPTED_BY_SCHEDULER and ctx.in_window(pod.disruption_at):
            fault.seen.append(
                Seen(
                    pod.name,
                    pod.disruption_at,
                    f"{pod.name}: DisruptionTarget {PREEMPTED_BY_SCHEDULER}",
                    ev.source_of(EvidenceKind.PODS),
                    node=pod.node,
                )
            )
    if not fault.seen:
        return fault
    victim = next((p for p in ours if p.priority_class or p.priority is not None), None)
    victim_class = victim.priority_class if victim and victim.priority_class else None
    if victim_class is None:
        victim_class = next(
            (c for pod in fault.pods if (c := _priority_class(ev, None, pod, ctx))), None
        )
    name, uid = preemptors[0] if preemptors else (None, None)
    who = _preemptor_pod(ev, name, uid)
    label = name or (f"{who.namespace}/{who.name}" if who else None) or uid or ""
    preemptor_class = who.priority_class if who and who.priority_class else None
    if preemptor_class is None:
        namespace, _, short = (name or "").rpartition("/")
        preemptor_class = _priority_class(ev, uid, short, ctx, namespace or None)
    nodes = sorted({s.node for s in fault.seen if s.node})
    fault.details.update(
        {
            "preemptor": label or "a higher-priority pod",
            "preemptors": str(len(preemptors)),
            "preemptor_namespace": label.partition("/")[0] if "/" in label else "",
            "preemptor_class": preemptor_class or "",
            "victim_class": victim_class or "",
            "victim_priority": _int(victim.priority if victim else None),
            "preemptor_priority": _int(who.priority if who else None),
            "node": ", ".join(nodes),
        }
    )
    return fault


def _eviction(
    ctx: Context, ev: Evidence, signals: Sequence[Signal], pods: _Pods, ours: Sequence[PodInfo]
) -> Fault:
    fault = Fault(RootCause.NODE_PRESSURE_EVICTION)
    logs = ev.source_of(EvidenceKind.LOGS)
    resources: list[str] = []
    for sig in signals:
        if sig.kind is not SignalKind.EVICTED or not pods.signal(sig, ctx):
            continue
        named = pods.named(sig)
        resources += _resources(sig.excerpt)
        node = sig.node or (pods.node_of.get(named) if named else None)
        fault.seen.append(Seen(named, sig.timestamp, sig.excerpt, logs, node=node))
    for pod in ours:
        if pod.status_reason != "Evicted":
            continue
        at = pod.disruption_at
        if at is not None and not ctx.in_window(at):
            continue
        resources += _resources(pod.status_message or "")
        fault.seen.append(
            Seen(
                pod.name,
                at,
                f"{pod.name}: status.reason Evicted: {pod.status_message or ''}".strip(),
                ev.source_of(EvidenceKind.PODS),
                node=pod.node,
            )
        )
    for s in ev.pod_reasons or ():
        if s.metric != POD_REASON_METRIC or s.labels.get("reason") != "Evicted":
            continue
        name = _pod_label(s.labels)
        began = _began(s, ctx) if pods(name) else None
        if began is not None:
            fault.seen.append(
                Seen(
                    name,
                    began,
                    f'{POD_REASON_METRIC}{{pod="{name}", reason="Evicted"}}',
                    ev.source_of(EvidenceKind.POD_REASONS),
                    node=pods.node_of.get(name or ""),
                )
            )
    nodes = {n for s in fault.seen if (n := s.node or pods.node_of.get(s.pod or ""))}
    pressure = _node_pressure(ctx, ev, signals, nodes, pods.everyone)
    if not fault.seen and pods.everyone:
        # An incident of a node pool: its nodes' pressure is the finding itself.
        fault.seen += pressure
    if not fault.seen:
        return fault
    resources += [r for p in pressure for r in _resources(p.text)]
    node_names = sorted(
        {s.node for s in fault.seen if s.node} | {p.node for p in pressure if p.node}
    )
    fault.details.update(
        {
            "nodes": ", ".join(node_names) or "the node",
            "resource": _most_common(resources) or "a resource",
            "pressure": "; ".join(dict.fromkeys(p.text for p in pressure[:3])),
        }
    )
    fault.details["pressure_sources"] = ",".join(sorted({p.source for p in pressure if p.source}))
    return fault


def _image(
    ctx: Context, ev: Evidence, signals: Sequence[Signal], pods: _Pods, ours: Sequence[PodInfo]
) -> Fault:
    fault = Fault(RootCause.IMAGE_PULL)
    logs = ev.source_of(EvidenceKind.LOGS)
    images: list[str] = []
    errors: list[str] = []
    containers: list[str] = []
    for sig in signals:
        if sig.kind is not SignalKind.IMAGE_PULL_FAILED or not pods.signal(sig, ctx):
            continue
        text = sig.excerpt
        image = _IMAGE.search(text)
        if image:
            images.append(image["image"])
        if _PULL_ERROR.search(text) and sig.reason:
            errors.append(sig.reason)  # the classifier keeps the registry's answer here
        fault.seen.append(Seen(pods.named(sig), sig.timestamp, text, logs, node=sig.node))
    for pod in ours:
        for c in pod.containers:
            if c.waiting_reason not in IMAGE_WAITING_REASONS:
                continue
            at = pod.scheduled_at if ctx.in_window(pod.scheduled_at) else None
            if c.image:
                images.append(c.image)
            containers.append(c.name)
            fault.seen.append(
                Seen(
                    pod.name,
                    at,
                    f"container {c.name} of {pod.name} waiting: {c.waiting_reason}"
                    + (f" ({c.waiting_message})" if c.waiting_message else ""),
                    ev.source_of(EvidenceKind.PODS),
                    c.name,
                    pod.node,
                )
            )
    for s in ev.pod_reasons or ():
        if s.metric != WAITING_METRIC or s.labels.get("reason") not in IMAGE_WAITING_REASONS:
            continue
        name = _pod_label(s.labels)
        began = _began(s, ctx) if pods(name) else None
        if began is not None:
            containers.append(s.labels.get("container") or "")
            fault.seen.append(
                Seen(
                    name,
                    began,
                    f'{WAITING_METRIC}{{pod="{name}", reason="{s.labels.get("reason")}"}}',
                    ev.source_of(EvidenceKind.POD_REASONS),
                    s.labels.get("container"),
                )
            )
    if not fault.seen:
        return fault
    if not images:
        images = [c.image for p in ours for c in p.containers if c.image and c.name in containers]
    fault.details.update(
        {
            "image": _most_common(images) or "the image",
            "error": _most_common(errors) or "",
            "container": _most_common([c for c in containers if c]) or "",
        }
    )
    return fault


# --- findings and remediation ------------------------------------------------------------------


def _describe(fault: Fault, notes: Notes, coordinators: frozenset[str]) -> None:
    d = fault.details
    # The coordinator first (a Kubeflow Chief or Master): the replica the job waits on.
    pods = sorted(fault.pods, key=lambda p: (p not in coordinators, p))
    lead = " (the coordinator first)" if pods and pods[0] in coordinators else ""
    what = f"{len(pods)} pod(s){lead} ({short_list(pods)})" if pods else "its pods"
    example = _example(fault)
    if fault.cause is RootCause.OUT_OF_MEMORY:
        memory = ""
        if d.get("limit") and d.get("peak"):
            memory = f"; working set peaked at {d['peak']} of its {d['limit']} limit ({d['share']})"
        elif d.get("limit"):
            memory = f"; memory limit {d['limit']}"
        when = f" {_when(fault).rstrip()}" if fault.first else ""
        text = f"Container {d['container']} was OOM-killed in {what}{when}{memory}: {example}"
    elif fault.cause is RootCause.PRIORITY_PREEMPTION:
        more = f" (and {int(d['preemptors']) - 1} more)" if int(d["preemptors"]) > 1 else ""
        text = (
            f"The scheduler preempted {what} {_when(fault)}for {d['preemptor']}{more}"
            f"{_class(d['preemptor_class'])}{_priority(d)}, a higher priority than the "
            f"workload's{_class(d['victim_class'], default='(no PriorityClass)')}: {example}"
        )
    elif fault.cause is RootCause.NODE_PRESSURE_EVICTION:
        text = (
            f"The kubelet evicted {what} {_when(fault)}from {d['nodes']}, low on "
            f"{d['resource']}: {example}"
        )
        if d.get("pressure"):
            notes.add(
                STEP,
                f"Node pressure on {d['nodes']}: {d['pressure']}",
                fault.cause,
                source=d.get("pressure_sources") or None,
            )
    else:
        text = (
            f"{what.capitalize()} cannot pull image {d['image']} {_when(fault)}"
            f"(scheduled, waiting on the registry, not on capacity): {example}"
        )
    notes.add(STEP, text[:600], fault.cause, source=fault.sources())


def remediation_actions(fault: Fault, ctx: Context) -> tuple[str, ...]:
    """Concrete actions naming the workload's objects, for the cause ``fault`` is."""
    d = fault.details
    job = (
        f"{ctx.workload_kind.api_kind} {ctx.namespace + '/' if ctx.namespace else ''}{ctx.workload}"
    )
    if fault.cause is RootCause.OUT_OF_MEMORY:
        limit = d.get("limit") or "its limit (not read: no pod status or resource limits metric)"
        peak = (
            f", peak working set {d['peak']} ({d['share']} of the limit)" if d.get("peak") else ""
        )
        return (
            f"Raise the memory limit (and request) of container {d['container']} in {job}'s "
            f"pod template above its peak: limit {limit}{peak}.",
            "Or cut its memory use: a smaller per-device batch, fewer data-loader workers "
            "and prefetch, sharded optimizer state, activation checkpointing.",
            "Keep requests equal to limits for training containers (Guaranteed QoS) so "
            "other pods on the node are evicted before them.",
            "No node action: an OOM kill at the container's limit is not a node fault.",
        )
    if fault.cause is RootCause.PRIORITY_PREEMPTION:
        victim = _class(d.get("victim_class") or "", default="no PriorityClass (priority 0)")
        preemptor = _class(d.get("preemptor_class") or "", default="a higher priority")
        quota_ns = d.get("preemptor_namespace")
        quota = f"namespace {quota_ns}" if quota_ns else "the preemptor's namespace"
        node = f" on node {d['node']}" if d.get("node") else ""
        return (
            f"{job} runs at{victim}; {d['preemptor']} runs at{preemptor}{_priority(d)} and "
            f"preempted its pods{node}: by design the scheduler evicts the lower priority.",
            "If the training must not be interrupted, give it a PriorityClass at least as "
            f"high as{preemptor}, or set preemptionPolicy: Never on the preemptor's "
            "PriorityClass so it waits instead of evicting.",
            f"Cap {quota} with a ResourceQuota (CPU, memory, GPUs; scopeSelector on its "
            "PriorityClass) so online services cannot take the training job's share, and "
            "give the training namespace its own quota.",
            "Or keep training on its own nodes (a tainted node pool with a toleration and "
            "nodeSelector on the job), and checkpoint often so a preemption loses little.",
        )
    if fault.cause is RootCause.NODE_PRESSURE_EVICTION:
        resource = d.get("resource", "a resource")
        nodes = d.get("nodes", "the node")
        if resource == "ephemeral-storage":
            fix = (
                "Give the training containers ephemeral-storage requests and limits; write "
                "checkpoints, datasets and scratch to a PersistentVolume or Cloud Storage, "
                "not the node's boot disk; or use larger boot disks or local SSDs."
            )
        elif resource == "memory":
            fix = (
                "Set memory requests equal to limits for the training containers "
                f"(Guaranteed QoS, evicted last) and find what else grew on {nodes} "
                "(pods without memory limits, node daemons)."
            )
        else:
            fix = f"Find what exhausted {resource} on {nodes} and bound it per pod."
        return (
            f"The kubelet on {nodes} evicted pods of {job}: the node ran low on {resource}.",
            fix,
            "Keep other workloads off the training nodes (taints, a dedicated node pool) "
            "or raise the node's eviction headroom (kubelet system reserved, node size).",
            "No cordon and no VM action: the node and its host are healthy.",
        )
    image = d.get("image", "the image")
    error = d.get("error") or "the pull failed"
    registry = image.split("/", 1)[0] if "/" in image else "docker.io"
    low = error.lower()
    if "not found" in low or "notfound" in low or "manifest unknown" in low:
        check = (
            f"The reference does not exist in {registry}: check the tag or digest "
            f"(gcloud artifacts docker images list) and fix the image of {job}."
        )
    elif any(w in low for w in ("403", "denied", "unauthorized", "permission", "401")):
        check = (
            f"Grant the nodes' service account roles/artifactregistry.reader on the "
            f"repository in {registry}, or set imagePullSecrets on {job}'s pods for a "
            "private registry."
        )
    else:
        check = (
            f"Check that the nodes reach {registry} (Private Google Access or Cloud NAT for "
            "private nodes) and pre-pull or mirror the image next to the cluster."
        )
    container = f"Container {d['container']} of " if d.get("container") else ""
    return (
        f"{container}{job} cannot pull {image}: {error}.",
        check,
        "Configure imagePullSecrets and sync images to a registry the cluster reaches "
        "before submitting the job.",
        "No capacity or node action: the pods are scheduled and wait on the image.",
    )


def summary_tail(fault: Fault) -> str:
    d = fault.details
    if fault.cause is RootCause.OUT_OF_MEMORY:
        return f"container {d['container']} was OOM-killed{_limit(d)}."
    if fault.cause is RootCause.PRIORITY_PREEMPTION:
        return f"its pods were preempted by {d['preemptor']}{_class(d['preemptor_class'])}."
    if fault.cause is RootCause.NODE_PRESSURE_EVICTION:
        return f"the kubelet evicted its pods from {d['nodes']} (low on {d['resource']})."
    return f"its pods cannot pull image {d['image']}."


# --- helpers -----------------------------------------------------------------------------------


def _pod_label(labels: Mapping[str, str]) -> str | None:
    return labels.get("pod") or labels.get("pod_name")


def _began(series: Series, ctx: Context) -> datetime | None:
    """When a 0/1 reason series turned 1 inside the window; None when it held before the
    window began (an old termination) or never held inside it."""
    before = [x for x in series.samples if x.at < ctx.start_time]
    if before and before[-1].value > 0:
        return None
    return next((x.at for x in series.samples if ctx.in_window(x.at) and x.value > 0), None)


def _node_pressure(
    ctx: Context, ev: Evidence, signals: Sequence[Signal], nodes: set[str], everyone: bool
) -> list[Seen]:
    """Pressure on ``nodes`` inside the window: node Events, condition series, nodes.json."""
    out: list[Seen] = []
    logs = ev.source_of(EvidenceKind.LOGS)
    for sig in signals:
        if sig.kind is SignalKind.NODE_PRESSURE and (everyone or sig.node in nodes):
            out.append(Seen(None, sig.timestamp, sig.excerpt, logs, node=sig.node))
    for s in ev.node_conditions or ():
        condition, node = s.labels.get("condition"), s.labels.get("node_name")
        if condition not in _PRESSURE_RESOURCE or s.labels.get("status") != "True":
            continue
        if not (everyone or node in nodes):
            continue
        began = next((x.at for x in s.samples if ctx.in_window(x.at) and x.value > 0), None)
        if began is not None:
            out.append(
                Seen(
                    None,
                    began,
                    f"node {node} {condition} True from {hm(began)}",
                    ev.source_of(EvidenceKind.NODE_CONDITIONS),
                    node=node,
                )
            )
    for info in ev.nodes or ():
        if not (everyone or info.name in nodes):
            continue
        for cond in _recent_pressure(info, ctx):
            out.append(
                Seen(
                    None,
                    cond.since,
                    f"node {info.name} {cond.type} {cond.status} since "
                    f"{hm(cond.since) if cond.since else '?'} ({cond.message or cond.reason})",
                    ev.source_of(EvidenceKind.NODES),
                    node=info.name,
                )
            )
    out.sort(key=lambda s: (s.at is None, s.at or ctx.end_time))
    return out


def _recent_pressure(node: NodeInfo, ctx: Context) -> Iterable[NodeCondition]:
    """Pressure true now, or that ended inside the window (it held until then)."""
    for cond in node.pressure:
        if cond.status is True or (cond.status is False and ctx.in_window(cond.since)):
            yield cond


def _resources(text: str) -> list[str]:
    out = [m["resource"].rstrip(".") for m in _LOW_ON.finditer(text)]
    out += [m["resource"].rstrip(".") for m in _RECLAIM.finditer(text)]
    out += [r for key, r in _PRESSURE_RESOURCE.items() if key in text]
    return out


def _priority_class(
    ev: Evidence, uid: str | None, pod: str, ctx: Context, namespace: str | None = None
) -> str | None:
    for s in ev.pod_info or ():
        labels = s.labels
        if (uid and labels.get("uid") == uid) or (
            pod
            and labels.get("pod") == pod
            and (namespace or ctx.namespace) in (None, labels.get("namespace"))
        ):
            return labels.get("priority_class") or None
    return None


def _preemptor_pod(ev: Evidence, name: str | None, uid: str | None) -> PodInfo | None:
    for pod in ev.pods or ():
        if (uid and pod.uid == uid) or (name and f"{pod.namespace}/{pod.name}" == name):
            return pod
    return None


def _most_common(values: Iterable[str]) -> str | None:
    counts: dict[str, int] = defaultdict(int)
    for v in values:
        if v:
            counts[v] += 1
    return max(counts, key=lambda k: counts[k]) if counts else None


def _bytes(value: float) -> str:
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value >= size:
            return f"{value / size:.1f}".rstrip("0").rstrip(".") + unit
    return f"{value:.0f}B"


def _example(fault: Fault) -> str:
    """A line that shows the fault best: a log line or pod status before a metric name."""
    ranked = sorted(
        fault.seen,
        key=lambda s: (
            s.text.startswith("kube_"),
            "Error: " in s.text,  # "Error: ImagePullBackOff" says less than the pull error
            s.at.timestamp() if s.at else float("inf"),
        ),
    )
    return ranked[0].text


def _priority(d: Mapping[str, str]) -> str:
    if d.get("preemptor_priority") and d.get("victim_priority"):
        return f" (priority {d['preemptor_priority']} > {d['victim_priority']})"
    return ""


def _int(value: int | None) -> str:
    return "" if value is None else str(value)


def _when(fault: Fault) -> str:
    return f"at {hm(fault.first)} " if fault.first else ""


def _class(name: str, *, default: str = "") -> str:
    if name:
        return f" PriorityClass {name}"
    return f" {default}" if default else ""


def _limit(d: Mapping[str, str]) -> str:
    if d.get("limit") and d.get("peak"):
        return f" at its {d['limit']} limit (peak {d['peak']})"
    return f" (limit {d['limit']})" if d.get("limit") else ""
