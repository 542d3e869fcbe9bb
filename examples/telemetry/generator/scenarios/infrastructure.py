"""Scenarios where the infrastructure restarts a JobSet: Spot preemption, a faulty host, a
single host error, Compute Engine maintenance.
"""

from __future__ import annotations

import math

from ..builders.cluster import Context, JobSetSpec
from ..builders.deterministic import NS
from ..builders.scenario import Scenario
from ..builders.templates import (
    GPU_TAINT,
    GPU_TOLERATION,
    TPU_TAINT,
    TPU_TOLERATION,
    expect,
    gpu_capacity,
    gpu_labels,
    tpu_capacity,
    tpu_labels,
)


def scenario_spot_preemption() -> Scenario:
    ctx = Context(
        project="acme-ml-spot",
        location="us-west4",
        zone="us-west4-a",
        cluster="tpu-spot-cluster",
        namespace="training",
        workload="gemma-7b-finetune",
        issue_time="2026-03-11T14:42:00Z",
    )
    sc = Scenario(
        "spot-preemption",
        "Two-slice TPU v5e JobSet on Spot node pools (one pool per slice). Spot VMs are "
        "preempted at T-22m, T-9m (Eviction) and T+6m (Defragmentation); each preemption is "
        "followed by a JobSet restart (restarts 2 -> 5 inside the window). An older preemption "
        "at T-70m (restart 1 -> 2) lies before the window and must not be counted. Spot nodes "
        "carry no gce-topology-host label; their brief NotReady runs are explained by the "
        "preemptions.",
        ctx,
        expect("spot_preemption", "avoid_preemption"),
    )
    common = dict(
        spot=True,
        labels=tpu_labels("tpu-v5-lite-podslice", "2x4"),
        capacity=tpu_capacity(112, 197990396),
        taints=TPU_TAINT,
    )
    pool0 = sc.add_pool("v5e-spot-0", "ct5lp-hightpu-4t", 2, **common)  # type: ignore[arg-type]
    pool1 = sc.add_pool("v5e-spot-1", "ct5lp-hightpu-4t", 2, **common)  # type: ignore[arg-type]
    placement = pool0 + pool1
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="slice",
        replicas=2,
        parallelism=2,
        container="jax-tpu",
        image="us-docker.pkg.dev/acme-ml-spot/train/gemma-ft:2026.03.02",
        resources={"google.com/tpu": "4"},
        node_selector={
            "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
            "cloud.google.com/gke-tpu-topology": "2x4",
            "cloud.google.com/gke-spot": "true",
        },
        tolerations=TPU_TOLERATION,
    )
    # (preemption minute, node, reason, restart minute)
    events = [
        (-70.4, pool1[0], "Eviction", -68),
        (-22.3, pool0[0], "Eviction", -20),
        (-8.7, pool1[1], "Eviction", -7),
        (5.6, pool0[1], "Defragmentation", 7),
    ]
    sc.add_jobset(spec, 1, [r for *_, r in events])
    for m0, node, reason, _ in events:
        sc.preemption(node, m0, reason)
    starts = [-400] + [r for *_, r in events]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        running: dict[int, int | None] = {}
        failed: dict[int, int] = {}
        if k > 0:
            _, node, _, r = events[k - 1]
            g = placement.index(node)
            back = max(n for n in node.not_ready) + 1  # node Ready again
            running[g] = max(back, r + 1)
        if end is not None:
            m0, node, _, r = events[k]
            failed[placement.index(node)] = math.ceil(m0)
        sc.attempt(spec, 1 + k, start, end, placement, running_from=running, failed_at=failed)
    for m0, node, _, _ in events:
        coord = sc.coordinator_at(spec, m0)
        if coord and coord.node is not node:
            sc.container_log(
                coord,
                m0 + 0.5,
                "Received SIGTERM from the job controller, stopping training loop "
                "after the current step",
                key="sigterm",
            )
    sc.training_noise(spec, "jax")
    sc.kubelet_noise()
    return sc


FAULTY_HOST = "b7a3c1e2f4d5a6b7c8d9e0f1a2b3c4d5"


