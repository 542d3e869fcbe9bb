"""Read Kubernetes Node, Pod and Kubeflow job objects (API JSON, as ``kubectl get -o json``
prints them)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from loopbreaker.diagnosis import maintenance
from loopbreaker.diagnosis.jobsets import pod_attempt_fields
from loopbreaker.errors import InvalidContext
from loopbreaker.model import (
    KUBEFLOW_CHIEF_TYPES,
    ContainerInfo,
    NodeCondition,
    NodeInfo,
    PodInfo,
    Signal,
    SignalKind,
    Termination,
    WorkloadKind,
)
from loopbreaker.model.evidence import (
    FLEX_START_LABEL,
    HEALTH_PREDICTION_LABEL,
    MACHINE_TYPE_LABEL,
    RESERVATION_LABEL,
)
from loopbreaker.signals.classify import kubeflow_kind
from loopbreaker.timeutil import parse_rfc3339

HOST_LABEL = "cloud.google.com/gce-topology-host"
POOL_LABEL = "cloud.google.com/gke-nodepool"
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
SPOT_LABELS = ("cloud.google.com/gke-spot", "cloud.google.com/gke-preemptible")
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
KUBEFLOW_JOB_LABEL = "training.kubeflow.org/job-name"
#: GKE's node labels naming the accelerator ("About GPUs in GKE", "About TPUs in GKE").
ACCELERATOR_LABELS = ("cloud.google.com/gke-accelerator", "cloud.google.com/gke-tpu-accelerator")
#: GKE annotates every node with its VM's numeric id.
INSTANCE_ID_ANNOTATION = "container.googleapis.com/instance_id"

#: The node conditions the kubelet's eviction manager sets.
PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure")
_QUANTITY = re.compile(
    r"^\s*(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<suffix>[A-Za-z]*|[eE][+-]?[0-9]+)\s*$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "m": 1e-3}
_PROVIDER_ID = re.compile(r"^gce://(?P<project>[^/]+)/(?P<zone>[^/]+)/(?P<instance>[^/]+)$")
_POD_NAME = re.compile(r"^(?P<rest>.+)-(?P<job>\d+)-(?P<pod>\d+)-[a-z0-9]{5}$")


def items_of(document: object) -> list[Mapping[str, Any]]:
    """Accept a ``List`` (kubectl -o json), a bare array, or a single object."""
    if isinstance(document, Mapping):
        items = document.get("items")
        if isinstance(items, list):
            return [i for i in items if isinstance(i, Mapping)]
        return [document] if "metadata" in document else []
    if isinstance(document, list):
        return [i for i in document if isinstance(i, Mapping)]
    return []


def node_info(obj: Mapping[str, Any]) -> NodeInfo | None:
    meta = _map(obj.get("metadata"))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    labels = _labels(meta)
    spec = _map(obj.get("spec"))
    provider = spec.get("providerID")
    project = zone = instance = None
    if isinstance(provider, str):
        match = _PROVIDER_ID.match(provider)
        if match:
            project, zone, instance = match["project"], match["zone"], match["instance"]
    zone = zone or next((labels[k] for k in ZONE_LABELS if k in labels), None)
    return NodeInfo(
        name=name,
        node_pool=labels.get(POOL_LABEL),
        physical_host=labels.get(HOST_LABEL) or None,
        zone=zone,
        instance=instance or name,
        project=project,
        ready=_ready(_map(obj.get("status"))),
        spot=any(labels.get(k) == "true" for k in SPOT_LABELS),
        flex_start=labels.get(FLEX_START_LABEL) == "true",
        instance_id=_instance_id(meta),
        pressure=_pressure(_map(obj.get("status"))),
        maintenance=maintenance.from_node(labels, _list(spec.get("taints"))),
        recommended_for_training={"true": True, "false": False}.get(
            labels.get(HEALTH_PREDICTION_LABEL, "").strip().lower()
        ),
        machine_type=labels.get(MACHINE_TYPE_LABEL) or None,
        kubelet_version=_text(_map(_map(obj.get("status")).get("nodeInfo")).get("kubeletVersion")),
        reservation=labels.get(RESERVATION_LABEL) or None,
        accelerator=next((labels[k] for k in ACCELERATOR_LABELS if labels.get(k)), None),
    )


def pod_info(obj: Mapping[str, Any]) -> PodInfo | None:
    meta = _map(obj.get("metadata"))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    labels = _labels(meta)
    spec = _map(obj.get("spec"))
    status = _map(obj.get("status"))
    workload = labels.get(JOBSET_LABEL) or labels.get(KUBEFLOW_JOB_LABEL)
    unschedulable = False
    message = None
    scheduled_at = disruption_at = None
    disruption_reason = None
    conditions = status.get("conditions")
    for cond in conditions if isinstance(conditions, list) else []:
        if not isinstance(cond, Mapping):
            continue
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            unschedulable = cond.get("reason") == "Unschedulable"
            msg = cond.get("message")
            message = msg if isinstance(msg, str) else None
        elif cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            scheduled_at = _time(cond.get("lastTransitionTime"))
        elif cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            disruption_reason = _str(cond.get("reason"))
            disruption_at = _time(cond.get("lastTransitionTime"))
    phase = status.get("phase")
    node = spec.get("nodeName")
    namespace = meta.get("namespace")
    priority = spec.get("priority")
    return PodInfo(
        name=name,
        namespace=namespace if isinstance(namespace, str) else None,
        phase=phase if isinstance(phase, str) else None,
        node=node if isinstance(node, str) else None,
        workload=workload,
        coordinator=_coordinator(name, labels),
        unschedulable=unschedulable,
        message=message,
        replica_type=(labels.get("training.kubeflow.org/replica-type") or "").lower() or None,
        workload_kind=_pod_kind(labels),
        uid=_str(meta.get("uid")),
        priority_class=_str(spec.get("priorityClassName")),
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else None,
        status_reason=_str(status.get("reason")),
        status_message=_str(status.get("message")),
        containers=_containers(spec, status),
        accelerators=_accelerators(spec),
        disruption_reason=disruption_reason,
        disruption_at=disruption_at,
        scheduled_at=scheduled_at,
        created_at=_time(meta.get("creationTimestamp")),
        **pod_attempt_fields(labels),
    )


#: Extended resources of accelerators: NVIDIA's device plugin (``nvidia.com/gpu``) and GKE's
#: TPU (``google.com/tpu``), as "About GPUs in GKE" / "Deploy TPU workloads in GKE" request
#: them in ``resources.limits`` (extended resources need requests equal to limits).
ACCELERATOR_RESOURCES = ("nvidia.com/gpu", "google.com/tpu")


def _accelerators(spec: Mapping[str, Any]) -> int | None:
    """The accelerators the pod's containers ask for, summed; None when none does."""
    total = 0
    for container in _list(spec.get("containers")):
        resources = _map(_map(container).get("resources"))
        asked = _map(resources.get("limits")) or _map(resources.get("requests"))
        for name in ACCELERATOR_RESOURCES:
            count = parse_quantity(asked.get(name))
            if count is not None and count > 0:
                total += int(count)
    return total or None


