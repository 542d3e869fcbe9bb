"""What a scenario logs besides Events: container, node journal, kubelet, audit, pool lines."""

from __future__ import annotations

from typing import Any

from .cluster import AnyPod, Node
from .deterministic import NS, glog_prefix, rand_hex, rand_int, rand_uuid, syslog_stamp
from .entries import INTERRUPTION_LOG, audit_entry, pod_log_labels
from .events import Events


class Recorder(Events):
    """The log-writing half of a scenario: every method adds LogEntry objects."""

    def jobset_uid(self, name: str) -> str:
        return rand_uuid("jobset", self.ctx.cluster, name)

    def container_log(
        self,
        pod: AnyPod,
        m: float,
        text: str,
        *,
        stderr: bool = False,
        key: object = "",
        at_ns: int | None = None,
    ) -> dict[str, Any]:
        """A container line; ``at_ns`` pins the entry timestamp (else derived from ``m``)."""
        res = self.resource(
            container_name=pod.spec.container, namespace_name=pod.namespace, pod_name=pod.name
        )
        at = at_ns if at_ns is not None else self.ctx.at(m, pod.name, key, text[:40])
        labels = pod_log_labels(pod, self.jobset_uid(pod.spec.name))
        if stderr:
            return self.log("stderr", "k8s_container", res, at, "ERROR", text=text, labels=labels)
        return self.log("stdout", "k8s_container", res, at, "INFO", text=text, labels=labels)

    def glog_line(
        self, pod: AnyPod, m: float, at: int, tid: int, where: str, text: str, level: str = "I"
    ) -> dict[str, Any]:
        """A glog line (TensorFlow's C++ and Python logging) on stderr at ``at``."""
        line = f"{glog_prefix(level, at, tid, where)} {text}"
        return self.container_log(pod, m, line, stderr=True, at_ns=at)

    def stderr_lines(self, pod: AnyPod, m: float, lines: list[tuple[int, str]]) -> None:
        """Lines a container writes to stderr, each at its own time: [(at_ns, text)]."""
        for at, text in lines:
            self.container_log(pod, m, text, stderr=True, at_ns=at)

    def node_log(
        self, node: Node, at_ns: int, text: str, log_id: str = "node-journal", level: str = "ERROR"
    ) -> dict[str, Any]:
        """A line of the node: its journal (ERROR unless told), or another of its logs."""
        res = self.resource(node_name=node.name)
        labels = {"compute.googleapis.com/resource_name": node.name}
        return self.log(log_id, "k8s_node", res, at_ns, level, text=text, labels=labels)

    def kernel_line(
        self, node: Node, m: float, message: str, key: object = "", ident: str = "kernel"
    ) -> dict[str, Any]:
        at = self.ctx.at(m, node.name, "kernel", key)
        if ident == "kernel":
            up = max(at - node.boot_ns, NS)
            body = f"kernel: [{up // NS:>5d}.{(up % NS) // 1000:06d}] {message}"
        else:
            body = f"{ident}: {message}"
        return self.node_log(node, at, f"{syslog_stamp(at)} {node.name} {body}")

    def node_registered(self, node: Node, m: float) -> dict[str, Any]:
        """The kubelet of a node back from an outage registers it again."""
        message = f'"Successfully registered node" node="{node.name}"'
        return self.kubelet_journal(node, m, message, "kubelet_node_status.go:79")

    def kubelet_journal(self, node: Node, m: float, message: str, where: str) -> dict[str, Any]:
        """A kubelet journald record the way GKE ships it (jsonPayload, MESSAGE field)."""
        at = self.ctx.at(m, node.name, "kubelet", message[:30])
        pid = rand_int(1800, 3900, "kubelet-pid", node.name)
        record = {
            "MESSAGE": f"{glog_prefix('I', at, pid, where)} {message}",
            "PRIORITY": "6",
            "SYSLOG_FACILITY": "3",
            "SYSLOG_IDENTIFIER": "kubelet",
            "_BOOT_ID": rand_hex(32, "boot", node.name, node.boot_ns),
            "_CMDLINE": "/home/kubernetes/bin/kubelet --v=2 --cloud-provider=external",
            "_COMM": "kubelet",
            "_EXE": "/home/kubernetes/bin/kubelet",
            "_HOSTNAME": node.name,
            "_MACHINE_ID": rand_hex(32, "machine", node.name),
            "_PID": str(pid),
            "_SYSTEMD_UNIT": "kubelet.service",
            "_TRANSPORT": "stdout",
            "_UID": "0",
        }
        res = self.resource(node_name=node.name)
        labels = {"compute.googleapis.com/resource_name": node.name}
        return self.log("kubelet", "k8s_node", res, at, "INFO", json_payload=record, labels=labels)

    def audit(self, node: Node, m: float, method: str) -> dict[str, Any]:
        at = self.ctx.at(m, "audit", node.name, method)
        return self.add(
            audit_entry(self.ctx.project, node.zone, node.name, node.instance_id, method, at)
        )

    def pool_log(self, node: Node, m: float, text: str) -> dict[str, Any]:
        """A notice of the node's pool (PreemptionEvent, MaintenanceEvent)."""
        at = self.ctx.at(m, "pool", node.name, text[:20])
        res = self.resource(node_pool_name=node.pool)
        return self.log(INTERRUPTION_LOG, "gke_nodepool", res, at, "INFO", text=text)

    def termination_log(self, node: Node, m: float, reason: str = "Host Error") -> dict[str, Any]:
        return self.node_log(
            node,
            self.ctx.at(m, "termination", node.name),
            f"TerminationEvent: Node '{node.name}' was terminated due to: {reason}",
            INTERRUPTION_LOG,
        )
