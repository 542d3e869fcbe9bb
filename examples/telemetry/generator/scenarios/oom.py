"""Out-of-memory scenarios: the kernel OOM-kills a JobSet worker, a TFJob parameter server."""

from __future__ import annotations

import math

from ..builders.cluster import (
    FIRST_MINUTE,
    LAST_MINUTE,
    Context,
    JobSetSpec,
    KfPod,
    KubeflowSpec,
    Pod,
)
from ..builders.deterministic import glog_prefix, rand_float, rand_int
from ..builders.metrics import _oom_usage, add_memory, add_reason, since
from ..builders.pods import failed_status
from ..builders.scenario import Scenario
from ..builders.templates import GPU_TAINT, GPU_TOLERATION, expect, gpu_capacity, gpu_labels
from ..builders.workload import audit_gc_delete, audit_oom_patch, jobset_event, kernel_oom


def scenario_jobset_oom() -> Scenario:
    ctx = Context(
        project="helios-ml-prod",
        location="us-central1",
        zone="us-central1-b",
        cluster="a3-train-usc1",
        namespace="llm",
        workload="mistral-7b-sft",
        issue_time="2026-08-12T10:30:00Z",
    )
    sc = Scenario(
        "jobset-oom-killed",
        "A3 High GPU JobSet (1 x 4 pods, container trainer, memory limit 160Gi). The "
        "packed-sequence data loader of worker 2 leaks host memory: its working set climbs "
        "to the limit and the kernel OOM-kills the container at T-21.6m, T-2.6m and T+17.4m "
        "(oom-kill line naming the pod's memory cgroup, node-problem-detector OOMKilling, "
        "the kubelet's status patch OOMKilled in the audit log). Each time the Job fails and "
        "the JobSet restarts (Restarting event, kube_jobset_restarts 3 -> 6); the garbage "
        "collector deletes the old pods, the OOM-killed one with its OOMKilled status. "
        "Nodes stay Ready, no interruption; the other workers are terminated by the restart "
        "(exit code 143), not OOM-killed.",
        ctx,
        expect("out_of_memory", "fix_memory"),
    )
    nodes = sc.add_pool(
        "a3-pool",
        "a3-highgpu-8g",
        4,
        labels=gpu_labels("nvidia-h100-80gb"),
        capacity=gpu_capacity(208, 1919216020),
        taints=GPU_TAINT,
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="trainer",
        image="us-central1-docker.pkg.dev/helios-ml-prod/llm/sft-trainer:2026.08.05",
        resources={"cpu": "96", "memory": "160Gi", "nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        tolerations=GPU_TOLERATION,
    )
    fails = [-21.6, -2.6, 17.4]
    restarts = [math.ceil(f) + 1 for f in fails]
    sc.add_jobset(spec, 3, restarts)
    starts = [-400, *restarts]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        failed = {2: math.ceil(fails[k])} if end is not None else None
        sc.attempt(spec, 3 + k, start, end, nodes, failed_at=failed)
    for k, m0 in enumerate(fails):
        pod = sc.pod(spec, 3 + k, 2)
        kernel_oom(sc, pod, m0)
        audit_oom_patch(sc, pod, m0 + 0.03, started_m=starts[k] + 0.7)
        jobset_event(
            sc, spec, restarts[k] - 0.55, "Restarting", f"restarting jobset, attempt {4 + k}"
        )
        status = failed_status(sc, pod, m0, starts[k] + 0.7, reason="OOMKilled", code=137)
        audit_gc_delete(sc, pod, restarts[k] - 0.5, status)
        add_reason(
            sc,
            "kube_pod_container_status_terminated_reason",
            pod,
            "OOMKilled",
            since(math.ceil(m0)),
            container="trainer",
        )
    usage = _oom_usage([math.ceil(f) - 1 for f in fails])
    for pod in sc.pods:
        if (pod.end_m or LAST_MINUTE) >= FIRST_MINUTE and (
            pod.end_m is None or pod.end_m > FIRST_MINUTE
        ):
            if isinstance(pod, Pod) and pod.p == 2:
                add_memory(sc, pod, usage)
            else:
                add_memory(sc, pod, lambda m, p=pod: 0.55 + rand_float(-0.03, 0.03, "m", p.name, m))
    sc.training_noise(spec, "hf")
    sc.kubelet_noise()
    return sc


def scenario_tfjob_oom() -> Scenario:
    ctx = Context(
        project="corvid-recsys",
        location="europe-west1",
        zone="europe-west1-c",
        cluster="recsys-gpu-euw1",
        namespace="ranking",
        workload="dlrm-ps",
        issue_time="2026-09-03T18:20:00Z",
        workload_kind="tfjob",
    )
    sc = Scenario(
        "tfjob-oom-killed",
        "Kubeflow TFJob (ParameterServerStrategy: Chief, 2 PS on CPU nodes, 4 GPU Workers, "
        "restartPolicy ExitCode). Parameter server PS 1 holds the growing embedding tables: "
        "its working set climbs to its 96Gi limit and the kernel OOM-kills it at T-17.4m "
        "and T+6.6m (oom-kill line naming the pod's memory cgroup, OOMKilling event, "
        "kube_pod_container_status_terminated_reason OOMKilled: the pod runs with "
        "restartPolicy Never, so there is no last-terminated state). The operator sees exit "
        "code 137 (ExitedWithCode; 137 alone would prove nothing), re-creates dlrm-ps-ps-1 "
        "and records TFJobRestarting (counter 0 -> 2).",
        ctx,
        expect("out_of_memory", "fix_memory"),
    )
    cpus = sc.add_pool(
        "cpu-pool", "n2-highmem-32", 3, capacity={"cpu": "32", "memory": "263965424Ki"}
    )
    gpus = sc.add_pool(
        "l4-pool",
        "g2-standard-48",
        4,
        labels=gpu_labels("nvidia-l4", 4),
        capacity=gpu_capacity(48, 197972452, 4),
        taints=GPU_TAINT,
    )
    cpu_select = {"cloud.google.com/gke-nodepool": "cpu-pool"}
    gpu_select = {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    spec = KubeflowSpec(
        name=ctx.workload,
        api_kind="TFJob",
        replicas={"Chief": 1, "PS": 2, "Worker": 4},
        image="europe-west1-docker.pkg.dev/corvid-recsys/ranking/dlrm-tf:2.17.1",
        resources={
            "Chief": {"cpu": "8", "memory": "32Gi"},
            "PS": {"cpu": "24", "memory": "96Gi"},
            "Worker": {"cpu": "40", "memory": "160Gi", "nvidia.com/gpu": "4"},
        },
        node_selector={"Chief": cpu_select, "PS": cpu_select, "Worker": gpu_select},
        tolerations={"Worker": GPU_TOLERATION},
        command=["python3", "-m", "dlrm.train", "--strategy=parameter_server"],
    )
    placement = {("Chief", 0): cpus[0], ("PS", 0): cpus[1], ("PS", 1): cpus[2]}
    placement.update({("Worker", i): gpus[i] for i in range(4)})
    ps1 = ("PS", 1)
    fails = [-17.4, 6.6]
    restarts = [math.ceil(f) + 1 for f in fails]
    for rtype, count in spec.replicas.items():
        for i in range(count):
            if (rtype, i) != ps1:
                sc.kf_pods(spec, ctx.namespace, 0, -500, None, placement, only=[(rtype, i)])
    starts = [-500, *restarts]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        (pod,) = sc.kf_pods(
            spec,
            ctx.namespace,
            k,
            start,
            end,
            placement,
            only=[ps1],
            failed_at={ps1: end - 1} if end is not None else None,
            created_m=start - 0.58 if k else None,
        )
        if end is not None:
            kernel_oom(sc, pod, fails[k], qos="guaranteed")
            add_reason(
                sc,
                "kube_pod_container_status_terminated_reason",
                pod,
                "OOMKilled",
                lambda m, f=end - 1: m >= f,
                container="tensorflow",
            )
            sc.kf_restart([pod], end, 137)
    sc.operator_counter(ctx.namespace, "tensorflow", None, restarts)
    usage = _oom_usage([r - 2 for r in restarts], ramp=12)
    for pod in sc.pods:
        if isinstance(pod, KfPod) and (pod.rtype, pod.index) == ps1:
            add_memory(sc, pod, usage)
        elif isinstance(pod, KfPod):
            add_memory(sc, pod, lambda m, p=pod: 0.48 + rand_float(-0.04, 0.04, "m", p.name, m))
    chief = sc.kf_pod(spec, "Chief", 0, 0)
    tid = rand_int(130_000, 140_000, "tid", chief.name)
    for m in range(FIRST_MINUTE + 1, LAST_MINUTE + 1, 3):
        at = ctx.at(m + 0.4, "tf-step", m)
        step = 812_000 + (m - FIRST_MINUTE) * 140
        sc.container_log(
            chief,
            m + 0.4,
            f"{glog_prefix('I', at, tid, 'controller.py:495')} train | step: {step:>7d} | "
            f"training metrics: {{'loss': {0.44 + rand_float(-0.01, 0.01, 'l', m):.4f}, "
            f"'auc': {rand_float(0.801, 0.806, 'auc', m):.4f}}}",
            stderr=True,
            at_ns=at,
        )
    for m0 in fails:
        at = ctx.at(m0 + 0.2, "tf-ps-lost", m0)
        sc.container_log(
            chief,
            m0 + 0.2,
            f"{glog_prefix('W', at, tid, 'cluster_coordinator.py:793')} PS "
            "/job:ps/replica:0/task:1 failed with UnavailableError: Socket closed; "
            "the coordinator waits for it to come back.",
            stderr=True,
            at_ns=at,
        )
    sc.kubelet_noise()
    return sc
