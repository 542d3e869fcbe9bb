"""Node-pressure eviction scenarios: a JobSet pod (memory), a TFJob worker (boot disk)."""

from __future__ import annotations

import math

from ..builders.cluster import FIRST_MINUTE, LAST_MINUTE, Context
from ..builders.deterministic import rand_float
from ..builders.scenario import Scenario, declare
from ..builders.templates import jobset, kubeflow_job, nodepool, resources
from ..builders.workload import evicted, jobset_restarting, node_pressure_events


def tfjob_eviction(sc: Scenario, ctx: Context) -> None:
    hits = [(-13.2, 0), (11.8, 2)]  # (minute, Worker evicted)
    restarts = [math.ceil(m) + 1 for m, _ in hits]
    cpus = sc.cpu_pool("cpu-pool", "c3-standard-44", 5, 44, 181197988)
    spec = kubeflow_job(
        "TFJob",
        ctx.workload,
        "us-central1-docker.pkg.dev/lumen-vision-prod/vision/effnet-tf:2.17.0",
        {"Chief": (cpus[:1], "8", "32Gi"), "PS": (cpus[1:2], "16", "64Gi")}
        | {"Worker": (cpus[2:], "40", "128Gi")},
        command=["python3", "-m", "effnet.train", "--model_dir=/scratch/model"],
    )
    hit_workers = [("Worker", i) for _, i in hits]
    sc.kf_replicas(spec, ctx.namespace, -300, skip=hit_workers)
    for k, ((m0, index), r, key) in enumerate(zip(hits, restarts, hit_workers, strict=True)):
        old, _ = sc.kf_incarnations(spec, ctx.namespace, key, [-300, r], exit_code=137)
        last = k == len(hits) - 1
        node_pressure_events(
            sc, spec.placement[key], m0 - 0.5, "DiskPressure", m0 + 4.1, relieved=last
        )
        evicted(sc, old, m0, "ephemeral-storage", 86_400_212 + index, "0", f"{8_412_096 - index}Ki")
    sc.operator_counter(ctx.namespace, "tensorflow", 1, restarts)

    def train(m: int) -> str:
        accuracy = rand_float(0.771, 0.774, "acc", m)
        return f"train | step: {210_000 + 64 * (m + 90):>7d} | top_1_accuracy: {accuracy:.4f}"

    minutes = range(FIRST_MINUTE + 1, LAST_MINUTE + 1, 5)
    sc.chief_steps(spec, minutes, 0.3, "eff-step", "controller.py:495", train)


def jobset_eviction(sc: Scenario, ctx: Context) -> None:
    nodes = sc.add_pool(
        "highmem-pool",
        "n2-highmem-32",
        4,
        suffixes=["h1m4", "p7c2", "v3k8", "z5t6"],
        capacity={"cpu": "32", "memory": "263965424Ki"},
    )
    image = "us-west1-docker.pkg.dev/quarry-analytics/ml/xgb-ranker:1.7.6-r3"
    select = nodepool("highmem-pool")
    spec = jobset(ctx.workload, "xgboost", image, resources("28", "32Gi"), select, [])
    hits = [(-18.4, 1), (8.3, 2)]
    restarts = [math.ceil(m) + 1 for m, _ in hits]
    sc.add_jobset(spec, 5, restarts)
    sc.attempt(spec, 5, -500, restarts[0], nodes, failed_at={1: math.ceil(hits[0][0])})
    sc.attempt(spec, 6, restarts[0], restarts[1], nodes, failed_at={2: math.ceil(hits[1][0])})
    sc.attempt(spec, 7, restarts[1], None, nodes)
    for k, (m0, g) in enumerate(hits):
        last = k == len(hits) - 1
        node_pressure_events(sc, nodes[g], m0 - 0.4, "MemoryPressure", m0 + 3.2, relieved=last)
        pod = sc.pod(spec, 5 + k, g)
        evicted(sc, pod, m0, "memory", 118_204_332 + 1000 * k, "32Gi", f"{86_220 + 11 * k}Ki")
        jobset_restarting(sc, spec, restarts[k], 6 + k)
    sc.training_noise(spec, "jax", workers=False)


scenario_jobset_eviction = declare(
    jobset_eviction,
    "jobset-node-pressure-eviction",
    "CPU JobSet (1 x 4 pods, XGBoost workers, memory request 32Gi) on n2-highmem-32 "
    "nodes shared with an ETL backfill that sets no memory limit. The backfill grows on "
    "node ...-p7c2 and later on ...-v3k8: the node runs low on memory (MemoryPressure, "
    "NodeHasInsufficientMemory, EvictionThresholdMet) and the kubelet evicts the "
    "training pod, the pod furthest above its request (Evicted, kube_pod_status_reason "
    "Evicted) at T-18.4m and T+8.3m. The Job fails and the JobSet restarts (5 -> 7). "
    "The nodes stay Ready; the pressure ends minutes later.",
    Context(
        "quarry-analytics",
        "us-west1",
        "us-west1-b",
        "batch-cpu-usw1",
        "ml-batch",
        "xgb-ranker-train",
        "2026-10-14T06:40:00Z",
    ),
    "node_pressure_eviction",
    "relieve_node_pressure",
)


scenario_tfjob_eviction = declare(
    tfjob_eviction,
    "tfjob-node-pressure-eviction",
    "Kubeflow TFJob (Chief, PS, 3 Workers on CPU nodes, restartPolicy ExitCode) whose "
    "workers write checkpoints and summaries to an emptyDir on the node's boot disk "
    "without an ephemeral-storage limit. The disk fills (DiskPressure, "
    "NodeHasDiskPressure, EvictionThresholdMet 'Attempting to reclaim "
    "ephemeral-storage') and the kubelet evicts Worker 0 at T-13.2m and Worker 2 at "
    "T+11.8m (Evicted: low on ephemeral-storage). The operator sees exit code 137, "
    "re-creates the worker and records TFJobRestarting (counter 1 -> 3).",
    Context(
        "lumen-vision-prod",
        "us-central1",
        "us-central1-f",
        "cpu-train-usc1",
        "vision",
        "effnet-ps",
        "2026-06-30T21:10:00Z",
        "tfjob",
    ),
    "node_pressure_eviction",
    "relieve_node_pressure",
)
