"""Golden fixtures of node and host signals.

Interruption notices, Compute Engine audit entries, kernel and systemd lines, node Events,
and node lines that must stay unrecognized.
"""

from __future__ import annotations

from ..builders.deterministic import dt, glog_prefix
from .fixtures import Fixtures

NOT_READY, PRESSURE = "node_not_ready", "node_pressure"


def host_signals(f: Fixtures) -> None:
    ctx, sc, node = f.sc.ctx, f.sc, f.node
    # Node-pool notices: name, minute, text, kind.
    for name, m, text, kind in (
        (
            "preemption_gke_nodepool",
            -3.1,
            f"PreemptionEvent: Node '{node.name}' in node pool 'tpu-pool' was preempted.",
            "preemption",
        ),
        (
            "maintenance_gke_nodepool",
            -2.9,
            f"MaintenanceEvent: Node '{node.name}' in node pool 'tpu-pool' is "
            "undergoing host maintenance.",
            "maintenance",
        ),
    ):
        f.add(name, sc.pool_log(node, m, text), kind=kind, node_pool="tpu-pool", **f.node_exp)
    # Compute Engine system events: name, minute, compute.instances method, kind.
    for name, m, method, kind in (
        ("preemption_gce_audit", -3.2, "preempted", "preemption"),
        (
            "maintenance_gce_migrate_on_host_maintenance",
            -2.8,
            "migrateOnHostMaintenance",
            "maintenance",
        ),
        (
            "maintenance_gce_terminate_on_host_maintenance",
            -2.7,
            "terminateOnHostMaintenance",
            "maintenance",
        ),
        ("host_error_gce_audit", -2.6, "hostError", "host_error"),
        ("automatic_restart_gce_audit", -1.2, "automaticRestart", "automatic_restart"),
        ("guest_terminate_gce_audit", -1.0, "guestTerminate", "guest_terminate"),
    ):
        entry = sc.audit(node, m, f"compute.instances.{method}")
        f.add(name, entry, kind=kind, instance=node.name, node=node.name, zone=ctx.zone)
    reason = "Host Error"
    entry = sc.termination_log(node, -2.5)
    f.add("termination_k8s_node_host_error", entry, kind="termination", reason=reason, **f.node_exp)
    # Node-journal lines: name, minute, message, key, process, kind.
    for name, m, message, key, ident, kind in (
        (
            "kernel_panic_node_journal",
            -2.7,
            "Kernel panic - not syncing: Fatal exception in interrupt",
            "panic",
            "kernel",
            "kernel_panic",
        ),
        (
            "kernel_bug_paging_request",
            -2.75,
            "BUG: unable to handle kernel paging request at 0000000000002008",
            "bug",
            "kernel",
            "kernel_bug",
        ),
        (
            "hardware_failure_apei",
            -2.76,
            "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0",
            "apei",
            "kernel",
            "hardware_failure",
        ),
        (
            "node_problem_detector_exit",
            -2.74,
            "node-problem-detector.service: Main process exited, code=exited, status=1/FAILURE",
            "npd",
            "systemd[1]",
            "node_problem_detector_exit",
        ),
    ):
        entry = sc.kernel_line(node, m, message, key=key, ident=ident)
        f.add(name, entry, kind=kind, **f.node_exp)
    at = ctx.at(-2.77, "npd-hw")
    status = (
        f"{glog_prefix('I', at, 1893, 'log_monitor.go:159')} New status generated: "
        "&{Source:kernel-monitor Events:[{Severity:warn Timestamp:"
        f"{dt(at):%Y-%m-%d %H:%M:%S} +0000 UTC Reason:HardwareFailure Message:hardware "
        "failure detected on TPU chip 2 (PCIe link down)}] Conditions:[]}"
    )
    entry = sc.node_log(node, at, status, "node-problem-detector", "WARNING")
    f.add("hardware_failure_npd_status", entry, kind="hardware_failure", **f.node_exp)
    # Node status Events: name, minute, new status, its source, kind.
    for name, m, status, component, kind in (
        (
            "node_not_ready_event_node_controller",
            -2.4,
            "NodeNotReady",
            "node-controller",
            NOT_READY,
        ),
        ("node_not_ready_event_kubelet", -2.3, "NodeNotReady", "kubelet", NOT_READY),
        ("unrecognized_node_ready_event", -1.5, "NodeReady", "kubelet", "unrecognized"),
    ):
        entry = sc.node_status(node, m, status, component=component)
        f.add(name, entry, kind=kind, **f.node_exp)
    # The kubelet's pressure Events.
    message = "Attempting to reclaim memory"
    reason = "EvictionThresholdMet"
    entry = sc.event_node(node, -0.16, reason, message, component="kubelet", etype="Warning")
    name = "node_pressure_eviction_threshold_met"
    f.add(name, entry, kind=PRESSURE, reason=reason, **f.node_exp)
    for name, status in (
        ("insufficient_memory", "NodeHasInsufficientMemory"),
        ("disk_pressure", "NodeHasDiskPressure"),
    ):
        entry = sc.node_status(node, -0.16, status, component="kubelet")
        f.add(f"node_pressure_{name}", entry, kind=PRESSURE, reason=status, **f.node_exp)
    gc = '"Image garbage collection succeeded" freedBytes=0'
    entry = sc.kubelet_journal(node, -4.0, gc, "image_gc_manager.go:392")
    f.add("unrecognized_kubelet_journal", entry, kind="unrecognized", **f.node_exp)
