"""What Kubernetes records when it stops a pod: OOM kills, preemption, evictions, image pulls.

With the JobSet controller's Events.
"""

from __future__ import annotations

import math
from typing import Any

from .cluster import GKE_VERSION, LAST_MINUTE, AnyPod, JobSetSpec, Node, PlainPod, Pod
from .deterministic import fmt_ts, rand_hex, rand_int
from .entries import AUDIT_ACTIVITY_LOG
from .metrics import add_reason, container_of, memory_limit, since
from .nodes import pressure_until
from .pods import failed_status, pod_item, terminated_status, waiting_on_image
from .scenario import Scenario

KUBELET_AGENT = f"kubelet/{GKE_VERSION} (linux/amd64) kubernetes/5b6a4ea"


GC_PRINCIPAL = "system:serviceaccount:kube-system:generic-garbage-collector"


def pod_ref(pod: AnyPod | PlainPod) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": pod.name,
        "namespace": pod.namespace,
        "resourceVersion": str(rand_int(10**7, 10**8, "ref", pod.uid)),
        "uid": pod.uid,
    }


def jobset_event(
    sc: Scenario, spec: JobSetSpec, m: float, reason: str, message: str, etype: str = "Warning"
) -> dict[str, Any]:
    """An Event the JobSet controller records on the JobSet (``Restarting``...)."""
    ctx = sc.ctx
    at = ctx.at(m, "jsev", spec.name, reason, message)
    involved = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "name": spec.name,
        "namespace": ctx.namespace,
        "resourceVersion": str(rand_int(10**7, 10**8, "jsrv", spec.name, at)),
        "uid": sc.jobset_uid(spec.name),
    }
    return sc.object_event(m, at, involved, reason, message, component="jobset", etype=etype)


def oom_killed(
    sc: Scenario, pod: AnyPod, m0: float, started_m: float, *, deleted_m: float | None = None
) -> None:
    """The kernel OOM-kills the container of a JobSet pod at T+m0: its lines, the kubelet's
    OOMKilled status patch, the terminated reason from then on, and (``deleted_m``) the
    garbage collector deleting the pod with that status."""
    kernel_oom(sc, pod, m0)
    audit_oom_patch(sc, pod, m0 + 0.03, started_m=started_m)
    if deleted_m is not None:
        status = failed_status(sc, pod, m0, started_m, reason="OOMKilled", code=137)
        audit_gc_delete(sc, pod, deleted_m, status)
    reason = "kube_pod_container_status_terminated_reason"
    add_reason(sc, reason, pod, "OOMKilled", since(math.ceil(m0)), container=container_of(pod))


def jobset_restarting(sc: Scenario, spec: JobSetSpec, restart_m: float, attempt: int) -> None:
    """The JobSet controller's Restarting Warning just before the restart at T+restart_m."""
    jobset_event(sc, spec, restart_m - 0.55, "Restarting", f"restarting jobset, attempt {attempt}")


def kernel_oom(
    sc: Scenario, pod: AnyPod, m: float, *, qos: str = "burstable", task: str = "python3"
) -> list[dict[str, Any]]:
    """What the kernel logs when a container's memory cgroup hits its limit: the
    ``oom-kill:`` line names the pod's cgroup (hence its uid)."""
    node = pod.node
    assert node is not None
    limit_kb = memory_limit(pod) // 1024
    cid = rand_hex(64, "cid", pod.uid, m)
    pid = rand_int(2000, 60000, "oompid", pod.uid, m)
    qos_path = "" if qos == "guaranteed" else f"/{qos}"
    memcg = f"/kubepods{qos_path}/pod{pod.uid}/{cid}"
    anon = limit_kb - rand_int(4000, 90000, "anon", pod.uid, m)
    lines = [
        f"{task} invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=-997",
        f"memory: usage {limit_kb}kB, limit {limit_kb}kB, failcnt {rand_int(20, 4000, 'fc', m)}",
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),"
        f"cpuset={cid},mems_allowed=0-1,oom_memcg={memcg},task_memcg={memcg},"
        f"task={task},pid={pid},uid=0",
        f"Memory cgroup out of memory: Killed process {pid} ({task}) "
        f"total-vm:{anon + rand_int(10**6, 4 * 10**6, 'vm', m)}kB, anon-rss:{anon}kB, "
        f"file-rss:{rand_int(20000, 90000, 'frss', m)}kB, shmem-rss:0kB, UID:0 "
        f"pgtables:{rand_int(90000, 300000, 'pgt', m)}kB oom_score_adj:-997",
    ]
    out = [
        sc.kernel_line(node, m + 0.0002 * i, line, key=("oom", pod.uid, i))
        for i, line in enumerate(lines)
    ]
    # node-problem-detector's kernel monitor turns the kill into a Node Event.
    entry = sc.event_node(node, m + 0.02, "OOMKilling", lines[-1], etype="Warning")
    entry["jsonPayload"]["source"] = {"component": "kernel-monitor", "host": node.name}
    entry["jsonPayload"]["reportingComponent"] = "kernel-monitor"
    entry["jsonPayload"]["reportingInstance"] = node.name
    return [*out, entry]


