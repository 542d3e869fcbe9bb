"""Precedence scenarios: two causes in one window, and the one the diagnosis must name."""

from __future__ import annotations

import math

from ..builders.cluster import Context, JobSetSpec, Pod
from ..builders.deterministic import py_stamp, rand_float
from ..builders.metrics import _oom_usage, add_memory, add_pod_info, add_reason, since
from ..builders.pods import deployment_pod
from ..builders.pytorch import nccl_failure_lines
from ..builders.scenario import Scenario
from ..builders.templates import GPU_TAINT, GPU_TOLERATION, expect, gpu_capacity, gpu_labels
from ..builders.workload import (
    audit_oom_patch,
    evicted,
    jobset_event,
    kernel_oom,
    node_pressure_events,
    preempted,
)


def scenario_oom_then_nccl() -> Scenario:
    ctx = Context(
        project="tessera-llm",
        location="us-central1",
        zone="us-central1-c",
        cluster="a100-train-usc1",
        namespace="pretrain",
        workload="llama-13b-cpt",
        issue_time="2026-05-06T04:20:00Z",
    )
    sc = Scenario(
        "oom-then-nccl-timeout",
        "Precedence: an OOM kill followed by NCCL timeouts. A2 Ultra JobSet (1 x 4 pods, "
        "32 ranks, container limit 1000Gi). Worker 2's host memory grows until the kernel "
        "OOM-kills its container at T-24.4m and T+1.6m. Its Job keeps the other pods "
        "running (backoffLimit 3), and they hang in the all-reduce until the coordinator's "
        "NCCL watchdog fires 10 minutes later (Watchdog caught collective operation "
        "timeout, DistBackendError, ChildFailedError) and the JobSet restarts (1 -> 3, at "
        "T-13.8m and T+12.2m). Worker 1 logs connection reset by peer. The coordinator's "
        "timeout is the consequence: out_of_memory, not application.",
        ctx,
        expect("out_of_memory", "fix_memory"),
    )
    nodes = sc.add_pool(
        "a100-pool",
        "a2-ultragpu-8g",
        4,
        labels=gpu_labels("nvidia-a100-80gb"),
        capacity=gpu_capacity(96, 1391821596),
        taints=GPU_TAINT,
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="pytorch",
        image="us-central1-docker.pkg.dev/tessera-llm/cpt/megatron:24.09-cu124",
        resources={"cpu": "88", "memory": "1000Gi", "nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"},
        tolerations=GPU_TOLERATION,
    )
    ooms = [-24.4, 1.6]
    restarts = [-13, 13]
    sc.add_jobset(spec, 1, restarts)
    starts = [-300, *restarts]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        failed = None
        if end is not None:
            failed = {g: end - 1 for g in range(4)}
            failed[2] = math.ceil(ooms[k])
        sc.attempt(spec, 1 + k, start, end, nodes, failed_at=failed)
    sc.training_noise(
        spec,
        "megatron",
        every=3,
        quiet=[(math.ceil(o), r) for o, r in zip(ooms, restarts, strict=True)],
    )
    for k, (m0, r) in enumerate(zip(ooms, restarts, strict=True)):
        pod = sc.pod(spec, 1 + k, 2)
        kernel_oom(sc, pod, m0)
        audit_oom_patch(sc, pod, m0 + 0.03, started_m=starts[k] + 0.7)
        add_reason(
            sc,
            "kube_pod_container_status_terminated_reason",
            pod,
            "OOMKilled",
            since(math.ceil(m0)),
            container="pytorch",
        )
        coord = sc.pod(spec, 1 + k, 0)
        fail_m = m0 + 10.0
        for at, text in nccl_failure_lines(ctx, coord, fail_m, 30_000 + 97 * k):
            sc.container_log(coord, fail_m, text, stderr=True, at_ns=at)
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
        jobset_event(sc, spec, r - 0.55, "Restarting", f"restarting jobset, attempt {2 + k}")
    usage = _oom_usage([math.ceil(m) - 1 for m in ooms], ramp=14)
    for pod in sc.pods:
        if isinstance(pod, Pod) and pod.p == 2:
            add_memory(sc, pod, usage)
        else:
            add_memory(sc, pod, lambda m, p=pod: 0.5 + rand_float(-0.03, 0.03, "m", p.name, m))
    sc.kubelet_noise()
    return sc


