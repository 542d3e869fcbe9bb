"""nodes.json: each node as ``kubectl get nodes -o json`` prints it at T+35m."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .cluster import GKE_VERSION, LAST_MINUTE, Node, kube_list
from .deterministic import NS, fmt_ts, rand_hex, rand_int, rand_uuid

if TYPE_CHECKING:
    from .scenario import Scenario


def nodes_json(sc: Scenario) -> dict[str, Any]:
    ctx = sc.ctx
    region = ctx.zone.rsplit("-", 1)[0]
    items = []
    for node in sc.nodes:
        labels = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/instance-type": node.machine,
            "beta.kubernetes.io/os": "linux",
            "cloud.google.com/gke-boot-disk": "hyperdisk-balanced"
            if node.machine.startswith(("a3", "ct6e", "ct5p"))
            else "pd-balanced",
            "cloud.google.com/gke-container-runtime": "containerd",
            "cloud.google.com/gke-cpu-scaling-level": "4",
            "cloud.google.com/gke-logging-variant": "DEFAULT",
            "cloud.google.com/gke-max-pods-per-node": "110",
            "cloud.google.com/gke-nodepool": node.pool,
            "cloud.google.com/gke-os-distribution": "cos",
            "cloud.google.com/gke-provisioning": "spot" if node.spot else "standard",
            "cloud.google.com/gke-stack-type": "IPV4",
            "cloud.google.com/machine-family": node.machine.split("-")[0],
            "cloud.google.com/private-node": "false",
            "failure-domain.beta.kubernetes.io/region": region,
            "failure-domain.beta.kubernetes.io/zone": node.zone,
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": node.name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": node.machine,
            "topology.gke.io/zone": node.zone,
            "topology.kubernetes.io/region": region,
            "topology.kubernetes.io/zone": node.zone,
        }
        if node.spot:
            labels["cloud.google.com/gke-spot"] = "true"
        if node.host:
            labels["cloud.google.com/gce-topology-block"] = node.block or ""
            labels["cloud.google.com/gce-topology-subblock"] = node.subblock or ""
            labels["cloud.google.com/gce-topology-host"] = node.host
        labels.update(node.labels)
        status = node.not_ready.get(LAST_MINUTE, "True")
        hb = ctx.at(LAST_MINUTE - 0.2, "hb", node.name)
        cpu = node.capacity.get("cpu", "8")
        capacity = {
            "cpu": cpu,
            "ephemeral-storage": "98831908Ki",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
            "memory": node.capacity.get("memory", "32876680Ki"),
            "pods": "110",
        }
        capacity.update({k: v for k, v in node.capacity.items() if k not in capacity})
        allocatable = dict(capacity)
        allocatable["cpu"] = f"{int(cpu) * 1000 - 200 - int(cpu) * 10}m"
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "annotations": {
                        "container.googleapis.com/instance_id": node.instance_id,
                        "node.alpha.kubernetes.io/ttl": "0",
                        "node.gke.io/last-applied-node-labels": ",".join(
                            f"{k}={v}"
                            for k, v in sorted(labels.items())
                            if k.startswith("cloud.google.com/gke-")
                        ),
                        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                    },
                    "creationTimestamp": fmt_ts(node.created_ns, 0),
                    "labels": labels,
                    "name": node.name,
                    "resourceVersion": str(rand_int(10**7, 10**8, "nrv", node.name)),
                    "uid": rand_uuid("node", node.name),
                },
                "spec": {
                    "podCIDR": node.pod_cidr,
                    "podCIDRs": [node.pod_cidr],
                    "providerID": f"gce://{node.project}/{node.zone}/{node.name}",
                    **({"taints": node.taints} if node.taints else {}),
                },
                "status": {
                    "addresses": [
                        {"address": node.ip, "type": "InternalIP"},
                        {"address": "", "type": "ExternalIP"},
                        {"address": node.name, "type": "Hostname"},
                    ],
                    "allocatable": allocatable,
                    "capacity": capacity,
                    "conditions": node_conditions(node, status, hb),
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                    "nodeInfo": {
                        "architecture": "amd64",
                        "bootID": rand_uuid("boot", node.name, node.boot_ns),
                        "containerRuntimeVersion": "containerd://1.7.24",
                        "kernelVersion": "6.6.72+",
                        "kubeProxyVersion": GKE_VERSION,
                        "kubeletVersion": GKE_VERSION,
                        "machineID": rand_hex(32, "machine", node.name),
                        "operatingSystem": "linux",
                        "osImage": "Container-Optimized OS from Google",
                        "systemUUID": rand_uuid("sys", node.name),
                    },
                },
            }
        )
    for item in items:
        hook = sc.node_hooks.get(item["metadata"]["name"])
        if hook is not None:
            hook(item)
    return kube_list(items)


#: node-problem-detector's conditions: type -> (reason, message) while False.
NPD_CONDITIONS = {
    "FrequentContainerdRestart": (
        "NoFrequentContainerdRestart",
        "containerd is functioning properly",
    ),
    "KernelDeadlock": ("KernelHasNoDeadlock", "kernel has no deadlock"),
    "ReadonlyFilesystem": ("FilesystemIsNotReadOnly", "Filesystem is not read-only"),
    "FrequentKubeletRestart": ("NoFrequentKubeletRestart", "kubelet is functioning properly"),
    "CorruptDockerOverlay2": ("NoCorruptDockerOverlay2", "docker overlay2 is functioning properly"),
    "FrequentUnregisterNetDevice": (
        "NoFrequentUnregisterNetDevice",
        "node is functioning properly",
    ),
}
#: The kubelet's pressure conditions: type -> (reason, message) while False.
KUBELET_CONDITIONS = {
    "MemoryPressure": ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    "DiskPressure": ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
}


def condition(ctype: str, status: str, reason: str, message: str, hb: str, since: str) -> dict:
    """One entry of a node's ``status.conditions``."""
    return {
        "lastHeartbeatTime": hb,
        "lastTransitionTime": since,
        "message": message,
        "reason": reason,
        "status": status,
        "type": ctype,
    }


