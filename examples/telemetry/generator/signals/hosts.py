"""Golden fixtures of node and host signals: interruptions, host errors, kernel faults."""

from __future__ import annotations

from ..builders.deterministic import dt, glog_prefix
from .fixtures import Fixtures


def host_signals(f: Fixtures) -> None:
    ctx, sc, node, add, node_exp = f.ctx, f.sc, f.node, f.add, f.node_exp
    add(
        "preemption_gke_nodepool",
        sc.pool_log(
            node,
            -3.1,
            f"PreemptionEvent: Node '{node.name}' in node pool 'tpu-pool' was preempted.",
        ),
        kind="preemption",
        node_pool="tpu-pool",
        **node_exp,
    )
    add(
        "preemption_gce_audit",
        sc.audit(node, -3.2, "compute.instances.preempted"),
        kind="preemption",
        instance=node.name,
        node=node.name,
        zone=ctx.zone,
    )
    add(
        "maintenance_gke_nodepool",
        sc.pool_log(
            node,
            -2.9,
            f"MaintenanceEvent: Node '{node.name}' in node pool 'tpu-pool' is "
            "undergoing host maintenance.",
        ),
        kind="maintenance",
        node_pool="tpu-pool",
        **node_exp,
    )
    add(
        "maintenance_gce_migrate_on_host_maintenance",
        sc.audit(node, -2.8, "compute.instances.migrateOnHostMaintenance"),
        kind="maintenance",
        instance=node.name,
        node=node.name,
        zone=ctx.zone,
    )
    add(
        "maintenance_gce_terminate_on_host_maintenance",
        sc.audit(node, -2.7, "compute.instances.terminateOnHostMaintenance"),
        kind="maintenance",
        instance=node.name,
        node=node.name,
        zone=ctx.zone,
    )
    add(
        "termination_k8s_node_host_error",
        sc.termination_log(node, -2.5),
        kind="termination",
        reason="Host Error",
        **node_exp,
    )
    # --- host faults
    add(
        "host_error_gce_audit",
        sc.audit(node, -2.6, "compute.instances.hostError"),
        kind="host_error",
        instance=node.name,
        node=node.name,
        zone=ctx.zone,
    )
    add(
        "automatic_restart_gce_audit",
        sc.audit(node, -1.2, "compute.instances.automaticRestart"),
        kind="automatic_restart",
        instance=node.name,
        node=node.name,
        zone=ctx.zone,
    )
    add(
        "guest_terminate_gce_audit",
        sc.audit(node, -1.0, "compute.instances.guestTerminate"),
        kind="guest_terminate",
        instance=node.name,
        node=node.name,
        zone=ctx.zone,
    )
    add(
        "node_not_ready_event_node_controller",
        sc.event_node(node, -2.4, "NodeNotReady", f"Node {node.name} status is now: NodeNotReady"),
        kind="node_not_ready",
        **node_exp,
    )
    add(
        "node_not_ready_event_kubelet",
        sc.event_node(
            node,
            -2.3,
            "NodeNotReady",
            f"Node {node.name} status is now: NodeNotReady",
            component="kubelet",
        ),
        kind="node_not_ready",
        **node_exp,
    )
    add(
        "kernel_panic_node_journal",
        sc.kernel_line(
            node, -2.7, "Kernel panic - not syncing: Fatal exception in interrupt", key="panic"
        ),
        kind="kernel_panic",
        **node_exp,
    )
    add(
        "kernel_bug_paging_request",
        sc.kernel_line(
            node,
            -2.75,
            "BUG: unable to handle kernel paging request at 0000000000002008",
            key="bug",
        ),
        kind="kernel_bug",
        **node_exp,
    )
    add(
        "hardware_failure_apei",
        sc.kernel_line(
            node,
            -2.76,
            "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0",
            key="apei",
        ),
        kind="hardware_failure",
        **node_exp,
    )
    at = ctx.at(-2.77, "npd-hw")
    add(
        "hardware_failure_npd_status",
        sc.node_log(
            node,
            at,
            f"{glog_prefix('I', at, 1893, 'log_monitor.go:159')} New status generated: "
            "&{Source:kernel-monitor Events:[{Severity:warn Timestamp:"
            f"{dt(at):%Y-%m-%d %H:%M:%S} +0000 UTC Reason:HardwareFailure Message:hardware "
            "failure detected on TPU chip 2 (PCIe link down)}] Conditions:[]}",
            log_id="node-problem-detector",
            level="WARNING",
        ),
        kind="hardware_failure",
        **node_exp,
    )
    add(
        "node_problem_detector_exit",
        sc.kernel_line(
            node,
            -2.74,
            "node-problem-detector.service: Main process exited, code=exited, status=1/FAILURE",
            key="npd",
            ident="systemd[1]",
        ),
        kind="node_problem_detector_exit",
        **node_exp,
    )
