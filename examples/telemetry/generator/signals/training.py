"""Golden fixtures of training-process signals: NCCL, connection resets, crashes, a TPU hang.

And container lines that must stay unrecognized.
"""

from __future__ import annotations

from ..builders.deterministic import c10_prefix, glog_prefix, py_stamp
from ..builders.noise import train_line
from .fixtures import Fixtures


def training_signals(f: Fixtures) -> None:
    ctx, gctx = f.sc.ctx, f.gs.ctx
    coord, g1, g2 = f.gpods[0], f.gpods[1], f.gpods[2]
    t = gctx.at(-1.0, "watchdog")
    f.stderr(
        "nccl_timeout_watchdog_coordinator",
        coord,
        -1.0,
        "nccl_timeout",
        f"{c10_prefix(0, 'E', t, 'ProcessGroupNCCL.cpp:629')} [Rank 0] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, "
        "NumelIn=131072000, NumelOut=131072000, Timeout(ms)=600000) ran for 600081 "
        "milliseconds before timing out.",
    )
    t = gctx.at(-0.9, "warn")
    f.stderr(
        "nccl_timeout_warn_collective_worker",
        g1,
        -0.9,
        "nccl_timeout",
        f"[rank8]:[{py_stamp(t)}] NCCL WARN: Collective collectiveName/1234567890abcde "
        "timeout after 1800 seconds",
    )
    t = gctx.at(-0.95, "some")
    f.stderr(
        "nccl_timeout_some_operations_failed",
        coord,
        -0.95,
        "nccl_timeout",
        f"{c10_prefix(0, 'E', t, 'ProcessGroupNCCL.cpp:1709')} Some NCCL "
        "operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
        "subsequent GPU operations might run on corrupted/incomplete data.",
    )
    t = gctx.at(-0.8, "reset")
    f.stderr(
        "connection_reset_proxy_coordinator",
        coord,
        -0.8,
        "connection_reset",
        f"[rank0]:[{py_stamp(t)}] NCCL WARN : [Proxy Service] Failed to send, "
        "connection reset by peer",
    )
    t = gctx.at(-0.7, "reset2")
    f.stderr(
        "connection_reset_non_coordinator_with_coordinator_label",
        g2,
        -0.7,
        "connection_reset",
        f"[rank16]:[{py_stamp(t)}] NCCL WARN NET/Socket : peer 10.8.1.14<43117> "
        "message truncated; recv() failed: connection reset by peer",
    )
    t = gctx.at(-0.6, "died")
    f.stderr(
        "worker_crash_child_process_died",
        coord,
        -0.6,
        "worker_crash",
        f"[rank0]:[{py_stamp(t)}] torch.distributed.elastic.multiprocessing.api: "
        "[ERROR] Child process 12345 died with exit code 1",
    )
    f.stderr(
        "worker_crash_child_failed_error",
        g1,
        -0.5,
        "worker_crash",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    )
    # The NCCL error a DistBackendError carries names the failure more sharply: the
    # catalog reads it as nccl_error (pytorch.toml, nccl.toml).
    f.stderr(
        "nccl_error_in_dist_backend_error",
        coord,
        -0.4,
        "nccl_error",
        "torch.distributed.DistBackendError: NCCL error in: "
        "../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error (run with "
        "NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
    )
    # A DistBackendError whose cause no sharper signature names (pytorch.toml; a user's log:
    # https://github.com/verl-project/verl/issues/1611). libstdc++'s "terminate called after
    # throwing an instance of 'c10::DistBackendError'" only names the type of the exception
    # the "what():" line after it states: it is quiet, so the failure counts once.
    f.stderr(
        "dist_backend_error",
        coord,
        -0.35,
        "dist_backend_error",
        "torch.distributed.DistBackendError: [7] is setting up NCCL communicator and "
        "retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
        "store->get('0') got error: failed to recv, got 0 bytes",
    )
    # libtpu's wording (xla_tpu.toml: AI-Hypercomputer/maxtext 0a5e4e2c8
    # docs/guides/monitoring_and_debugging/megascale_hang_playbook.md).
    t = ctx.at(-0.3, "mega")
    f.stderr(
        "megascale_hang_detected",
        f.tpods[0],
        -0.3,
        "megascale_hang",
        f"{glog_prefix('E', t, 3011, 'megascale_runtime.cc:412')} Megascale detects a hang "
        "that is likely caused by bad TPU chips on the following hosts. Please remove the "
        "hosts from the fleet and restart the workload. If problem persists please contact "
        "Megascale XLA team.",
    )
    # Ordinary lines on stdout.
    step = train_line("maxtext", 41200, f.tpods[0], ctx)
    f.add(
        "unrecognized_training_step",
        f.sc.container_log(f.tpods[0], -5.0, step),
        kind="unrecognized",
        **f.pod_exp(f.tpods[0]),
    )
    bootstrap = f"{g1.name}:412:980 [0] NCCL INFO Bootstrap : Using eth0:10.8.1.14<0>"
    f.add(
        "unrecognized_nccl_info",
        f.gs.container_log(g1, -6.0, bootstrap),
        kind="unrecognized",
        **f.pod_exp(g1),
    )