def node_conditions(node: Node, status: str, hb: int) -> list[dict[str, str]]:
    booted = fmt_ts(node.boot_ns + 40 * NS, 0)
    hbs = fmt_ts(hb, 0)
    out = [
        condition(ctype, "False", reason, message, hbs, booted)
        for ctype, (reason, message) in NPD_CONDITIONS.items()
    ]
    created = fmt_ts(node.created_ns, 0)
    route = "NodeController create implicit route"
    out.append(condition("NetworkUnavailable", "False", "RouteCreated", route, hbs, created))
    out += [
        condition(ctype, "False", reason, message, hbs, booted)
        for ctype, (reason, message) in KUBELET_CONDITIONS.items()
    ]
    if status == "True":
        ready = fmt_ts(node.ready_since_ns, 0)
        posting = "kubelet is posting ready status"
        out.append(condition("Ready", "True", "KubeletReady", posting, hbs, ready))
    else:
        stopped = "Kubelet stopped posting node status."
        out.append(condition("Ready", status, "NodeStatusUnknown", stopped, hbs, hbs))
    return out


def pressure_until(node: Node, ctype: str, since_ns: int) -> Callable[[dict[str, Any]], None]:
    """A nodes.json hook: pressure condition ``ctype`` False again since ``since_ns``."""
    reason, message = KUBELET_CONDITIONS[ctype]

    def hook(item: dict[str, Any]) -> None:
        for cond in item["status"]["conditions"]:
            if cond["type"] == ctype:
                cond.update(
                    {
                        "lastTransitionTime": fmt_ts(since_ns, 0),
                        "message": message,
                        "reason": reason,
                        "status": "False",
                    }
                )

    return hook
