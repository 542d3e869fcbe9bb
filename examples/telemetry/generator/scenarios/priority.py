"""Priority preemption scenarios: an online service's pods preempt a JobSet's, a TFJob's."""

from __future__ import annotations

import math

from ..builders.cluster import FIRST_MINUTE, LAST_MINUTE, Context, KfPod
from ..builders.deterministic import K8S_ALPHABET, rand_float, rand_str
from ..builders.metrics import add_pod_info
from ..builders.pods import Deployment, deployment_pod, priority_hook
from ..builders.scenario import Scenario, declare
from ..builders.templates import gpu_jobset, kubeflow_job, resources
from ..builders.workload import jobset_restarting, preempted


def jobset_priority_preemption(sc: Scenario, ctx: Context) -> None:
    a100 = ("nvidia-tesla-a100", 96, 696267776)
    suffixes = ["b2n7", "f6q1", "m9x3", "k4d8"]
    nodes = sc.gpu_pool("a2-pool", "a2-highgpu-8g", 4, *a100, suffixes=suffixes)
    image = "us-east4-docker.pkg.dev/orbit-ai-shared/vision/vit-train:4.2.0"
    low = {"cpu": "80", "memory": "600Gi", "priority_class": "offline-low"}
    spec = gpu_jobset(ctx.workload, "trainer", image, a100[0], **low)
    hits = [-12.3, 19.2]
    restarts = [math.ceil(h) + 1 for h in hits]
    sc.add_jobset(spec, 2, restarts)
    msg = (
        "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 3 node(s) didn't match pod "
        "anti-affinity rules. preemption: 0/4 nodes are available: 1 No preemption victims "
        "found for incoming pod, 3 Preemption is not helpful for scheduling."
    )
    sc.attempt(spec, 2, -600, restarts[0], nodes, failed_at={3: math.ceil(hits[0])})
    second = sc.attempt(
        spec,
        3,
        restarts[0],
        restarts[1],
        nodes,
        running_from={3: 3},
        failed_at={3: math.ceil(hits[1])},
        unsched={3: (restarts[0], 2)},
        sched_message=msg,
    )
    third = sc.attempt(
        spec,
        4,
        restarts[1],
        None,
        nodes,
        running_from={3: None},
        unsched={3: (restarts[1], LAST_MINUTE + 1)},
        sched_message=msg,
    )
    ranker = Deployment(
        "ranker",
        "serving",
        "us-east4-docker.pkg.dev/orbit-ai-shared/serving/ranker:8.14.2",
        resources("40", "300Gi", 8),
        "online-critical",
        100000,
    )
    pods = ("ranker-gpu-7c9d6f5b8-xq2lp", 2), ("ranker-gpu-7c9d6f5b8-r8vtn", None)
    for k, (hit, (name, end)) in enumerate(zip(hits, pods, strict=True)):
        preemptor = deployment_pod(sc, ranker, name, nodes[3], math.ceil(hit), end)
        preempted(sc, sc.pod(spec, 2 + k, 3), hit, preemptor)
        jobset_restarting(sc, spec, restarts[k], 3 + k)
    for pod, first, until in ((second[3], restarts[0], 2), (third[3], restarts[1], LAST_MINUTE)):
        times = [first + 0.1, first + 1.1, first + 3.2, first + 8.3]
        sc.unschedulable(pod, times, msg, until=until)
    sc.scheduled(second[3], 2.4)
    for pod in sc.pods:
        add_pod_info(sc, pod, "offline-low", ("Job", spec.job_name(0)))
    sc.training_noise(spec, "hf")


