"""The evidence the diagnosis reads: samples, series, nodes, pods and where each came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loopbreaker.model.signal import Signal


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
#: GKE's host-maintenance marks on a node ("Monitor maintenance events", "Manage disruption
#: to GKE nodes that don't live migrate"): the start (epoch seconds, GKE 1.31.1-gke.2008000
#: and later), ``ONGOING`` while it runs, and the taint once the node is about to go.
SCHEDULED_MAINTENANCE_LABEL = "cloud.google.com/scheduled-maintenance-time"
ACTIVE_MAINTENANCE_LABEL = "cloud.google.com/active-node-maintenance"
IMPENDING_TERMINATION_TAINT = "cloud.google.com/impending-node-termination"
#: GKE's node health prediction ("Enable node health prediction in a GKE cluster",
#: https://docs.cloud.google.com/ai-hypercomputer/docs/workloads/enable-node-health-prediction):
#: a CronJob sets it on every node every 10 minutes, ``true`` for a healthy node, ``false``
#: for one whose GPUs are likely to degrade within five hours. A forecast, never a failure.
HEALTH_PREDICTION_LABEL = "gke.google.com/recommended-to-run-large-training-workload"
#: The well-known label the kubelet sets to the VM's machine type.
MACHINE_TYPE_LABEL = "node.kubernetes.io/instance-type"
#: GKE's label on nodes that consume a specific reservation (the nodeSelector of
#: "Consuming reserved zonal resources", cloud.google.com/kubernetes-engine/docs/how-to/
#: consuming-reservations).
RESERVATION_LABEL = "cloud.google.com/reservation-name"
#: GKE's label on flex-start nodes (Dynamic Workload Scheduler): the nodeSelector
#: ``cloud.google.com/gke-flex-start: "true"`` of "Run a small batch workload with flex-start
#: provisioning mode" (cloud.google.com/kubernetes-engine/docs/how-to/dws-flex-start-training).
#: Such VMs are on Compute's FLEX_START provisioning model: never reservation-bound.
FLEX_START_LABEL = "cloud.google.com/gke-flex-start"


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
class NodeMaintenance:
    """A node's host maintenance, as GKE's node labels and taint and Compute Engine's
    ``resourceStatus.upcomingMaintenance`` tell it (read by
    :mod:`loopbreaker.diagnosis.maintenance`)."""

    #: ``cloud.google.com/scheduled-maintenance-time``: the planned start.
    scheduled_at: datetime | None = None
    #: ``cloud.google.com/active-node-maintenance`` (``ONGOING``).
    active: str | None = None
    #: The ``cloud.google.com/impending-node-termination`` taint is on the node.
    terminating: bool = False
    #: Compute Engine ``upcomingMaintenance``: window, latest start, status and type.
    window_start: datetime | None = None
    window_end: datetime | None = None
    latest_start: datetime | None = None
    status: str | None = None
    type: str | None = None
    can_reschedule: bool | None = None

    @property
    def start(self) -> datetime | None:
        """When it starts: Compute's window, else GKE's label."""
        return self.window_start or self.scheduled_at

    @property
    def under_way(self) -> bool:
        return self.terminating or self.active is not None or self.status == "ONGOING"


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
    #: GKE's ``FLEX_START_LABEL`` is ``true``.
    flex_start: bool = False
    #: The VM's numeric id (GKE's ``container.googleapis.com/instance_id`` annotation).
    instance_id: str | None = None
    #: Its ``MemoryPressure``, ``DiskPressure`` and ``PIDPressure`` conditions.
    pressure: tuple[NodeCondition, ...] = ()
    #: Its host maintenance, None when nothing announces one.
    maintenance: NodeMaintenance | None = None
    #: ``HEALTH_PREDICTION_LABEL`` as a bool; None when absent or neither true nor false.
    recommended_for_training: bool | None = None
    #: ``node.kubernetes.io/instance-type`` (the VM's machine type).
    machine_type: str | None = None
    #: ``status.nodeInfo.kubeletVersion`` (``v1.32.3-gke.1057001`` on GKE).
    kubelet_version: str | None = None
    #: The reservation GKE's ``cloud.google.com/reservation-name`` label names.
    reservation: str | None = None
    #: GKE's ``cloud.google.com/gke-accelerator`` (``nvidia-h100-80gb``) or
    #: ``cloud.google.com/gke-tpu-accelerator`` (``tpu-v5p-slice``) label.
    accelerator: str | None = None


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
    #: ``metadata.creationTimestamp``: when the pod of this restart attempt was made.
    created_at: datetime | None = None
    #: JobSet pod labels ``jobset.sigs.k8s.io/restart-attempt`` (the JobSet's
    #: ``status.restarts`` when the pod's Job was made), ``job-restart-attempt`` (its Job's
    #: own restarts, v0.12+), ``jobset-uid`` (v0.9+) and ``replicatedjob-name`` /
    #: ``job-index`` (which Job): see :mod:`loopbreaker.diagnosis.jobsets`.
    restart_attempt: int | None = None
    job_restart_attempt: int | None = None
    #: Accelerators its containers request (``nvidia.com/gpu``, ``google.com/tpu``), summed;
    #: None when it requests none.
    accelerators: int | None = None
    jobset_uid: str | None = None
    job_key: str | None = None


@dataclass(frozen=True)
class HostFailureRecord:
    """A failure of a host remembered from an earlier incident."""

    host: str
    node: str | None
    at: datetime
    incident_id: str | None = None


@dataclass(frozen=True)
class JobSetInfo:
    """One JobSet object (``kubectl get jobsets -o json``): its restart counters.

    Field names from kubernetes-sigs/jobset ``api/jobset/v1alpha2/jobset_types.go``:
    ``status.restarts`` (v0.2+), ``restartsCountTowardsMax`` (v0.6+),
    ``replicatedJobsStatus[].jobRestarts`` (v0.12+, the RestartJob actions),
    ``currentInPlaceRestartAttempt`` (v0.11+, InPlaceRestart feature gate).
    """

    name: str
    namespace: str | None = None
    uid: str | None = None
    created_at: datetime | None = None
    restarts: int | None = None
    restarts_count_towards_max: int | None = None
    #: Sum of ``replicatedJobsStatus[].jobRestarts[]``; None when the API has none.
    job_restarts: int | None = None
    in_place_restarts: int | None = None
    #: ``RestartingJobSet`` condition (v0.12+) last turned True at this time.
    restarting_since: datetime | None = None
    #: ``Failed`` condition: reason (``ReachedMaxRestarts``, ``FailJobSetFailurePolicyAction``,
    #: ``FailedJobs``) and when.
    failed_reason: str | None = None
    failed_at: datetime | None = None
    #: ``metadata.ownerReferences`` kind of its controller (``TrainJob``), if any.
    owner_kind: str | None = None
    owner_name: str | None = None


@dataclass(frozen=True)
class CheckpointMark:
    """A checkpoint save the job's own log line reports (:mod:`loopbreaker.diagnosis.progress`)."""

    at: datetime
    namespace: str | None
    pod: str | None
    #: The step (iteration) the line names, None when it names none.
    step: int | None
    #: Which framework's wording matched (``transformers``, ``megatron``...).
    framework: str


