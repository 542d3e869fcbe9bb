"""The kinds: what a log entry can say, and which controller restarts a job."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

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
    #: NCCL's own failures other than timeouts (``NCCL WARN`` lines, ``ncclRemoteError``).
    NCCL_ERROR = "nccl_error"
    #: A rendezvous, store or coordination service gave up waiting (c10d, XLA, TF).
    COORDINATION_TIMEOUT = "coordination_timeout"
    #: The TPU runtime reports its slice or session failed.
    TPU_RUNTIME_ERROR = "tpu_runtime_error"
    #: A GPU fault that NVIDIA's Xid catalog puts on the application (Xid 13, 31, 43...),
    #: and the CUDA runtime's illegal access and launch failures.
    GPU_APPLICATION_ERROR = "gpu_application_error"
    #: The accelerator ran out of its own memory (CUDA, NCCL, XLA / TPU HBM).
    GPU_OUT_OF_MEMORY = "gpu_out_of_memory"
    #: An Xid that is neither hardware nor application by the catalog: evidence only.
    GPU_ERROR = "gpu_error"
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
    #: Kubeflow Trainer v2 (``trainer.kubeflow.org``): runs as a JobSet of its own name.
    TRAINJOB = "trainjob"

    @property
    def kubeflow(self) -> bool:
        """Run by the Kubeflow training operator (TFJob, PyTorchJob), whose restart counter
        names no job; a TrainJob is a Kubeflow project too but is not operator-counted."""
        return self in (WorkloadKind.TFJOB, WorkloadKind.PYTORCHJOB)

    @property
    def jobset_backed(self) -> bool:
        """Runs as a JobSet of the same name and namespace: its queries and readers follow
        that JobSet (a TrainJob's runtime creates one it owns)."""
        return not self.kubeflow

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
    # kubeflow/trainer v2.1.0 pkg/apis/trainer/v1alpha1/trainjob_types.go: TrainJobKind.
    WorkloadKind.TRAINJOB: "TrainJob",
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
        SignalKind.NCCL_ERROR,
        SignalKind.COORDINATION_TIMEOUT,
        SignalKind.TPU_RUNTIME_ERROR,
        SignalKind.GPU_APPLICATION_ERROR,
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
#: Kinds that say the accelerator ran out of its own memory (a cause of its own).
ACCELERATOR_MEMORY_KINDS = frozenset({SignalKind.GPU_OUT_OF_MEMORY})
#: Kinds kept as evidence that decide nothing on their own (an Xid of unknown class).
EVIDENCE_ONLY_KINDS = frozenset({SignalKind.GPU_ERROR})
