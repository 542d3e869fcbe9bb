"""What a scenario logs: container lines, the node journal, kubelet records, Kubernetes Events,
audit entries and node-pool notices.
"""

from __future__ import annotations

from typing import Any

from .cluster import LAST_MINUTE, AnyPod, Context, Node
from .deterministic import NS, glog_prefix, rand_hex, rand_int, rand_uuid, syslog_stamp
from .entries import (
    EVENTS_LOG,
    INTERRUPTION_LOG,
    audit_entry,
    k8s_event_payload,
    make_entry,
    pod_log_labels,
)


class Recorder:
    """The log-writing half of a scenario: every method adds LogEntry objects."""

    ctx: Context
    entries: list[dict[str, Any]]

    def jobset_uid(self, name: str) -> str:
        return rand_uuid("jobset", self.ctx.cluster, name)

    def add(self, entry: dict[str, Any]) -> dict[str, Any]:
        self.entries.append(entry)
        return entry

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
        ctx = self.ctx
        return self.add(
            make_entry(
                ctx.project,
                log_id="stderr" if stderr else "stdout",
                resource_type="k8s_container",
                resource_labels=self.resource(
                    container_name=pod.spec.container,
                    namespace_name=pod.namespace,
                    pod_name=pod.name,
                ),
                at_ns=at_ns if at_ns is not None else ctx.at(m, pod.name, key, text[:40]),
                severity="ERROR" if stderr else "INFO",
                text=text,
                labels=pod_log_labels(pod, self.jobset_uid(pod.spec.name)),
            )
        )

    def resource(self, **labels: str) -> dict[str, str]:
        """The resource labels of an entry of this cluster (``k8s_cluster``'s: no more)."""
        ctx = self.ctx
        return {
            "cluster_name": ctx.cluster,
            "location": ctx.location,
            "project_id": ctx.project,
            **labels,
        }

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

    def node_resource(self, node: Node) -> dict[str, str]:
        return self.resource(node_name=node.name)

    def node_log(
        self,
        node: Node,
        at_ns: int,
        text: str,
        *,
        log_id: str = "node-journal",
        severity: str = "ERROR",
    ) -> dict[str, Any]:
        return self.add(
            make_entry(
                self.ctx.project,
                log_id=log_id,
                resource_type="k8s_node",
                resource_labels=self.node_resource(node),
                at_ns=at_ns,
                severity=severity,
                text=text,
                labels={"compute.googleapis.com/resource_name": node.name},
            )
        )

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
        return self.add(
            make_entry(
                self.ctx.project,
                log_id="kubelet",
                resource_type="k8s_node",
                resource_labels=self.node_resource(node),
                at_ns=at,
                severity="INFO",
                json_payload={
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
                },
                labels={"compute.googleapis.com/resource_name": node.name},
            )
        )

    def event(
        self,
        resource_type: str,
        resource_labels: dict[str, str],
        m: float,
        payload: dict[str, Any],
    ) -> dict[str, Any]:
        """An Event's entry: a Warning is logged as WARNING, a Normal one as INFO."""
        return self.add(
            make_entry(
                self.ctx.project,
                log_id=EVENTS_LOG,
                resource_type=resource_type,
                resource_labels=resource_labels,
                at_ns=self.ctx.at(m, "event", payload["metadata"]["name"], payload["count"]),
                severity="WARNING" if payload["type"] == "Warning" else "INFO",
                json_payload=payload,
            )
        )

    def event_node(
        self,
        node: Node,
        m: float,
        reason: str,
        message: str,
        *,
        component: str = "node-controller",
        etype: str = "Normal",
    ) -> dict[str, Any]:
        at = self.ctx.at(m, "ev", node.name, reason)
        payload = k8s_event_payload(
            involved={
                "apiVersion": "v1",
                "kind": "Node",
                "name": node.name,
                "uid": rand_uuid("node", node.name),
            },
            reason=reason,
            message=message,
            component=component,
            etype=etype,
            first_ns=at,
            host=node.name if component == "kubelet" else None,
        )
        return self.event("k8s_node", self.node_resource(node), m, payload)

    def node_status(
        self, node: Node, m: float, status: str, *, component: str = "node-controller"
    ) -> dict[str, Any]:
        """The Event of a node's new status (NodeNotReady, NodeReady, NodeHas...)."""
        message = f"Node {node.name} status is now: {status}"
        return self.event_node(node, m, status, message, component=component)

    def event_pod(
        self,
        pod: AnyPod,
        m: float,
        reason: str,
        message: str,
        *,
        component: str,
        etype: str = "Normal",
        count: int = 1,
        first_m: float | None = None,
    ) -> dict[str, Any]:
        ctx = self.ctx
        at = ctx.at(m, "ev", pod.name, reason, count)
        first = ctx.at(first_m, "ev", pod.name, reason, 1) if first_m is not None else at
        payload = k8s_event_payload(
            involved={
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.name,
                "namespace": pod.namespace,
                "uid": pod.uid,
                "resourceVersion": str(rand_int(10**7, 10**8, "prv", pod.name)),
            },
            reason=reason,
            message=message,
            component=component,
            etype=etype,
            first_ns=first,
            last_ns=at,
            count=count,
            host=pod.node.name if component == "kubelet" and pod.node else None,
            namespace=pod.namespace,
        )
        res = self.resource(namespace_name=pod.namespace, pod_name=pod.name)
        return self.event("k8s_pod", res, m, payload)

    def scheduled(self, pod: AnyPod, m: float) -> dict[str, Any]:
        """The scheduler's Scheduled Event: ``pod`` bound to its node."""
        node = pod.node.name if pod.node else ""
        message = f"Successfully assigned {pod.namespace}/{pod.name} to {node}"
        return self.event_pod(pod, m, "Scheduled", message, component="default-scheduler")

    def killing(self, pod: AnyPod, m: float) -> dict[str, Any]:
        """The kubelet stops the pod's container."""
        message = f"Stopping container {pod.spec.container}"
        return self.event_pod(pod, m, "Killing", message, component="kubelet")

    def unschedulable(
        self, pod: AnyPod, times: list[float], message: str, until: float = LAST_MINUTE
    ) -> None:
        """The scheduler's FailedScheduling Warnings at ``times`` (its back-off), counted from
        the first, up to ``until``."""
        for count, m in enumerate(times, start=1):
            if m > until:
                break
            self.failed_scheduling(pod, m, message, count=count, first_m=times[0])

    def failed_scheduling(
        self, pod: AnyPod, m: float, message: str, *, count: int = 1, first_m: float | None = None
    ) -> dict[str, Any]:
        """The scheduler's FailedScheduling Warning (the ``count``-th since ``first_m``)."""
        return self.event_pod(
            pod,
            m,
            "FailedScheduling",
            message,
            component="default-scheduler",
            etype="Warning",
            count=count,
            first_m=first_m,
        )

    def cluster_event(self, m: float, payload: dict[str, Any]) -> dict[str, Any]:
        """An Event on a cluster-level object (a JobSet, a Kubeflow job)."""
        return self.event("k8s_cluster", self.resource(), m, payload)

    def object_event(
        self,
        m: float,
        at: int,
        involved: dict[str, Any],
        reason: str,
        message: str,
        *,
        component: str,
        etype: str,
        name: str | None = None,
    ) -> dict[str, Any]:
        """A controller's Event on ``involved`` (seen once, at ``at``), under its own ``name``
        where the controller's recorder names it so."""
        payload = k8s_event_payload(
            involved=involved,
            reason=reason,
            message=message,
            component=component,
            etype=etype,
            first_ns=at,
            namespace=involved["namespace"],
        )
        if name is not None:
            payload["metadata"]["name"] = name
        return self.cluster_event(m, payload)

    def audit(self, node: Node, m: float, method: str) -> dict[str, Any]:
        at = self.ctx.at(m, "audit", node.name, method)
        return self.add(
            audit_entry(self.ctx.project, node.zone, node.name, node.instance_id, method, at)
        )

    def pool_log(self, node: Node, m: float, text: str, severity: str = "INFO") -> dict[str, Any]:
        ctx = self.ctx
        return self.add(
            make_entry(
                ctx.project,
                log_id=INTERRUPTION_LOG,
                resource_type="gke_nodepool",
                resource_labels=self.resource(node_pool_name=node.pool),
                at_ns=ctx.at(m, "pool", node.name, text[:20]),
                severity=severity,
                text=text,
            )
        )

    def termination_log(self, node: Node, m: float, reason: str = "Host Error") -> dict[str, Any]:
        return self.node_log(
            node,
            self.ctx.at(m, "termination", node.name),
            f"TerminationEvent: Node '{node.name}' was terminated due to: {reason}",
            log_id=INTERRUPTION_LOG,
            severity="ERROR",
        )
