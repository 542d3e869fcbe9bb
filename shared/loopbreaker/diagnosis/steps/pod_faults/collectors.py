"""Step 4's collectors: the evidence of each cause of pods stopped by Kubernetes itself,
from pod status, kube-state-metrics, Events, kernel and audit lines (pure)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
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
from loopbreaker.diagnosis.steps.common import hm
from loopbreaker.diagnosis.steps.pod_faults import (
    AT_LIMIT,
    OOM_KILLED,
    PREEMPTED_BY_SCHEDULER,
    Fault,
    Pods,
    Seen,
    int_text,
    pod_label,
    size_text,
)
from loopbreaker.model import (
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

PRESSURE_RESOURCE = {
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


#: What the classifier writes of an out-of-memory message's numbers ("asked 2.00 GiB, ...").
_DETAIL = re.compile(
    r"(?:^|, )(?P<key>asked|free|in use|total|memory space|device|rank) (?P<value>[^,]+)"
)


def gpu_oom(ctx: Context, ev: Evidence, signals: Sequence[Signal], pods: Pods) -> Fault:
    """The accelerator's own memory ran out (CUDA, NCCL, XLA / TPU HBM): the numbers the
    first message gives, and every rank and pod that said so."""
    fault = Fault(RootCause.GPU_OUT_OF_MEMORY)
    logs = ev.source_of(EvidenceKind.LOGS)
    ranks: set[str] = set()
    for sig in signals:
        if sig.kind is not SignalKind.GPU_OUT_OF_MEMORY or not pods.signal(sig, ctx):
            continue
        if sig.pod is None and sig.workload is None and not pods.everyone:
            continue  # a line that names no pod of ours
        fault.seen.append(Seen(sig.pod, sig.timestamp, sig.excerpt, logs, sig.container, sig.node))
        details = {m["key"]: m["value"].strip() for m in _DETAIL.finditer(sig.reason or "")}
        if "rank" in details:
            ranks.add(details["rank"])
        for key, value in details.items():
            fault.details.setdefault(key.replace(" ", "_"), value)
    if fault.seen:
        first = min(fault.seen, key=lambda s: (s.at is None, s.at or ctx.end_time))
        fault.details["xla"] = "yes" if _XLA_MEMORY.search(first.text) else ""
        fault.details["ranks"] = ", ".join(sorted(ranks, key=lambda r: (len(r), r)))
        fault.details["container"] = next((s.container for s in fault.seen if s.container), "")
    return fault


# XLA's and the TPU runtime's wording: the advice differs (HBM, rematerialisation).
_XLA_MEMORY = re.compile(r"RESOURCE_EXHAUSTED|\bhbm\b|XlaRuntimeError", re.I)


def oom(
    ctx: Context, ev: Evidence, signals: Sequence[Signal], pods: Pods, ours: Sequence[PodInfo]
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
        if s.labels.get("reason") != OOM_KILLED or not pods(pod_label(s.labels)):
            continue
        began = _began(s, ctx)
        if began is not None:
            name = pod_label(s.labels)
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
            "limit": size_text(limit) if limit else "",
            "peak": size_text(peak) if peak else "",
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
    pods: Pods,
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
        if not the_one(pod_label(s.labels)):
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


def preemption(
    ctx: Context, ev: Evidence, signals: Sequence[Signal], pods: Pods, ours: Sequence[PodInfo]
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
            "victim_priority": int_text(victim.priority if victim else None),
            "preemptor_priority": int_text(who.priority if who else None),
            "node": ", ".join(nodes),
        }
    )
    return fault


def eviction(
    ctx: Context, ev: Evidence, signals: Sequence[Signal], pods: Pods, ours: Sequence[PodInfo]
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
        name = pod_label(s.labels)
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


def image(
    ctx: Context, ev: Evidence, signals: Sequence[Signal], pods: Pods, ours: Sequence[PodInfo]
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
        name = pod_label(s.labels)
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
        if condition not in PRESSURE_RESOURCE or s.labels.get("status") != "True":
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
    out += [r for key, r in PRESSURE_RESOURCE.items() if key in text]
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