def parse_quantity(value: object) -> float | None:
    """A Kubernetes resource quantity (``72Gi``, ``512M``, ``1.5e9``) as a number; None
    for anything else."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str):
        return None
    match = _QUANTITY.match(value)
    if match is None:
        return None
    number, suffix = float(match["number"]), match["suffix"]
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    if suffix[:1] in ("e", "E"):
        return number * 10.0 ** int(suffix[1:])
    return None


def _containers(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[ContainerInfo, ...]:
    statuses = {
        s.get("name"): s for s in _list(status.get("containerStatuses")) if isinstance(s, Mapping)
    }
    out = []
    for container in _list(spec.get("containers")):
        if not isinstance(container, Mapping) or not isinstance(container.get("name"), str):
            continue
        name = container["name"]
        limits = _map(_map(container.get("resources")).get("limits"))
        state = _map(statuses.get(name, {}))
        waiting = _map(_map(state.get("state")).get("waiting"))
        out.append(
            ContainerInfo(
                name=name,
                image=_str(container.get("image")),
                memory_limit=parse_quantity(limits.get("memory")),
                terminated=_termination(_map(state.get("state")).get("terminated")),
                last_terminated=_termination(_map(state.get("lastState")).get("terminated")),
                waiting_reason=_str(waiting.get("reason")),
                waiting_message=_str(waiting.get("message")),
            )
        )
    return tuple(out)


def _termination(value: object) -> Termination | None:
    if not isinstance(value, Mapping):
        return None
    code = value.get("exitCode")
    return Termination(
        reason=_str(value.get("reason")),
        exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        finished_at=_time(value.get("finishedAt")),
    )


def _pressure(status: Mapping[str, Any]) -> tuple[NodeCondition, ...]:
    out = []
    for cond in _list(status.get("conditions")):
        if not isinstance(cond, Mapping) or cond.get("type") not in PRESSURE_CONDITIONS:
            continue
        state = cond.get("status")
        out.append(
            NodeCondition(
                type=str(cond["type"]),
                status=True if state == "True" else False if state == "False" else None,
                since=_time(cond.get("lastTransitionTime")),
                reason=_str(cond.get("reason")),
                message=_str(cond.get("message")),
            )
        )
    return tuple(out)


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_rfc3339(value)
    except InvalidContext:
        return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _pod_kind(labels: Mapping[str, str]) -> str | None:
    if labels.get(JOBSET_LABEL):
        return WorkloadKind.JOBSET.value
    if labels.get(KUBEFLOW_JOB_LABEL):
        kind = kubeflow_kind(
            labels.get("training.kubeflow.org/operator-name"),
            labels.get("training.kubeflow.org/replica-type"),
        )
        return kind.value if kind else None
    return None


def _coordinator(name: str, labels: Mapping[str, str]) -> bool | None:
    job_index = labels.get("jobset.sigs.k8s.io/job-index")
    pod_index = labels.get("batch.kubernetes.io/job-completion-index")
    if job_index is not None and pod_index is not None:
        return job_index == "0" and pod_index == "0"
    replica_type = labels.get("training.kubeflow.org/replica-type")
    if replica_type is not None:
        index = labels.get("training.kubeflow.org/replica-index")
        return replica_type.lower() in KUBEFLOW_CHIEF_TYPES or (
            replica_type.lower() == "worker" and index == "0"
        )
    match = _POD_NAME.match(name)
    if match and labels.get(JOBSET_LABEL):
        return match["job"] == "0" and match["pod"] == "0"
    return None


def _ready(status: Mapping[str, Any]) -> bool | None:
    conditions = status.get("conditions")
    for cond in conditions if isinstance(conditions, list) else []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return None


def _instance_id(meta: Mapping[str, Any]) -> str | None:
    value = _map(meta.get("annotations")).get(INSTANCE_ID_ANNOTATION)
    return value if isinstance(value, str) and value.isdigit() else None


def _labels(meta: Mapping[str, Any]) -> dict[str, str]:
    labels = meta.get("labels")
    if not isinstance(labels, Mapping):
        return {}
    return {str(k): v for k, v in labels.items() if isinstance(v, str)}


def _text(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def job_restart(obj: Mapping[str, Any]) -> Signal | None:
    """The latest restart of a TFJob / PyTorchJob, from its ``Restarting`` condition.

    The operator keeps one condition per type, so a job object tells only when it last
    started restarting (``lastTransitionTime``); its Events tell every restart. Both at once
    are one restart (the engine merges reports seconds apart)."""
    kind = WorkloadKind.from_api_kind(obj.get("kind") if isinstance(obj.get("kind"), str) else None)
    meta = _map(obj.get("metadata"))
    name = meta.get("name")
    if kind is None or not kind.kubeflow or not isinstance(name, str):
        return None
    conditions = _map(obj.get("status")).get("conditions")
    for cond in conditions if isinstance(conditions, list) else []:
        if not isinstance(cond, Mapping) or cond.get("type") != "Restarting":
            continue
        stamp = cond.get("lastTransitionTime") or cond.get("lastUpdateTime")
        if not isinstance(stamp, str):
            return None
        try:
            at = parse_rfc3339(stamp, what=f"{kind.api_kind} {name} Restarting condition")
        except (ValueError, InvalidContext):
            return None
        reason = cond.get("reason")
        message = cond.get("message")
        namespace = meta.get("namespace")
        return Signal(
            kind=SignalKind.JOB_RESTARTING,
            timestamp=at,
            severity="WARNING",
            namespace=namespace if isinstance(namespace, str) else None,
            workload=name,
            workload_kind=kind.value,
            reason=reason if isinstance(reason, str) else "JobRestarting",
            excerpt=(message if isinstance(message, str) else "Restarting")[:300],
            resource_type=f"kubeflow.org/{kind.api_kind}",
        )
    return None
