"""pods.json: JobSet, Kubeflow and Deployment pods as ``kubectl get pods -o json`` prints them.

With the container statuses other records (audit entries, hooks) quote.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .cluster import LAST_MINUTE, AnyPod, KfPod, Node, PlainPod, Pod, kube_list
from .deterministic import fmt_ts, rand_hex, rand_int, rand_uuid
from .metrics import add_pod_info, container_of
from .templates import GPU_TOLERATION

if TYPE_CHECKING:
    from .scenario import Scenario


def _default_tolerations() -> list[dict[str, Any]]:
    """The two tolerations the DefaultTolerationSeconds admission plugin adds to a pod."""
    return [
        {
            "effect": "NoExecute",
            "key": f"node.kubernetes.io/{taint}",
            "operator": "Exists",
            "tolerationSeconds": 300,
        }
        for taint in ("not-ready", "unreachable")
    ]


def pods_json(sc: Scenario) -> dict[str, Any]:
    items = [
        pod_item(sc, p) if isinstance(p, Pod) else kf_pod_item(sc, p)
        for p in sc.pods
        if p.end_m is None
    ]
    for item in items:
        hook = sc.pod_hooks.get(item["metadata"]["uid"])
        if hook is not None:
            hook(item)
    items += sc.extra_pod_items
    items.sort(key=lambda i: (i["metadata"]["namespace"], i["metadata"]["name"]))
    return kube_list(items)


def pod_item(sc: Scenario, pod: Pod) -> dict[str, Any]:
    spec = pod.spec
    labels = pod.labels(sc.jobset_uid(spec.name))
    created = fmt_ts(pod.created_ns, 0)
    annotations = {k: v for k, v in labels.items() if k.startswith("jobset.sigs.k8s.io/")}
    annotations["batch.kubernetes.io/job-completion-index"] = str(pod.p)
    if spec.resources.get("google.com/tpu"):
        annotations["alpha.jobset.sigs.k8s.io/exclusive-topology"] = "cloud.google.com/gke-nodepool"
    container: dict[str, Any] = {
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "name": spec.container,
        "ports": [{"containerPort": 8471, "protocol": "TCP"}]
        if "google.com/tpu" in spec.resources
        else [{"containerPort": 29500, "protocol": "TCP"}],
        "resources": {"limits": dict(spec.resources), "requests": dict(spec.resources)},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "hostname": f"{spec.job_name(pod.j)}-{pod.p}",
        "nodeSelector": dict(spec.node_selector),
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 1000 if spec.priority_class else 0,
        "restartPolicy": "Never",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "subdomain": spec.name,
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            *spec.tolerations,
            *_default_tolerations(),
        ],
    }
    if spec.priority_class:
        pod_spec["priorityClassName"] = spec.priority_class
    status = pod_status(sc, pod, pod_spec, spec.image, spec.container)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "annotations": annotations,
            "creationTimestamp": created,
            "finalizers": ["batch.kubernetes.io/job-tracking"],
            "generateName": f"{spec.job_name(pod.j)}-{pod.p}-",
            "labels": labels,
            "name": pod.name,
            "namespace": pod.namespace,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "Job",
                    "name": spec.job_name(pod.j),
                    "uid": pod.job_uid,
                }
            ],
            "resourceVersion": str(rand_int(10**7, 10**8, "prv", pod.name)),
            "uid": pod.uid,
        },
        "spec": pod_spec,
        "status": status,
    }


def pod_status(
    sc: Scenario, pod: AnyPod, pod_spec: dict[str, Any], image: str, container: str
) -> dict[str, Any]:
    """The status of a pod at T+35m; sets ``nodeName`` in ``pod_spec`` once it is bound."""
    ctx = sc.ctx
    phase = pod.phase_at(LAST_MINUTE) or "Pending"
    created = fmt_ts(pod.created_ns, 0)
    run_m = next((s for s, ph in pod.phases if ph == "Running"), None)
    started = fmt_ts(ctx.at(run_m - 0.3, "started", pod.name), 0) if run_m is not None else None
    status: dict[str, Any] = {"phase": phase, "qosClass": "Guaranteed"}
    if pod.node is not None and phase != "Pending":
        pod_spec["nodeName"] = pod.node.name
        ready_at = fmt_ts(ctx.at((run_m or 0) + 0.1, "ready", pod.name), 0)
        status.update(
            {
                "conditions": [
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": started,
                        "status": "True",
                        "type": "PodReadyToStartContainers",
                    },
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": created,
                        "status": "True",
                        "type": "Initialized",
                    },
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": ready_at,
                        "status": "True",
                        "type": "Ready",
                    },
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": ready_at,
                        "status": "True",
                        "type": "ContainersReady",
                    },
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": created,
                        "status": "True",
                        "type": "PodScheduled",
                    },
                ],
                "containerStatuses": [
                    {
                        "containerID": "containerd://" + rand_hex(64, "cid", pod.name),
                        "image": image,
                        "imageID": image.split(":")[0] + "@sha256:" + rand_hex(64, "img", image),
                        "lastState": {},
                        "name": container,
                        "ready": True,
                        "restartCount": 0,
                        "started": True,
                        "state": {"running": {"startedAt": started}},
                    }
                ],
                "hostIP": pod.node.ip,
                "hostIPs": [{"ip": pod.node.ip}],
                "podIP": pod.ip,
                "podIPs": [{"ip": pod.ip}],
                "startTime": created,
            }
        )
    else:
        status["conditions"] = [
            {
                "lastProbeTime": None,
                "lastTransitionTime": created,
                "message": pod.sched_message or "",
                "reason": "Unschedulable",
                "status": "False",
                "type": "PodScheduled",
            }
        ]
    return status


def kf_pod_item(sc: Scenario, pod: KfPod) -> dict[str, Any]:
    """A pod as the Kubeflow training operator creates it (owner: the TFJob/PyTorchJob)."""
    spec = pod.spec
    port_name, port = spec.port
    container: dict[str, Any] = {
        "env": [*spec.env, *kf_env(sc, pod)],
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "name": spec.container,
        "ports": [{"containerPort": port, "name": port_name, "protocol": "TCP"}],
        "resources": {
            "limits": dict(spec.resources[pod.rtype]),
            "requests": dict(spec.resources[pod.rtype]),
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    if spec.command:
        container["command"] = list(spec.command)
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "nodeSelector": dict(spec.node_selector.get(pod.rtype, {})),
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        # restartPolicy ExitCode: the pod itself never restarts; the operator re-creates it.
        "restartPolicy": "Never",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            *spec.tolerations.get(pod.rtype, []),
            *_default_tolerations(),
        ],
    }
    status = pod_status(sc, pod, pod_spec, spec.image, spec.container)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "creationTimestamp": fmt_ts(pod.created_ns, 0),
            "labels": pod.labels(),
            "name": pod.name,
            "namespace": pod.namespace,
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": spec.api_kind,
                    "name": spec.name,
                    "uid": sc.kubeflow_uid(spec, pod.namespace),
                }
            ],
            "resourceVersion": str(rand_int(10**7, 10**8, "prv", pod.uid)),
            "uid": pod.uid,
        },
        "spec": pod_spec,
        "status": status,
    }


def kf_env(sc: Scenario, pod: KfPod) -> list[dict[str, str]]:
    """What the operator adds to the framework's container: TF_CONFIG for TFJob, the
    torch.distributed rendezvous variables for PyTorchJob."""
    spec = pod.spec
    _, port = spec.port
    if spec.api_kind == "TFJob":
        cluster = {
            rtype.lower(): [
                f"{spec.pod_name(rtype, i)}.{pod.namespace}.svc:{port}" for i in range(count)
            ]
            for rtype, count in spec.replicas.items()
        }
        config = {
            "cluster": cluster,
            "task": {"type": pod.rtype.lower(), "index": pod.index},
            "environment": "cloud",
        }
        return [{"name": "TF_CONFIG", "value": json.dumps(config, separators=(",", ":"))}]
    world = sum(spec.replicas.values())
    rank = 0 if pod.rtype == "Master" else pod.index + int(spec.has_chief)
    return [
        {"name": "MASTER_PORT", "value": str(port)},
        {"name": "MASTER_ADDR", "value": spec.pod_name("Master", 0)},
        {"name": "WORLD_SIZE", "value": str(world)},
        {"name": "RANK", "value": str(rank)},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]


def terminated_status(
    sc: Scenario, pod: AnyPod, m: float, *, reason: str, code: int, started_m: float
) -> dict[str, Any]:
    """A container status that ended at T+m."""
    return {
        "containerID": "containerd://" + rand_hex(64, "cid", pod.uid, "term"),
        "image": pod.spec.image,
        "imageID": pod.spec.image.split(":")[0] + "@sha256:" + rand_hex(64, "img", pod.spec.image),
        "lastState": {},
        "name": container_of(pod),
        "ready": False,
        "restartCount": 0,
        "started": False,
        "state": {
            "terminated": {
                "containerID": "containerd://" + rand_hex(64, "cid", pod.uid, "term"),
                "exitCode": code,
                "finishedAt": fmt_ts(sc.ctx.at(m, "fin", pod.uid), 0),
                "reason": reason,
                "startedAt": fmt_ts(sc.ctx.at(started_m, "st", pod.uid), 0),
            }
        },
    }


def failed_status(
    sc: Scenario, pod: AnyPod, m: float, started_m: float, *, reason: str, code: int
) -> dict[str, Any]:
    node = pod.node
    return {
        "conditions": [
            {
                "lastProbeTime": None,
                "lastTransitionTime": fmt_ts(sc.ctx.at(m, "c", pod.uid), 0),
                "status": "False",
                "type": t,
            }
            for t in ("Ready", "ContainersReady")
        ],
        "containerStatuses": [
            terminated_status(sc, pod, m, reason=reason, code=code, started_m=started_m)
        ],
        "hostIP": node.ip if node else "",
        "phase": "Failed",
        "podIP": pod.ip,
        "qosClass": "Burstable",
        "startTime": fmt_ts(pod.created_ns, 0),
    }


def waiting_on_image(
    sc: Scenario, pod: AnyPod, reason: str, message: str
) -> Callable[[dict[str, Any]], None]:
    """A pods.json hook: the pod is bound to its node and its container waits on a pull."""

    def hook(item: dict[str, Any]) -> None:
        node = pod.node
        assert node is not None
        created = fmt_ts(pod.created_ns, 0)
        bound = fmt_ts(sc.ctx.at(pod.start_m - 0.8, "bound", pod.uid), 0)
        item["spec"]["nodeName"] = node.name
        item["status"] = {
            "conditions": [
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": bound,
                    "status": "True",
                    "type": "PodReadyToStartContainers",
                },
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": bound,
                    "status": "True",
                    "type": "Initialized",
                },
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": bound,
                    "message": f"containers with unready status: [{container_of(pod)}]",
                    "reason": "ContainersNotReady",
                    "status": "False",
                    "type": "Ready",
                },
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": bound,
                    "message": f"containers with unready status: [{container_of(pod)}]",
                    "reason": "ContainersNotReady",
                    "status": "False",
                    "type": "ContainersReady",
                },
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": bound,
                    "status": "True",
                    "type": "PodScheduled",
                },
            ],
            "containerStatuses": [
                {
                    "image": pod.spec.image,
                    "imageID": "",
                    "lastState": {},
                    "name": container_of(pod),
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"waiting": {"message": message, "reason": reason}},
                }
            ],
            "hostIP": node.ip,
            "hostIPs": [{"ip": node.ip}],
            "phase": "Pending",
            "podIP": pod.ip,
            "podIPs": [{"ip": pod.ip}],
            "qosClass": "Guaranteed",
            "startTime": created,
        }

    return hook


def priority_hook(priority_class: str, value: int) -> Callable[[dict[str, Any]], None]:
    def hook(item: dict[str, Any]) -> None:
        item["spec"]["priorityClassName"] = priority_class
        item["spec"]["priority"] = value

    return hook


@dataclass
class Deployment:
    """An online service sharing the cluster: its pods' namespace, template and priority."""

    app: str
    namespace: str
    image: str
    resources: dict[str, str]
    priority_class: str
    priority: int


