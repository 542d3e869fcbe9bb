"""Golden fixtures of training-process signals: NCCL timeouts and errors, connection resets,
worker crashes, a Megascale hang, and ordinary lines that must stay unrecognized."""

from __future__ import annotations

from ..builders.deterministic import c10_prefix, glog_prefix, py_stamp
from ..builders.noise import train_line
from .fixtures import Fixtures, pod_exp


def training_signals(f: Fixtures) -> None:
    ctx, sc, gctx, gs, gpods, tpods, add = f.ctx, f.sc, f.gctx, f.gs, f.gpods, f.tpods, f.add
    coord, g1, g2 = gpods[0], gpods[1], gpods[2]
    t = gctx.at(-1.0, "watchdog")
    add(
        "nccl_timeout_watchdog_coordinator",
        gs.container_log(
            coord,
            -1.0,
            f"{c10_prefix(0, 'E', t, 'ProcessGroupNCCL.cpp:629')} [Rank 0] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, "
            "NumelIn=131072000, NumelOut=131072000, Timeout(ms)=600000) ran for 600081 "
            "milliseconds before timing out.",
            stderr=True,
        ),
        kind="nccl_timeout",
        **pod_exp(coord, gctx.cluster, gctx.workload),
    )
    t = gctx.at(-0.9, "warn")
    add(
        "nccl_timeout_warn_collective_worker",
        gs.container_log(
            g1,
            -0.9,
            f"[rank8]:[{py_stamp(t)}] NCCL WARN: Collective collectiveName/1234567890abcde "
            "timeout after 1800 seconds",
            stderr=True,
        ),
        kind="nccl_timeout",
        **pod_exp(g1, gctx.cluster, gctx.workload),
    )
    t = gctx.at(-0.95, "some")
    add(
        "nccl_timeout_some_operations_failed",
        gs.container_log(
            coord,
            -0.95,
            f"{c10_prefix(0, 'E', t, 'ProcessGroupNCCL.cpp:1709')} Some NCCL "
            "operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
            "subsequent GPU operations might run on corrupted/incomplete data.",
            stderr=True,
        ),
        kind="nccl_timeout",
        **pod_exp(coord, gctx.cluster, gctx.workload),
    )
    t = gctx.at(-0.8, "reset")
    add(
        "connection_reset_proxy_coordinator",
        gs.container_log(
            coord,
            -0.8,
            f"[rank0]:[{py_stamp(t)}] NCCL WARN : [Proxy Service] Failed to send, "
            "connection reset by peer",
            stderr=True,
        ),
        kind="connection_reset",
        **pod_exp(coord, gctx.cluster, gctx.workload),
    )
    t = gctx.at(-0.7, "reset2")
    add(
        "connection_reset_non_coordinator_with_coordinator_label",
        gs.container_log(
            g2,
            -0.7,
            f"[rank16]:[{py_stamp(t)}] NCCL WARN NET/Socket : peer 10.8.1.14<43117> "
            "message truncated; recv() failed: connection reset by peer",
            stderr=True,
        ),
        kind="connection_reset",
        **pod_exp(g2, gctx.cluster, gctx.workload),
    )
    t = gctx.at(-0.6, "died")
    add(
        "worker_crash_child_process_died",
        gs.container_log(
            coord,
            -0.6,
            f"[rank0]:[{py_stamp(t)}] torch.distributed.elastic.multiprocessing.api: "
            "[ERROR] Child process 12345 died with exit code 1",
            stderr=True,
        ),
        kind="worker_crash",
        **pod_exp(coord, gctx.cluster, gctx.workload),
    )
    add(
        "worker_crash_child_failed_error",
        gs.container_log(
            g1,
            -0.5,
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            stderr=True,
        ),
        kind="worker_crash",
        **pod_exp(g1, gctx.cluster, gctx.workload),
    )
    # The NCCL error a DistBackendError carries names the failure more sharply: the
    # catalog reads it as nccl_error (pytorch.toml, nccl.toml).
    add(
        "nccl_error_in_dist_backend_error",
        gs.container_log(
            coord,
            -0.4,
            "torch.distributed.DistBackendError: NCCL error in: "
            "../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error (run with "
            "NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
            stderr=True,
        ),
        kind="nccl_error",
        **pod_exp(coord, gctx.cluster, gctx.workload),
    )
    # A DistBackendError whose cause no sharper signature names (pytorch.toml; a user's log:
    # https://github.com/verl-project/verl/issues/1611). libstdc++'s "terminate called after
    # throwing an instance of 'c10::DistBackendError'" only names the type of the exception
    # the "what():" line after it states: it is quiet, so the failure counts once.
    add(
        "dist_backend_error",
        gs.container_log(
            coord,
            -0.35,
            "torch.distributed.DistBackendError: [7] is setting up NCCL communicator and "
            "retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
            "store->get('0') got error: failed to recv, got 0 bytes",
            stderr=True,
        ),
        kind="dist_backend_error",
        **pod_exp(coord, gctx.cluster, gctx.workload),
    )
    # libtpu's wording (xla_tpu.toml: AI-Hypercomputer/maxtext 0a5e4e2c8
    # docs/guides/monitoring_and_debugging/megascale_hang_playbook.md).
    t = ctx.at(-0.3, "mega")
    add(
        "megascale_hang_detected",
        sc.container_log(
            tpods[0],
            -0.3,
            f"{glog_prefix('E', t, 3011, 'megascale_runtime.cc:412')} Megascale detects a hang "
            "that is likely caused by bad TPU chips on the following hosts. Please remove the "
            "hosts from the fleet and restart the workload. If problem persists please contact "
            "Megascale XLA team.",
            stderr=True,
        ),
        kind="megascale_hang",
        **pod_exp(tpods[0], ctx.cluster, ctx.workload),
    )


def unrecognized_signals(f: Fixtures) -> None:
    ctx, sc, gctx, gs, tpods, node, add = f.ctx, f.sc, f.gctx, f.gs, f.tpods, f.node, f.add
    node_exp, g1 = f.node_exp, f.gpods[1]
    add(
        "unrecognized_training_step",
        sc.container_log(tpods[0], -5.0, train_line("maxtext", 41200, tpods[0], ctx)),
        kind="unrecognized",
        **pod_exp(tpods[0], ctx.cluster, ctx.workload),
    )
    add(
        "unrecognized_nccl_info",
        gs.container_log(
            g1, -6.0, f"{g1.name}:412:980 [0] NCCL INFO Bootstrap : Using eth0:10.8.1.14<0>"
        ),
        kind="unrecognized",
        **pod_exp(g1, gctx.cluster, gctx.workload),
    )
    sched_node = tpods[1].node.name if tpods[1].node else ""
    add(
        "unrecognized_scheduled_event",
        sc.event_pod(
            tpods[1],
            -30.0,
            "Scheduled",
            f"Successfully assigned default/{tpods[1].name} to {sched_node}",
            component="default-scheduler",
        ),
        kind="unrecognized",
        pod=tpods[1].name,
        cluster=ctx.cluster,
    )
    add(
        "unrecognized_kubelet_journal",
        sc.kubelet_journal(
            node,
            -4.0,
            '"Image garbage collection succeeded" freedBytes=0',
            "image_gc_manager.go:392",
        ),
        kind="unrecognized",
        **node_exp,
    )
    add(
        "unrecognized_node_ready_event",
        sc.event_node(
            node,
            -1.5,
            "NodeReady",
            f"Node {node.name} status is now: NodeReady",
            component="kubelet",
        ),
        kind="unrecognized",
        **node_exp,
    )
