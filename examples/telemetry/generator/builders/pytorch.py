"""What PyTorch prints when a rank fails: the NCCL watchdog, CUDA errors, torchrun's agent.

Every failure line is a wording of the signature catalog
(shared/loopbreaker/signals/catalog/*.toml); the comment beside it names its source.
"""

from __future__ import annotations

from .cluster import AnyPod, Context
from .deterministic import NS, c10_prefix, dt, elastic_prefix, py_stamp, rand_int
from .scenario import Scenario

#: What a PyTorchJob's container sets for NCCL: INFO logs, async error handling.
NCCL_ENV = [
    {"name": "NCCL_DEBUG", "value": "INFO"},
    {"name": "TORCH_NCCL_ASYNC_ERROR_HANDLING", "value": "1"},
]
TORCHRUN = "/usr/bin/python3"


ELASTIC_MP_API = "torch/distributed/elastic/multiprocessing/api.py"


ELASTIC_AGENT_API = "torch/distributed/elastic/agent/server/api.py"


def nccl_failure_lines(ctx: Context, pod: AnyPod, m: float, seq: int) -> list[tuple[int, str]]:
    """(entry time ns, text) of what a torchrun rank-0 container prints on a watchdog timeout.

    The time printed inside a line is a few milliseconds before the entry's timestamp.
    """
    t = ctx.at(m, "nccl", pod.name)
    pid = rand_int(2000, 9000, "pid", pod.name)
    ms = 1_000_000
    raw: list[tuple[int, str]] = [
        (
            t,
            f"{c10_prefix(0, 'E', t, 'ProcessGroupNCCL.cpp:629')} [Rank 0] Watchdog caught "
            f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
            "NumelIn=268435456, NumelOut=268435456, Timeout(ms)=600000) ran for "
            f"{600000 + rand_int(20, 120, 'ran', seq)} milliseconds before timing out.",
        ),
        (
            t + 2 * ms,
            f"{c10_prefix(0, 'E', t + 2 * ms, 'ProcessGroupNCCL.cpp:1664')} "
            f"[PG ID 0 PG GUID 0(default_pg) Rank 0] Exception (either an error or "
            f"timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: "
            f"{seq}, last completed NCCL work: {seq - 1}.",
        ),
        (
            t + 3 * ms,
            f"{c10_prefix(0, 'E', t + 3 * ms, 'ProcessGroupNCCL.cpp:1709')} "
            "Some NCCL operations have failed or timed out. Due to the asynchronous "
            "nature of CUDA kernels, subsequent GPU operations might run on "
            "corrupted/incomplete data.",
        ),
        (
            t + 4 * ms,
            f"{c10_prefix(0, 'E', t + 4 * ms, 'ProcessGroupNCCL.cpp:1715')} To "
            "avoid data inconsistency, we are taking the entire process down.",
        ),
        (t + 9 * ms, "terminate called after throwing an instance of 'c10::DistBackendError'"),
        (
            t + 6812 * ms,
            f"[{py_stamp(t + 6812 * ms)}] "
            "torch.distributed.elastic.multiprocessing.api: [ERROR] failed "
            f"(exitcode: -6) local_rank: 0 (pid: {pid}) of binary: "
            "/usr/bin/python3",
        ),
        (t + 7390 * ms, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "),
        (
            t + 7391 * ms,
            f"train.py FAILED\n  time      : {dt(t):%Y-%m-%d_%H:%M:%S}\n"
            f"  host      : {pod.name}\n"
            f"  rank      : 0 (local_rank: 0)\n  exitcode  : -6 (pid: {pid})\n"
            f"  error_file: <N/A>\n  traceback : Signal 6 (SIGABRT) received by "
            f"PID {pid}",
        ),
    ]
    return [(at + rand_int(400_000, 3_000_000, "lag", at), text) for at, text in raw]


def torchrun_startup(sc: Scenario, pod: AnyPod, m: float, agent_pid: int) -> None:
    """torchrun's agent forming its worker group (one pod, stderr as Python logging writes)."""
    at = sc.ctx.at(m, "torchrun-start", pod.name)
    lines = [
        # pytorch.toml quiet (source: https://github.com/pytorch/pytorch/issues/147064)
        f"{elastic_prefix('I', at, agent_pid, ELASTIC_AGENT_API + ':677')} [default] "
        "Rendezvous'ing worker group",
        # pytorch.toml quiet (source: pytorch/pytorch v2.4.0
        # torch/distributed/elastic/agent/server/api.py)
        f"{elastic_prefix('I', at + 2_300_000_000, agent_pid, ELASTIC_AGENT_API + ':525')} "
        "[default] Rendezvous complete for workers. Result:",
    ]
    for i, text in enumerate(lines):
        sc.container_log(pod, m, text, stderr=True, at_ns=at + i * 2_300_000_000)


def torchrun_failure(
    sc: Scenario,
    pod: AnyPod,
    at_ns: int,
    pids: tuple[int, list[int]],
    *,
    local_rank: int = 0,
    exitcode: int = 1,
    kill_others: bool = False,
) -> int:
    """What torchrun (agent and local workers: ``pids``) prints when local worker
    ``local_rank`` fails: the other workers sent SIGTERM (``kill_others``), the failure, then
    ChildFailedError's report. Returns the time of the last line."""
    agent_pid, workers = pids
    pid = workers[local_rank]
    others = [p for i, p in enumerate(workers) if i != local_rank] if kill_others else []
    api = ELASTIC_MP_API
    lines: list[tuple[int, str]] = []
    t = at_ns
    for other in others:
        t += rand_int(300_000, 2_000_000, "sigterm", pod.name, other, at_ns)
        # pytorch.toml quiet (source: https://github.com/hpcaitech/ColossalAI/issues/3514)
        lines.append(
            (
                t,
                f"{elastic_prefix('W', t, agent_pid, api + ':897')} Sending process {other} "
                "closing signal SIGTERM",
            )
        )
    t += rand_int(1_200_000_000, 2_600_000_000, "fail-line", pod.name, at_ns)
    # pytorch.toml pytorch.elastic_worker_failed
    # (source: https://github.com/pytorch/pytorch/issues/147064)
    lines.append(
        (
            t,
            f"{elastic_prefix('E', t, agent_pid, api + ':869')} failed (exitcode: {exitcode}) "
            f"local_rank: {local_rank} (pid: {pid}) of binary: {TORCHRUN}",
        )
    )
    t += rand_int(200_000_000, 400_000_000, "cfe", pod.name, at_ns)
    # pytorch.toml pytorch.child_failed_error (source: https://github.com/meta-llama/llama/issues/706)
    lines.append((t, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"))
    # pytorch.toml pytorch.elastic_root_cause
    # (source: https://github.com/open-mmlab/mmsegmentation/issues/3106)
    lines.append((t + 400_000, "Root Cause (first observed failure):"))
    # pytorch.toml pytorch.elastic_root_cause (source: https://github.com/pytorch/pytorch/issues/121209;
    # the -6 form: https://github.com/open-mmlab/mmsegmentation/issues/3106)
    lines.append((t + 800_000, f"  exitcode  : {exitcode} (pid: {pid})"))
    # pytorch.toml quiet (source: https://github.com/open-mmlab/mmsegmentation/issues/3106)
    lines.append((t + 900_000, "  error_file: <N/A>"))
    if exitcode < 0:
        signal = {-6: "SIGABRT", -9: "SIGKILL", -11: "SIGSEGV"}[exitcode]
        # pytorch.toml pytorch.elastic_root_cause
        # (source: https://github.com/open-compass/VLMEvalKit/issues/1131)
        lines.append(
            (t + 1_000_000, f"  traceback : Signal {-exitcode} ({signal}) received by PID {pid}")
        )
    else:
        # pytorch.toml quiet (source: https://github.com/pytorch/pytorch/issues/121209)
        lines.append(
            (
                t + 1_000_000,
                "  traceback : To enable traceback see: "
                "https://pytorch.org/docs/stable/elastic/errors.html",
            )
        )
    for at, text in lines:
        sc.container_log(pod, dt_minutes(sc, at), text, stderr=True, at_ns=at)
    return lines[-1][0]


def torchrun_stopped(sc: Scenario, pod: AnyPod, m: float, agent_pid: int, worker_pid: int) -> None:
    """A pod the controller stops (SIGTERM to the container): its torchrun shuts down."""
    at = sc.ctx.at(m, "death", pod.name)
    # pytorch.toml quiet (source: pytorch/pytorch v2.9.0
    # torch/distributed/elastic/agent/server/api.py)
    sc.container_log(
        pod,
        m,
        f"{elastic_prefix('W', at, agent_pid, ELASTIC_AGENT_API + ':725')} Received 15 death "
        "signal, shutting down workers",
        stderr=True,
        at_ns=at,
    )
    t = at + rand_int(400_000, 2_000_000, "death-term", pod.name)
    # pytorch.toml quiet (source: https://github.com/hpcaitech/ColossalAI/issues/3514)
    sc.container_log(
        pod,
        m,
        f"{elastic_prefix('W', t, agent_pid, ELASTIC_MP_API + ':897')} Sending process "
        f"{worker_pid} closing signal SIGTERM",
        stderr=True,
        at_ns=t,
    )


def torch_size(gib: float) -> str:
    """A size as PyTorch's allocator prints it (c10 format_size: MiB below 1 GiB)."""
    if gib < 1:
        return f"{gib * 1024:.2f} MiB"
    return f"{gib:.2f} GiB"


def dt_minutes(sc: Scenario, at_ns: int) -> float:
    """Minutes from the issue time (only used to key a log line whose time is pinned)."""
    return (at_ns - sc.ctx.t_ns) / (60 * NS)


def worker_pids(pod: AnyPod, base_key: object = "") -> tuple[int, list[int]]:
    """(torchrun agent pid, the 8 local workers' pids) inside the container."""
    agent = rand_int(7, 40, "agent-pid", pod.name, base_key)
    first = rand_int(180, 420, "worker-pid", pod.name, base_key)
    return agent, [first + i for i in range(8)]


def cuda_error_lines(sc: Scenario, pod: AnyPod, at_ns: int, rank: int, error: str) -> int:
    """A rank's CUDA error and the hints PyTorch appends (c10/cuda/CUDAMiscFunctions.cpp);
    the excepthook PyTorch 2.3+ installs prefixes every line with '[rankN]: '."""
    lines = [
        f"[rank{rank}]: RuntimeError: CUDA error: {error}",
        # nvidia.toml quiet (source: https://github.com/jade-hpc-gpu/jade-hpc-gpu.github.io/issues/194)
        f"[rank{rank}]: CUDA kernel errors might be asynchronously reported at some other API "
        "call, so the stacktrace below might be incorrect.",
        # nvidia.toml quiet (source: https://github.com/jade-hpc-gpu/jade-hpc-gpu.github.io/issues/194)
        f"[rank{rank}]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
        # nvidia.toml quiet (source: https://github.com/jade-hpc-gpu/jade-hpc-gpu.github.io/issues/194)
        f"[rank{rank}]: Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    ]
    t = at_ns
    for i, text in enumerate(lines):
        sc.container_log(pod, dt_minutes(sc, t), text, stderr=True, at_ns=t)
        t += rand_int(30_000, 300_000, "cuda-hint", pod.name, rank, i, at_ns)
    return t
