"""JobSet scenarios on healthy nodes: capacity, an NCCL hang, no restart loop, an unknown loop."""

from __future__ import annotations

from ..builders.cluster import LAST_MINUTE, Context
from ..builders.deterministic import NS, py_stamp, rand_int
from ..builders.gpu import a2_ultra_pool
from ..builders.pytorch import nccl_failure_lines
from ..builders.scenario import Scenario, declare
from ..builders.templates import gpu_jobset, tpu_jobset

#: The NCCL-hang scenario's zonal cluster; the golden signal fixtures are logged in it too.
A100_CLUSTER = Context(
    "neox-research-7781",
    "us-central1-a",
    "us-central1-a",
    "a100-cluster",
    "llm",
    "gpt-neox-pretrain",
    "2026-01-27T16:48:00Z",
)


def capacity(sc: Scenario, ctx: Context) -> None:
    v6e = ("tpu-v6e-slice", "4x4")
    tpu = sc.tpu_pool("v6e-pool", "ct6e-standard-4t", 4, *v6e, 180, 739695076, hosts=True)
    image = "us-docker.pkg.dev/acme-ml-platform/maxtext/runner:2026.02.10"
    spec = tpu_jobset(ctx.workload, "maxtext", image, *v6e)
    image = "us-docker.pkg.dev/acme-ml-platform/eval/harness:3.2.1"
    other = tpu_jobset(
        "priority-eval", "eval", image, *v6e, rjob="eval", priority_class="high-priority-eval"
    )
    r0, r1 = -41, -27
    sc.add_jobset(spec, 9, [r0, r1])
    sc.add_jobset(other, 0, [])
    msg = (
        "0/4 nodes are available: 4 Insufficient google.com/tpu. preemption: 0/4 nodes "
        "are available: 4 No preemption victims found for incoming pod."
    )
    sc.attempt(spec, 9, -700, r0, tpu, failed_at={3: r0 - 1})
    sc.attempt(spec, 10, r0, r1, tpu, failed_at={2: r1 - 1})
    pending = sc.attempt(
        spec,
        11,
        r1,
        None,
        tpu,
        running_from={g: None for g in range(4)},
        unsched={g: (r1, LAST_MINUTE + 1) for g in range(4)},
        sched_message=msg,
    )
    evals = sc.attempt(
        other,
        0,
        -28,
        None,
        tpu,
        running_from={g: -26 for g in range(4)},
        unsched={g: (-28, -27) for g in range(4)},
        sched_message=msg,
    )
    for g, pod in enumerate(evals):
        sc.failed_scheduling(pod, -27.8 + 0.01 * g, msg)
        sc.scheduled(pod, -26.6 + 0.01 * g)
    for g, pod in enumerate(pending):
        first = r1 + 0.08 + 0.01 * g
        times = [first, first + 1.0, first + 3.1, first + 8.2, first + 18.4, first + 38.6]
        sc.unschedulable(pod, times, msg)
    sc.training_noise(spec, "maxtext")


def nccl_hang(sc: Scenario, ctx: Context) -> None:
    nodes = a2_ultra_pool(sc)
    image = "us-central1-docker.pkg.dev/neox-research-7781/neox/gpt-neox:2.0-cu124"
    a100 = "nvidia-a100-80gb"
    spec = gpu_jobset(ctx.workload, "pytorch", image, a100, coordinator_label=True)
    restarts = [-39, -19, 1, 21]  # -39 is before the window
    sc.add_jobset(spec, 1, restarts)
    sc.attempts(spec, 1, [-300, *restarts], nodes, lambda k, end: {g: end - 1 for g in range(4)})
    sc.training_noise(spec, "megatron", every=3, quiet=[(r - 12, r) for r in restarts])
    for k, r in enumerate(restarts):
        fail_m = r - 1.6
        pod = sc.coordinator_at(spec, fail_m)
        assert pod is not None
        seq = 48000 + 213 * k
        sc.stderr_lines(pod, fail_m, nccl_failure_lines(ctx, pod, fail_m, seq))
        worker = next(p for p in sc.pods if p.attempt == pod.attempt and p.p == 2)
        tw = ctx.at(fail_m - 0.05, "wk", worker.name)
        rank = 16
        lines = [
            f"[rank{rank}]:[{py_stamp(tw)}] NCCL WARN : [Proxy Service {rank}] Failed to "
            "send, connection reset by peer",
            f"[rank{rank}]:[{py_stamp(tw + 4 * NS)}] NCCL WARN: Collective "
            f"allreduce/{seq} timeout after 600 seconds",
            f"[{py_stamp(tw + 9 * NS)}] torch.distributed.elastic.multiprocessing.api: "
            f"[ERROR] Child process {rand_int(2000, 9000, 'cp', worker.name)} died with "
            "exit code 1",
        ]
        for offset, text in zip((0, 4, 9), lines, strict=True):
            at = tw + offset * NS + rand_int(400_000, 3_000_000, "lag", tw, offset)
            sc.container_log(worker, fail_m, text, stderr=True, at_ns=at)


