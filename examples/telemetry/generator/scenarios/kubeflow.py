"""Kubeflow training-operator scenarios: a TFJob on a faulty host, a PyTorchJob NCCL timeout."""

from __future__ import annotations

import math

from ..builders.cluster import FIRST_MINUTE, LAST_MINUTE, Context, spans
from ..builders.deterministic import NS, c10_prefix, rand_float, rand_int
from ..builders.gpu import A3_GPU_BUS, a3_pool
from ..builders.pytorch import NCCL_ENV, nccl_failure_lines
from ..builders.scenario import Scenario, declare
from ..builders.templates import kubeflow_job

TF_FAULTY_HOST = "4e1f9a07c3b2d5e6f7a8091b2c3d4e5f"


def tfjob_faulty_host(sc: Scenario, ctx: Context) -> None:
    reservation = {
        "cloud.google.com/reservation-name": "a3-vision-usc1-block",
        "cloud.google.com/reservation-affinity": "specific",
    }
    gpus = a3_pool(
        sc,
        4,
        "a3-res-pool",
        pool_hash="5c2e8d1a",
        suffixes=["h2m7", "t6w4", "q8v3", "b3n9"],
        host_ids={2: TF_FAULTY_HOST},
        labels=reservation,
    )
    cpus = sc.cpu_pool("cpu-pool", "n2-highmem-32", 3, 32, 263965424)
    bad = gpus[2]
    sc.suspect(bad, 2)
    spec = kubeflow_job(
        "TFJob",
        ctx.workload,
        "us-central1-docker.pkg.dev/lumen-vision-prod/vision/resnet-ps:tf2.17-cu12",
        {"Chief": (cpus[:1], "8", "32Gi"), "PS": (cpus[1:2], "16", "96Gi")}
        | {"Worker": (gpus, "96", "1000Gi", 8)},
        command=["python3", "-m", "official.vision.train", "--experiment=resnet_imagenet"],
    )
    other = kubeflow_job(
        "TFJob",
        "wide-deep-ctr",
        "us-central1-docker.pkg.dev/lumen-vision-prod/recsys/wide-deep:tf2.17",
        {"Chief": ([cpus[2]], "4", "16Gi"), "PS": ([cpus[2]], "4", "32Gi")}
        | {"Worker": (cpus[:2], "8", "48Gi")},
    )

    # wide-deep-ctr: Worker 1 is OOM-killed at T-51m and re-created at T-50m.
    other_r, worker1 = -50, ("Worker", 1)
    sc.kf_replicas(other, ctx.namespace, -900, skip=[worker1])
    sc.kf_incarnations(other, ctx.namespace, worker1, [-900, other_r], exit_code=137)

    ep1, ep2 = -16.4, 9.2
    xid79 = "79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    sc.host_failure(
        bad,
        ep1,
        [
            "NVRM: Xid (PCI:0000:a8:00): 48, pid=21544, name=python3, An uncorrectable "
            "double bit error (DBE) has been detected on GPU in the framebuffer at "
            "partition 0, subpartition 0.",
            f"NVRM: Xid (PCI:0000:a8:00): {xid79}",
            "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 1",
            "Kernel panic - not syncing: Fatal exception in interrupt",
        ],
    )
    back1 = bad.ready_again
    sc.host_failure(
        bad,
        ep2,
        [
            "mce: [Hardware Error]: CPU 71: Machine Check Exception: 5 Bank 5: bea0000000000108",
            f"NVRM: Xid (PCI:0000:c6:00): {xid79}",
            "Kernel panic - not syncing: Fatal machine check",
        ],
    )
    back2 = bad.ready_again
    # The pod turns Failed when the rebooted kubelet reports it (the Ready=False sample);
    # the operator re-creates it within the minute, on the recovered node.
    r1, r2 = back1, back2
    worker2 = ("Worker", 2)
    sc.kf_replicas(spec, ctx.namespace, -600, skip=[worker2])
    first, second, _ = sc.kf_incarnations(
        spec, ctx.namespace, worker2, [-600, r1, r2], exit_code=137
    )
    sc.operator_counter(ctx.namespace, "tensorflow", 3, [other_r, r1, r2])
    for back in (back1, back2):
        sc.node_registered(bad, back - 0.6)

    chief, tid = sc.kf_chief(spec)
    step0 = 318_000
    for m in range(FIRST_MINUTE + 1, LAST_MINUTE + 1, 3):
        step = step0 + (m - FIRST_MINUTE) * 96
        at = ctx.at(m + 0.4, "tf-step", step)
        down = any(bad.not_ready.get(x) for x in (m, m - 1))
        loss = 2.1 * math.exp(-step / 400_000) + 0.95 + rand_float(-0.02, 0.02, "tl", step)
        rate = rand_float(7400, 7600, "ips", step) if down else rand_float(9900, 10150, "ips", step)
        text = (
            f"train | step: {step:>7d} | steps per second: {rate / 4096:.2f} | training "
            f"metrics: {{'training_loss': {loss:.4f}, 'accuracy': "
            f"{rand_float(0.71, 0.73, 'acc', step):.4f}, 'examples/sec': {rate:.1f}}}"
        )
        sc.glog_line(chief, m + 0.4, at, tid, "controller.py:495", text)
        if (m - FIRST_MINUTE) % 21 == 19:
            saved = f"saved checkpoint to gs://{ctx.project}-ckpt/{spec.name}/ckpt-{step}."
            sc.glog_line(chief, m + 0.7, at + 18 * NS, tid, "controller.py:528", saved)
    w = "/job:worker/replica:0/task:2"
    for m0, pod in ((ep1, first), (ep2, second)):
        at = ctx.at(m0 + 0.35, "tf-unavailable", pod.name)
        # gRPC stamps the error when the channel broke, a few seconds after the host died.
        broke = at - 8 * NS
        created = f"{broke // NS}.{broke % NS:09d}"
        failed = (
            f"Worker {w} failed with UnavailableError: Socket closed. Additional GRPC error "
            f"information from remote target {w} while calling /tensorflow.eager.EagerService/"
            f'RunComponentFunction: :{{"created":"@{created}","description":"Error '
            f'received from peer ipv4:{pod.ip}:2222","grpc_status":14}}'
        )
        sc.glog_line(chief, m0 + 0.35, at, tid, "cluster_coordinator.py:793", failed, "W")
        waiting = (
            f"Waiting for worker {w} to come back; its closures are rescheduled on the other "
            "workers."
        )
        sc.glog_line(chief, m0 + 0.36, at + NS // 50, tid, "cluster_coordinator.py:812", waiting)
    for incarnation, r in ((1, r1), (2, r2)):
        pod = sc.kf_pod(spec, "Worker", 2, incarnation)
        at = ctx.at(r + 1.2, "tf-start", pod.name)
        ptid = rand_int(200, 900, "ptid", pod.name, incarnation)
        for gpu, bus in enumerate(A3_GPU_BUS):
            device = (
                f"Created device {w}/device:GPU:{gpu} with 78938 MB memory:  -> device: {gpu}, "
                f"name: NVIDIA H100 80GB HBM3, pci bus id: 0000:{bus}:00.0, compute "
                "capability: 9.0"
            )
            sc.glog_line(pod, r + 1.2, at + gpu * 3_000_000, ptid, "gpu_device.cc:2019", device)
        server = f"Started server with target: grpc://{pod.name}.{ctx.namespace}.svc:2222"
        sc.glog_line(pod, r + 1.21, at + 90_000_000, ptid, "grpc_server_lib.cc:467", server)
        recovered = f"Worker {w} has been recovered."
        sc.glog_line(chief, r + 1.25, at + 4 * NS, tid, "cluster_coordinator.py:901", recovered)


def pytorchjob_nccl_timeout(sc: Scenario, ctx: Context) -> None:
    a100 = sc.gpu_pool("a100-pool", "a2-highgpu-1g", 8, "nvidia-tesla-a100", 12, 87553420, 1)
    l4 = sc.gpu_pool("l4-pool", "g2-standard-12", 2, "nvidia-l4", 12, 49330012, 1)
    spec = kubeflow_job(
        "PyTorchJob",
        ctx.workload,
        "europe-west4-docker.pkg.dev/sable-nlp-lab/nlp/bert-pretrain:2.4.1-cu124",
        {"Master": (a100[:1], "10", "72Gi", 1), "Worker": (a100[1:], "10", "72Gi", 1)},
        command=["python3", "/workspace/run_pretraining.py", "--config=bert_large_phase2.yaml"],
        env=NCCL_ENV,
    )
    other = kubeflow_job(
        "PyTorchJob",
        "roberta-sweep-3",
        "europe-west4-docker.pkg.dev/sable-nlp-lab/nlp/roberta-eval:1.2.0",
        {"Master": (l4[:1], "10", "40Gi", 1), "Worker": (l4[1:], "10", "40Gi", 1)},
    )

    restarts = [-41, -21, -1, 19]  # -41 is before the window
    starts = [-300, *restarts]
    sc.kf_attempts(spec, ctx.namespace, starts, lambda k, end: end - 1, 134)
    sc.operator_counter(ctx.namespace, "pytorch", 6, [r for r in restarts for _ in range(2)])

    # The other namespace's job: its Worker is OOM-killed twice.
    other_ns, worker0 = "nlp-eval", ("Worker", 0)
    other_starts = [-200, 5, 24]
    sc.kf_replicas(other, other_ns, -200, skip=[worker0])
    sc.kf_incarnations(other, other_ns, worker0, other_starts, exit_code=137)
    sc.operator_counter(other_ns, "pytorch", None, other_starts[1:])

    # The Master's log: start-up, steps every 3 minutes until the hang, checkpoints.
    quiet = [(r - 12, r) for r in restarts]
    last_ckpt = 152_000
    for k, start, until in spans(starts):
        master = sc.kf_pod(spec, "Master", 0, k)
        run = start + 1
        end = LAST_MINUTE + 1 if until is None else until
        resume = last_ckpt
        if run >= FIRST_MINUTE:
            t = ctx.at(run + 0.2, "pt-start", master.name, k)
            pid = rand_int(100, 999, "pid", master.name, k)
            for i, line in enumerate(
                (
                    f"{master.name}:{pid}:{pid} [0] NCCL INFO Bootstrap : Using "
                    f"eth0:{master.ip}<0>",
                    "NCCL version 2.21.5+cuda12.4",
                    f"{master.name}:{pid}:{pid + 17} [0] NCCL INFO comm 0x55d0c4a2f1e0 rank 0 "
                    "nranks 8 cudaDev 0 nvmlDev 0 busId 4000 commId 0x3f6e1b9d2c4a8e17 - Init "
                    "COMPLETE",
                    f"[rank0] resuming from gs://{ctx.project}-ckpt/{spec.name}/step_{resume}",
                )
            ):
                sc.container_log(master, run + 0.2, line, at_ns=t + i * 40_000_000)
        for m in range(max(run, FIRST_MINUTE), min(end, LAST_MINUTE + 1)):
            if any(a <= m < b for a, b in quiet) or m >= end - 1:
                continue
            step = resume + (m - run) * 55
            if (m - run) % 5 == 4:
                last_ckpt = step
                sc.container_log(
                    master,
                    m + 0.8,
                    f"[rank0] saved checkpoint gs://{ctx.project}-ckpt/{spec.name}/step_{step}",
                    key=("ckpt", m),
                )
            if (m - run) % 3 != 1:
                continue
            loss = 1.9 * math.exp(-step / 250_000) + 1.1 + rand_float(-0.02, 0.02, "bl", step)
            sc.container_log(
                master,
                m + 0.5,
                f"[rank0] step {step} | mlm_loss {loss:.4f} | nsp_loss "
                f"{rand_float(0.015, 0.03, 'nsp', step):.4f} | lr 8.72e-05 | "
                f"{rand_float(410, 425, 'sps', step):.1f} seq/s",
                key=("train", m),
            )

    # The hang: every rank's watchdog fires; Worker 0 first, the Master's abort chain.
    for k, r in enumerate(restarts):
        fail_m = r - 1.6
        seq = 91_000 + 377 * k
        master = sc.kf_pod(spec, "Master", 0, k)
        lines = nccl_failure_lines(ctx, master, fail_m, seq)[:5]
        t_last = lines[-1][0]
        ran = 600000 + rand_int(20, 120, "ran", seq)
        lines += [
            (
                t_last + 150_000,
                "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog "
                f"thread terminated with exception: [Rank 0] Watchdog caught collective "
                f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
                f"NumelIn=335544320, NumelOut=335544320, Timeout(ms)=600000) ran for {ran} "
                "milliseconds before timing out.",
            ),
            (t_last + 2_400_000, "Fatal Python error: Aborted"),
        ]
        sc.stderr_lines(master, fail_m, lines)
        for i in range(7):
            worker = sc.kf_pod(spec, "Worker", i, k)
            rank = i + 1
            # The Master's watchdog time; Worker 0's fires 2 s before it, the others after.
            t = ctx.at(fail_m, "nccl", master.name)
            if i == 0:
                t -= 2 * NS
            else:
                t += rand_int(10_000_000, 900_000_000, "wd", worker.name, k)
            sc.container_log(
                worker,
                fail_m,
                f"{c10_prefix(rank, 'E', t, 'ProcessGroupNCCL.cpp:629')} [Rank {rank}] "
                f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
                "OpType=ALLREDUCE, NumelIn=335544320, NumelOut=335544320, Timeout(ms)=600000) "
                f"ran for {600000 + rand_int(5, 90, 'ranw', seq, rank)} milliseconds before "
                "timing out.",
                stderr=True,
                at_ns=t + rand_int(400_000, 3_000_000, "lag", t),
            )


scenario_tfjob_faulty_host = declare(
    tfjob_faulty_host,
    "tfjob-faulty-host",
    "Kubeflow TFJob (ParameterServerStrategy: Chief + PS on CPU nodes, 4 GPU Workers on "
    "A3 High H100 reserved-block nodes, restartPolicy ExitCode). Worker 2's node "
    "gke-a3-vision-usc1-a3-res-pool-5c2e8d1a-q8v3 sits on physical host "
    f"{TF_FAULTY_HOST}, which fails twice inside the window: at T-16m (Xid 48 DBE, Xid "
    "79, APEI hardware error, kernel panic, hostError, TerminationEvent, NodeNotReady, "
    "Ready=Unknown for 4 min, automaticRestart) and at T+9m (machine check, Xid 79, "
    "kernel panic, same chain). Each time the pod fails (exit code 137) and the operator "
    "re-creates resnet50-ps-worker-2 under the same name (TFJobRestarting, "
    "training_operator_jobs_restarted_total{job_namespace=ml-jobs,framework=tensorflow} "
    "3 -> 6, of which +2 inside the window). The counter has no job label: its earlier "
    "step at T-50m belongs to another TFJob of the namespace (wide-deep-ctr). The Chief "
    "(the coordinator) logs the worker's UnavailableError and keeps training.",
    Context(
        "lumen-vision-prod",
        "us-central1",
        "us-central1-c",
        "a3-vision-usc1",
        "ml-jobs",
        "resnet50-ps",
        "2026-10-06T13:40:00Z",
        "tfjob",
    ),
    "faulty_host",
    "isolate_host",
)


scenario_pytorchjob_nccl_timeout = declare(
    pytorchjob_nccl_timeout,
    "pytorchjob-nccl-timeout",
    "Kubeflow PyTorchJob (Master + 7 Workers, one A100 each on A2 nodes, restartPolicy "
    "ExitCode, plain python launcher so an abort exits 134). Training hangs in an "
    "all-reduce about 8 minutes after every (re)start; after 600 s every rank's NCCL "
    "watchdog fires (the Master, rank 0, logs Watchdog caught collective operation "
    "timeout and the DistBackendError abort), all 8 pods exit 134 and the operator "
    "re-creates them under the same names at T-21m, T-1m and T+19m (T-41m is before the "
    "window). Each restart records two PyTorchJobRestarting events (1 Master, 7 Worker "
    "replica(s)) and two counter steps, so "
    "training_operator_jobs_restarted_total{job_namespace=nlp-train,framework=pytorch} "
    "rises by 6 for 3 restarts. Worker 0 logs its own watchdog line first; the Master "
    "is the coordinator. Another PyTorchJob (roberta-sweep-3, namespace nlp-eval) "
    "restarts at T+5m and T+24m: its counter series (first sample inside the window) "
    "and events must be ignored. Nodes are healthy; A2 nodes carry no topology labels.",
    Context(
        "sable-nlp-lab",
        "europe-west4",
        "europe-west4-a",
        "a100-nlp-euw4",
        "nlp-train",
        "bert-ddp",
        "2026-11-23T07:10:00Z",
        "pytorchjob",
    ),
    "application",
    "inspect_application",
)
