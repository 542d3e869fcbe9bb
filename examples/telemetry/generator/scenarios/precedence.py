"""Precedence scenarios: two causes in one window, and the one the diagnosis must name."""

from __future__ import annotations

import math

from ..builders.cluster import Context, Pod
from ..builders.deterministic import py_stamp
from ..builders.gpu import a2_ultra_pool, a3_pool
from ..builders.metrics import add_memory, add_pod_info, oom_usage, steady
from ..builders.pods import Deployment, deployment_pod
from ..builders.pytorch import nccl_failure_lines
from ..builders.scenario import Scenario, declare
from ..builders.templates import gpu_jobset, resources
from ..builders.workload import (
    evicted,
    jobset_restarting,
    node_pressure_events,
    oom_killed,
    preempted,
)


def oom_then_nccl(sc: Scenario, ctx: Context) -> None:
    nodes = a2_ultra_pool(sc)
    image = "us-central1-docker.pkg.dev/tessera-llm/cpt/megatron:24.09-cu124"
    a100 = "nvidia-a100-80gb"
    spec = gpu_jobset(ctx.workload, "pytorch", image, a100, cpu="88", memory="1000Gi")
    ooms = [-24.4, 1.6]
    restarts = [-13, 13]
    sc.add_jobset(spec, 1, restarts)
    starts = [-300, *restarts]

    def failed_at(k: int, end: int) -> dict[int, int]:
        failed = {g: end - 1 for g in range(4)}
        failed[2] = math.ceil(ooms[k])
        return failed

    sc.attempts(spec, 1, starts, nodes, failed_at)
    sc.training_noise(
        spec,
        "megatron",
        every=3,
        quiet=[(math.ceil(o), r) for o, r in zip(ooms, restarts, strict=True)],
    )
    for k, (m0, r) in enumerate(zip(ooms, restarts, strict=True)):
        oom_killed(sc, sc.pod(spec, 1 + k, 2), m0, starts[k] + 0.7)
        coord = sc.pod(spec, 1 + k, 0)
        fail_m = m0 + 10.0
        sc.stderr_lines(coord, fail_m, nccl_failure_lines(ctx, coord, fail_m, 30_000 + 97 * k))
        worker = sc.pod(spec, 1 + k, 1)
        tw = ctx.at(m0 + 0.05, "reset", worker.name)
        sc.container_log(
            worker,
            m0 + 0.05,
            f"[rank8]:[{py_stamp(tw)}] NCCL WARN NET/Socket : peer 10.8.1.14<51277> message "
            "truncated; recv() failed: connection reset by peer",
            stderr=True,
            at_ns=tw,
        )
        jobset_restarting(sc, spec, r, 2 + k)
    usage = oom_usage([math.ceil(m) - 1 for m in ooms], ramp=14)
    for pod in sc.pods:
        add_memory(
            sc, pod, usage if isinstance(pod, Pod) and pod.p == 2 else steady(pod, 0.5, 0.03)
        )


def spot_with_preempted_pods(sc: Scenario, ctx: Context) -> None:
    nodes = sc.gpu_pool("l4-spot", "g2-standard-48", 6, "nvidia-l4", 48, 197972452, 4, spot=True)
    image = "us-docker.pkg.dev/acme-ml-spot/diffusion/sdxl-ft:1.4.2"
    low = {"cpu": "44", "memory": "180Gi", "priority_class": "offline-low"}
    spec = gpu_jobset(ctx.workload, "trainer", image, None, gpus=4, spot=True, **low)
    restarts = [-15, 5]
    sc.add_jobset(spec, 8, restarts)
    sc.preemption(nodes[4], -16.3)
    sc.preemption(nodes[1], 3.7)
    sc.attempt(spec, 8, -500, restarts[0], nodes, failed_at={2: -15})
    sc.attempt(spec, 9, restarts[0], restarts[1], nodes, failed_at={1: 4})
    sc.attempt(spec, 10, restarts[1], None, nodes, running_from={1: nodes[1].ready_again})
    harness = Deployment(
        "eval-harness",
        "eval",
        "us-docker.pkg.dev/acme-ml-spot/eval/harness:2.0.3",
        resources("40", "160Gi", 4),
        "spot-eval-high",
        500000,
    )
    deployment_pod(sc, harness, "eval-harness-5f7d9c8b6-2kq9w", nodes[4], -600, -16)
    moved = deployment_pod(sc, harness, "eval-harness-5f7d9c8b6-w8ht4", nodes[2], -16, None)
    preempted(sc, sc.pod(spec, 8, 2), -15.9, moved)
    for k, r in enumerate(restarts):
        jobset_restarting(sc, spec, r, 9 + k)
    for pod in sc.pods:
        add_pod_info(sc, pod, "offline-low", ("Job", spec.job_name(0)))
    sc.training_noise(spec, "diffusion")


EVICTED_HOST = "9c2e41d07b5a3f16e8d40c7b2a91f5e3"


