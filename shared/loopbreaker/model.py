"""Typed values shared by the core, the readers and the renderers (stdlib only)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from loopbreaker.timeutil import format_rfc3339

#: The workflow's query window: issue time +/- 30 minutes.
DEFAULT_WINDOW = timedelta(minutes=30)


class SignalKind(StrEnum):
    """What a single log entry tells about a restart loop."""

    # Node-pool and node interruptions.
    PREEMPTION = "preemption"
    MAINTENANCE = "maintenance"
    TERMINATION = "termination"
    # Node faults.
    HOST_ERROR = "host_error"
    AUTOMATIC_RESTART = "automatic_restart"
    GUEST_TERMINATE = "guest_terminate"
    NODE_NOT_READY = "node_not_ready"
    KERNEL_PANIC = "kernel_panic"
    KERNEL_BUG = "kernel_bug"
    HARDWARE_FAILURE = "hardware_failure"
    NODE_PROBLEM_DETECTOR_EXIT = "node_problem_detector_exit"
    # Workload faults.
    NCCL_TIMEOUT = "nccl_timeout"
    CONNECTION_RESET = "connection_reset"
    WORKER_CRASH = "worker_crash"
    DIST_BACKEND_ERROR = "dist_backend_error"
    MEGASCALE_HANG = "megascale_hang"
    # The workload's pods stopped by Kubernetes itself: memory limits, the scheduler,
    # the kubelet's eviction manager, the image registry.
    OOM_KILLED = "oom_killed"
    PRIORITY_PREEMPTED = "priority_preempted"
    EVICTED = "evicted"
    NODE_PRESSURE = "node_pressure"
    IMAGE_PULL_FAILED = "image_pull_failed"
    # Scheduling and controllers.
    UNSCHEDULABLE = "unschedulable"
    JOB_RESTARTING = "job_restarting"
    UNRECOGNIZED = "unrecognized"
    # Alerts (never from a log entry): an alert that fired before has resolved.
    ALERT_RESOLVED = "alert_resolved"


class WorkloadKind(StrEnum):
    """The controller that restarts the training job."""

    JOBSET = "jobset"
    TFJOB = "tfjob"
    PYTORCHJOB = "pytorchjob"

    @property
    def kubeflow(self) -> bool:
        return self is not WorkloadKind.JOBSET

    @property
    def api_kind(self) -> str:
        """The Kubernetes kind (``involvedObject.kind`` of its Events)."""
        return _API_KINDS[self]

    @property
    def framework(self) -> str | None:
        """The training operator's ``framework`` metric label (None for JobSet)."""
        return _FRAMEWORKS.get(self)

    @classmethod
    def parse(cls, value: str, *, what: str = "workload kind") -> WorkloadKind:
        """``tfjob``, ``TFJob`` or ``tf-job`` -> TFJOB; a clear error otherwise."""
        key = value.strip().lower().replace("-", "").replace("_", "")
        for kind in cls:
            if key == kind.value:
                return kind
        from loopbreaker.errors import InvalidContext

        raise InvalidContext(f"{what} {value!r} is not one of {', '.join(k.value for k in cls)}")

    @classmethod
    def from_api_kind(cls, kind: str | None) -> WorkloadKind | None:
        return next((k for k, v in _API_KINDS.items() if v == kind), None)

    @classmethod
    def from_framework(cls, framework: str | None) -> WorkloadKind | None:
        return next((k for k, v in _FRAMEWORKS.items() if v == framework), None)


_API_KINDS = {
    WorkloadKind.JOBSET: "JobSet",
    WorkloadKind.TFJOB: "TFJob",
    WorkloadKind.PYTORCHJOB: "PyTorchJob",
}
_FRAMEWORKS = {WorkloadKind.TFJOB: "tensorflow", WorkloadKind.PYTORCHJOB: "pytorch"}
#: Kubeflow replica types that coordinate the job; Worker 0 does when there is none.
KUBEFLOW_CHIEF_TYPES = frozenset({"chief", "master", "launcher"})


