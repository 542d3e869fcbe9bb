"""One classified log entry (Signal) and the workload context an incident is about (Context)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from loopbreaker.model.kinds import DEFAULT_WINDOW, SignalKind, WorkloadKind
from loopbreaker.timeutil import format_rfc3339


@dataclass(frozen=True)
class Signal:
    """One classified log entry."""

    kind: SignalKind
    timestamp: datetime | None
    severity: str = "DEFAULT"
    project: str | None = None
    cluster: str | None = None
    location: str | None = None
    node_pool: str | None = None
    node: str | None = None
    namespace: str | None = None
    pod: str | None = None
    container: str | None = None
    workload: str | None = None
    physical_host: str | None = None
    instance: str | None = None
    instance_id: str | None = None
    zone: str | None = None
    reason: str | None = None
    #: The machine type and accelerator a capacity signal names (what Compute could not
    #: create: ``a3-highgpu-8g``, ``8 nvidia-h100-80gb``).
    machine_type: str | None = None
    accelerator: str | None = None
    #: True when the entry comes from worker 0 of slice 0 (the coordinator),
    #: False when it is known to be another worker, None when unknown.
    coordinator: bool | None = None
    #: The controller kind the entry names (pod labels, Event object kind or reason).
    workload_kind: str | None = None
    #: Kubeflow replica type (``chief``, ``worker``...) of the pod, lower case.
    replica_type: str | None = None
    #: The pod's uid: an Event's ``involvedObject.uid``, a kernel memory cgroup path.
    pod_uid: str | None = None
    #: The other pod an entry names (``namespace/name``): a preemptor, from ``related``.
    related_pod: str | None = None
    related_uid: str | None = None
    excerpt: str = ""
    #: The catalog signature that named the kind (``nvidia.xid``), None for alerts.
    signature: str | None = None
    insert_id: str | None = None
    log_name: str | None = None
    resource_type: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, datetime):
                value = format_rfc3339(value)
            elif isinstance(value, SignalKind | WorkloadKind):
                value = value.value
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Signal:
        from loopbreaker.timeutil import parse_rfc3339

        values = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        values["kind"] = SignalKind(values["kind"])
        ts = values.get("timestamp")
        values["timestamp"] = parse_rfc3339(ts) if isinstance(ts, str) else None
        return cls(**values)


@dataclass(frozen=True)
class Context:
    """The five variables of the workflow plus the window derived from the issue time."""

    cluster: str
    workload: str
    issue_time: datetime
    project: str | None = None
    location: str | None = None
    namespace: str | None = None
    window: timedelta = DEFAULT_WINDOW
    workload_kind: WorkloadKind = WorkloadKind.JOBSET

    @property
    def start_time(self) -> datetime:
        return self.issue_time - self.window

    @property
    def end_time(self) -> datetime:
        return self.issue_time + self.window

    def in_window(self, moment: datetime | None) -> bool:
        return moment is not None and self.start_time <= moment <= self.end_time

    def placeholders(self) -> dict[str, str | None]:
        """Values for the query templates; None keeps the ``{placeholder}``."""
        return {
            "project_id": self.project,
            "location": self.location,
            "cluster_name": self.cluster,
            "namespace": self.namespace,
            "workload_name": self.workload,
            "job_kind": self.workload_kind.api_kind,
            "framework": self.workload_kind.framework,
            "issue_time": format_rfc3339(self.issue_time),
            "start_time": format_rfc3339(self.start_time),
            "end_time": format_rfc3339(self.end_time),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "location": self.location,
            "cluster": self.cluster,
            "namespace": self.namespace,
            "workload": self.workload,
            "workload_kind": self.workload_kind.value,
            "issue_time": format_rfc3339(self.issue_time),
            "start_time": format_rfc3339(self.start_time),
            "end_time": format_rfc3339(self.end_time),
        }
