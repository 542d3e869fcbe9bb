"""GKE's report-and-replace, as "Report faulty hosts through GKE" describes it, on top of the
fake Kubernetes and Compute servers.

Source: "Manage AI-optimized GKE clusters" (docs.cloud.google.com/ai-hypercomputer/docs/
manage/manage-gke-clusters, updated 2026-04-06), sections "Requirements", "Report a faulty
host" and "Monitor the operation progress". After ``kubectl label nodes NODE
cloud.google.com/fault-behavior=FAULT_REASON`` (``PERFORMANCE``, ``SDC``, ``XID`` or
``unspecified``) GKE:

1. evicts the node's workloads (respecting PodDisruptionBudgets) and prevents new Pods:
   ``cloud.google.com/report-and-replace-status=PodsEvicted``;
2. calls ``reportHostAsFaulty`` on the VM: ``OperationRUNNING``, with the Compute operation id
   in ``cloud.google.com/report-and-replace-operation``;
3. ``OperationDone`` once the host is reported; Compute brings the VM back on a healthy host
   (A4 and A3 Ultra migrate to another host; A3 Mega and A3 High are repaired in place,
   "Report faulty hosts", docs.cloud.google.com/ai-hypercomputer/docs/manage/
   report-faulty-host);
4. removes its taint and the fault-behavior label: the node serves workloads again.

"In case of any API errors, GKE sets the node label
cloud.google.com/report-and-replace-status=ERROR" and clears its taint and the fault-behavior
label, for instance when a requirement is not met (GKE 1.32.3-gke.1057001 or later, one of the
supported machine types, a reservation-bound VM in RUNNING state).

The pages name no taint key, so the fake sets none (nothing in loopbreaker reads it). GKE acts
asynchronously; here each ``GET`` of the node advances one stage, so a client that follows the
labels sees every stage in order. ``script`` bends a run: ``"error"`` (the report call fails),
``"stall"`` (stuck at PodsEvicted), ``"vanish"`` (labels cleared with no status).
"""

from __future__ import annotations

from typing import Any

from .base import Request, Response
from .cluster import ClusterServer
from .compute_ops import ComputeOpsServer

FAULT_BEHAVIOR = "cloud.google.com/fault-behavior"
STATUS = "cloud.google.com/report-and-replace-status"
OPERATION = "cloud.google.com/report-and-replace-operation"
VALUES = {"PERFORMANCE", "SDC", "XID", "unspecified"}
MACHINE_TYPES = {
    "a4x-maxgpu-4g-metal",
    "a4x-highgpu-4g",
    "a4-highgpu-8g",
    "a3-ultragpu-8g",
    "a3-megagpu-8g",
    "a3-highgpu-8g",
}
#: Machine types Compute repairs in place rather than migrate ("Report faulty hosts").
REPAIRED_IN_PLACE = {"a3-megagpu-8g", "a3-highgpu-8g"}
MIN_VERSION = (1, 32, 3, 1057001)
HOST_LABEL = "cloud.google.com/gce-topology-host"