#: Kinds that say the node went away because the platform took it (not a fault).
INTERRUPTION_KINDS = frozenset({SignalKind.PREEMPTION, SignalKind.MAINTENANCE})
#: Kinds that count as a failure of the node's physical host.
HOST_FAULT_KINDS = frozenset(
    {
        SignalKind.TERMINATION,
        SignalKind.HOST_ERROR,
        SignalKind.AUTOMATIC_RESTART,
        SignalKind.NODE_NOT_READY,
        SignalKind.KERNEL_PANIC,
        SignalKind.KERNEL_BUG,
        SignalKind.HARDWARE_FAILURE,
        SignalKind.NODE_PROBLEM_DETECTOR_EXIT,
    }
)
#: Kinds raised by the training application itself.
WORKLOAD_FAULT_KINDS = frozenset(
    {
        SignalKind.NCCL_TIMEOUT,
        SignalKind.CONNECTION_RESET,
        SignalKind.WORKER_CRASH,
        SignalKind.DIST_BACKEND_ERROR,
        SignalKind.MEGASCALE_HANG,
    }
)
#: Kinds that say Kubernetes stopped the workload's pods for a reason of the workload's
#: own making or of the cluster's sharing, not the VM's (OOM, priority, pressure, image).
POD_FAULT_KINDS = frozenset(
    {
        SignalKind.OOM_KILLED,
        SignalKind.PRIORITY_PREEMPTED,
        SignalKind.EVICTED,
        SignalKind.NODE_PRESSURE,
        SignalKind.IMAGE_PULL_FAILED,
    }
)


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


# --- Evidence ------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    at: datetime
    value: float


@dataclass(frozen=True)
class Series:
    """Raw samples of one time series, as a range-vector selector returns them."""

    metric: str
    labels: Mapping[str, str]
    samples: tuple[Sample, ...]


#: GKE node labels with the parts of a VM's place (GKE sets them where Compute Engine
#: reports a topology: A3/A4 GPU families, TPUs, compact placement).
TOPOLOGY_BLOCK_LABEL = "cloud.google.com/gce-topology-block"
TOPOLOGY_SUBBLOCK_LABEL = "cloud.google.com/gce-topology-subblock"
TOPOLOGY_HOST_LABEL = "cloud.google.com/gce-topology-host"


@dataclass(frozen=True)
class HostPlace:
    """Where a VM runs, as Compute Engine reports it: block, sub-block and host ids.

    ``resourceStatus.physicalHostTopology`` gives the parts as fields; older responses
    give ``resourceStatus.physicalHost`` as one opaque id, newer ones as
    ``blockId/subBlockId/hostId`` (with or without a leading slash). The host id alone
    names the machine; block and sub-block say where it stands.
    """

    host: str
    block: str | None = None
    subblock: str | None = None

    @classmethod
    def parse(
        cls, physical_host: str | None, topology: Mapping[str, Any] | None = None
    ) -> HostPlace | None:
        topo = topology or {}
        host = topo.get("host")
        if isinstance(host, str) and host:
            block, subblock = topo.get("block"), topo.get("subblock") or topo.get("subBlock")
            return cls(
                host,
                block if isinstance(block, str) and block else None,
                subblock if isinstance(subblock, str) and subblock else None,
            )
        if not physical_host:
            return None
        parts = [p for p in physical_host.strip().strip("/").split("/") if p]
        if len(parts) == 3:
            return cls(parts[2], parts[0], parts[1])
        return cls(physical_host.strip()) if parts else None

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> HostPlace | None:
        host = labels.get(TOPOLOGY_HOST_LABEL)
        if not host:
            return None
        return cls(
            host,
            labels.get(TOPOLOGY_BLOCK_LABEL) or None,
            labels.get(TOPOLOGY_SUBBLOCK_LABEL) or None,
        )

    def differences(self, other: HostPlace) -> list[str]:
        """The parts both know that differ, as ``part: ours != theirs``."""
        out = []
        for part in ("block", "subblock", "host"):
            mine, theirs = getattr(self, part), getattr(other, part)
            if mine is not None and theirs is not None and mine != theirs:
                out.append(f"{part} {theirs} (expected {mine})")
        return out


@dataclass(frozen=True)
class NodeCondition:
    """One of a node's pressure conditions (``MemoryPressure``, ``DiskPressure``...)."""

    type: str
    status: bool | None
    since: datetime | None = None
    reason: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class NodeInfo:
    name: str
    node_pool: str | None = None
    physical_host: str | None = None
    zone: str | None = None
    instance: str | None = None
    project: str | None = None
    ready: bool | None = None
    spot: bool = False
    #: The VM's numeric id (GKE's ``container.googleapis.com/instance_id`` annotation).
    instance_id: str | None = None
    #: Its ``MemoryPressure``, ``DiskPressure`` and ``PIDPressure`` conditions.
    pressure: tuple[NodeCondition, ...] = ()


@dataclass(frozen=True)
class Termination:
    """How a container ended (``state.terminated`` or ``lastState.terminated``)."""

    reason: str | None
    exit_code: int | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True)
class ContainerInfo:
    """One container of a pod: its image, memory limit and how it last stopped."""

    name: str
    image: str | None = None
    #: ``resources.limits.memory`` in bytes, None when the container has no limit.
    memory_limit: float | None = None
    terminated: Termination | None = None
    last_terminated: Termination | None = None
    waiting_reason: str | None = None
    waiting_message: str | None = None