def scenario_faulty_host() -> Scenario:
    ctx = Context(
        project="customer-ai-project-123",
        location="us-east5",
        zone="us-east5-a",
        cluster="tpu-cluster-prod",
        namespace="default",
        workload="llama3-70b-training",
        issue_time="2026-05-20T08:15:00Z",
    )
    sc = Scenario(
        "faulty-host",
        "TPU v5p slice (4 hosts, reserved block) running a JobSet. Node "
        "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-x7k2 on physical host "
        f"{FAULTY_HOST} fails twice inside the window: at T-20m (kernel BUG, "
        "node-problem-detector exit, hostError, TerminationEvent, NodeNotReady, Ready=Unknown "
        "for 4 min, automaticRestart) and again at T+5m (APEI/MCE hardware errors, kernel "
        "panic, same chain). Each failure triggers one JobSet restart (6 -> 8) and the new "
        "pod waits on the recovering node (a FailedScheduling for the unreachable taint). "
        "The other three TPU nodes sit on other hosts and stay healthy.",
        ctx,
        expect(
            "faulty_host",
            "isolate_host",
            [
                {
                    "host": FAULTY_HOST,
                    "nodes": ["gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-x7k2"],
                    "failures": 2,
                }
            ],
        ),
    )
    tpu = sc.add_pool(
        "tpu-pool",
        "ct5p-hightpu-4t",
        4,
        pool_hash="3f9a2b1c",
        suffixes=["m4p8", "r2d6", "x7k2", "w9c3"],
        hosts=True,
        host_ids={2: FAULTY_HOST},
        labels=tpu_labels("tpu-v5p-slice", "2x2x4"),
        capacity=tpu_capacity(208, 463475916),
        taints=TPU_TAINT,
    )
    bad = tpu[2]
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="slice",
        replicas=1,
        parallelism=4,
        container="maxtext",
        image="us-docker.pkg.dev/customer-ai-project-123/maxtext/maxtext-runner:2026-05-12",
        resources={"google.com/tpu": "4"},
        node_selector={
            "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
            "cloud.google.com/gke-tpu-topology": "2x2x4",
        },
        tolerations=TPU_TOLERATION,
    )
    ep1, ep2 = -20.3, 4.8
    r1, r2 = -18, 7
    sc.add_jobset(spec, 6, [r1, r2])
    sc.host_failure(
        bad,
        ep1,
        [
            ("kernel", "BUG: unable to handle kernel paging request at 0000000000002008"),
            ("kernel", "#PF: supervisor read access in kernel mode"),
            ("kernel", "Oops: 0000 [#1] PREEMPT SMP NOPTI"),
            (
                "systemd[1]",
                "node-problem-detector.service: Main process exited, code=exited, status=1/FAILURE",
            ),
        ],
    )
    back1 = max(bad.not_ready) + 1
    sc.host_failure(
        bad,
        ep2,
        [
            (
                "kernel",
                "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0",
            ),
            ("kernel", "{1}[Hardware Error]: event severity: fatal"),
            (
                "kernel",
                "mce: [Hardware Error]: CPU 47: Machine Check Exception: 5 Bank 12: "
                "be00000000800400",
            ),
            ("kernel", "Kernel panic - not syncing: Fatal machine check"),
        ],
    )
    back2 = max(bad.not_ready) + 1
    msg = (
        "0/4 nodes are available: 1 node(s) had untolerated taint "
        "{node.kubernetes.io/unreachable: }, 3 Insufficient google.com/tpu. preemption: "
        "0/4 nodes are available: 1 Preemption is not helpful for scheduling, 3 No "
        "preemption victims found for incoming pod."
    )
    sc.attempt(spec, 6, -500, r1, tpu, failed_at={2: math.ceil(ep1)})
    sc.attempt(
        spec,
        7,
        r1,
        r2,
        tpu,
        running_from={2: back1 + 1},
        failed_at={2: math.ceil(ep2)},
        unsched={2: (r1, back1)},
        sched_message=msg,
    )
    sc.attempt(
        spec,
        8,
        r2,
        None,
        tpu,
        running_from={2: back2 + 1},
        unsched={2: (r2, back2)},
        sched_message=msg,
    )
    for attempt, r, back in ((7, r1, back1), (8, r2, back2)):
        pod = sc.pod(spec, attempt, 2)
        sc.event_pod(
            pod, r - 0.84, "FailedScheduling", msg, component="default-scheduler", etype="Warning"
        )
        sc.event_pod(
            pod,
            back - 0.2,
            "Scheduled",
            f"Successfully assigned {pod.namespace}/{pod.name} to {bad.name}",
            component="default-scheduler",
        )
    for m0 in (ep1, ep2):
        coord = sc.coordinator_at(spec, m0)
        if coord:
            sc.container_log(
                coord,
                m0 + 1.1,
                "Terminating: job controller requested shutdown (SIGTERM)",
                key="sigterm",
            )
    sc.kubelet_journal(
        bad,
        back1 - 0.6,
        f'"Successfully registered node" node="{bad.name}"',
        "kubelet_node_status.go:79",
    )
    sc.training_noise(spec, "maxtext")
    sc.kubelet_noise()
    return sc


