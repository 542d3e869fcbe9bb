"""NVIDIA Xid scenarios: an application fault, hardware faults, an Xid 79 on a Ready node."""

from __future__ import annotations

import math
from typing import Any

from ..builders.cluster import Context
from ..builders.deterministic import NS, rand_hex, rand_int
from ..builders.gpu import a3_jobset, a3_pool, gpu_fault_episode, outage_back, xid_burst
from ..builders.pytorch import cuda_error_lines, torchrun_failure, worker_pids
from ..builders.scenario import Scenario, declare
from ..builders.workload import jobset_restarting

#: What CUDA reports to the rank whose GPU has an uncorrectable memory error.
UNCORRECTABLE = "uncorrectable ECC error encountered"


def gpu_xid_application(sc: Scenario, ctx: Context) -> None:
    nodes = a3_pool(sc, 4)
    spec = a3_jobset(ctx, "us-east5-docker.pkg.dev/corvid-ml-research/moe/moe-trainer:0.7.3-cu126")
    fails = [-9.4, 2.6]
    restarts = [math.ceil(f) + 1 for f in fails]
    sc.add_jobset(spec, 2, restarts)
    starts = [-400, *restarts]
    sc.attempts(spec, 2, starts, nodes, lambda k, end: {g: math.ceil(fails[k]) for g in range(4)})
    sc.training_noise(spec, "megatron", every=3)
    for k, (m0, r) in enumerate(zip(fails, restarts, strict=True)):
        second = ctx.second(m0)
        for i, node in enumerate(nodes):
            pod = sc.pod(spec, 2 + k, i)
            host_pid = rand_int(40_000, 3_000_000, "host-pid", node.name, k)
            lines: list[tuple[int, str]] = []
            for gpu in range(8):
                if i in (1, 3) and gpu in (2, 5):
                    # nvidia.toml nvidia.xid, Xid 13 (source: https://github.com/leptonai/gpud/pull/46)
                    lines.append(
                        (
                            gpu,
                            "13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on "
                            f"(GPC {rand_int(0, 8, 'gpc', node.name, gpu, k)}, TPC "
                            f"{rand_int(0, 9, 'tpc', node.name, gpu, k)}, SM 0): Illegal "
                            "Instruction Parameter",
                        )
                    )
                    continue
                # nvidia.toml nvidia.xid, Xid 31 (source: https://github.com/akash-network/support/issues/244;
                # name=pt_main_thread as in that source's Xid 43 line)
                lines.append(
                    (
                        gpu,
                        f"31, pid={host_pid + gpu}, name=pt_main_thread, Ch 00000008, intr "
                        "00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_"
                        f"{rand_int(0, 16, 'gpcc', node.name, gpu, k)} faulted @ "
                        f"0x7f{rand_hex(2, 'va1', node.name, gpu, k)}_"
                        f"{rand_hex(8, 'va2', node.name, gpu, k)}. Fault is of type FAULT_PDE "
                        "ACCESS_TYPE_VIRT_READ",
                    )
                )
            start_at = second + rand_int(60_000_000, 400_000_000, "burst", node.name, k)
            xid_burst(sc, node, start_at, lines, first_since_boot=(k == 0))
            # Every rank's process sees the fault at its next synchronisation.
            t = second + NS + rand_int(0, 500_000_000, "sync", node.name, k)
            last = t
            for local in range(8):
                at = t + rand_int(1_000_000, 80_000_000, "rank-err", pod.name, local)
                # nvidia.toml nvidia.cuda_application_error
                # (source: https://github.com/VITA-Group/TEGNAS/issues/19)
                last = max(
                    last,
                    cuda_error_lines(
                        sc, pod, at, 8 * i + local, "an illegal memory access was encountered"
                    ),
                )
            torchrun_failure(sc, pod, last, worker_pids(pod))
        jobset_restarting(sc, spec, r, 3 + k)


XID48_HOST = "d41c7e9a2b6f08e35a1c9d7f4e2b6a80"