def no_restarts(sc: Scenario, ctx: Context) -> None:
    v4 = ("tpu-v4-podslice", "2x2x4")
    tpu = sc.tpu_pool("v4-pool", "ct4p-hightpu-4t", 4, *v4, 240, 421573588)
    image = "us-docker.pkg.dev/acme-ml-platform/t5x/t5x-runner:0.9.3"
    spec = tpu_jobset(ctx.workload, "t5x", image, *v4)
    sc.add_jobset(spec, 3, [-62])
    sc.restarts["data-prep-sharder"] = (0, [-12, 9])
    sc.attempt(spec, 3, -800, -62, tpu, failed_at={1: -63})
    sc.attempt(spec, 4, -62, None, tpu)
    sc.interruption_constant("v4-pool", "MaintenanceEvent", "AutoUpgrade", 1)
    sc.training_noise(spec, "jax")


def unknown(sc: Scenario, ctx: Context) -> None:
    l4 = ("nvidia-l4", 48, 197972452, 4)
    nodes = sc.gpu_pool("l4-pool", "g2-standard-48", 4, *l4)
    image = "asia-southeast1-docker.pkg.dev/orbital-ml-dev/asr/whisper-ft:0.3.1"
    spec = gpu_jobset(ctx.workload, "trainer", image, "nvidia-l4", gpus=4)
    r1, r2 = -14, 12
    sc.add_jobset(spec, 0, [r1, r2])
    sc.attempt(spec, 0, -200, r1, nodes, failed_at={3: r1 - 1})
    sc.attempt(spec, 1, r1, r2, nodes, failed_at={0: r2 - 1})
    sc.attempt(spec, 2, r2, None, nodes)
    sc.training_noise(spec, "hf", every=3)
    for k, r in enumerate((r1, r2)):
        pod = next(p for p in sc.pods if p.attempt == k and p.p == (3 if k == 0 else 0))
        sc.container_log(
            pod,
            r - 1.4,
            "UserWarning: torch.utils.checkpoint: the use_reentrant parameter "
            "should be passed explicitly.",
            stderr=True,
            key="warn",
        )
        sc.container_log(
            pod,
            r - 1.2,
            "audio shard gs://orbital-ml-dev-asr/shards/train-00417.tar: 3 "
            "samples skipped (empty transcript)",
            key="skip",
        )
        sc.killing(pod, r - 0.6)


scenario_capacity = declare(
    capacity,
    "capacity",
    "TPU v6e JobSet (one 4x4 slice = 4 hosts). The JobSet restarts at T-41m (before the "
    "window, rescheduled at once) and at T-27m (10 -> 11 in the window). A higher-priority "
    "JobSet (priority-eval) submitted at T-28m takes the freed slice, so from T-27m all "
    "four new pods stay Pending/Unschedulable with FailedScheduling 'Insufficient "
    "google.com/tpu'. All nodes stay Ready and no interruption increases (only an old "
    "constant AutoUpgrade series).",
    Context(
        "acme-ml-platform",
        "us-east5",
        "us-east5-b",
        "tpu-v6e-cluster",
        "default",
        "maxtext-v6e-pretrain",
        "2026-02-14T11:20:00Z",
    ),
    "capacity",
    "add_capacity",
)


scenario_nccl_hang = declare(
    nccl_hang,
    "nccl-application-hang",
    "A2 Ultra (A100 80GB) JobSet, 4 pods x 8 GPUs (32 ranks), zonal cluster. The "
    "training hangs in an all-reduce about 8 minutes after every (re)start; the NCCL "
    "watchdog fires after 600 s on the coordinator (worker 0 of job 0) with "
    "ProcessGroupNCCL timeout, DistBackendError and torchrun ChildFailedError, and "
    "the JobSet restarts (2 -> 5, at T-19m, T+1m, T+21m). A non-coordinator worker logs "
    "NCCL WARN connection reset / collective timeout lines. Nodes are healthy (no "
    "NotReady, no interruptions); A2 nodes carry no gce-topology-host label. Pods carry "
    "the jobset.sigs.k8s.io/coordinator label (value names worker 0 for every pod).",
    A100_CLUSTER,
    "application",
    "inspect_application",
)


scenario_no_restarts = declare(
    no_restarts,
    "no-restarts",
    "TPU v4 JobSet (one 2x2x4 slice = 4 hosts). kube_jobset_restarts for the workload is "
    "4 from T-62m on (the last restart happened before the window) and flat through the "
    "window, so there is no restart loop. Another JobSet in the same namespace "
    "(data-prep-sharder) does restart inside the window and must be ignored.",
    Context(
        "acme-ml-platform",
        "us-central2-b",
        "us-central2-b",
        "tpu-v4-research",
        "team-nlp",
        "t5-xxl-pretrain",
        "2026-07-03T09:00:00Z",
    ),
    "no_restart_loop",
    "none",
    restart_loop=False,
)


scenario_unknown = declare(
    unknown,
    "unknown",
    "L4 GPU JobSet (4 pods x 4 GPUs) restarts twice inside the window (T-14m, T+12m; "
    "0 -> 2). Nodes stay Ready, there are no interruptions, no pending pods and the "
    "worker logs hold only ordinary or unrecognized lines. Nothing explains the restarts. "
    "The data crosses midnight UTC.",
    Context(
        "orbital-ml-dev",
        "asia-southeast1",
        "asia-southeast1-b",
        "l4-dev-cluster",
        "default",
        "whisper-large-ft",
        "2026-09-15T23:55:00Z",
    ),
    "unknown",
    "inspect_application",
    kubelet_every=13,
)
