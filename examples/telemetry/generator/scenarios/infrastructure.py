"""Infrastructure scenarios: Spot preemption, a faulty host, a host error, host maintenance."""

from __future__ import annotations

import math

from ..builders.cluster import Context, Node, spans
from ..builders.deterministic import NS
from ..builders.gpu import a3_pool
from ..builders.scenario import Scenario, declare
from ..builders.templates import gpu_jobset, tpu_jobset

FAULTY_HOST = "b7a3c1e2f4d5a6b7c8d9e0f1a2b3c4d5"
FAULTY_NODE = "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-x7k2"
#: The faulty-host scenario's cluster; the golden signal fixtures are logged in it too.
TPU_CLUSTER = Context(
    "customer-ai-project-123",
    "us-east5",
    "us-east5-a",
    "tpu-cluster-prod",
    "default",
    "llama3-70b-training",
    "2026-05-20T08:15:00Z",
)


def faulty_host_slice(sc: Scenario) -> list[Node]:
    """The TPU v5p slice of the faulty-host cluster: node 2 sits on ``FAULTY_HOST``."""
    return sc.tpu_pool(
        "tpu-pool",
        "ct5p-hightpu-4t",
        4,
        "tpu-v5p-slice",
        "2x2x4",
        208,
        463475916,
        pool_hash="3f9a2b1c",
        suffixes=["m4p8", "r2d6", "x7k2", "w9c3"],
        hosts=True,
        host_ids={2: FAULTY_HOST},
    )


def spot_preemption(sc: Scenario, ctx: Context) -> None:
    v5e = ("ct5lp-hightpu-4t", 2, "tpu-v5-lite-podslice", "2x4", 112, 197990396)
    pool0 = sc.tpu_pool("v5e-spot-0", *v5e, spot=True)
    pool1 = sc.tpu_pool("v5e-spot-1", *v5e, spot=True)
    placement = pool0 + pool1
    image = "us-docker.pkg.dev/acme-ml-spot/train/gemma-ft:2026.03.02"
    slices = {"replicas": 2, "parallelism": 2, "spot": True}
    spec = tpu_jobset(ctx.workload, "jax-tpu", image, "tpu-v5-lite-podslice", "2x4", **slices)
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
    for k, start, end in spans([-400] + [r for *_, r in events]):
        running: dict[int, int | None] = {}
        failed: dict[int, int] = {}
        if k > 0:
            _, node, _, r = events[k - 1]
            running[placement.index(node)] = max(node.ready_again, r + 1)
        if end is not None:
            m0, node, _, _ = events[k]
            failed[placement.index(node)] = math.ceil(m0)
        sc.attempt(spec, 1 + k, start, end, placement, running_from=running, failed_at=failed)
    text = "Received SIGTERM from the job controller, stopping training loop after the current step"
    for m0, node, _, _ in events:
        sc.coordinator_stops(spec, m0, text, after=0.5, unless_on=node)
    sc.training_noise(spec, "jax")


def faulty_host(sc: Scenario, ctx: Context) -> None:
    tpu = faulty_host_slice(sc)
    bad = tpu[2]
    sc.suspect(bad, 2)
    image = "us-docker.pkg.dev/customer-ai-project-123/maxtext/maxtext-runner:2026-05-12"
    spec = tpu_jobset(ctx.workload, "maxtext", image, "tpu-v5p-slice", "2x2x4")
    ep1, ep2 = -20.3, 4.8
    r1, r2 = -18, 7
    sc.add_jobset(spec, 6, [r1, r2])
    sc.host_failure(
        bad,
        ep1,
        [
            "BUG: unable to handle kernel paging request at 0000000000002008",
            "#PF: supervisor read access in kernel mode",
            "Oops: 0000 [#1] PREEMPT SMP NOPTI",
            (
                "systemd[1]",
                "node-problem-detector.service: Main process exited, code=exited, status=1/FAILURE",
            ),
        ],
    )
    back1 = bad.ready_again
    sc.host_failure(
        bad,
        ep2,
        [
            "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0",
            "{1}[Hardware Error]: event severity: fatal",
            "mce: [Hardware Error]: CPU 47: Machine Check Exception: 5 Bank 12: be00000000800400",
            "Kernel panic - not syncing: Fatal machine check",
        ],
    )
    sc.attempt(spec, 6, -500, r1, tpu, failed_at={2: math.ceil(ep1)})
    sc.waiting_attempt(spec, 7, 2, r1, r2, tpu, failed=math.ceil(ep2))
    sc.waiting_attempt(spec, 8, 2, r2, None, tpu)
    for m0 in (ep1, ep2):
        sc.coordinator_stops(spec, m0)
    sc.node_registered(bad, back1 - 0.6)
    sc.training_noise(spec, "maxtext")