def scenario_single_node_failure() -> Scenario:
    ctx = Context(
        project="quanta-genai-prod",
        location="europe-west4",
        zone="europe-west4-b",
        cluster="a3-mega-eu",
        namespace="ml-jobs",
        workload="mixtral-8x7b-sft",
        issue_time="2026-04-02T21:37:30Z",
    )
    sc = Scenario(
        "single-node-failure",
        "A3 Mega GPU JobSet (4 nodes, reserved block, one host each). One node fails once "
        "inside the window at T-6m (GPU Xid 79, kernel panic, hostError, TerminationEvent, "
        "NodeNotReady, Ready=Unknown/False for 5 min) and the JobSet restarts (2 -> 3). A "
        "different node had a similar failure at T-75m, before the window: it must not be "
        "counted. Issue time is not on a whole minute (21:37:30).",
        ctx,
        {},
    )
    nodes = sc.add_pool(
        "a3mega-pool",
        "a3-megagpu-8g",
        4,
        hosts=True,
        labels=gpu_labels("nvidia-h100-mega-80gb"),
        capacity=gpu_capacity(208, 1918952244),
        taints=GPU_TAINT,
    )
    old_bad, bad = nodes[3], nodes[1]
    sc.expect = expect(
        "host_error", "watch_host", [{"host": bad.host, "nodes": [bad.name], "failures": 1}]
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="trainer",
        replicas=1,
        parallelism=4,
        container="trainer",
        image="europe-west4-docker.pkg.dev/quanta-genai-prod/llm/sft-trainer:v0.14.2",
        resources={"nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-mega-80gb"},
        tolerations=GPU_TOLERATION,
    )
    ep0, ep1 = -75.2, -6.2
    r0, r1 = -73, -4
    sc.add_jobset(spec, 1, [r0, r1])
    sc.host_failure(
        old_bad,
        ep0,
        [
            (
                "kernel",
                "NVRM: Xid (PCI:0000:c8:00): 79, pid='<unknown>', name=<unknown>, GPU has "
                "fallen off the bus.",
            ),
        ],
        unknown=3,
    )
    sc.host_failure(
        bad,
        ep1,
        [
            (
                "kernel",
                "NVRM: Xid (PCI:0000:97:00): 79, pid='<unknown>', name=<unknown>, GPU has "
                "fallen off the bus.",
            ),
            ("kernel", "NVRM: GPU 0000:97:00.0: GPU has fallen off the bus."),
            ("kernel", "Kernel panic - not syncing: Fatal exception in interrupt"),
        ],
        unknown=4,
        false=1,
    )
    back0 = max(m for m in old_bad.not_ready) + 1
    back1 = max(m for m in bad.not_ready) + 1
    sc.attempt(spec, 1, -600, r0, nodes, failed_at={3: math.ceil(ep0)})
    sc.attempt(spec, 2, r0, r1, nodes, running_from={3: back0}, failed_at={1: math.ceil(ep1)})
    sc.attempt(spec, 3, r1, None, nodes, running_from={1: back1})
    sc.training_noise(spec, "hf")
    sc.kubelet_noise()
    return sc


def scenario_maintenance() -> Scenario:
    ctx = Context(
        project="northwind-ai",
        location="us-east4",
        zone="us-east4-a",
        cluster="h100-train-east",
        namespace="research",
        workload="dit-xl-diffusion",
        issue_time="2026-06-08T03:05:00Z",
    )
    sc = Scenario(
        "maintenance",
        "A3 High GPU JobSet (2 replicated jobs x 2 pods) on a reserved block. Two different "
        "nodes go through Compute Engine host maintenance (MaintenanceEvent 'HW/SW "
        "Maintenance', compute.instances.terminateOnHostMaintenance) at T-17m and T+4m; each "
        "node is NotReady for ~5 min and each maintenance triggers a JobSet restart (3 -> 5). "
        "The NotReady runs and NodeNotReady events are explained by the maintenance, so no "
        "host is suspect. A third node carries an upcoming scheduled-maintenance-time label.",
        ctx,
        expect("maintenance", "plan_maintenance"),
    )
    nodes = sc.add_pool(
        "a3-pool",
        "a3-highgpu-8g",
        4,
        hosts=True,
        labels=gpu_labels("nvidia-h100-80gb"),
        capacity=gpu_capacity(208, 1919216020),
        taints=GPU_TAINT,
    )
    nodes[2].labels["cloud.google.com/scheduled-maintenance-time"] = str(
        ctx.t_ns // NS + 5 * 86400 + 7200
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=2,
        parallelism=2,
        container="dit",
        image="us-east4-docker.pkg.dev/northwind-ai/vision/dit-train:1.8.0",
        resources={"nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        tolerations=GPU_TOLERATION,
    )
    m1, m2 = -17.4, 3.7
    r1, r2 = -15, 6
    sc.add_jobset(spec, 3, [r1, r2])
    sc.maintenance(nodes[1], m1)
    sc.maintenance(nodes[3], m2)
    back1 = max(nodes[1].not_ready) + 1
    back2 = max(nodes[3].not_ready) + 1
    sc.attempt(spec, 3, -900, r1, nodes, failed_at={1: math.ceil(m1 + 0.2)})
    sc.attempt(spec, 4, r1, r2, nodes, running_from={1: back1}, failed_at={3: math.ceil(m2 + 0.2)})
    sc.attempt(spec, 5, r2, None, nodes, running_from={3: back2})
    sc.interruption_constant("a3-pool", "MaintenanceEvent", "AutoUpgrade", 4)
    sc.training_noise(spec, "diffusion")
    sc.kubelet_noise()
    return sc
