"""Node-pressure eviction scenarios: the kubelet evicts a JobSet pod (memory), a TFJob worker
(ephemeral storage).
"""

from __future__ import annotations

import math

from ..builders.cluster import FIRST_MINUTE, LAST_MINUTE, Context, JobSetSpec, KubeflowSpec
from ..builders.deterministic import glog_prefix, rand_float, rand_int
from ..builders.metrics import add_reason, since
from ..builders.nodes import pressure_until
from ..builders.scenario import Scenario
from ..builders.templates import expect
from ..builders.workload import evicted, jobset_event, node_pressure_events


def scenario_jobset_eviction() -> Scenario:
    ctx = Context(
        project="quarry-analytics",
        location="us-west1",
        zone="us-west1-b",
        cluster="batch-cpu-usw1",
        namespace="ml-batch",
        workload="xgb-ranker-train",
        issue_time="2026-10-14T06:40:00Z",
    )
    sc = Scenario(
        "jobset-node-pressure-eviction",
        "CPU JobSet (1 x 4 pods, XGBoost workers, memory request 32Gi) on n2-highmem-32 "
        "nodes shared with an ETL backfill that sets no memory limit. The backfill grows on "
        "node ...-p7c2 and later on ...-v3k8: the node runs low on memory (MemoryPressure, "
        "NodeHasInsufficientMemory, EvictionThresholdMet) and the kubelet evicts the "
        "training pod, the pod furthest above its request (Evicted, kube_pod_status_reason "
        "Evicted) at T-18.4m and T+8.3m. The Job fails and the JobSet restarts (5 -> 7). "
        "The nodes stay Ready; the pressure ends minutes later.",
        ctx,
        expect("node_pressure_eviction", "relieve_node_pressure"),
    )
    nodes = sc.add_pool(
        "highmem-pool",
        "n2-highmem-32",
        4,
        suffixes=["h1m4", "p7c2", "v3k8", "z5t6"],
        capacity={"cpu": "32", "memory": "263965424Ki"},
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="xgboost",
        image="us-west1-docker.pkg.dev/quarry-analytics/ml/xgb-ranker:1.7.6-r3",
        resources={"cpu": "28", "memory": "32Gi"},
        node_selector={"cloud.google.com/gke-nodepool": "highmem-pool"},
        tolerations=[],
    )
    hits = [(-18.4, 1), (8.3, 2)]
    restarts = [math.ceil(m) + 1 for m, _ in hits]
    sc.add_jobset(spec, 5, restarts)
    sc.attempt(spec, 5, -500, restarts[0], nodes, failed_at={1: math.ceil(hits[0][0])})
    sc.attempt(spec, 6, restarts[0], restarts[1], nodes, failed_at={2: math.ceil(hits[1][0])})
    sc.attempt(spec, 7, restarts[1], None, nodes)
    for k, (m0, g) in enumerate(hits):
        node = nodes[g]
        node_pressure_events(sc, node, m0 - 0.4, "MemoryPressure", m0 + 3.2)
        pod = sc.pod(spec, 5 + k, g)
        evicted(sc, pod, m0, "memory", 118_204_332 + 1000 * k, "32Gi", f"{86_220 + 11 * k}Ki")
        add_reason(sc, "kube_pod_status_reason", pod, "Evicted", since(math.ceil(m0)))
        jobset_event(
            sc, spec, restarts[k] - 0.55, "Restarting", f"restarting jobset, attempt {6 + k}"
        )
    last = nodes[hits[1][1]]
    sc.node_hooks[last.name] = pressure_until(
        last,
        "MemoryPressure",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
        ctx.at(hits[1][0] + 3.2, "relief", last.name),
    )
    sc.training_noise(spec, "jax", workers=False)
    sc.kubelet_noise()
    return sc