class GkeClusterServer(ClusterServer):
    """A cluster whose control plane runs report-and-replace on labelled nodes."""

    def __init__(self, *args: Any, compute: ComputeOpsServer, project: str, zone: str, **kw: Any):
        super().__init__(*args, **kw)
        self.compute = compute
        self.project, self.zone = project, zone
        #: node -> "done" (default), "error", "stall" or "vanish".
        self.script: dict[str, str] = {}
        #: node -> the statuses it went through, in order.
        self.statuses: dict[str, list[str]] = {}
        #: node -> the fault-behavior value GKE acted on.
        self.reported: dict[str, str] = {}

    def _get_node(self, request: Request, name: str) -> Response:
        node = self.node(name)
        if node is not None:
            self._advance(node)
        return super()._get_node(request, name)

    # --- the controller ---------------------------------------------------------------

    def _advance(self, node: dict[str, Any]) -> None:
        labels = node.setdefault("metadata", {}).setdefault("labels", {})
        name = node["metadata"]["name"]
        status = labels.get(STATUS)
        if FAULT_BEHAVIOR not in labels and status != "OperationDone":
            return
        script = self.script.get(name, "done")
        if status in (None, "ERROR") and FAULT_BEHAVIOR in labels:
            if labels[FAULT_BEHAVIOR] not in VALUES or self._blocker(node):
                return self._error(node)
            if script == "vanish":
                labels.pop(FAULT_BEHAVIOR)
                return None
            self._gke_drain(name)
            return self._set(node, "PodsEvicted")
        if status == "PodsEvicted" and script != "stall":
            if script == "error":
                return self._error(node)
            key = (self.project, self.zone, self._instance(node))
            body = {
                "disruptionSchedule": "IMMEDIATE",
                "faultReasons": [{"behavior": _COMPUTE[labels[FAULT_BEHAVIOR]]}],
            }
            op = self.compute.report(key, body, None)
            self.reported[name] = labels[FAULT_BEHAVIOR]
            labels[OPERATION] = op.body["id"]
            return self._set(node, "OperationRUNNING")
        if status == "OperationRUNNING":
            self._move_host(node)
            return self._set(node, "OperationDone")
        if status == "OperationDone" and FAULT_BEHAVIOR in labels:
            # "Removes the taint and the fault-behavior label from the node."
            labels.pop(FAULT_BEHAVIOR)
            self._bump(node)
        return None

    def _blocker(self, node: dict[str, Any]) -> str | None:
        labels = node["metadata"]["labels"]
        if labels.get("node.kubernetes.io/instance-type") not in MACHINE_TYPES:
            return "machine type"
        version = ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
        parts = version.lstrip("v").replace("-gke.", ".").split(".")
        if not all(p.isdigit() for p in parts) or tuple(map(int, parts)) < MIN_VERSION:
            return "version"
        key = (self.project, self.zone, self._instance(node))
        return self.compute.report_refusal(key)

    def _error(self, node: dict[str, Any]) -> None:
        labels = node["metadata"]["labels"]
        labels.pop(FAULT_BEHAVIOR, None)
        self._set(node, "ERROR")

    def _set(self, node: dict[str, Any], status: str) -> None:
        node["metadata"]["labels"][STATUS] = status
        self.statuses.setdefault(node["metadata"]["name"], []).append(status)
        self._bump(node)

    def _bump(self, node: dict[str, Any]) -> None:
        self._version += 1
        node["metadata"]["resourceVersion"] = str(self._version)

    def _gke_drain(self, name: str) -> None:
        """GKE's own drain: every pod but DaemonSet and mirror pods leaves the node."""
        for pod in [p for p in self.pods if p.get("spec", {}).get("nodeName") == name]:
            meta = pod.get("metadata", {})
            owners = {o.get("kind") for o in meta.get("ownerReferences") or ()}
            mirror = "kubernetes.io/config.mirror" in (meta.get("annotations") or {})
            if "DaemonSet" not in owners and not mirror:
                self.pods.remove(pod)
                self.gke_evictions.append((meta.get("namespace"), meta.get("name")))

    def _instance(self, node: dict[str, Any]) -> str:
        provider = node.get("spec", {}).get("providerID", "")
        return provider.rsplit("/", 1)[-1] or node["metadata"]["name"]

    def _move_host(self, node: dict[str, Any]) -> None:
        labels = node["metadata"]["labels"]
        if labels.get("node.kubernetes.io/instance-type") in REPAIRED_IN_PLACE:
            return
        new = "f0e1d2c3b4a5968778695a4b3c2d1e0f"
        labels[HOST_LABEL] = new
        record = self.compute.instances.get((self.project, self.zone, self._instance(node)))
        if record is not None and record.get("physicalHost"):
            record["physicalHost"] = "/".join([*record["physicalHost"].split("/")[:-1], new])

    @property
    def gke_evictions(self) -> list[tuple[str | None, str | None]]:
        """The pods GKE (not the client) removed from labelled nodes."""
        return self.__dict__.setdefault("_gke_evictions", [])


#: GKE's label values as Compute's ``faultReasons[].behavior``.
_COMPUTE = {
    "PERFORMANCE": "PERFORMANCE",
    "SDC": "SILENT_DATA_CORRUPTION",
    "XID": "UNRECOVERABLE_GPU_ERROR",
    "unspecified": "BEHAVIOR_UNSPECIFIED",
}