def tfjob_priority_preemption(sc: Scenario, ctx: Context) -> None:
    cpus = sc.cpu_pool("shared-pool", "n2-standard-64", 5, 64, 263965424)
    spec = kubeflow_job(
        "TFJob",
        ctx.workload,
        "asia-northeast1-docker.pkg.dev/nimbus-adtech/ml/wide-deep:2.16.2",
        {"Chief": (cpus[:1], "8", "32Gi"), "PS": (cpus[:1], "16", "64Gi")}
        | {"Worker": (cpus[1:4], "48", "96Gi")},
        command=["python3", "/app/train.py"],
    )
    w1 = ("Worker", 1)
    hits = [-9.5, 14.5]
    restarts = [math.ceil(h) + 1 for h in hits]
    sc.kf_replicas(spec, ctx.namespace, -400, skip=[w1])
    nodes = [cpus[2], cpus[4], cpus[2]]
    victims = sc.kf_incarnations(spec, ctx.namespace, w1, [-400, *restarts], nodes=nodes)
    frontend = Deployment(
        "search-frontend",
        "online",
        "asia-northeast1-docker.pkg.dev/nimbus-adtech/online/search-frontend:5.2.9",
        resources("56", "96Gi"),
        "online-high",
        1000000,
    )
    for k, hit in enumerate(hits):
        name = f"search-frontend-6d8f7b9c4-{rand_str(K8S_ALPHABET, 5, 'sf', k)}"
        node = victims[k].node or cpus[2]
        preemptor = deployment_pod(sc, frontend, name, node, math.ceil(hit), None)
        preempted(sc, victims[k], hit, preemptor)
        sc.kf_restart([victims[k]], restarts[k], 143)
    sc.operator_counter(ctx.namespace, "tensorflow", 4, restarts)
    for pod in sc.pods:
        if isinstance(pod, KfPod):
            sc.pod_hooks[pod.uid] = priority_hook("offline-low", 1000)
            add_pod_info(sc, pod, "offline-low", ("TFJob", spec.name))

    def loss(m: int) -> str:
        value = 0.39 + rand_float(-0.01, 0.01, "l", m)
        return f"loss = {value:.5f}, step = {50_000 + 90 * (m + 90)}"

    minutes = range(FIRST_MINUTE + 2, LAST_MINUTE + 1, 4)
    sc.chief_steps(spec, minutes, 0.3, "wd-step", "estimator.py:2297", loss)


scenario_jobset_priority_preemption = declare(
    jobset_priority_preemption,
    "jobset-preempted-by-priority",
    "A JobSet (1 x 4 pods, PriorityClass offline-low, value 1000) shares an A2 GPU pool "
    "with the online ranker (namespace serving, PriorityClass online-critical, value "
    "100000). The ranker's autoscaler adds a GPU pod at T-12.3m and at T+19.2m: the "
    "scheduler preempts the training pod on node ...-k4d8 (Preempted, related = the "
    "ranker pod; DisruptionTarget PreemptionByScheduler), the Job fails and the JobSet "
    "restarts (2 -> 4). Until the ranker scales in at T+2m the re-created pod 3 is "
    "unschedulable (FailedScheduling Insufficient nvidia.com/gpu): a consequence, not "
    "missing capacity. Nodes stay Ready, no interruption.",
    Context(
        "orbit-ai-shared",
        "us-east4",
        "us-east4-c",
        "shared-gpu-use4",
        "research",
        "vit-pretrain",
        "2026-04-21T15:05:00Z",
    ),
    "priority_preemption",
    "protect_priority",
)


scenario_tfjob_priority_preemption = declare(
    tfjob_priority_preemption,
    "tfjob-preempted-by-priority",
    "Kubeflow TFJob on shared CPU nodes (Chief, PS, 3 Workers, PriorityClass "
    "offline-low value 1000, the low tier of an online/offline co-location). The online "
    "search-frontend Deployment (namespace online, PriorityClass online-high value "
    "1000000) scales out at T-9.5m and T+14.5m; the scheduler preempts Worker 1 each "
    "time (Preempted, related = the frontend pod). The worker exits 143, the operator "
    "re-creates it (ExitedWithCode, TFJobRestarting; counter 4 -> 6).",
    Context(
        "nimbus-adtech",
        "asia-northeast1",
        "asia-northeast1-a",
        "mixed-prod-ane1",
        "kubeflow",
        "ctr-wide-deep",
        "2026-12-08T02:15:00Z",
        "tfjob",
    ),
    "priority_preemption",
    "protect_priority",
)
