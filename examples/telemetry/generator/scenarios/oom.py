"""Out-of-memory scenarios: the kernel OOM-kills a JobSet worker, a TFJob parameter server."""

from __future__ import annotations

import math

from ..builders.cluster import FIRST_MINUTE, LAST_MINUTE, Context, KfPod, Pod
from ..builders.deterministic import rand_float
from ..builders.gpu import a3_pool
from ..builders.metrics import add_memory, add_reason, oom_usage, since, steady
from ..builders.scenario import Scenario, declare
from ..builders.templates import (
    gpu_jobset,
    kubeflow_job,
)
from ..builders.workload import jobset_restarting, kernel_oom, oom_killed


def jobset_oom(sc: Scenario, ctx: Context) -> None:
    nodes = a3_pool(sc, 4, hosts=False)
    image = "us-central1-docker.pkg.dev/helios-ml-prod/llm/sft-trainer:2026.08.05"
    h100 = "nvidia-h100-80gb"
    spec = gpu_jobset(ctx.workload, "trainer", image, h100, cpu="96", memory="160Gi")
    fails = [-21.6, -2.6, 17.4]
    restarts = [math.ceil(f) + 1 for f in fails]
    sc.add_jobset(spec, 3, restarts)
    starts = [-400, *restarts]
    sc.attempts(spec, 3, starts, nodes, lambda k, end: {2: math.ceil(fails[k])})
    for k, m0 in enumerate(fails):
        pod = sc.pod(spec, 3 + k, 2)
        oom_killed(sc, pod, m0, starts[k] + 0.7, deleted_m=restarts[k] - 0.5)
        jobset_restarting(sc, spec, restarts[k], 4 + k)
    usage = oom_usage([math.ceil(f) - 1 for f in fails])
    for pod in sc.pods:
        if (pod.end_m or LAST_MINUTE) >= FIRST_MINUTE and (
            pod.end_m is None or pod.end_m > FIRST_MINUTE
        ):
            add_memory(
                sc, pod, usage if isinstance(pod, Pod) and pod.p == 2 else steady(pod, 0.55, 0.03)
            )
    sc.training_noise(spec, "hf")


def tfjob_oom(sc: Scenario, ctx: Context) -> None:
    cpus = sc.cpu_pool("cpu-pool", "n2-highmem-32", 3, 32, 263965424)
    gpus = sc.gpu_pool("l4-pool", "g2-standard-48", 4, "nvidia-l4", 48, 197972452, 4)
    spec = kubeflow_job(
        "TFJob",
        ctx.workload,
        "europe-west1-docker.pkg.dev/corvid-recsys/ranking/dlrm-tf:2.17.1",
        {"Chief": (cpus[:1], "8", "32Gi"), "PS": (cpus[1:], "24", "96Gi")}
        | {"Worker": (gpus, "40", "160Gi", 4)},
        command=["python3", "-m", "dlrm.train", "--strategy=parameter_server"],
    )
    ps1 = ("PS", 1)
    fails = [-17.4, 6.6]
    restarts = [math.ceil(f) + 1 for f in fails]
    sc.kf_replicas(spec, ctx.namespace, -500, skip=[ps1])
    killed = sc.kf_incarnations(spec, ctx.namespace, ps1, [-500, *restarts])
    for pod, m0, end in zip(killed, fails, restarts, strict=False):
        kernel_oom(sc, pod, m0, qos="guaranteed")
        reason = "kube_pod_container_status_terminated_reason"
        add_reason(sc, reason, pod, "OOMKilled", since(end - 1), container="tensorflow")
        sc.kf_restart([pod], end, 137)
    sc.operator_counter(ctx.namespace, "tensorflow", None, restarts)
    usage = oom_usage([r - 2 for r in restarts], ramp=12)
    for pod in sc.pods:
        if isinstance(pod, KfPod):
            add_memory(sc, pod, usage if (pod.rtype, pod.index) == ps1 else steady(pod, 0.48, 0.04))

    def train(m: int) -> str:
        return (
            f"train | step: {812_000 + (m - FIRST_MINUTE) * 140:>7d} | training metrics: "
            f"{{'loss': {0.44 + rand_float(-0.01, 0.01, 'l', m):.4f}, 'auc': "
            f"{rand_float(0.801, 0.806, 'auc', m):.4f}}}"
        )

    minutes = range(FIRST_MINUTE + 1, LAST_MINUTE + 1, 3)
    sc.chief_steps(spec, minutes, 0.4, "tf-step", "controller.py:495", train)
    chief, tid = sc.kf_chief(spec)
    lost = (
        "PS /job:ps/replica:0/task:1 failed with UnavailableError: Socket closed; the "
        "coordinator waits for it to come back."
    )
    for m0 in fails:
        at = ctx.at(m0 + 0.2, "tf-ps-lost", m0)
        sc.glog_line(chief, m0 + 0.2, at, tid, "cluster_coordinator.py:793", lost, "W")


scenario_jobset_oom = declare(
    jobset_oom,
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
    Context(
        "helios-ml-prod",
        "us-central1",
        "us-central1-b",
        "a3-train-usc1",
        "llm",
        "mistral-7b-sft",
        "2026-08-12T10:30:00Z",
    ),
    "out_of_memory",
    "fix_memory",
)


scenario_tfjob_oom = declare(
    tfjob_oom,
    "tfjob-oom-killed",
    "Kubeflow TFJob (ParameterServerStrategy: Chief, 2 PS on CPU nodes, 4 GPU Workers, "
    "restartPolicy ExitCode). Parameter server PS 1 holds the growing embedding tables: "
    "its working set climbs to its 96Gi limit and the kernel OOM-kills it at T-17.4m "
    "and T+6.6m (oom-kill line naming the pod's memory cgroup, OOMKilling event, "
    "kube_pod_container_status_terminated_reason OOMKilled: the pod runs with "
    "restartPolicy Never, so there is no last-terminated state). The operator sees exit "
    "code 137 (ExitedWithCode; 137 alone would prove nothing), re-creates dlrm-ps-ps-1 "
    "and records TFJobRestarting (counter 0 -> 2).",
    Context(
        "corvid-recsys",
        "europe-west1",
        "europe-west1-c",
        "recsys-gpu-euw1",
        "ranking",
        "dlrm-ps",
        "2026-09-03T18:20:00Z",
        "tfjob",
    ),
    "out_of_memory",
    "fix_memory",
)
