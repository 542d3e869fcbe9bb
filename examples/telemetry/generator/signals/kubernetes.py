"""Golden fixtures of Kubernetes signals: scheduling, operator restarts, stopped pods, pulls.

The workload's pods stopped by Kubernetes itself (OOM kills, preemption, eviction, image
pulls), with the pod Events that must stay unrecognized.
"""

from __future__ import annotations

from typing import Any

from ..builders.cluster import KubeflowSpec, PlainPod
from ..builders.deterministic import rand_uuid
from ..builders.pods import failed_status, terminated_status
from ..builders.workload import (
    KUBELET_AGENT,
    audit_entry_k8s,
    audit_gc_delete,
    audit_oom_patch,
    evicted,
    kernel_oom,
    preempted,
)
from .fixtures import Fixtures, node_of


def scheduling_signals(f: Fixtures) -> None:
    ctx, gctx, tpods = f.sc.ctx, f.gs.ctx, f.tpods
    waits = {0: (0, 30)}
    pending = f.sc.attempt(tpods[0].spec, 4, 0, None, f.tpu, running_from={0: None}, unsched=waits)
    message = (
        "0/8 nodes are available: 8 Insufficient google.com/tpu. preemption: 0/8 nodes are "
        "available: 8 No preemption victims found for incoming pod."
    )
    entry = f.sc.failed_scheduling(pending[0], 0.2, message)
    exp = {"pod": pending[0].name, "cluster": ctx.cluster}
    f.add("unschedulable_tpu", entry, kind="unschedulable", **exp)
    gspec, waits = f.gpods[0].spec, {1: (0, 30)}
    gpending = f.gs.attempt(gspec, 3, 0, None, f.gnodes, running_from={1: None}, unsched=waits)[1]
    message = (
        "0/5 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 4 "
        "Insufficient nvidia.com/gpu. preemption: 0/5 nodes are available: 1 Preemption is "
        "not helpful for scheduling, 4 No preemption victims found for incoming pod."
    )
    entry = f.gs.failed_scheduling(gpending, 0.3, message, count=3, first_m=-4.0)
    exp = {"pod": gpending.name, "cluster": gctx.cluster}
    f.add("unschedulable_gpu", entry, kind="unschedulable", **exp)
    for kind, job in (("PyTorchJob", "bert-large-ddp"), ("TFJob", "resnet50-ps")):
        involved = {
            "apiVersion": "kubeflow.org/v1",
            "kind": kind,
            "name": job,
            "namespace": "kubeflow-jobs",
            "uid": rand_uuid(kind, job),
            "resourceVersion": "81723311",
        }
        message = f"{kind} kubeflow-jobs/{job} is restarting because 1 Worker replica(s) failed."
        entry = f.gs.object_event(
            -0.2,
            gctx.at(-0.2, kind),
            involved,
            f"{kind}Restarting",
            message,
            component=f"{kind.lower()}-controller",
            etype="Warning",
        )
        name = f"job_restarting_{kind.lower()}"
        f.add(name, entry, kind="job_restarting", workload=job, cluster=gctx.cluster)
    tf_job = KubeflowSpec(
        "wide-deep-ctr",
        "TFJob",
        {"Worker": 2},
        "x",
        {"Worker": {"cpu": "8", "memory": "48Gi"}},
        {},
        {},
    )
    message = "Pod: ml-jobs.wide-deep-ctr-worker-1 exited with code 137"
    entry = f.sc.event_job(tf_job, "ml-jobs", -0.11, "ExitedWithCode", message)
    exp = {"workload": "wide-deep-ctr", "cluster": ctx.cluster}
    f.add("unrecognized_exited_with_code_137", entry, kind="unrecognized", **exp)
    entry = f.sc.scheduled(tpods[1], -30.0)
    exp = {"pod": tpods[1].name, "cluster": ctx.cluster}
    f.add("unrecognized_scheduled_event", entry, kind="unrecognized", **exp)


