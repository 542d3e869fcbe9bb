"""Priority preemption scenarios: an online service's pods preempt a JobSet's, a TFJob's."""

from __future__ import annotations

import math

from ..builders.cluster import FIRST_MINUTE, LAST_MINUTE, Context, JobSetSpec, KfPod, KubeflowSpec
from ..builders.deterministic import K8S_ALPHABET, glog_prefix, rand_float, rand_int, rand_str
from ..builders.metrics import add_pod_info
from ..builders.pods import deployment_pod, priority_hook
from ..builders.scenario import Scenario
from ..builders.templates import GPU_TAINT, GPU_TOLERATION, expect, gpu_capacity, gpu_labels
from ..builders.workload import jobset_event, preempted


def scenario_jobset_priority_preemption() -> Scenario:
    ctx = Context(
        project="orbit-ai-shared",
        location="us-east4",
        zone="us-east4-c",
        cluster="shared-gpu-use4",
        namespace="research",
        workload="vit-pretrain",
        issue_time="2026-04-21T15:05:00Z",
    )
    sc = Scenario(
        "jobset-preempted-by-priority",
        "A JobSet (1 x 4 pods, PriorityClass offline-low, value 1000) shares an A2 GPU pool "
        "with the online ranker (namespace serving, PriorityClass online-critical, value "
        "100000). The ranker's autoscaler adds a GPU pod at T-12.3m and at T+19.2m: the "
        "scheduler preempts the training pod on node ...-k4d8 (Preempted, related = the "
        "ranker pod; DisruptionTarget PreemptionByScheduler), the Job fails and the JobSet "
        "restarts (2 -> 4). Until the ranker scales in at T+2m the re-created pod 3 is "
        "unschedulable (FailedScheduling Insufficient nvidia.com/gpu): a consequence, not "
        "missing capacity. Nodes stay Ready, no interruption.",
        ctx,
        expect("priority_preemption", "protect_priority"),
    )
    nodes = sc.add_pool(
        "a2-pool",
        "a2-highgpu-8g",
        4,
        suffixes=["b2n7", "f6q1", "m9x3", "k4d8"],
        labels=gpu_labels("nvidia-tesla-a100"),
        capacity=gpu_capacity(96, 696267776),
        taints=GPU_TAINT,
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="trainer",
        image="us-east4-docker.pkg.dev/orbit-ai-shared/vision/vit-train:4.2.0",
        resources={"cpu": "80", "memory": "600Gi", "nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"},
        tolerations=GPU_TOLERATION,
        priority_class="offline-low",
    )
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
    ranker = "us-east4-docker.pkg.dev/orbit-ai-shared/serving/ranker:8.14.2"
    first_pod = deployment_pod(
        sc,
        "ranker-gpu-7c9d6f5b8-xq2lp",
        "serving",
        nodes[3],
        math.ceil(hits[0]),
        2,
        app="ranker",
        image=ranker,
        resources={"cpu": "40", "memory": "300Gi", "nvidia.com/gpu": "8"},
        priority_class="online-critical",
        priority=100000,
    )
    second_pod = deployment_pod(
        sc,
        "ranker-gpu-7c9d6f5b8-r8vtn",
        "serving",
        nodes[3],
        math.ceil(hits[1]),
        None,
        app="ranker",
        image=ranker,
        resources={"cpu": "40", "memory": "300Gi", "nvidia.com/gpu": "8"},
        priority_class="online-critical",
        priority=100000,
    )
    preempted(sc, sc.pod(spec, 2, 3), hits[0], first_pod)
    preempted(sc, sc.pod(spec, 3, 3), hits[1], second_pod)
    for k, r in enumerate(restarts):
        jobset_event(sc, spec, r - 0.55, "Restarting", f"restarting jobset, attempt {3 + k}")
    for pod, first in ((second[3], restarts[0]), (third[3], restarts[1])):
        for count, m in enumerate((first + 0.1, first + 1.1, first + 3.2, first + 8.3), 1):
            if m < (2 if pod is second[3] else LAST_MINUTE):
                sc.event_pod(
                    pod,
                    m,
                    "FailedScheduling",
                    msg,
                    component="default-scheduler",
                    etype="Warning",
                    count=count,
                    first_m=first + 0.1,
                )
    sc.event_pod(
        second[3],
        2.4,
        "Scheduled",
        f"Successfully assigned research/{second[3].name} to {nodes[3].name}",
        component="default-scheduler",
    )
    for pod in sc.pods:
        add_pod_info(sc, pod, "offline-low", ("Job", spec.job_name(0)))
    sc.training_noise(spec, "hf")
    sc.kubelet_noise()
    return sc