@dataclass(frozen=True)
class RestartAttemptSeen:
    """A JobSet restart-attempt label value seen at a time (a log entry of a pod, a
    ``kube_pod_labels`` sample, a pod's creation): ``job`` names the Job for the per-Job
    ``job-restart-attempt`` label, None for the JobSet-wide ``restart-attempt``."""

    workload: str
    namespace: str | None
    at: datetime
    attempt: int
    jobset_uid: str | None = None
    job: str | None = None
    cluster: str | None = None
    #: ``pod`` (a pod object's creation), ``log`` or ``metric``.
    origin: str = "log"


class EvidenceKind(StrEnum):
    RESTARTS = "restarts"
    #: JobSet objects (jobsets.json, the Kubernetes API).
    JOBSETS = "jobsets"
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
    #: ``DCGM_FI_DEV_XID_ERRORS``: the last Xid of each GPU, from NVIDIA's dcgm-exporter.
    GPU_XIDS = "gpu_xids"


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
    #: dcgm-exporter's ``DCGM_FI_DEV_XID_ERRORS`` per GPU; None when no source holds it.
    gpu_xids: tuple[Series, ...] | None = None
    host_history: tuple[HostFailureRecord, ...] = ()
    #: JobSet objects (``jobsets.json``, the live API); None when not read.
    jobsets: tuple[JobSetInfo, ...] | None = None
    #: Restart-attempt pod labels seen on log entries (``labels."k8s-pod/…"``).
    log_restart_attempts: tuple[RestartAttemptSeen, ...] | None = None
    #: Checkpoint saves the job logged; None when no log file was read (live queries ask
    #: Cloud Logging for failures only, never for progress lines).
    checkpoints: tuple[CheckpointMark, ...] | None = None
    #: The restart series the source held before scoping, in short (metric and the
    #: labels that place it): what step 1 names when none is the workload's.
    restart_series_seen: tuple[str, ...] | None = None
    sources: Mapping[EvidenceKind, SourceStatus] = field(default_factory=dict)
    #: Log entries that could not be read, as (where, reason).
    rejected_entries: tuple[tuple[str, str], ...] = ()

    def source_of(self, kind: EvidenceKind) -> str | None:
        status = self.sources.get(kind)
        return status.source if status and status.available else None