def gpu_xid_hardware_twice(sc: Scenario, ctx: Context) -> None:
    nodes = a3_pool(sc, 4, suffixes=["f5n1", "p8c3", "r4t6", "k2w8"], host_ids={3: XID48_HOST})
    bad = nodes[3]
    sc.suspect(bad, 2)
    spec = a3_jobset(ctx, "us-central1-docker.pkg.dev/halcyon-genai/llm/cpt-trainer:2026.06.30")
    eps = [-14.3, 0.7]
    restarts = [math.ceil(e) + 1 for e in eps]
    backs = [outage_back(e) for e in eps]
    sc.add_jobset(spec, 5, restarts)
    sc.attempt(spec, 5, -500, restarts[0], nodes, failed_at={3: math.ceil(eps[0])})
    sc.attempt(
        spec,
        6,
        restarts[0],
        restarts[1],
        nodes,
        running_from={3: backs[0] + 1},
        failed_at={3: math.ceil(eps[1])},
    )
    sc.attempt(spec, 7, restarts[1], None, nodes, running_from={3: backs[1] + 1})
    gpu = 6
    for k, m0 in enumerate(eps):
        phys = f"0x{rand_hex(9, 'phys', k)}"
        xids = [
            # nvidia.toml nvidia.xid, Xid 48 (source: https://github.com/NVIDIA/gpu-operator/issues/1146)
            "48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has "
            f"been detected on GPU in the framebuffer at physAddr {phys} partition "
            f"{rand_int(0, 8, 'part', k)}, subpartition {rand_int(0, 2, 'sub', k)}.",
            # nvidia.toml nvidia.xid, Xid 63 (source: https://github.com/stas00/ml-engineering/blob/7bc7c3054eb93c277a4755c597ae0864d77a63f1/compute/accelerator/nvidia/debug.md;
            # pid='<unknown>', name=<unknown> as the 535 driver prints them)
            "63, pid='<unknown>', name=<unknown>, Row Remapper: New row marked for remapping, "
            "reset gpu to activate.",
        ]
        # nvidia.toml nvidia.cuda_uncorrectable_hardware_error
        # (source: https://github.com/vllm-project/vllm/issues/5222)
        gpu_fault_episode(sc, spec, 5 + k, 3, m0, gpu, xids, error=UNCORRECTABLE)
    sc.training_noise(spec, "hf")


def gpu_xid_hardware_once(sc: Scenario, ctx: Context) -> None:
    nodes = a3_pool(sc, 4)
    bad = nodes[2]
    sc.suspect(bad, 1)
    spec = a3_jobset(ctx, "europe-west4-docker.pkg.dev/tidewater-ai/vision/vit-trainer:3.2.0")
    m0 = -4.3
    restart = math.ceil(m0) + 1
    sc.add_jobset(spec, 3, [restart])
    sc.attempt(spec, 3, -600, restart, nodes, failed_at={2: math.ceil(m0)})
    sc.attempt(spec, 4, restart, None, nodes, running_from={2: outage_back(m0) + 1})
    # nvidia.toml nvidia.xid, Xid 95 (source: NVIDIA/open-gpu-kernel-modules 570.86.15
    # src/nvidia/src/kernel/gpu/arch/ampere/kern_gpu_error_cont_ga100.c)
    xid95 = (
        f"95, pid={rand_int(40_000, 900_000, 'x95pid')}, Uncontained: LTC TAG (0x2, 0x1). "
        "RST: Yes, D-RST: No"
    )
    # the 570 driver's banner is not in the catalog
    gpu_fault_episode(sc, spec, 3, 2, m0, 3, [xid95], error=UNCORRECTABLE, banner=False)
    sc.training_noise(spec, "diffusion")


def gpu_xid79_stays_ready(sc: Scenario, ctx: Context) -> None:
    nodes = a3_pool(sc, 5, suffixes=["b3m9", "h7q2", "n2x5", "t6c1", "w8d4"])
    bad, spare = nodes[1], nodes[4]
    sc.suspect(bad, 1)
    spec = a3_jobset(ctx, "us-east4-docker.pkg.dev/lyra-foundation/sft/sft-trainer:1.9.4")
    m0 = -6.4
    restart = math.ceil(m0) + 1
    sc.add_jobset(spec, 1, [restart])
    sc.attempt(spec, 1, -520, restart, nodes[:4], failed_at={1: math.ceil(m0)})
    sc.attempt(spec, 2, restart, None, [nodes[0], spare, nodes[2], nodes[3]])
    # nvidia.toml nvidia.xid, Xid 79 (source: https://github.com/akash-network/support/issues/209)
    xid79 = "79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    gpu_fault_episode(sc, spec, 1, 1, m0, 5, [xid79], error=None, exitcode=-6, outage=False)

    def seven_gpus(item: dict[str, Any]) -> None:
        # nvidia-gpu-device-plugin marks the lost GPU unhealthy: allocatable drops to 7.
        item["status"]["allocatable"]["nvidia.com/gpu"] = "7"

    sc.node_hooks[bad.name] = seven_gpus
    sc.training_noise(spec, "megatron", every=3)