def scenario_tfjob_priority_preemption() -> Scenario:
    ctx = Context(
        project="nimbus-adtech",
        location="asia-northeast1",
        zone="asia-northeast1-a",
        cluster="mixed-prod-ane1",
        namespace="kubeflow",
        workload="ctr-wide-deep",
        issue_time="2026-12-08T02:15:00Z",
        workload_kind="tfjob",
    )
    sc = Scenario(
        "tfjob-preempted-by-priority",
        "Kubeflow TFJob on shared CPU nodes (Chief, PS, 3 Workers, PriorityClass "
        "offline-low value 1000, the low tier of an online/offline co-location). The online "
        "search-frontend Deployment (namespace online, PriorityClass online-high value "
        "1000000) scales out at T-9.5m and T+14.5m; the scheduler preempts Worker 1 each "
        "time (Preempted, related = the frontend pod). The worker exits 143, the operator "
        "re-creates it (ExitedWithCode, TFJobRestarting; counter 4 -> 6).",
        ctx,
        expect("priority_preemption", "protect_priority"),
    )
    cpus = sc.add_pool(
        "shared-pool", "n2-standard-64", 5, capacity={"cpu": "64", "memory": "263965424Ki"}
    )
    select = {"cloud.google.com/gke-nodepool": "shared-pool"}
    spec = KubeflowSpec(
        name=ctx.workload,
        api_kind="TFJob",
        replicas={"Chief": 1, "PS": 1, "Worker": 3},
        image="asia-northeast1-docker.pkg.dev/nimbus-adtech/ml/wide-deep:2.16.2",
        resources={
            "Chief": {"cpu": "8", "memory": "32Gi"},
            "PS": {"cpu": "16", "memory": "64Gi"},
            "Worker": {"cpu": "48", "memory": "96Gi"},
        },
        node_selector={"Chief": select, "PS": select, "Worker": select},
        tolerations={},
        command=["python3", "/app/train.py"],
    )
    placement = {("Chief", 0): cpus[0], ("PS", 0): cpus[0]}
    placement.update({("Worker", i): cpus[i + 1] for i in range(3)})
    w1 = ("Worker", 1)
    hits = [-9.5, 14.5]
    restarts = [math.ceil(h) + 1 for h in hits]
    for rtype, count in spec.replicas.items():
        for i in range(count):
            if (rtype, i) != w1:
                sc.kf_pods(spec, ctx.namespace, 0, -400, None, placement, only=[(rtype, i)])
    starts = [-400, *restarts]
    victims = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        spot = dict(placement)
        spot[w1] = cpus[2] if k % 2 == 0 else cpus[4]
        (pod,) = sc.kf_pods(
            spec,
            ctx.namespace,
            k,
            start,
            end,
            spot,
            only=[w1],
            failed_at={w1: end - 1} if end is not None else None,
            created_m=start - 0.58 if k else None,
        )
        victims.append(pod)
    frontend = "asia-northeast1-docker.pkg.dev/nimbus-adtech/online/search-frontend:5.2.9"
    for k, hit in enumerate(hits):
        preemptor = deployment_pod(
            sc,
            f"search-frontend-6d8f7b9c4-{rand_str(K8S_ALPHABET, 5, 'sf', k)}",
            "online",
            victims[k].node or cpus[2],
            math.ceil(hit),
            None,
            app="search-frontend",
            image=frontend,
            resources={"cpu": "56", "memory": "96Gi"},
            priority_class="online-high",
            priority=1000000,
        )
        preempted(sc, victims[k], hit, preemptor)
        sc.kf_restart([victims[k]], restarts[k], 143)
    sc.operator_counter(ctx.namespace, "tensorflow", 4, restarts)
    for pod in sc.pods:
        if isinstance(pod, KfPod):
            sc.pod_hooks[pod.uid] = priority_hook("offline-low", 1000)
            add_pod_info(sc, pod, "offline-low", ("TFJob", spec.name))
    chief = sc.kf_pod(spec, "Chief", 0, 0)
    tid = rand_int(130_000, 140_000, "tid", chief.name)
    for m in range(FIRST_MINUTE + 2, LAST_MINUTE + 1, 4):
        at = ctx.at(m + 0.3, "wd-step", m)
        sc.container_log(
            chief,
            m + 0.3,
            f"{glog_prefix('I', at, tid, 'estimator.py:2297')} loss = "
            f"{0.39 + rand_float(-0.01, 0.01, 'l', m):.5f}, step = {50_000 + 90 * (m + 90)}",
            stderr=True,
            at_ns=at,
        )
    sc.kubelet_noise()
    return sc
