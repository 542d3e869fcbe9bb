"""Cloud Logging LogEntry builders, and the entry log every scenario keeps.

The entry itself, a pod's log labels, Kubernetes Event payloads and Compute Engine audit
entries.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from .cluster import AnyPod, Context
from .deterministic import LOWER_ALNUM, fmt_ts, rand_hex, rand_int, rand_str, rand_uuid

#: Log id used for GKE interruption notices (PreemptionEvent / MaintenanceEvent on
#: gke_nodepool, TerminationEvent on k8s_node). The real id is unverified; classify by
#: resource.type and payload text, never by this name.
INTERRUPTION_LOG = "container.googleapis.com/node-pool-events"


SYSTEM_EVENT_LOG = "cloudaudit.googleapis.com/system_event"


EVENTS_LOG = "events"


AUDIT_ACTIVITY_LOG = "cloudaudit.googleapis.com/activity"


def insert_id(log_id: str, *parts: object) -> str:
    if log_id.startswith("cloudaudit"):
        return rand_str(LOWER_ALNUM, 12, "iid", *parts)
    if log_id == EVENTS_LOG:
        return rand_str(LOWER_ALNUM, 14, "iid", *parts)
    return rand_str(LOWER_ALNUM, 16, "iid", *parts)


def make_entry(
    project: str,
    *,
    log_id: str,
    resource_type: str,
    resource_labels: dict[str, str],
    at_ns: int,
    severity: str,
    text: str | None = None,
    json_payload: dict[str, Any] | None = None,
    proto_payload: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    operation: dict[str, Any] | None = None,
    digits: int = 9,
) -> dict[str, Any]:
    key = (project, log_id, resource_type, sorted(resource_labels.items()), at_ns, text)
    delay = rand_int(60_000_000, 2_400_000_000, "recv", *key)
    entry: dict[str, Any] = {
        "insertId": insert_id(log_id, *key),
        "logName": f"projects/{project}/logs/{quote(log_id, safe='')}",
        "receiveTimestamp": fmt_ts(at_ns + delay, 9),
        "resource": {"type": resource_type, "labels": dict(resource_labels)},
        "severity": severity,
        "timestamp": fmt_ts(at_ns, digits),
    }
    if labels:
        entry["labels"] = dict(labels)
    if operation:
        entry["operation"] = operation
    if text is not None:
        entry["textPayload"] = text
    if json_payload is not None:
        entry["jsonPayload"] = json_payload
    if proto_payload is not None:
        entry["protoPayload"] = proto_payload
    return entry


def pod_log_labels(pod: AnyPod, jobset_uid: str) -> dict[str, str]:
    out = {"compute.googleapis.com/resource_name": pod.node.name if pod.node else ""}
    for k, v in pod.labels(jobset_uid).items():
        out["k8s-pod/" + k.replace(".", "_")] = v
    out["logging.gke.io/top_level_controller_name"] = pod.spec.name
    out["logging.gke.io/top_level_controller_type"] = pod.spec.api_kind
    return out


def k8s_event_payload(
    involved: dict[str, Any],
    reason: str,
    message: str,
    component: str,
    etype: str,
    first_ns: int,
    last_ns: int | None = None,
    count: int = 1,
    host: str | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    """A v1 Event (``last_ns`` defaults to ``first_ns``: an Event seen once)."""
    last_ns = first_ns if last_ns is None else last_ns
    name = f"{involved['name']}.{rand_hex(16, 'event', involved['name'], reason, first_ns)}"
    source: dict[str, str] = {"component": component}
    if host:
        source["host"] = host
    return {
        "apiVersion": "v1",
        "count": count,
        "eventTime": None,
        "firstTimestamp": fmt_ts(first_ns, 0),
        "involvedObject": involved,
        "kind": "Event",
        "lastTimestamp": fmt_ts(last_ns, 0),
        "message": message,
        "metadata": {
            "creationTimestamp": fmt_ts(first_ns, 0),
            "name": name,
            "namespace": namespace,
            "resourceVersion": str(rand_int(10_000_000, 99_999_999, "rv", name, last_ns)),
            "uid": rand_uuid("event", name),
        },
        "reason": reason,
        "reportingComponent": component,
        "reportingInstance": host or "",
        "source": source,
        "type": etype,
    }


AUDIT_STATUS = {
    "compute.instances.preempted": "Instance was preempted.",
    "compute.instances.hostError": "Instance terminated by Compute Engine.",
    "compute.instances.automaticRestart": "Instance automatically restarted by Compute Engine.",
    "compute.instances.terminateOnHostMaintenance": (
        "Instance terminated during Compute Engine maintenance."
    ),
    "compute.instances.migrateOnHostMaintenance": (
        "Instance migrated during Compute Engine maintenance."
    ),
    "compute.instances.guestTerminate": "Instance stopped by guest OS shutdown.",
}


def audit_entry(
    project: str, zone: str, instance: str, instance_id: str, method: str, at_ns: int
) -> dict[str, Any]:
    ms = at_ns // 1_000_000
    op_id = (
        f"systemevent-{ms + rand_int(200, 900, 'op', instance, method, at_ns)}-"
        f"{rand_hex(13, 'op1', instance, at_ns)}-{rand_hex(8, 'op2', instance, at_ns)}-"
        f"{rand_hex(8, 'op3', instance, at_ns)}"
    )
    return make_entry(
        project,
        log_id=SYSTEM_EVENT_LOG,
        resource_type="gce_instance",
        resource_labels={"instance_id": instance_id, "project_id": project, "zone": zone},
        at_ns=at_ns,
        severity="INFO",
        proto_payload={
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "authenticationInfo": {"principalEmail": "system@google.com"},
            "methodName": method,
            "request": {"@type": f"type.googleapis.com/{method}"},
            "resourceName": f"projects/{project}/zones/{zone}/instances/{instance}",
            "serviceName": "compute.googleapis.com",
            "status": {"message": AUDIT_STATUS[method]},
        },
        operation={"first": True, "id": op_id, "last": True, "producer": method},
        digits=6,
    )


class EntryLog:
    """The LogEntry objects of one scenario (its cluster: ``ctx``)."""

    ctx: Context
    entries: list[dict[str, Any]]

    def add(self, entry: dict[str, Any]) -> dict[str, Any]:
        self.entries.append(entry)
        return entry

    def log(
        self,
        log_id: str,
        resource_type: str,
        resource_labels: dict[str, str],
        at_ns: int,
        severity: str,
        **payload: Any,
    ) -> dict[str, Any]:
        """An entry of this project (``payload``: text, json_payload, labels...)."""
        entry = make_entry(
            self.ctx.project,
            log_id=log_id,
            resource_type=resource_type,
            resource_labels=resource_labels,
            at_ns=at_ns,
            severity=severity,
            **payload,
        )
        return self.add(entry)

    def resource(self, **labels: str) -> dict[str, str]:
        """The resource labels of an entry of this cluster (``k8s_cluster``'s: no more)."""
        ctx = self.ctx
        return {
            "cluster_name": ctx.cluster,
            "location": ctx.location,
            "project_id": ctx.project,
            **labels,
        }