scenario_gpu_xid_application = declare(
    gpu_xid_application,
    "gpu-xid-application-every-rank",
    "A3 High JobSet (1 x 4 pods, 8 H100 each, 32 ranks, reserved block) training a MoE "
    "model with a custom FP8 token-dispatch kernel. At T-9.4m and again at T+2.6m (two "
    "attempts, 12 minutes apart) the kernel reads out of bounds on every rank: in the same "
    "second all 4 nodes log an application-class Xid on each GPU (Xid 31 MMU fault; Xid 13 "
    "Graphics SM Warp Exception on two GPUs of nodes 1 and 3), every rank raises CUDA "
    "error: an illegal memory access was encountered, and each pod's torchrun reports "
    "failed (exitcode: 1) and ChildFailedError. The JobSet restarts (2 -> 4). Nodes stay "
    "Ready throughout: one fault of the job on every rank, not four hosts failing.",
    Context(
        "corvid-ml-research",
        "us-east5",
        "us-east5-a",
        "a3-kernels-use5",
        "moe",
        "moe-16b-fp8",
        "2026-03-24T19:40:00Z",
    ),
    "application",
    "inspect_application",
)


scenario_gpu_xid_hardware_twice = declare(
    gpu_xid_hardware_twice,
    "gpu-xid-hardware-twice",
    "A3 High JobSet (1 x 4 pods, reserved block). GPU 6 (PCI 0000:8a:00) of node "
    f"...-k2w8 on physical host {XID48_HOST} reports an uncorrectable double-bit ECC error "
    "(Xid 48, then Xid 63 row remapping) at T-14.3m and again at T+0.7m, 15 minutes "
    "apart. Each time rank 30 dies with CUDA error: uncorrectable ECC error encountered, "
    "torchrun reports failed (exitcode: 1), the JobSet restarts (5 -> 7) and the node is "
    "reset (Ready Unknown for 3 samples, then False, NodeNotReady; the driver loads again "
    "on boot); the new pod waits for the node. There is no Compute Engine hostError or "
    "TerminationEvent: the Xid is the evidence. Two hardware faults of one host: "
    "faulty_host.",
    Context(
        "halcyon-genai",
        "us-central1",
        "us-central1-a",
        "a3-prod-usc1",
        "training",
        "llama3-70b-cpt",
        "2026-07-08T11:25:00Z",
    ),
    "faulty_host",
    "isolate_host",
)


scenario_gpu_xid_hardware_once = declare(
    gpu_xid_hardware_once,
    "gpu-xid-hardware-once",
    "A3 High JobSet (1 x 4 pods, reserved block). At T-4.3m GPU 3 (PCI 0000:0b:00) of "
    "node 2 reports an uncontained memory error (Xid 95, 'Uncontained: LTC TAG ... RST: "
    "Yes'): rank 19 dies with CUDA error: uncorrectable ECC error encountered, torchrun "
    "reports failed (exitcode: 1), the JobSet restarts (3 -> 4) and the node is reset "
    "once (Ready Unknown for 3 samples, then False, NodeNotReady); the new pod waits "
    "for it. One hardware fault of one host inside the window: host_error, watch it.",
    Context(
        "tidewater-ai",
        "europe-west4",
        "europe-west4-b",
        "a3-vision-euw4",
        "vision",
        "vit-22b-pretrain",
        "2026-10-27T15:50:00Z",
    ),
    "host_error",
    "watch_host",
)


scenario_gpu_xid79_stays_ready = declare(
    gpu_xid79_stays_ready,
    "gpu-xid79-node-stays-ready",
    "A3 High JobSet (1 x 4 pods) on a 5-node reserved pool (one spare). At T-6.4m GPU 5 "
    "(PCI 0000:85:00) of node ...-h7q2 falls off the bus (Xid 79): rank 13 aborts (Fatal "
    "Python error: Aborted, torchrun failed (exitcode: -6), Signal 6 (SIGABRT)) and the "
    "JobSet restarts (1 -> 2); the new pod 1 runs on the spare node. The node itself "
    "never goes NotReady (node_status_condition Ready=True all along, no hostError, no "
    "TerminationEvent, no NodeNotReady); the device plugin reports 7 allocatable GPUs "
    "on it since. A hardware Xid is a host fault even on a Ready node: host_error.",
    Context(
        "lyra-foundation",
        "us-east4",
        "us-east4-b",
        "a3-sft-use4",
        "sft",
        "qwen2-72b-sft",
        "2026-12-15T06:35:00Z",
    ),
    "host_error",
    "watch_host",
)
