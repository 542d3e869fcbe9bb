"""GPU nodes and their faults: A2/A3 pools and JobSets, NVIDIA Xid bursts, GPU fault episodes.

Every Xid line is a wording of the signature catalog; the comment beside it names its source.
"""

from __future__ import annotations

import math
from typing import Any

from .cluster import Context, JobSetSpec, Node
from .deterministic import NS, rand_int, rand_uuid, syslog_stamp
from .pytorch import cuda_error_lines, torchrun_failure, torchrun_stopped, worker_pids
from .scenario import Scenario
from .templates import gpu_jobset
from .workload import jobset_restarting

#: PCI bus of the eight H100s of an a3-highgpu-8g VM, as nvidia-smi lists them (0000:BB:00.0).
A3_GPU_BUS = ("04", "05", "0a", "0b", "84", "85", "8a", "8b")


#: The GPU driver of these nodes (GKE's default driver for 1.32; 535 prints pid= and name=).
GPU_DRIVER = "535.183.01"


def kernel_at(sc: Scenario, node: Node, at_ns: int, message: str) -> dict[str, Any]:
    """A kernel line of the node journal at an exact time (``Scenario.kernel_line`` derives
    its own time from the minute; a driver's burst needs its lines in order)."""
    up = max(at_ns - node.boot_ns, NS)
    body = f"kernel: [{up // NS:>5d}.{(up % NS) // 1000:06d}] {message}"
    return sc.node_log(node, at_ns, f"{syslog_stamp(at_ns)} {node.name} {body}")


def gpu_uuid(node: Node, gpu: int) -> str:
    return "GPU-" + rand_uuid("gpu-uuid", node.name, gpu)


def xid_burst(
    sc: Scenario,
    node: Node,
    at_ns: int,
    lines: list[tuple[int, str]],
    *,
    first_since_boot: bool,
) -> int:
    """Xid lines of one node starting at ``at_ns``: [(gpu, message after 'NVRM: ')].

    Before a GPU's first Xid since the driver loaded, the driver names it once
    (kernel_rc.c _krcLogUuidOnce): 'NVRM: GPU at PCI:...: GPU-<uuid>' and its board serial.
    Returns the time of the last line.
    """
    at = at_ns
    named: set[int] = set()
    for gpu, message in lines:
        bus = A3_GPU_BUS[gpu]
        if first_since_boot and gpu not in named:
            named.add(gpu)
            # nvidia.toml quiet (source: https://github.com/akash-network/support/issues/244)
            kernel_at(sc, node, at, f"NVRM: GPU at PCI:0000:{bus}:00: {gpu_uuid(node, gpu)}")
            at += rand_int(8_000, 40_000, "uuid-lag", node.name, gpu, at)
            # nvidia.toml quiet (source: https://github.com/akash-network/support/issues/244)
            kernel_at(
                sc,
                node,
                at,
                "NVRM: GPU Board Serial Number: "
                f"{rand_int(1_650_000_000_000, 1_659_999_999_999, 'serial', node.name, gpu)}",
            )
            at += rand_int(8_000, 40_000, "serial-lag", node.name, gpu, at)
        kernel_at(sc, node, at, f"NVRM: Xid (PCI:0000:{bus}:00): {message}")
        at += rand_int(20_000, 900_000, "xid-lag", node.name, gpu, at)
    return at


def driver_loaded(sc: Scenario, node: Node) -> None:
    """The driver's banner when the node boots again (after an outage)."""
    at = node.boot_ns + rand_int(14 * NS, 19 * NS, "nvload", node.name, node.boot_ns)
    # nvidia.toml quiet (source: https://github.com/akash-network/support/issues/244)
    kernel_at(
        sc,
        node,
        at,
        f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {GPU_DRIVER}  Sun May 12 19:39:15 UTC "
        "2024",
    )


def a3_pool(
    sc: Scenario, count: int, pool: str = "a3-pool", *, hosts: bool = True, **kwargs: Any
) -> list[Node]:
    """A3 High nodes, 8 x H100 80GB each, on a reserved block (gce-topology-* labels) unless
    ``hosts`` is False."""
    h100 = ("nvidia-h100-80gb", 208, 1919216020)
    return sc.gpu_pool(pool, "a3-highgpu-8g", count, *h100, hosts=hosts, **kwargs)


def a2_ultra_pool(sc: Scenario, count: int = 4) -> list[Node]:
    """A2 Ultra nodes, 8 x A100 80GB each (no topology labels)."""
    return sc.gpu_pool("a100-pool", "a2-ultragpu-8g", count, "nvidia-a100-80gb", 96, 1391821596)


def a3_jobset(ctx: Context, image: str, container: str = "pytorch", **kwargs: Any) -> JobSetSpec:
    """The workload's JobSet of 4 A3 High pods, all of a node each."""
    h100 = "nvidia-h100-80gb"
    return gpu_jobset(ctx.workload, container, image, h100, cpu="200", memory="1700Gi", **kwargs)


def gpu_host_outage(
    sc: Scenario, node: Node, m0: float, unknown: int = 3, *, banner: bool = True
) -> None:
    """The node stops posting status after its GPU fault (Ready Unknown, then False, then
    True again), with the node controller's NodeNotReady and the driver loading on boot."""
    sc.outage(node, math.ceil(m0 + 0.1), unknown, 1, noticed=m0 + 0.62)
    if banner:
        driver_loaded(sc, node)


def outage_back(m0: float, unknown: int = 3) -> int:
    """The first Ready minute after ``gpu_host_outage(…, m0, unknown)``."""
    return math.ceil(m0 + 0.1) + unknown + 1


def gpu_fault_episode(
    sc: Scenario,
    spec: JobSetSpec,
    attempt: int,
    g: int,
    m0: float,
    gpu: int,
    xids: list[str],
    *,
    error: str | None,
    exitcode: int = 1,
    outage: bool = True,
    banner: bool = True,
) -> None:
    """GPU ``gpu`` of the node of pod ``g`` of ``attempt`` faults at T+m0: the driver's Xid
    lines, the rank on that GPU dies (its CUDA ``error``, or an abort), torchrun reports it,
    the node may go NotReady (``outage``); the JobSet restarts the next minute."""
    pod = sc.pod(spec, attempt, g)
    node = pod.node
    assert node is not None
    start_at = sc.ctx.second(m0) + rand_int(100_000_000, 600_000_000, "xid-at", node.name, m0)
    xid_burst(sc, node, start_at, [(gpu, x) for x in xids], first_since_boot=True)
    rank = 8 * (pod.j * pod.spec.parallelism + pod.p) + gpu
    t = start_at + rand_int(300_000_000, 900_000_000, "app-sees", node.name, m0)
    if error is not None:
        last = cuda_error_lines(sc, pod, t, rank, error)
    else:
        # pytorch.toml pytorch.fatal_python_error (source: python/cpython v3.11.7
        # Modules/faulthandler.c)
        sc.container_log(pod, m0, "Fatal Python error: Aborted", stderr=True, at_ns=t)
        last = t
    pids = worker_pids(pod)
    torchrun_failure(sc, pod, last, pids, local_rank=gpu, exitcode=exitcode, kill_others=True)
    if outage:
        gpu_host_outage(sc, node, m0, banner=banner)
    restart = math.ceil(m0) + 1
    for other in range(spec.size):
        if other != g:
            stopped = sc.pod(spec, attempt, other)
            agent, workers = worker_pids(stopped)
            torchrun_stopped(sc, stopped, restart - 0.5, agent, workers[0])
    jobset_restarting(sc, spec, restart, attempt + 1)