@dataclass(frozen=True)
class PodInfo:
    name: str
    namespace: str | None = None
    phase: str | None = None
    node: str | None = None
    workload: str | None = None
    coordinator: bool | None = None
    unschedulable: bool = False
    #: Kubeflow replica type, lower case (``chief``, ``master``, ``worker``, ``ps``).
    replica_type: str | None = None
    message: str | None = None
    #: The controller kind its labels name (``jobset``, ``tfjob``...), None when unknown.
    workload_kind: str | None = None
    uid: str | None = None
    priority_class: str | None = None
    priority: int | None = None
    #: ``status.reason`` / ``status.message`` (``Evicted`` and the kubelet's explanation).
    status_reason: str | None = None
    status_message: str | None = None
    containers: tuple[ContainerInfo, ...] = ()
    #: The ``DisruptionTarget`` condition: why and when Kubernetes took the pod down.
    disruption_reason: str | None = None
    disruption_at: datetime | None = None
    #: When it was bound to its node (``PodScheduled`` True).
    scheduled_at: datetime | None = None


@dataclass(frozen=True)
class HostFailureRecord:
    """A failure of a host remembered from an earlier incident."""

    host: str
    node: str | None
    at: datetime
    incident_id: str | None = None


class EvidenceKind(StrEnum):
    RESTARTS = "restarts"
    INTERRUPTIONS = "interruptions"
    NODE_CONDITIONS = "node_conditions"
    POD_PHASES = "pod_phases"
    UNSCHEDULABLE = "unschedulable"
    LOGS = "logs"
    NODES = "nodes"
    PODS = "pods"
    POD_REASONS = "pod_reasons"
    MEMORY = "memory"
    POD_INFO = "pod_info"


@dataclass(frozen=True)
class SourceStatus:
    """Where a kind of evidence came from, or why it is missing."""

    source: str
    available: bool
    reason: str | None = None


@dataclass(frozen=True)
class Evidence:
    """Everything the decision engine looks at. ``None`` means unavailable, not empty."""

    restarts: tuple[Series, ...] | None = None
    interruptions: tuple[Series, ...] | None = None
    node_conditions: tuple[Series, ...] | None = None
    pod_phases: tuple[Series, ...] | None = None
    unschedulable: tuple[Series, ...] | None = None
    signals: tuple[Signal, ...] | None = None
    nodes: tuple[NodeInfo, ...] | None = None
    pods: tuple[PodInfo, ...] | None = None
    #: kube-state-metrics reasons: ``kube_pod_container_status_(last_)terminated_reason``,
    #: ``..._waiting_reason``, ``kube_pod_status_reason``.
    pod_reasons: tuple[Series, ...] | None = None
    #: ``container_memory_working_set_bytes`` and ``kube_pod_container_resource_limits``.
    memory: tuple[Series, ...] | None = None
    #: ``kube_pod_info`` (uid, node, priority class of each pod).
    pod_info: tuple[Series, ...] | None = None
    host_history: tuple[HostFailureRecord, ...] = ()
    sources: Mapping[EvidenceKind, SourceStatus] = field(default_factory=dict)
    #: Log entries that could not be read, as (where, reason).
    rejected_entries: tuple[tuple[str, str], ...] = ()

    def source_of(self, kind: EvidenceKind) -> str | None:
        status = self.sources.get(kind)
        return status.source if status and status.available else None


# --- Diagnosis -----------------------------------------------------------------------


class RootCause(StrEnum):
    NO_RESTART_LOOP = "no_restart_loop"
    SPOT_PREEMPTION = "spot_preemption"
    MAINTENANCE = "maintenance"
    FAULTY_HOST = "faulty_host"
    HOST_ERROR = "host_error"
    CAPACITY = "capacity"
    OUT_OF_MEMORY = "out_of_memory"
    PRIORITY_PREEMPTION = "priority_preemption"
    NODE_PRESSURE_EVICTION = "node_pressure_eviction"
    IMAGE_PULL = "image_pull"
    APPLICATION = "application"
    UNKNOWN = "unknown"


class RemediationPath(StrEnum):
    NONE = "none"
    AVOID_PREEMPTION = "avoid_preemption"
    PLAN_MAINTENANCE = "plan_maintenance"
    ISOLATE_HOST = "isolate_host"
    WATCH_HOST = "watch_host"
    ADD_CAPACITY = "add_capacity"
    FIX_MEMORY = "fix_memory"
    PROTECT_PRIORITY = "protect_priority"
    RELIEVE_NODE_PRESSURE = "relieve_node_pressure"
    FIX_IMAGE = "fix_image"
    INSPECT_APPLICATION = "inspect_application"