def eviction_then_faulty_host(sc: Scenario, ctx: Context) -> None:
    suffixes = ["a8m1", "q3v6", "r5d2", "y7k4"]
    nodes = a3_pool(sc, 4, "a3-res", suffixes=suffixes, host_ids={1: EVICTED_HOST})
    bad = nodes[1]
    sc.suspect(bad, 2)
    image = "us-south1-docker.pkg.dev/meridian-ai/pretrain/dense-trainer:0.19.3"
    h100 = "nvidia-h100-80gb"
    spec = gpu_jobset(ctx.workload, "trainer", image, h100, cpu="96", memory="1200Gi")
    evict_m = -25.2
    ep1, ep2 = -12.3, 6.2
    xid79 = "79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    sc.host_failure(
        bad,
        ep1,
        [
            f"NVRM: Xid (PCI:0000:97:00): {xid79}",
            "Kernel panic - not syncing: Fatal exception in interrupt",
        ],
    )
    back1 = bad.ready_again
    sc.host_failure(
        bad,
        ep2,
        [f"NVRM: Xid (PCI:0000:c6:00): {xid79}", "Kernel panic - not syncing: Fatal machine check"],
    )
    back2 = bad.ready_again
    restarts = [-24, -10, 9]
    sc.add_jobset(spec, 4, restarts)
    sc.attempt(spec, 4, -700, restarts[0], nodes, failed_at={1: -25})
    sc.attempt(spec, 5, restarts[0], restarts[1], nodes, failed_at={1: math.ceil(ep1)})
    sc.attempt(
        spec,
        6,
        restarts[1],
        restarts[2],
        nodes,
        running_from={1: back1},
        failed_at={1: math.ceil(ep2)},
    )
    sc.attempt(spec, 7, restarts[2], None, nodes, running_from={1: back2})
    node_pressure_events(sc, bad, evict_m - 0.4, "MemoryPressure", evict_m + 2.6)
    evicted(sc, sc.pod(spec, 4, 1), evict_m, "memory", 1_258_291_200, "1200Gi", "91244Ki")
    for k, r in enumerate(restarts):
        jobset_restarting(sc, spec, r, 5 + k)
    sc.training_noise(spec, "megatron")


scenario_oom_then_nccl = declare(
    oom_then_nccl,
    "oom-then-nccl-timeout",
    "Precedence: an OOM kill followed by NCCL timeouts. A2 Ultra JobSet (1 x 4 pods, "
    "32 ranks, container limit 1000Gi). Worker 2's host memory grows until the kernel "
    "OOM-kills its container at T-24.4m and T+1.6m. Its Job keeps the other pods "
    "running (backoffLimit 3), and they hang in the all-reduce until the coordinator's "
    "NCCL watchdog fires 10 minutes later (Watchdog caught collective operation "
    "timeout, DistBackendError, ChildFailedError) and the JobSet restarts (1 -> 3, at "
    "T-13.8m and T+12.2m). Worker 1 logs connection reset by peer. The coordinator's "
    "timeout is the consequence: out_of_memory, not application.",
    Context(
        "tessera-llm",
        "us-central1",
        "us-central1-c",
        "a100-train-usc1",
        "pretrain",
        "llama-13b-cpt",
        "2026-05-06T04:20:00Z",
    ),
    "out_of_memory",
    "fix_memory",
)


scenario_spot_with_preempted_pods = declare(
    spot_with_preempted_pods,
    "spot-preemption-with-preempted-pods",
    "Precedence: a Spot preemption storm whose pods also show Preempted. A JobSet (1 x "
    "4 pods, PriorityClass offline-low) and an eval Deployment (namespace eval, "
    "PriorityClass spot-eval-high) share a Spot L4 pool. Compute Engine preempts the "
    "eval pod's VM at T-16.3m: the re-created eval pod preempts training pod 2 on "
    "another node (Preempted, related = the eval pod). At T+3.7m the VM of training pod "
    "1 itself is preempted. The JobSet restarts each time (8 -> 10). The VMs went away, "
    "not the scheduler's choice: spot_preemption.",
    Context(
        "acme-ml-spot",
        "us-west4",
        "us-west4-b",
        "l4-spot-usw4",
        "training",
        "sd-xl-finetune",
        "2026-07-19T20:10:00Z",
    ),
    "spot_preemption",
    "avoid_preemption",
)


scenario_eviction_then_faulty_host = declare(
    eviction_then_faulty_host,
    "eviction-then-failing-host",
    "Precedence: an eviction on a node that later fails twice for a host error. A3 High "
    "JobSet (1 x 4 pods) on a reserved block. At T-25.2m node ...-q3v6 runs low on "
    "memory (a log agent's buffer) and the kubelet evicts pod 1 (Evicted, "
    f"MemoryPressure); the JobSet restarts. Then the same node's host {EVICTED_HOST} "
    "fails at T-12.3m and T+6.2m (Xid 79, kernel panic, hostError, TerminationEvent, "
    "NodeNotReady), each followed by a restart (4 -> 7). An infrastructure cause wins "
    "whatever the order: faulty_host.",
    Context(
        "meridian-ai",
        "us-south1",
        "us-south1-a",
        "h100-res-uss1",
        "foundation",
        "dense-30b-pretrain",
        "2026-02-25T17:50:00Z",
    ),
    "faulty_host",
    "isolate_host",
)
