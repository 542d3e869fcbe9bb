"""Golden fixtures of Kubernetes signals: scheduling, controllers, and the workload's pods
stopped by Kubernetes itself (OOM kills, preemption, eviction, image pulls)."""

from __future__ import annotations

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


def kubernetes_signals(f: Fixtures) -> None:
    ctx, sc, node, tpu, tspec, tpods = f.ctx, f.sc, f.node, f.tpu, f.tspec, f.tpods
    gctx, gs, gnodes, gspec, gpods, add = f.gctx, f.gs, f.gnodes, f.gspec, f.gpods, f.add
    node_exp = f.node_exp
    pending = sc.attempt(tspec, 4, 0, None, tpu, running_from={0: None}, unsched={0: (0, 30)})[0]
    add(
        "unschedulable_tpu",
        sc.event_pod(
            pending,
            0.2,
            "FailedScheduling",
            "0/8 nodes are available: 8 Insufficient google.com/tpu. preemption: 0/8 nodes are "
            "available: 8 No preemption victims found for incoming pod.",
            component="default-scheduler",
            etype="Warning",
        ),
        kind="unschedulable",
        pod=pending.name,
        cluster=ctx.cluster,
    )
    gpending = gs.attempt(gspec, 3, 0, None, gnodes, running_from={1: None}, unsched={1: (0, 30)})[
        1
    ]
    add(
        "unschedulable_gpu",
        gs.event_pod(
            gpending,
            0.3,
            "FailedScheduling",
            "0/5 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 4 "
            "Insufficient nvidia.com/gpu. preemption: 0/5 nodes are available: 1 Preemption is "
            "not helpful for scheduling, 4 No preemption victims found for incoming pod.",
            component="default-scheduler",
            etype="Warning",
            count=3,
            first_m=-4.0,
        ),
        kind="unschedulable",
        pod=gpending.name,
        cluster=gctx.cluster,
    )
    for kind, job, msg_kind in (
        ("PyTorchJob", "bert-large-ddp", "Worker"),
        ("TFJob", "resnet50-ps", "Worker"),
    ):
        at = gctx.at(-0.2, kind)
        involved = {
            "apiVersion": "kubeflow.org/v1",
            "kind": kind,
            "name": job,
            "namespace": "kubeflow-jobs",
            "uid": rand_uuid(kind, job),
            "resourceVersion": "81723311",
        }
        message = f"{kind} kubeflow-jobs/{job} is restarting because 1 {msg_kind} "
        message += "replica(s) failed."

        add(
            f"job_restarting_{kind.lower()}",
            gs.object_event(
                -0.2,
                at,
                involved,
                f"{kind}Restarting",
                message,
                component=f"{kind.lower()}-controller",
                etype="Warning",
            ),
            kind="job_restarting",
            workload=job,
            cluster=gctx.cluster,
        )

    # --- the workload's pods stopped by Kubernetes itself
    victim = tpods[1]
    oom = kernel_oom(sc, victim, -0.21)
    uid_exp = {"node": node_of(victim), "cluster": ctx.cluster}
    add(
        "unrecognized_oom_killer_invoked",
        oom[0],
        kind="unrecognized",
        **uid_exp,
    )
    add(
        "oom_killed_kernel_memcg",
        oom[2],
        kind="oom_killed",
        pod_uid=victim.uid,
        reason="oom-kill",
        **uid_exp,
    )
    add("oom_killed_kernel_killed_process", oom[3], kind="oom_killed", pod_uid=None, **uid_exp)
    add(
        "oom_killed_npd_event",
        oom[4],
        kind="oom_killed",
        reason="OOMKilling",
        **uid_exp,
    )
    add(
        "oom_killed_audit_kubelet_patch",
        audit_oom_patch(sc, victim, -0.2, started_m=-30),
        kind="oom_killed",
        pod=victim.name,
        namespace=victim.namespace,
        container=victim.spec.container,
        pod_uid=victim.uid,
        workload=None,
        reason="OOMKilled",
        cluster=ctx.cluster,
    )
    add(
        "oom_killed_audit_gc_delete",
        audit_gc_delete(
            sc,
            victim,
            0.4,
            failed_status(sc, victim, -0.2, -30, reason="OOMKilled", code=137),
        ),
        kind="oom_killed",
        pod=victim.name,
        namespace=victim.namespace,
        container=victim.spec.container,
        pod_uid=victim.uid,
        workload=ctx.workload,
        workload_kind="jobset",
        coordinator=victim.coordinator,
        cluster=ctx.cluster,
    )
    add(
        "unrecognized_audit_kubelet_patch_exit_137",
        audit_entry_k8s(
            sc,
            -0.19,
            method="io.k8s.core.v1.pods.status.patch",
            resource=f"core/v1/namespaces/{tpods[2].namespace}/pods/{tpods[2].name}/status",
            principal=f"system:node:{node_of(tpods[2])}",
            agent=KUBELET_AGENT,
            caller_ip=tpods[2].node.ip if tpods[2].node else "",
            request={
                "@type": "k8s.io/Patch",
                "metadata": {"uid": tpods[2].uid},
                "status": {
                    "containerStatuses": [
                        terminated_status(
                            sc, tpods[2], -0.2, reason="Error", code=137, started_m=-30
                        )
                    ],
                    "phase": "Failed",
                },
            },
        ),
        kind="unrecognized",
        pod=tpods[2].name,
        cluster=ctx.cluster,
    )
    serving = PlainPod("ranker-7c9d6f5b8-xq2lp", "serving", victim.node, -2, None, "10.70.3.9")
    add(
        "priority_preempted_scheduler",
        preempted(sc, victim, -0.18, serving),
        kind="priority_preempted",
        pod=victim.name,
        namespace=victim.namespace,
        pod_uid=victim.uid,
        node=node_of(victim),
        related_pod=f"serving/{serving.name}",
        related_uid=serving.uid,
        cluster=ctx.cluster,
    )
    add(
        "evicted_memory_kubelet",
        evicted(sc, tpods[2], -0.17, "memory", 61_848_460, "32Gi", "90712Ki"),
        kind="evicted",
        pod=tpods[2].name,
        pod_uid=tpods[2].uid,
        node=node_of(tpods[2]),
        cluster=ctx.cluster,
    )
    for name, reason, message, etype in (
        (
            "eviction_threshold_met",
            "EvictionThresholdMet",
            "Attempting to reclaim memory",
            "Warning",
        ),
        (
            "insufficient_memory",
            "NodeHasInsufficientMemory",
            f"Node {node.name} status is now: NodeHasInsufficientMemory",
            "Normal",
        ),
        (
            "disk_pressure",
            "NodeHasDiskPressure",
            f"Node {node.name} status is now: NodeHasDiskPressure",
            "Normal",
        ),
    ):
        add(
            f"node_pressure_{name}",
            sc.event_node(node, -0.16, reason, message, component="kubelet", etype=etype),
            kind="node_pressure",
            reason=reason,
            **node_exp,
        )
    image = "us-docker.pkg.dev/customer-ai-project-123/maxtext/runner:2026-05-40"
    missing = (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
        f'failed to resolve reference "{image}": {image}: not found'
    )
    add(
        "image_pull_failed_not_found",
        sc.event_pod(
            tpods[3],
            -0.15,
            "Failed",
            f'Failed to pull image "{image}": {missing}',
            component="kubelet",
            etype="Warning",
        ),
        kind="image_pull_failed",
        pod=tpods[3].name,
        node=node_of(tpods[3]),
        reason="NotFound",
        cluster=ctx.cluster,
    )
    private = "europe-west4-docker.pkg.dev/fjord-speech/private/conformer-worker:3.1.0"
    forbidden = (
        f'rpc error: code = Unknown desc = failed to pull and unpack image "{private}": failed '
        f'to resolve reference "{private}": failed to authorize: failed to fetch oauth token: '
        "unexpected status from GET request to https://europe-west4-docker.pkg.dev/v2/token?"
        "scope=repository%3Afjord-speech%2Fprivate%2Fconformer-worker%3Apull&service="
        "europe-west4-docker.pkg.dev: 403 Forbidden"
    )
    add(
        "image_pull_failed_forbidden",
        gs.event_pod(
            gpods[1],
            -0.14,
            "Failed",
            f'Failed to pull image "{private}": {forbidden}',
            component="kubelet",
            etype="Warning",
        ),
        kind="image_pull_failed",
        pod=gpods[1].name,
        reason="403 Forbidden",
        cluster=gctx.cluster,
    )
    add(
        "image_pull_failed_back_off",
        sc.event_pod(
            tpods[3],
            -0.13,
            "BackOff",
            f'Back-off pulling image "{image}"',
            component="kubelet",
            count=4,
            first_m=-2.0,
        ),
        kind="image_pull_failed",
        pod=tpods[3].name,
        reason="BackOff",
        cluster=ctx.cluster,
    )
    add(
        "unrecognized_back_off_restarting_container",
        sc.event_pod(
            tpods[3],
            -0.12,
            "BackOff",
            f"Back-off restarting failed container maxtext in pod {tpods[3].name}_default"
            f"({tpods[3].uid})",
            component="kubelet",
            etype="Warning",
            count=3,
        ),
        kind="unrecognized",
        pod=tpods[3].name,
        cluster=ctx.cluster,
    )
    tf_job = KubeflowSpec(
        name="wide-deep-ctr",
        api_kind="TFJob",
        replicas={"Worker": 2},
        image="x",
        resources={"Worker": {"cpu": "8", "memory": "48Gi"}},
        node_selector={},
        tolerations={},
    )
    add(
        "unrecognized_exited_with_code_137",
        sc.event_job(
            tf_job,
            "ml-jobs",
            -0.11,
            "ExitedWithCode",
            "Pod: ml-jobs.wide-deep-ctr-worker-1 exited with code 137",
        ),
        kind="unrecognized",
        workload="wide-deep-ctr",
        cluster=ctx.cluster,
    )