def stopped_pod_signals(f: Fixtures) -> None:
    sc, ctx, tpods = f.sc, f.sc.ctx, f.tpods
    victim, hit = tpods[1], tpods[2]
    oom = kernel_oom(sc, victim, -0.21)
    uid_exp = {"node": node_of(victim), "cluster": ctx.cluster}
    f.add("unrecognized_oom_killer_invoked", oom[0], kind="unrecognized", **uid_exp)
    exp: dict[str, Any] = {"pod_uid": victim.uid, "reason": "oom-kill", **uid_exp}
    f.add("oom_killed_kernel_memcg", oom[2], kind="oom_killed", **exp)
    # 'Killed process' restates the oom-kill: line's kill: it is not counted again.
    restates = "unrecognized_kernel_killed_process_restates_the_kill"
    f.add(restates, oom[3], kind="unrecognized", **uid_exp)
    f.add("oom_killed_npd_event", oom[4], kind="oom_killed", reason="OOMKilling", **uid_exp)
    # What the audited pod's signals name: the pod, its namespace, container and uid.
    audited = {"pod": victim.name, "namespace": victim.namespace}
    audited |= {"container": victim.spec.container, "pod_uid": victim.uid, "cluster": ctx.cluster}
    entry = audit_oom_patch(sc, victim, -0.2, started_m=-30)
    patch = {"workload": None, "reason": "OOMKilled"}
    f.add("oom_killed_audit_kubelet_patch", entry, kind="oom_killed", **audited, **patch)
    status = failed_status(sc, victim, -0.2, -30, reason="OOMKilled", code=137)
    entry = audit_gc_delete(sc, victim, 0.4, status)
    owner = {"workload": ctx.workload, "workload_kind": "jobset"}
    owner["coordinator"] = victim.coordinator
    f.add("oom_killed_audit_gc_delete", entry, kind="oom_killed", **audited, **owner)
    exited = terminated_status(sc, hit, -0.2, reason="Error", code=137, started_m=-30)
    entry = audit_entry_k8s(
        sc,
        -0.19,
        method="io.k8s.core.v1.pods.status.patch",
        resource=f"core/v1/namespaces/{hit.namespace}/pods/{hit.name}/status",
        principal=f"system:node:{node_of(hit)}",
        agent=KUBELET_AGENT,
        caller_ip=hit.node.ip if hit.node else "",
        request={
            "@type": "k8s.io/Patch",
            "metadata": {"uid": hit.uid},
            "status": {"containerStatuses": [exited], "phase": "Failed"},
        },
    )
    exp = {"pod": hit.name, "cluster": ctx.cluster}
    f.add("unrecognized_audit_kubelet_patch_exit_137", entry, kind="unrecognized", **exp)
    serving = PlainPod("ranker-7c9d6f5b8-xq2lp", "serving", victim.node, -2, None, "10.70.3.9")
    related = {"related_pod": f"serving/{serving.name}", "related_uid": serving.uid}
    exp = {"pod": victim.name, "namespace": victim.namespace, "pod_uid": victim.uid}
    exp |= {"node": node_of(victim), **related, "cluster": ctx.cluster}
    entry = preempted(sc, victim, -0.18, serving)
    f.add("priority_preempted_scheduler", entry, kind="priority_preempted", **exp)
    entry = evicted(sc, hit, -0.17, "memory", 61_848_460, "32Gi", "90712Ki")
    exp = {"pod": hit.name, "pod_uid": hit.uid, "node": node_of(hit), "cluster": ctx.cluster}
    f.add("evicted_memory_kubelet", entry, kind="evicted", **exp)


def image_pull_signals(f: Fixtures) -> None:
    sc, ctx, puller = f.sc, f.sc.ctx, f.tpods[3]
    image = "us-docker.pkg.dev/customer-ai-project-123/maxtext/runner:2026-05-40"
    missing = (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
        f'failed to resolve reference "{image}": {image}: not found'
    )
    failed = f'Failed to pull image "{image}": {missing}'
    entry = sc.event_pod(puller, -0.15, "Failed", failed, component="kubelet", etype="Warning")
    exp = {"pod": puller.name, "node": node_of(puller), "reason": "NotFound"}
    f.add(
        "image_pull_failed_not_found", entry, kind="image_pull_failed", **exp, cluster=ctx.cluster
    )
    private = "europe-west4-docker.pkg.dev/fjord-speech/private/conformer-worker:3.1.0"
    forbidden = (
        f'rpc error: code = Unknown desc = failed to pull and unpack image "{private}": failed '
        f'to resolve reference "{private}": failed to authorize: failed to fetch oauth token: '
        "unexpected status from GET request to https://europe-west4-docker.pkg.dev/v2/token?"
        "scope=repository%3Afjord-speech%2Fprivate%2Fconformer-worker%3Apull&service="
        "europe-west4-docker.pkg.dev: 403 Forbidden"
    )
    g1 = f.gpods[1]
    failed = f'Failed to pull image "{private}": {forbidden}'
    entry = f.gs.event_pod(g1, -0.14, "Failed", failed, component="kubelet", etype="Warning")
    exp = {"pod": g1.name, "reason": "403 Forbidden", "cluster": f.gs.ctx.cluster}
    f.add("image_pull_failed_forbidden", entry, kind="image_pull_failed", **exp)
    back_off = f'Back-off pulling image "{image}"'
    entry = sc.event_pod(
        puller, -0.13, "BackOff", back_off, component="kubelet", count=4, first_m=-2.0
    )
    exp = {"pod": puller.name, "reason": "BackOff", "cluster": ctx.cluster}
    f.add("image_pull_failed_back_off", entry, kind="image_pull_failed", **exp)
    restarting = (
        f"Back-off restarting failed container maxtext in pod {puller.name}_default({puller.uid})"
    )
    entry = sc.event_pod(
        puller, -0.12, "BackOff", restarting, component="kubelet", etype="Warning", count=3
    )
    exp = {"pod": puller.name, "cluster": ctx.cluster}
    f.add("unrecognized_back_off_restarting_container", entry, kind="unrecognized", **exp)