def scenario_spot_with_preempted_pods() -> Scenario:
    ctx = Context(
        project="acme-ml-spot",
        location="us-west4",
        zone="us-west4-b",
        cluster="l4-spot-usw4",
        namespace="training",
        workload="sd-xl-finetune",
        issue_time="2026-07-19T20:10:00Z",
    )
    sc = Scenario(
        "spot-preemption-with-preempted-pods",
        "Precedence: a Spot preemption storm whose pods also show Preempted. A JobSet (1 x "
        "4 pods, PriorityClass offline-low) and an eval Deployment (namespace eval, "
        "PriorityClass spot-eval-high) share a Spot L4 pool. Compute Engine preempts the "
        "eval pod's VM at T-16.3m: the re-created eval pod preempts training pod 2 on "
        "another node (Preempted, related = the eval pod). At T+3.7m the VM of training pod "
        "1 itself is preempted. The JobSet restarts each time (8 -> 10). The VMs went away, "
        "not the scheduler's choice: spot_preemption.",
        ctx,
        expect("spot_preemption", "avoid_preemption"),
    )
    common = dict(
        spot=True,
        labels=gpu_labels("nvidia-l4", 4),
        capacity=gpu_capacity(48, 197972452, 4),
        taints=GPU_TAINT,
    )
    nodes = sc.add_pool("l4-spot", "g2-standard-48", 6, **common)  # type: ignore[arg-type]
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="trainer",
        image="us-docker.pkg.dev/acme-ml-spot/diffusion/sdxl-ft:1.4.2",
        resources={"cpu": "44", "memory": "180Gi", "nvidia.com/gpu": "4"},
        node_selector={"cloud.google.com/gke-spot": "true"},
        tolerations=GPU_TOLERATION,
        priority_class="offline-low",
    )
    restarts = [-15, 5]
    sc.add_jobset(spec, 8, restarts)
    sc.preemption(nodes[4], -16.3)
    sc.preemption(nodes[1], 3.7)
    back = max(nodes[1].not_ready) + 1
    sc.attempt(spec, 8, -500, restarts[0], nodes, failed_at={2: -15})
    sc.attempt(spec, 9, restarts[0], restarts[1], nodes, failed_at={1: 4})
    sc.attempt(spec, 10, restarts[1], None, nodes, running_from={1: back})
    eval_image = "us-docker.pkg.dev/acme-ml-spot/eval/harness:2.0.3"
    deployment_pod(
        sc,
        "eval-harness-5f7d9c8b6-2kq9w",
        "eval",
        nodes[4],
        -600,
        -16,
        app="eval-harness",
        image=eval_image,
        resources={"cpu": "40", "memory": "160Gi", "nvidia.com/gpu": "4"},
        priority_class="spot-eval-high",
        priority=500000,
    )
    moved = deployment_pod(
        sc,
        "eval-harness-5f7d9c8b6-w8ht4",
        "eval",
        nodes[2],
        -16,
        None,
        app="eval-harness",
        image=eval_image,
        resources={"cpu": "40", "memory": "160Gi", "nvidia.com/gpu": "4"},
        priority_class="spot-eval-high",
        priority=500000,
    )
    preempted(sc, sc.pod(spec, 8, 2), -15.9, moved)
    for k, r in enumerate(restarts):
        jobset_event(sc, spec, r - 0.55, "Restarting", f"restarting jobset, attempt {9 + k}")
    for pod in sc.pods:
        add_pod_info(sc, pod, "offline-low", ("Job", spec.job_name(0)))
    sc.training_noise(spec, "diffusion")
    sc.kubelet_noise()
    return sc


EVICTED_HOST = "9c2e41d07b5a3f16e8d40c7b2a91f5e3"


def scenario_eviction_then_faulty_host() -> Scenario:
    ctx = Context(
        project="meridian-ai",
        location="us-south1",
        zone="us-south1-a",
        cluster="h100-res-uss1",
        namespace="foundation",
        workload="dense-30b-pretrain",
        issue_time="2026-02-25T17:50:00Z",
    )
    sc = Scenario(
        "eviction-then-failing-host",
        "Precedence: an eviction on a node that later fails twice for a host error. A3 High "
        "JobSet (1 x 4 pods) on a reserved block. At T-25.2m node ...-q3v6 runs low on "
        "memory (a log agent's buffer) and the kubelet evicts pod 1 (Evicted, "
        f"MemoryPressure); the JobSet restarts. Then the same node's host {EVICTED_HOST} "
        "fails at T-12.3m and T+6.2m (Xid 79, kernel panic, hostError, TerminationEvent, "
        "NodeNotReady), each followed by a restart (4 -> 7). An infrastructure cause wins "
        "whatever the order: faulty_host.",
        ctx,
        {},
    )
    nodes = sc.add_pool(
        "a3-res",
        "a3-highgpu-8g",
        4,
        suffixes=["a8m1", "q3v6", "r5d2", "y7k4"],
        hosts=True,
        host_ids={1: EVICTED_HOST},
        labels=gpu_labels("nvidia-h100-80gb"),
        capacity=gpu_capacity(208, 1919216020),
        taints=GPU_TAINT,
    )
    bad = nodes[1]
    sc.expect = expect(
        "faulty_host", "isolate_host", [{"host": EVICTED_HOST, "nodes": [bad.name], "failures": 2}]
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="trainer",
        image="us-south1-docker.pkg.dev/meridian-ai/pretrain/dense-trainer:0.19.3",
        resources={"cpu": "96", "memory": "1200Gi", "nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        tolerations=GPU_TOLERATION,
    )
    evict_m = -25.2
    ep1, ep2 = -12.3, 6.2
    sc.host_failure(
        bad,
        ep1,
        [
            (
                "kernel",
                "NVRM: Xid (PCI:0000:97:00): 79, pid='<unknown>', "
                "name=<unknown>, GPU has fallen off the bus.",
            ),
            ("kernel", "Kernel panic - not syncing: Fatal exception in interrupt"),
        ],
    )
    back1 = max(bad.not_ready) + 1
    sc.host_failure(
        bad,
        ep2,
        [
            (
                "kernel",
                "NVRM: Xid (PCI:0000:c6:00): 79, pid='<unknown>', "
                "name=<unknown>, GPU has fallen off the bus.",
            ),
            ("kernel", "Kernel panic - not syncing: Fatal machine check"),
        ],
    )
    back2 = max(bad.not_ready) + 1
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
    pod = sc.pod(spec, 4, 1)
    evicted(sc, pod, evict_m, "memory", 1_258_291_200, "1200Gi", "91244Ki")
    add_reason(sc, "kube_pod_status_reason", pod, "Evicted", lambda m: m >= -25)
    for k, r in enumerate(restarts):
        jobset_event(sc, spec, r - 0.55, "Restarting", f"restarting jobset, attempt {5 + k}")
    sc.training_noise(spec, "megatron")
    sc.kubelet_noise()
    return sc