def single_node_failure(sc: Scenario, ctx: Context) -> None:
    mega = ("nvidia-h100-mega-80gb", 208, 1918952244)
    nodes = sc.gpu_pool("a3mega-pool", "a3-megagpu-8g", 4, *mega, hosts=True)
    old_bad, bad = nodes[3], nodes[1]
    sc.suspect(bad, 1)
    image = "europe-west4-docker.pkg.dev/quanta-genai-prod/llm/sft-trainer:v0.14.2"
    spec = gpu_jobset(ctx.workload, "trainer", image, mega[0], rjob="trainer")
    ep0, ep1 = -75.2, -6.2
    r0, r1 = -73, -4
    sc.add_jobset(spec, 1, [r0, r1])
    xid79 = "79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    sc.host_failure(old_bad, ep0, [f"NVRM: Xid (PCI:0000:c8:00): {xid79}"], unknown=3)
    sc.host_failure(
        bad,
        ep1,
        [
            f"NVRM: Xid (PCI:0000:97:00): {xid79}",
            "NVRM: GPU 0000:97:00.0: GPU has fallen off the bus.",
            "Kernel panic - not syncing: Fatal exception in interrupt",
        ],
        unknown=4,
        false=1,
    )
    sc.attempt(spec, 1, -600, r0, nodes, failed_at={3: math.ceil(ep0)})
    back0 = old_bad.ready_again
    sc.attempt(spec, 2, r0, r1, nodes, running_from={3: back0}, failed_at={1: math.ceil(ep1)})
    sc.attempt(spec, 3, r1, None, nodes, running_from={1: bad.ready_again})
    sc.training_noise(spec, "hf")


def maintenance(sc: Scenario, ctx: Context) -> None:
    nodes = a3_pool(sc, 4)
    nodes[2].labels["cloud.google.com/scheduled-maintenance-time"] = str(
        ctx.t_ns // NS + 5 * 86400 + 7200
    )
    image = "us-east4-docker.pkg.dev/northwind-ai/vision/dit-train:1.8.0"
    spec = gpu_jobset(ctx.workload, "dit", image, "nvidia-h100-80gb", replicas=2, parallelism=2)
    m1, m2 = -17.4, 3.7
    r1, r2 = -15, 6
    sc.add_jobset(spec, 3, [r1, r2])
    sc.maintenance(nodes[1], m1)
    sc.maintenance(nodes[3], m2)
    back1, back2 = nodes[1].ready_again, nodes[3].ready_again
    sc.attempt(spec, 3, -900, r1, nodes, failed_at={1: math.ceil(m1 + 0.2)})
    sc.attempt(spec, 4, r1, r2, nodes, running_from={1: back1}, failed_at={3: math.ceil(m2 + 0.2)})
    sc.attempt(spec, 5, r2, None, nodes, running_from={3: back2})
    sc.interruption_constant("a3-pool", "MaintenanceEvent", "AutoUpgrade", 4)
    sc.training_noise(spec, "diffusion")


scenario_spot_preemption = declare(
    spot_preemption,
    "spot-preemption",
    "Two-slice TPU v5e JobSet on Spot node pools (one pool per slice). Spot VMs are "
    "preempted at T-22m, T-9m (Eviction) and T+6m (Defragmentation); each preemption is "
    "followed by a JobSet restart (restarts 2 -> 5 inside the window). An older preemption "
    "at T-70m (restart 1 -> 2) lies before the window and must not be counted. Spot nodes "
    "carry no gce-topology-host label; their brief NotReady runs are explained by the "
    "preemptions.",
    Context(
        "acme-ml-spot",
        "us-west4",
        "us-west4-a",
        "tpu-spot-cluster",
        "training",
        "gemma-7b-finetune",
        "2026-03-11T14:42:00Z",
    ),
    "spot_preemption",
    "avoid_preemption",
)


scenario_faulty_host = declare(
    faulty_host,
    "faulty-host",
    "TPU v5p slice (4 hosts, reserved block) running a JobSet. Node "
    f"{FAULTY_NODE} on physical host "
    f"{FAULTY_HOST} fails twice inside the window: at T-20m (kernel BUG, "
    "node-problem-detector exit, hostError, TerminationEvent, NodeNotReady, Ready=Unknown "
    "for 4 min, automaticRestart) and again at T+5m (APEI/MCE hardware errors, kernel "
    "panic, same chain). Each failure triggers one JobSet restart (6 -> 8) and the new "
    "pod waits on the recovering node (a FailedScheduling for the unreachable taint). "
    "The other three TPU nodes sit on other hosts and stay healthy.",
    TPU_CLUSTER,
    "faulty_host",
    "isolate_host",
)


scenario_single_node_failure = declare(
    single_node_failure,
    "single-node-failure",
    "A3 Mega GPU JobSet (4 nodes, reserved block, one host each). One node fails once "
    "inside the window at T-6m (GPU Xid 79, kernel panic, hostError, TerminationEvent, "
    "NodeNotReady, Ready=Unknown/False for 5 min) and the JobSet restarts (2 -> 3). A "
    "different node had a similar failure at T-75m, before the window: it must not be "
    "counted. Issue time is not on a whole minute (21:37:30).",
    Context(
        "quanta-genai-prod",
        "europe-west4",
        "europe-west4-b",
        "a3-mega-eu",
        "ml-jobs",
        "mixtral-8x7b-sft",
        "2026-04-02T21:37:30Z",
    ),
    "host_error",
    "watch_host",
)


scenario_maintenance = declare(
    maintenance,
    "maintenance",
    "A3 High GPU JobSet (2 replicated jobs x 2 pods) on a reserved block. Two different "
    "nodes go through Compute Engine host maintenance (MaintenanceEvent 'HW/SW "
    "Maintenance', compute.instances.terminateOnHostMaintenance) at T-17m and T+4m; each "
    "node is NotReady for ~5 min and each maintenance triggers a JobSet restart (3 -> 5). "
    "The NotReady runs and NodeNotReady events are explained by the maintenance, so no "
    "host is suspect. A third node carries an upcoming scheduled-maintenance-time label.",
    Context(
        "northwind-ai",
        "us-east4",
        "us-east4-a",
        "h100-train-east",
        "research",
        "dit-xl-diffusion",
        "2026-06-08T03:05:00Z",
    ),
    "maintenance",
    "plan_maintenance",
)
