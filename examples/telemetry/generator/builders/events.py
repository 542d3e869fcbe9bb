"""Kubernetes Events on nodes, pods and cluster-level objects, as Cloud Logging carries them."""

from __future__ import annotations

from typing import Any

from .cluster import LAST_MINUTE, AnyPod, Node
from .deterministic import rand_int, rand_uuid
from .entries import EVENTS_LOG, EntryLog, k8s_event_payload


class Events(EntryLog):
    """The Event-writing part of a scenario: every method adds one LogEntry or more."""

    def event(
        self, resource_type: str, resource_labels: dict[str, str], m: float, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """An Event's entry: a Warning is logged as WARNING, a Normal one as INFO."""
        at = self.ctx.at(m, "event", payload["metadata"]["name"], payload["count"])
        severity = "WARNING" if payload["type"] == "Warning" else "INFO"
        return self.log(
            EVENTS_LOG, resource_type, resource_labels, at, severity, json_payload=payload
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
        involved = {
            "apiVersion": "v1",
            "kind": "Node",
            "name": node.name,
            "uid": rand_uuid("node", node.name),
        }
        host = node.name if component == "kubelet" else None
        payload = k8s_event_payload(involved, reason, message, component, etype, at, host=host)
        return self.event("k8s_node", self.resource(node_name=node.name), m, payload)

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
        related: dict[str, Any] | None = None,
        action: str | None = None,
        annotations: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A Pod Event (the ``count``-th since T+first_m), with the fields of the
        events.k8s.io API where its recorder sets them: the scheduler's ``related``
        preemptor and ``action``, the kubelet's ``annotations``."""
        ctx = self.ctx
        at = ctx.at(m, "ev", pod.name, reason, count)
        first = ctx.at(first_m, "ev", pod.name, reason, 1) if first_m is not None else at
        involved = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": pod.uid,
            "resourceVersion": str(rand_int(10**7, 10**8, "prv", pod.name)),
        }
        host = pod.node.name if component == "kubelet" and pod.node else None
        payload = k8s_event_payload(
            involved, reason, message, component, etype, first, at, count, host, pod.namespace
        )
        if related is not None:
            # The scheduler records through events.k8s.io/v1: eventTime, no first/last time.
            payload["related"] = related
            payload["action"] = action
            payload["eventTime"] = payload["lastTimestamp"].replace("Z", ".000000Z")
            payload["firstTimestamp"] = None
            payload["lastTimestamp"] = None
            payload["reportingComponent"] = component
            payload["reportingInstance"] = f"{component}-gke-{ctx.cluster[:20]}"
            payload["source"] = {}
        if annotations:
            payload["metadata"]["annotations"] = dict(annotations)
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
        """A controller's Event on a cluster-level object (a JobSet, a Kubeflow job), seen
        once at ``at``, under its own ``name`` where the controller's recorder names it so."""
        namespace = involved["namespace"]
        payload = k8s_event_payload(
            involved, reason, message, component, etype, at, namespace=namespace
        )
        if name is not None:
            payload["metadata"]["name"] = name
        return self.event("k8s_cluster", self.resource(), m, payload)
