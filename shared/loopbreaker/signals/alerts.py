"""Alert notifications as signals (pure, stdlib only).

Two payloads reach ``on_alertmanager_webhook``: Alertmanager's webhook (version ``4``) and
Cloud Monitoring's alert-policy notification (schema ``1.2``, from a webhook channel or a
Pub/Sub channel pushed as an envelope). Each alert becomes one :class:`AlertSignal`:
firing alerts are the signals the log sinks would give (restart loop, node not ready,
GPU health, pods pending); a resolved alert becomes ``alert_resolved`` with the same
identity, so it joins the same incident and re-arms its diagnosis without counting as
a failure.

Which signal: the ``loopbreaker_signal`` label that the shipped PrometheusRule sets, else
the alert name or metric type (``KubeNodeNotReady``, ``JobSetRestarting``...). Identity
labels are read under their canonical names first (``workload``, ``namespace``,
``node``, ``pod``, ``cluster``), then under the source metrics' own names
(``jobset_name``, ``Hostname``...); ``job_namespace`` wins over ``namespace``, which is
the training operator's own namespace on its series. A TFJob / PyTorchJob restart alert
names no job: its signal names the namespace and kind, and the diagnosis names the jobs.
Idempotency: an alert is the same delivery when its fingerprint (or Cloud Monitoring
incident id), start and status are.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from loopbreaker.errors import InvalidInput
from loopbreaker.model import Signal, SignalKind, WorkloadKind
from loopbreaker.signals import decode
from loopbreaker.signals.envelope import from_pubsub_message
from loopbreaker.timeutil import from_epoch, parse_rfc3339

#: The largest body the webhook accepts; Alertmanager groups are small.
MAX_BODY = 1 << 20
#: Alerts in one notification at most (the shipped AlertmanagerConfig sets no maxAlerts: all).
MAX_ALERTS = 1000
MAX_EXCERPT = 300


class AlertSignalKind(StrEnum):
    """The ``loopbreaker_signal`` label values of the shipped rules."""

    RESTART_LOOP = "restart_loop"
    NODE_NOT_READY = "node_not_ready"
    PODS_PENDING = "pods_pending"
    GPU_HEALTH = "gpu_health"


_SIGNAL_KINDS: Mapping[AlertSignalKind, SignalKind] = {
    AlertSignalKind.RESTART_LOOP: SignalKind.JOB_RESTARTING,
    AlertSignalKind.NODE_NOT_READY: SignalKind.NODE_NOT_READY,
    AlertSignalKind.PODS_PENDING: SignalKind.UNSCHEDULABLE,
    AlertSignalKind.GPU_HEALTH: SignalKind.HARDWARE_FAILURE,
}

# Alert names of common rule sets (kube-prometheus-stack, DCGM, the Terraform module).
_KNOWN_ALERTS: Mapping[str, AlertSignalKind] = {
    "kubenodenotready": AlertSignalKind.NODE_NOT_READY,
    "kubenodeunreachable": AlertSignalKind.NODE_NOT_READY,
    "jobsetrestarting": AlertSignalKind.RESTART_LOOP,
    "kubepodnotscheduled": AlertSignalKind.PODS_PENDING,
}
_RESTART_NAME = re.compile(r"restart", re.I)
_GPU_NAME = re.compile(r"xid|dcgm|gpu.*(error|ecc|health)", re.I)
# Metric types of Cloud Monitoring conditions, in the PromQL naming of the shipped rules.
_METRIC_HINTS: Sequence[tuple[str, AlertSignalKind]] = (
    ("kube_jobset_restarts", AlertSignalKind.RESTART_LOOP),
    ("training_operator_jobs_restarted_total", AlertSignalKind.RESTART_LOOP),
    ("node/status_condition", AlertSignalKind.NODE_NOT_READY),
    ("node_status_condition", AlertSignalKind.NODE_NOT_READY),
    ("pod/status/unschedulable", AlertSignalKind.PODS_PENDING),
    ("DCGM_FI_DEV_XID_ERRORS", AlertSignalKind.GPU_HEALTH),
)

_WORKLOAD_LABELS = (
    "workload",
    "jobset_name",
    "job_name",
    "label_jobset_sigs_k8s_io_jobset_name",
    "label_training_kubeflow_org_job_name",
    "tfjob",
    "pytorchjob",
)
_NAMESPACE_LABELS = ("namespace", "job_namespace", "namespace_name", "exported_namespace")
_NODE_LABELS = ("node", "node_name", "kubernetes_node", "Hostname", "hostname")
_POD_LABELS = ("pod", "pod_name", "exported_pod")
_CLUSTER_LABELS = ("cluster", "cluster_name")
_POOL_LABELS = ("node_pool", "node_pool_name", "label_cloud_google_com_gke_nodepool")
_ZERO_TIME = "0001-01-01T00:00:00Z"


class Status(StrEnum):
    FIRING = "firing"
    RESOLVED = "resolved"


@dataclass(frozen=True)
class AlertSignal:
    """One alert of a notification, as the responder ingests it."""

    #: Dedup id: the same alert (fingerprint or incident id, start, status) is one delivery.
    dedup_id: str
    name: str
    status: Status
    #: None when the alert is of no kind loopbreaker acts on (``reason`` says why).
    signal: Signal | None
    reason: str | None = None


@dataclass(frozen=True)
class Notification:
    """One notification body: its payload kind, its alerts, and the Pub/Sub messageId
    when a push subscription delivered it."""

    payload: str
    alerts: list[AlertSignal]
    message_id: str | None = None


def parse(body: bytes, *, default_cluster: str | None = None) -> Notification:
    """The alerts of a notification body; InvalidInput names what is wrong."""
    document = _json(body, "body")
    message_id = None
    if isinstance(document, dict) and isinstance(document.get("message"), dict):
        # A Pub/Sub notification channel pushed to the function: the envelope log sinks use.
        delivery = from_pubsub_message(document["message"])
        document, message_id = delivery.entry, delivery.message_id
    if not isinstance(document, dict):
        raise InvalidInput(f"expected a JSON object, got {_type(document)}")
    if "alerts" in document:
        return Notification("alertmanager", alertmanager(document, default_cluster), message_id)
    if "incident" in document:
        return Notification(
            "cloud_monitoring", [cloud_monitoring(document, default_cluster)], message_id
        )
    raise InvalidInput(
        "neither an Alertmanager webhook payload (no 'alerts') nor a Cloud Monitoring "
        "notification (no 'incident')"
    )


def alertmanager(document: Mapping[str, Any], default_cluster: str | None) -> list[AlertSignal]:
    version = document.get("version")
    if version != "4":
        raise InvalidInput(f"Alertmanager webhook version {version!r} is not supported (want '4')")
    alerts = document.get("alerts")
    if not isinstance(alerts, list):
        raise InvalidInput(f"'alerts' must be a list, got {_type(alerts)}")
    if len(alerts) > MAX_ALERTS:
        raise InvalidInput(f"{len(alerts)} alerts in one notification (at most {MAX_ALERTS})")
    common = _str_map(document.get("commonLabels"), "commonLabels")
    out = []
    for index, alert in enumerate(alerts):
        where = f"alerts[{index}]"
        if not isinstance(alert, dict):
            raise InvalidInput(f"{where}: expected an object, got {_type(alert)}")
        labels = {**common, **_str_map(alert.get("labels"), f"{where}.labels")}
        annotations = _str_map(alert.get("annotations"), f"{where}.annotations")
        status = _status(alert.get("status"), where)
        starts = _time(alert.get("startsAt"), f"{where}.startsAt")
        ends_raw = alert.get("endsAt")
        ends = None if ends_raw in (None, "", _ZERO_TIME) else _time(ends_raw, f"{where}.endsAt")
        fingerprint = alert.get("fingerprint")
        if not isinstance(fingerprint, str) or not fingerprint:
            # Alertmanager always sends one; without it, the label set identifies the alert.
            fingerprint = _digest(json.dumps(sorted(labels.items())))
        name = labels.get("alertname", "")
        at = ends if status is Status.RESOLVED and ends else starts
        out.append(
            _alert_signal(
                ("am", fingerprint, starts.isoformat(), status.value),
                name,
                status,
                labels,
                _excerpt(name, annotations),
                at,
                default_cluster,
            )
        )
    return out


def cloud_monitoring(document: Mapping[str, Any], default_cluster: str | None) -> AlertSignal:
    incident = document.get("incident")
    if not isinstance(incident, dict):
        raise InvalidInput(f"'incident' must be an object, got {_type(incident)}")
    incident_id = incident.get("incident_id")
    if not isinstance(incident_id, str) or not incident_id:
        raise InvalidInput("incident.incident_id is missing")
    state = incident.get("state")
    if state not in ("open", "closed"):
        raise InvalidInput(f"incident.state {state!r} is neither 'open' nor 'closed'")
    status = Status.FIRING if state == "open" else Status.RESOLVED
    started = _epoch(incident.get("started_at"), "incident.started_at")
    ended = incident.get("ended_at")
    at = _epoch(ended, "incident.ended_at") if status is Status.RESOLVED and ended else started
    resource = incident.get("resource")
    metric = incident.get("metric")
    labels: dict[str, str] = {}
    labels.update(_str_map(incident.get("policy_user_labels"), "incident.policy_user_labels"))
    for part, what in ((resource, "resource"), (metric, "metric")):
        if isinstance(part, dict):
            labels.update(_str_map(part.get("labels"), f"incident.{what}.labels"))
    if isinstance(resource, dict) and isinstance(resource.get("labels"), dict):
        project = resource["labels"].get("project_id")
        if isinstance(project, str):
            labels.setdefault("project_id", project)
    name = str(incident.get("policy_name") or incident.get("condition_name") or "")
    labels.setdefault("alertname", name)
    metric_type = metric.get("type") if isinstance(metric, dict) else None
    hint = next(
        (
            k
            for needle, k in _METRIC_HINTS
            if isinstance(metric_type, str) and needle in metric_type
        ),
        None,
    )
    if hint is not None:
        labels.setdefault("loopbreaker_signal", hint.value)
    summary = incident.get("summary")
    excerpt = f"{name}: {summary}" if isinstance(summary, str) and summary else name
    return _alert_signal(
        ("cm", incident_id, started.isoformat(), status.value),
        name,
        status,
        labels,
        excerpt,
        at,
        default_cluster,
    )


def _alert_signal(
    identity: tuple[str, ...],
    name: str,
    status: Status,
    labels: Mapping[str, str],
    excerpt: str,
    at: datetime,
    default_cluster: str | None,
) -> AlertSignal:
    dedup_id = "a-" + _digest("\n".join(identity))
    kind = _signal_kind(labels, name)
    if kind is None:
        return AlertSignal(dedup_id, name, status, None, "not a loopbreaker alert")
    workload = _first(labels, _WORKLOAD_LABELS)
    workload_kind = _workload_kind(labels)
    signal = Signal(
        kind=_SIGNAL_KINDS[kind] if status is Status.FIRING else SignalKind.ALERT_RESOLVED,
        timestamp=at,
        severity="WARNING" if status is Status.RESOLVED else _severity(labels),
        project=labels.get("project_id") or labels.get("project"),
        cluster=_first(labels, _CLUSTER_LABELS) or default_cluster,
        location=labels.get("location"),
        node_pool=_first(labels, _POOL_LABELS),
        node=_first(labels, _NODE_LABELS)
        if kind in (AlertSignalKind.NODE_NOT_READY, AlertSignalKind.GPU_HEALTH)
        else None,
        namespace=alert_namespace(labels),
        pod=_first(labels, _POD_LABELS) if kind is AlertSignalKind.PODS_PENDING else None,
        workload=workload,
        workload_kind=workload_kind.value if workload_kind else None,
        reason=name or kind.value,
        excerpt=(("resolved: " if status is Status.RESOLVED else "") + excerpt)[:MAX_EXCERPT],
        log_name="alert",
        resource_type="alert",
    )
    # A TFJob / PyTorchJob restart alert names no job (the operator's counter has none):
    # it opens the namespace's incident, which the diagnosis resolves to the jobs
    # (loopbreaker.responder.kubeflow_alerts).
    return AlertSignal(dedup_id, name, status, signal)


def alert_namespace(labels: Mapping[str, str]) -> str | None:
    """The namespace an alert is about: ``job_namespace`` first. The training operator's
    counter names the job's namespace there (kubeflow/training-operator v1.8.0,
    pkg/common/metrics.go); its ``namespace`` is the operator's own (``kubeflow``) when a
    ServiceMonitor scraped it, as kube-prometheus-stack's does. The same rule as
    :func:`loopbreaker.diagnosis.scope.series_namespace`."""
    return labels.get("job_namespace") or _first(labels, _NAMESPACE_LABELS)


def _signal_kind(labels: Mapping[str, str], name: str) -> AlertSignalKind | None:
    explicit = labels.get("loopbreaker_signal")
    if explicit:
        try:
            return AlertSignalKind(explicit)
        except ValueError:
            return None
    known = _KNOWN_ALERTS.get(name.lower())
    if known is not None:
        return known
    if _RESTART_NAME.search(name) and (
        _first(labels, _WORKLOAD_LABELS) or "framework" in labels or "job_namespace" in labels
    ):
        return AlertSignalKind.RESTART_LOOP
    if _GPU_NAME.search(name) and _first(labels, _NODE_LABELS):
        return AlertSignalKind.GPU_HEALTH
    return None


def _workload_kind(labels: Mapping[str, str]) -> WorkloadKind | None:
    value = labels.get("workload_kind")
    if value:
        try:
            return WorkloadKind.parse(value)
        except InvalidInput:
            return None
    framework = WorkloadKind.from_framework(labels.get("framework"))
    if framework is not None:
        return framework
    return WorkloadKind.JOBSET if "jobset_name" in labels else None


def _severity(labels: Mapping[str, str]) -> str:
    return "CRITICAL" if labels.get("severity", "").lower() == "critical" else "ERROR"


def _excerpt(name: str, annotations: Mapping[str, str]) -> str:
    text = annotations.get("summary") or annotations.get("description") or ""
    return f"{name}: {text}" if text else name


def _first(labels: Mapping[str, str], names: Sequence[str]) -> str | None:
    return next((labels[n] for n in names if labels.get(n)), None)


def _status(value: object, where: str) -> Status:
    if value == Status.FIRING.value:
        return Status.FIRING
    if value == Status.RESOLVED.value:
        return Status.RESOLVED
    raise InvalidInput(f"{where}.status {value!r} is neither 'firing' nor 'resolved'")


def _time(value: object, where: str) -> datetime:
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: expected an RFC 3339 time, got {_type(value)}")
    try:
        return parse_rfc3339(value, what=where)
    except InvalidInput:
        raise
    except ValueError as exc:
        raise InvalidInput(f"{where}: {exc}") from exc


def _epoch(value: object, where: str) -> datetime:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInput(f"{where}: expected Unix seconds, got {_type(value)}")
    try:
        return from_epoch(float(value))
    except (ValueError, OverflowError) as exc:
        raise InvalidInput(f"{where}: {value!r} is not a Unix time in seconds") from exc


def _str_map(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: expected an object of strings, got {_type(value)}")
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def _json(raw: bytes, what: str) -> Any:
    # The hardened decoder: UTF-8 only (never a guessed UTF-16), bounded depth and
    # numbers, no lone surrogates (fingerprints and labels are hashed and stored).
    return decode.loads(raw, what=what, max_bytes=MAX_BODY)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _type(value: object) -> str:
    return "null" if value is None else type(value).__name__