def deployment_pod(
    sc: Scenario, app: Deployment, name: str, node: Node, start_m: int, end_m: int | None
) -> PlainPod:
    """A Deployment's pod: pods.json while it exists at T+35m, kube_pod_info with its
    PriorityClass."""
    namespace, priority_class = app.namespace, app.priority_class
    ip = f"10.{rand_int(64, 120, 'pods', sc.ctx.cluster)}.{rand_int(2, 250, 'dip', name)}.9"
    pod = PlainPod(name, namespace, node, start_m, end_m, ip)
    replicaset = name.rsplit("-", 1)[0]
    add_pod_info(sc, pod, priority_class, ("ReplicaSet", replicaset))
    created = sc.ctx.at(start_m - 0.3, "dcreated", name)
    if end_m is None:
        sc.extra_pod_items.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "creationTimestamp": fmt_ts(created, 0),
                    "generateName": f"{replicaset}-",
                    "labels": {"app": app.app, "pod-template-hash": replicaset.rsplit("-", 1)[-1]},
                    "name": name,
                    "namespace": namespace,
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "blockOwnerDeletion": True,
                            "controller": True,
                            "kind": "ReplicaSet",
                            "name": replicaset,
                            "uid": rand_uuid("rs", namespace, replicaset),
                        }
                    ],
                    "resourceVersion": str(rand_int(10**7, 10**8, "drv", name)),
                    "uid": pod.uid,
                },
                "spec": {
                    "containers": [
                        {
                            "image": app.image,
                            "imagePullPolicy": "IfNotPresent",
                            "name": app.app,
                            "resources": {
                                "limits": dict(app.resources),
                                "requests": dict(app.resources),
                            },
                        }
                    ],
                    "nodeName": node.name,
                    "preemptionPolicy": "PreemptLowerPriority",
                    "priority": app.priority,
                    "priorityClassName": priority_class,
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "tolerations": [*GPU_TOLERATION, *_default_tolerations()],
                },
                "status": {
                    "conditions": [
                        {
                            "lastProbeTime": None,
                            "lastTransitionTime": fmt_ts(created, 0),
                            "status": "True",
                            "type": t,
                        }
                        for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
                    ],
                    "hostIP": node.ip,
                    "phase": "Running",
                    "podIP": ip,
                    "qosClass": "Guaranteed",
                    "startTime": fmt_ts(created, 0),
                },
            }
        )
    return pod