class Risk(StrEnum):
    NONE = "none"
    LOW = "low"
    HIGH = "high"


class StepStatus(StrEnum):
    DONE = "done"
    SKIPPED = "skipped"
    UNAVAILABLE = "unavailable"


class QueryLanguage(StrEnum):
    PROMQL = "promql"
    LQL = "lql"
    MQL = "mql"


@dataclass(frozen=True)
class Query:
    id: str
    step: int
    language: QueryLanguage
    text: str
    description: str
    deprecated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "step": self.step,
            "language": self.language.value,
            "text": self.text,
            "description": self.description,
            "deprecated": self.deprecated,
        }


@dataclass(frozen=True)
class Finding:
    """One fact that supports or rules out a cause."""

    step: int
    message: str
    cause: RootCause | None = None
    supports: bool = True
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "message": self.message,
            "cause": self.cause.value if self.cause else None,
            "supports": self.supports,
            "source": self.source,
        }


@dataclass(frozen=True)
class StepReport:
    number: int
    title: str
    status: StepStatus
    findings: tuple[Finding, ...]
    queries: tuple[Query, ...]
    sources: tuple[str, ...] = ()
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "title": self.title,
            "status": self.status.value,
            "reason": self.reason,
            "sources": list(self.sources),
            "findings": [f.message for f in self.findings],
            "queries": [q.to_dict() for q in self.queries],
        }


@dataclass(frozen=True)
class FailureEpisode:
    """One failure of one node: its NotReady run and the log lines around it, merged."""

    node: str
    host: str
    start: datetime
    kinds: tuple[str, ...]
    excerpts: tuple[str, ...] = ()
    source: str = "telemetry"


@dataclass(frozen=True)
class SuspectHost:
    host: str
    nodes: tuple[str, ...]
    failures: int
    instances: tuple[str, ...] = ()
    zone: str | None = None
    node_pool: str | None = None
    host_known: bool = True
    first_failure: datetime | None = None
    last_failure: datetime | None = None
    episodes: tuple[FailureEpisode, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "nodes": list(self.nodes),
            "failures": self.failures,
            "instances": list(self.instances),
            "zone": self.zone,
            "node_pool": self.node_pool,
            "host_known": self.host_known,
            "first_failure": format_rfc3339(self.first_failure) if self.first_failure else None,
            "last_failure": format_rfc3339(self.last_failure) if self.last_failure else None,
            "episodes": [
                {"node": e.node, "start": format_rfc3339(e.start), "kinds": list(e.kinds)}
                for e in self.episodes
            ],
        }


@dataclass(frozen=True)
class Remediation:
    path: RemediationPath
    risk: Risk
    requires_approval: bool
    actions: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path.value,
            "risk": self.risk.value,
            "requires_approval": self.requires_approval,
            "actions": list(self.actions),
        }


@dataclass(frozen=True)
class TicketDraft:
    """A support case draft for a repeatedly failing physical host."""

    title: str
    summary: str
    physical_host: str
    host_known: bool
    project: str | None
    cluster: str
    zone: str | None
    node_pool: str | None
    nodes: tuple[str, ...]
    instances: tuple[str, ...]
    failures: int
    first_failure: datetime | None
    last_failure: datetime | None
    restart_increase: float | None
    restart_total: float | None
    excerpts: tuple[str, ...]
    queries: tuple[Query, ...]
    requested_action: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "summary": self.summary,
            "physical_host": self.physical_host,
            "host_known": self.host_known,
            "project": self.project,
            "cluster": self.cluster,
            "zone": self.zone,
            "node_pool": self.node_pool,
            "nodes": list(self.nodes),
            "instances": list(self.instances),
            "failures": self.failures,
            "first_failure": format_rfc3339(self.first_failure) if self.first_failure else None,
            "last_failure": format_rfc3339(self.last_failure) if self.last_failure else None,
            "restart_increase": self.restart_increase,
            "restart_total": self.restart_total,
            "excerpts": list(self.excerpts),
            "queries": [{"language": q.language.value, "text": q.text} for q in self.queries],
            "requested_action": self.requested_action,
        }


@dataclass(frozen=True)
class Diagnosis:
    """The outcome of the four-step workflow."""

    context: Context
    restart_loop: bool | None
    restart_increase: float | None
    restart_total: float | None
    root_cause: RootCause
    remediation: Remediation
    suspect_hosts: tuple[SuspectHost, ...]
    steps: tuple[StepReport, ...]
    evidence: tuple[Finding, ...]
    ticket_draft: TicketDraft | None
    missing_evidence: tuple[str, ...]
    summary: str
    queries_run: int = 0

    @property
    def partial(self) -> bool:
        return bool(self.missing_evidence)