def scenario_tfjob_eviction() -> Scenario:
    ctx = Context(
        project="lumen-vision-prod",
        location="us-central1",
        zone="us-central1-f",
        cluster="cpu-train-usc1",
        namespace="vision",
        workload="effnet-ps",
        issue_time="2026-06-30T21:10:00Z",
        workload_kind="tfjob",
    )
    sc = Scenario(
        "tfjob-node-pressure-eviction",
        "Kubeflow TFJob (Chief, PS, 3 Workers on CPU nodes, restartPolicy ExitCode) whose "
        "workers write checkpoints and summaries to an emptyDir on the node's boot disk "
        "without an ephemeral-storage limit. The disk fills (DiskPressure, "
        "NodeHasDiskPressure, EvictionThresholdMet 'Attempting to reclaim "
        "ephemeral-storage') and the kubelet evicts Worker 0 at T-13.2m and Worker 2 at "
        "T+11.8m (Evicted: low on ephemeral-storage). The operator sees exit code 137, "
        "re-creates the worker and records TFJobRestarting (counter 1 -> 3).",
        ctx,
        expect("node_pressure_eviction", "relieve_node_pressure"),
    )
    cpus = sc.add_pool(
        "cpu-pool", "c3-standard-44", 5, capacity={"cpu": "44", "memory": "181197988Ki"}
    )
    select = {"cloud.google.com/gke-nodepool": "cpu-pool"}
    spec = KubeflowSpec(
        name=ctx.workload,
        api_kind="TFJob",
        replicas={"Chief": 1, "PS": 1, "Worker": 3},
        image="us-central1-docker.pkg.dev/lumen-vision-prod/vision/effnet-tf:2.17.0",
        resources={
            "Chief": {"cpu": "8", "memory": "32Gi"},
            "PS": {"cpu": "16", "memory": "64Gi"},
            "Worker": {"cpu": "40", "memory": "128Gi"},
        },
        node_selector={"Chief": select, "PS": select, "Worker": select},
        tolerations={},
        command=["python3", "-m", "effnet.train", "--model_dir=/scratch/model"],
    )
    placement = {("Chief", 0): cpus[0], ("PS", 0): cpus[1]}
    placement.update({("Worker", i): cpus[i + 2] for i in range(3)})
    hits = [(-13.2, 0), (11.8, 2)]
    restarts = [math.ceil(m) + 1 for m, _ in hits]
    hit_workers = {("Worker", i) for _, i in hits}
    for rtype, count in spec.replicas.items():
        for i in range(count):
            if (rtype, i) not in hit_workers:
                sc.kf_pods(spec, ctx.namespace, 0, -300, None, placement, only=[(rtype, i)])
    for (m0, index), r in zip(hits, restarts, strict=True):
        key = ("Worker", index)
        (old,) = sc.kf_pods(
            spec, ctx.namespace, 0, -300, r, placement, only=[key], failed_at={key: r - 1}
        )
        sc.kf_pods(spec, ctx.namespace, 1, r, None, placement, only=[key], created_m=r - 0.58)
        node = placement[key]
        node_pressure_events(sc, node, m0 - 0.5, "DiskPressure", m0 + 4.1)
        evicted(sc, old, m0, "ephemeral-storage", 86_400_212 + index, "0", f"{8_412_096 - index}Ki")
        add_reason(sc, "kube_pod_status_reason", old, "Evicted", lambda m, f=r - 1: m >= f)
        sc.kf_restart([old], r, 137)
    sc.operator_counter(ctx.namespace, "tensorflow", 1, restarts)
    last = placement[("Worker", hits[1][1])]
    sc.node_hooks[last.name] = pressure_until(
        last,
        "DiskPressure",
        "KubeletHasNoDiskPressure",
        "kubelet has no disk pressure",
        ctx.at(hits[1][0] + 4.1, "relief", last.name),
    )
    chief = sc.kf_pod(spec, "Chief", 0, 0)
    tid = rand_int(130_000, 140_000, "tid", chief.name)
    for m in range(FIRST_MINUTE + 1, LAST_MINUTE + 1, 5):
        at = ctx.at(m + 0.3, "eff-step", m)
        sc.container_log(
            chief,
            m + 0.3,
            f"{glog_prefix('I', at, tid, 'controller.py:495')} train | step: "
            f"{210_000 + 64 * (m + 90):>7d} | top_1_accuracy: "
            f"{rand_float(0.771, 0.774, 'acc', m):.4f}",
            stderr=True,
            at_ns=at,
        )
    sc.kubelet_noise()
    return sc
