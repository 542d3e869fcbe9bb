"""Accelerator memory scenarios: CUDA out of memory (PyTorchJob), TPU HBM out of memory."""

from __future__ import annotations

import math

from ..builders.cluster import FIRST_MINUTE, LAST_MINUTE, Context
from ..builders.deterministic import glog_prefix, rand_float, rand_hex, rand_int
from ..builders.gpu import a3_pool
from ..builders.pytorch import (
    NCCL_ENV,
    torch_size,
    torchrun_failure,
    torchrun_startup,
    worker_pids,
)
from ..builders.scenario import Scenario, declare
from ..builders.templates import kubeflow_job, tpu_jobset
from ..builders.workload import jobset_restarting


def gpu_cuda_oom(sc: Scenario, ctx: Context) -> None:
    nodes = a3_pool(sc, 4)
    spec = kubeflow_job(
        "PyTorchJob",
        ctx.workload,
        "us-west4-docker.pkg.dev/aster-llm/finetune/llama-sft:2.5.1-cu124",
        {"Master": (nodes[:1], "200", "1700Gi", 8), "Worker": (nodes[1:], "200", "1700Gi", 8)},
        command=[
            "/bin/bash",
            "-c",
            "torchrun --nnodes=4 --nproc-per-node=8 --node-rank=$RANK "
            "--master-addr=$MASTER_ADDR --master-port=$MASTER_PORT /workspace/sft.py "
            "--config=/config/llama3-70b-lora.yaml || exit 128",
        ],
        env=NCCL_ENV,
    )
    fails = [-27.6, -6.6, 14.4]
    restarts = [math.ceil(f) + 1 for f in fails]
    starts = [-400, *restarts]
    sc.kf_attempts(spec, ctx.namespace, starts, lambda k, end: math.ceil(fails[k]), 128)
    sc.operator_counter(ctx.namespace, "pytorch", 3, [r for r in restarts for _ in range(2)])

    # The Master's log: torchrun and NCCL start-up, HF Trainer steps every 3 minutes,
    # checkpoints every 200 steps (25 minutes, longer than an attempt lives): every attempt
    # resumes from checkpoint 61200 and meets the bad batch at step 61344, 18 minutes on.
    rate, save_every, bad_step, ckpt = 8, 200, 61_344, 61_200
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else LAST_MINUTE + 1
        run = start + 1
        pods = [sc.kf_pod(spec, rtype, i, k) for rtype, i in spec.placement]
        master = pods[0]
        # step(m) = base_step + (m - base_m) * rate
        if k == 0:
            base_m, base_step = fails[0], bad_step
        else:
            base_m, base_step = start + 1.4, ckpt
        if run >= FIRST_MINUTE:
            for pod in pods:
                agent, _ = worker_pids(pod, k)
                torchrun_startup(sc, pod, run + 0.1, agent)
            t = ctx.at(run + 0.35, "pt-start", master.name, k)
            pid = rand_int(180, 420, "worker-pid", master.name, k)
            nccl_lines = [
                # nccl.toml quiet (source: NVIDIA/nccl v2.21.5-1 src/bootstrap.cc)
                f"{master.name}:{pid}:{pid} [0] NCCL INFO Bootstrap : Using eth0:{master.ip}<0>",
                # nccl.toml quiet (source: NVIDIA/nccl v2.20.5-1 src/init.cc; this image's 2.21.5)
                "NCCL version 2.21.5+cuda12.4",
                # nccl.toml quiet (source: NVIDIA/nccl v2.21.5-1 src/init.cc)
                f"{master.name}:{pid}:{pid + 41} [0] NCCL INFO ncclCommInitRank comm "
                f"0x55{rand_hex(10, 'comm', k)} rank 0 nranks 32 cudaDev 0 nvmlDev 0 busId "
                f"4000 commId 0x{rand_hex(16, 'commid', k)} - Init COMPLETE",
            ]
            for i, line in enumerate(nccl_lines):
                sc.container_log(master, run + 0.35, line, at_ns=t + i * 60_000_000)
        for m in range(max(run + 1, FIRST_MINUTE), min(end, LAST_MINUTE + 1)):
            if k < len(fails) and m >= math.floor(fails[k]):
                break
            if m + 0.5 < base_m and k > 0:
                continue
            step = base_step + int((m + 0.5 - base_m) * rate)
            prev = base_step + int((m - 0.5 - base_m) * rate)
            saved = (step // save_every) * save_every
            if prev < saved <= step and saved > (ckpt if k else 0):
                # pytorch.toml quiet (source: huggingface/transformers v4.40.0
                # src/transformers/trainer.py)
                text = f"Saving model checkpoint to /ckpt/{spec.name}/checkpoint-{saved}"
                sc.container_log(master, m + 0.8, text, key=("ckpt", k, m))
            if (m - run) % 3 == 1:
                loss = 1.3 * math.exp(-step / 90_000) + 0.82 + rand_float(-0.02, 0.02, "ll", step)
                metrics = {
                    "loss": f"{loss:.4f}",
                    "grad_norm": f"{rand_float(0.2, 0.6, 'gn', step):.4f}",
                    "learning_rate": f"{rand_float(1.1e-5, 1.3e-5, 'lr', step):.4e}",
                    "epoch": f"{step / 98_000:.2f}",
                }
                pairs = ", ".join(f"'{name}': {value}" for name, value in metrics.items())
                sc.container_log(master, m + 0.5, "{" + pairs + "}", key=("train", k, m))
        if k == len(fails):
            break
        # The long-sequence batch: every rank runs out of GPU memory within a second.
        m0 = fails[k]
        second = ctx.second(m0)
        for g, pod in enumerate(pods):
            last = second
            for local in range(8):
                at = second + rand_int(50_000_000, 950_000_000, "oom", pod.name, local, k)
                free = rand_float(0.9, 2.8, "free", pod.name, local, k)
                in_use = 79.11 - free
                reserved = rand_float(0.8, 2.9, "resv", pod.name, local, k)
                allocated = in_use - reserved - rand_float(1.1, 1.6, "ctx", pod.name, local, k)
                # pytorch.toml pytorch.cuda_oom_caching_allocator
                # (source: pytorch/pytorch v2.4.0 c10/cuda/CUDACachingAllocator.cpp)
                sc.container_log(
                    pod,
                    m0,
                    f"[rank{8 * g + local}]: torch.OutOfMemoryError: CUDA out of memory. Tried "
                    f"to allocate 3.91 GiB. GPU {local} has a total capacity of 79.11 GiB of "
                    f"which {torch_size(free)} is free. Process "
                    f"{rand_int(40_000, 900_000, 'nvml-pid', pod.name, local, k)} has "
                    f"{torch_size(in_use)} memory in use. Of the allocated memory "
                    f"{torch_size(allocated)} is allocated by PyTorch, and {torch_size(reserved)} "
                    "is reserved by "
                    "PyTorch but unallocated. If reserved but unallocated memory is large try "
                    "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
                    "fragmentation.  See documentation for Memory Management  "
                    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
                    stderr=True,
                    at_ns=at,
                )
                last = max(last, at)
            torchrun_failure(sc, pod, last, worker_pids(pod, k))


def tpu_hbm_oom(sc: Scenario, ctx: Context) -> None:
    v5p = ("tpu-v5p-slice", "2x2x4")
    tpu = sc.tpu_pool("v5p-pool", "ct5p-hightpu-4t", 4, *v5p, 208, 463475916, hosts=True)
    image = "us-docker.pkg.dev/atlas-tpu-research/maxtext/maxtext-runner:2026-08-28"
    spec = tpu_jobset(ctx.workload, "maxtext", image, *v5p)
    starts = [-43, -27, -11, 5, 21]
    fails = [s + 14.4 for s in starts[:-1]]
    restarts = starts[1:]
    assert restarts == [math.ceil(f) + 1 for f in fails]
    sc.add_jobset(spec, 0, restarts)
    groups = sc.attempts(
        spec, 0, starts, tpu, lambda k, end: {g: math.ceil(fails[k]) for g in range(4)}
    )
    for k, (group, start) in enumerate(zip(groups, starts, strict=True)):
        coord = group[0]
        run = start + 1
        for pod in group:
            at = ctx.at(run + 0.1, "jaxdist", pod.name)
            tid = rand_int(900, 1100, "tid", pod.name)
            lines = []
            if pod.coordinator:
                # xla_tpu.toml quiet (source: jax-ml/jax jax-v0.4.30 jax/_src/distributed.py)
                lines.append("Starting JAX distributed service on [::]:8476")
            # xla_tpu.toml quiet (source: jax-ml/jax jax-v0.4.30 jax/_src/distributed.py)
            lines.append(f"Connecting to JAX distributed service on {coord.ip}:8476")
            for i, text in enumerate(lines):
                sc.container_log(pod, run + 0.1, text, at_ns=at + i * 3_000_000)
            t = at + rand_int(400_000_000, 1_900_000_000, "jaxconn", pod.name)
            # xla_tpu.toml quiet (source: ROCm/xla upstream-jax-v0.6.2
            # xla/pjrt/distributed/client.cc)
            connected = "Connected to distributed JAX controller"
            sc.container_log(
                pod, run + 0.1, f"{glog_prefix('I', t, tid, 'client.cc:121')} {connected}", at_ns=t
            )
        # MaxText's memory report after the parameters are placed (startup_lines prints
        # "Memstats: After params initialized:" at run + 0.29).
        t = ctx.at(run + 0.3, "memstats", coord.name)
        for chip, coords in enumerate(("0,0,0", "1,0,0", "0,1,0", "1,1,0")):
            used = rand_float(71.2, 71.6, "hbm-used", k, chip)
            # xla_tpu.toml quiet (source: AI-Hypercomputer/maxtext tpu-recipes-v0.1.5
            # src/MaxText/max_utils.py)
            sc.container_log(
                coord,
                run + 0.3,
                f"\tUsing (GB) {used:.2f} / 95.74 ({used / 95.74 * 100:.6f}%) on "
                f"TPU_{chip}(process=0,({coords},0))",
                at_ns=t + chip * 1_000_000,
            )
        if k == len(fails):
            continue
        m0 = fails[k]
        second = ctx.second(m0)
        for pod in group:
            # xla_tpu.toml xla_tpu.hbm_compile_oom (source: https://github.com/erfanzar/EasyDeL/issues/78)
            sc.container_log(
                pod,
                m0,
                "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile "
                "permanent error. Ran out of memory in memory space hbm. Used 97.82G of 95.74G "
                "hbm. Exceeded hbm capacity by 2.08G.",
                stderr=True,
                at_ns=second + rand_int(100_000_000, 2_900_000_000, "hbm", pod.name),
            )
        jobset_restarting(sc, spec, restarts[k], k + 1)
    sc.training_noise(spec, "maxtext", checkpoint_every=10)


scenario_gpu_cuda_oom = declare(
    gpu_cuda_oom,
    "gpu-cuda-out-of-memory",
    "Kubeflow PyTorchJob (Master + 3 Workers, one A3 High node and 8 H100 each, 32 ranks, "
    "restartPolicy ExitCode; the container runs torchrun under 'bash -c ... || exit 128' "
    "so that a failed run exits with a retryable code). Each attempt resumes from the "
    "same checkpoint and, 18 minutes of training later, reaches the same long-sequence "
    "batch: every rank dies of torch.OutOfMemoryError: CUDA out of memory. Tried to "
    "allocate 3.91 GiB (the logits), each pod's torchrun reports failed (exitcode: 1) "
    "and ChildFailedError, all 4 pods exit 128 and the operator re-creates them "
    "(T-27.6m, T-6.6m, T+14.4m: 3 attempts; two PyTorchJobRestarting events, 1 Master "
    "and 3 Worker replica(s), and two counter steps per restart: "
    "training_operator_jobs_restarted_total{job_namespace=finetune,framework=pytorch} "
    "3 -> 9). Nodes stay Ready; no host is suspect.",
    Context(
        "aster-llm",
        "us-west4",
        "us-west4-a",
        "a3-llm-usw4",
        "finetune",
        "llama3-70b-lora",
        "2026-05-28T22:10:00Z",
        "pytorchjob",
    ),
    "gpu_out_of_memory",
    "fix_gpu_memory",
)


scenario_tpu_hbm_oom = declare(
    tpu_hbm_oom,
    "tpu-hbm-out-of-memory",
    "TPU v5p slice (2x2x4, 4 hosts, reserved block) running a MaxText JobSet created at "
    "T-43m. Every attempt restores the last checkpoint, trains, and about 13 minutes in "
    "compiles the eval step for its first evaluation: on all 4 workers XLA fails with "
    "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
    "space hbm (Used 97.82G of 95.74G hbm), the workers exit and the JobSet restarts "
    "(0 -> 4 at T-27m, T-11m, T+5m, T+21m). Nodes stay Ready, no interruption: the "
    "program needs more HBM than the chip has.",
    Context(
        "atlas-tpu-research",
        "us-east5",
        "us-east5-a",
        "v5p-train-use5",
        "llm",
        "gemma2-27b-pretrain",
        "2026-09-09T08:45:00Z",
    ),
    "gpu_out_of_memory",
    "fix_gpu_memory",
)