def audit_entry_k8s(
    sc: Scenario,
    m: float,
    *,
    method: str,
    resource: str,
    principal: str,
    agent: str,
    caller_ip: str,
    request: dict[str, Any] | None = None,
    response: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Kubernetes audit entry as GKE writes it to the Admin Activity log."""
    ctx = sc.ctx
    proto: dict[str, Any] = {
        "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
        "authenticationInfo": {"principalEmail": principal},
        "authorizationInfo": [{"granted": True, "permission": method, "resource": resource}],
        "methodName": method,
        "requestMetadata": {"callerIp": caller_ip, "callerSuppliedUserAgent": agent},
        "resourceName": resource,
        "serviceName": "k8s.io",
        "status": {"code": 0},
    }
    if request is not None:
        proto["request"] = request
    if response is not None:
        proto["response"] = response
    at = ctx.at(m, "audit-k8s", method, resource)
    labels = {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""}
    cluster = sc.resource()
    return sc.log(
        AUDIT_ACTIVITY_LOG,
        "k8s_cluster",
        cluster,
        at,
        "NOTICE",
        proto_payload=proto,
        labels=labels,
        digits=6,
    )


def audit_oom_patch(sc: Scenario, pod: AnyPod, m: float, started_m: float) -> dict[str, Any]:
    """The kubelet's status patch that reports the container ``OOMKilled``."""
    node = pod.node
    assert node is not None
    status = terminated_status(sc, pod, m - 0.01, reason="OOMKilled", code=137, started_m=started_m)
    return audit_entry_k8s(
        sc,
        m,
        method="io.k8s.core.v1.pods.status.patch",
        resource=f"core/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
        principal=f"system:node:{node.name}",
        agent=KUBELET_AGENT,
        caller_ip=node.ip,
        request={
            "@type": "k8s.io/Patch",
            "metadata": {"uid": pod.uid},
            "status": {
                "$setElementOrder/conditions": [
                    {"type": t}
                    for t in (
                        "PodReadyToStartContainers",
                        "Initialized",
                        "Ready",
                        "ContainersReady",
                        "PodScheduled",
                    )
                ],
                "containerStatuses": [status],
                "phase": "Failed",
            },
        },
    )


def audit_gc_delete(sc: Scenario, pod: Pod, m: float, status: dict[str, Any]) -> dict[str, Any]:
    """The garbage collector deleting a pod of a restarted JobSet; the response is the pod,
    with its labels and its last status."""
    item = pod_item(sc, pod)
    item["status"] = status
    item["metadata"]["deletionTimestamp"] = fmt_ts(sc.ctx.at(m, "del", pod.uid), 0)
    item["metadata"]["deletionGracePeriodSeconds"] = 0
    return audit_entry_k8s(
        sc,
        m,
        method="io.k8s.core.v1.pods.delete",
        resource=f"core/v1/namespaces/{pod.namespace}/pods/{pod.name}",
        principal=GC_PRINCIPAL,
        agent=f"kube-controller-manager/{GKE_VERSION} (linux/amd64) kubernetes/5b6a4ea/"
        "system:serviceaccount:kube-system:generic-garbage-collector",
        caller_ip="::1",
        request={
            "@type": "core.k8s.io/v1.DeleteOptions",
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": pod.uid},
            "propagationPolicy": "Background",
        },
        response={"@type": "core.k8s.io/v1.Pod", **item},
    )


def preempted(sc: Scenario, victim: AnyPod, m: float, preemptor: PlainPod) -> dict[str, Any]:
    """The scheduler preempts ``victim`` for ``preemptor`` (Event, DisruptionTarget)."""
    node = victim.node
    assert node is not None
    entry = sc.event_pod(
        victim,
        m,
        "Preempted",
        f"Preempted by pod {preemptor.uid} on node {node.name}",
        component="default-scheduler",
        related=pod_ref(preemptor),
        action="Preempting",
    )
    sc.killing(victim, m + 0.01)
    return entry


def evicted(
    sc: Scenario, pod: AnyPod, m: float, resource: str, using_ki: int, request: str, available: str
) -> dict[str, Any]:
    """The kubelet's eviction manager evicts ``pod`` from its node, low on ``resource``; from
    then on kube-state-metrics gives the pod the status reason Evicted."""
    threshold = "100Mi" if resource == "memory" else "10Gi"
    container = container_of(pod)
    entry = sc.event_pod(
        pod,
        m,
        "Evicted",
        f"The node was low on resource: {resource}. Threshold quantity: {threshold}, "
        f"available: {available}. Container {container} was using {using_ki}Ki, request is "
        f"{request}, has larger consumption of {resource}. ",
        component="kubelet",
        etype="Warning",
        annotations={
            "offending_containers": container,
            "offending_containers_usage": f"{using_ki}Ki",
            "starved_resource": resource,
        },
    )
    sc.killing(pod, m + 0.01)
    add_reason(sc, "kube_pod_status_reason", pod, "Evicted", since(math.ceil(m)))
    return entry


def node_pressure_events(
    sc: Scenario, node: Node, m: float, condition: str, until: float, *, relieved: bool = False
) -> None:
    """The kubelet's own Events while ``node`` is under pressure, and its condition; with
    ``relieved``, nodes.json shows the condition back to False since T+until."""
    resource, bad, good = {
        "MemoryPressure": ("memory", "NodeHasInsufficientMemory", "NodeHasSufficientMemory"),
        "DiskPressure": ("ephemeral-storage", "NodeHasDiskPressure", "NodeHasNoDiskPressure"),
    }[condition]
    sc.node_status(node, m, bad, component="kubelet")
    sc.event_node(
        node,
        m + 0.05,
        "EvictionThresholdMet",
        f"Attempting to reclaim {resource}",
        component="kubelet",
        etype="Warning",
    )
    sc.node_status(node, until, good, component="kubelet")
    minutes = sc.node_pressure.setdefault(node.name, {})
    for minute in range(math.ceil(m), math.ceil(until)):
        minutes[minute] = condition
    if relieved:
        sc.node_hooks[node.name] = pressure_until(
            node, condition, sc.ctx.at(until, "relief", node.name)
        )


def image_pull_events(
    sc: Scenario, pod: AnyPod, m: float, until: float, image: str, error: str
) -> None:
    """The kubelet's pull attempts of ``image`` for ``pod`` from T+m: each fails with
    ``error``, then backs off (10s, 20s, 40s ... 5m, as the kubelet does)."""
    backoff = [0.0, 0.2, 0.55, 1.25, 2.6, 5.3]
    while m + backoff[-1] < until:
        backoff.append(backoff[-1] + 5.1)
    for count, delay in enumerate(backoff, start=1):
        at = m + delay
        if at >= until or at > LAST_MINUTE:
            break
        for offset, reason, message, etype in (
            (0.0, "Pulling", f'Pulling image "{image}"', "Normal"),
            (0.02, "Failed", f'Failed to pull image "{image}": {error}', "Warning"),
            (0.021, "Failed", "Error: ErrImagePull", "Warning"),
            (0.05, "BackOff", f'Back-off pulling image "{image}"', "Normal"),
            (0.051, "Failed", "Error: ImagePullBackOff", "Warning"),
        ):
            sc.event_pod(
                pod,
                at + offset,
                reason,
                message,
                component="kubelet",
                etype=etype,
                count=count,
                first_m=m + offset,
            )


def image_pull_fails(
    sc: Scenario, pod: AnyPod, m: float, events_m: float, until: int | None, image: str, error: str
) -> None:
    """``pod`` waits on an image it cannot pull, from T+m (its kubelet's Events from
    T+events_m) until T+until, or through the snapshot (None), which then shows it waiting."""
    end = LAST_MINUTE + 1 if until is None else until
    image_pull_events(sc, pod, events_m, end, image, error)
    image_waiting_series(sc, pod, m, end)
    if until is None:
        back_off = f'Back-off pulling image "{image}"'
        sc.pod_hooks[pod.uid] = waiting_on_image(sc, pod, "ImagePullBackOff", back_off)


def image_waiting_series(sc: Scenario, pod: AnyPod, m: float, until: float) -> None:
    first, last = math.ceil(m), math.ceil(until)
    pulling = lambda x: x == first  # noqa: E731
    backing = lambda x: first < x < last  # noqa: E731
    add_reason(
        sc,
        "kube_pod_container_status_waiting_reason",
        pod,
        "ErrImagePull",
        pulling,
        container=container_of(pod),
    )
    add_reason(
        sc,
        "kube_pod_container_status_waiting_reason",
        pod,
        "ImagePullBackOff",
        backing,
        container=container_of(pod),
    )
