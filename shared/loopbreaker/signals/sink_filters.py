"""The Cloud Logging sink filters that feed ``on_log_entry`` (pure; the one place they live).

``python -m loopbreaker.signals.sink_filters`` writes ``infra/terraform/log-filters.json``, which
the Terraform module reads (``jsondecode(file(...))``); a test checks the file is current,
that every signal kind the classifier knows is matched by some filter (on the golden
LogEntry fixtures), and that ordinary container logs are not.
"""

from __future__ import annotations

import json
from pathlib import Path

from loopbreaker.model import SignalKind
from loopbreaker.signals.classify import (
    AUDIT_METHODS,
    EVICTED_REASON,
    IMAGE_EVENT_REASONS,
    IMAGE_PULL_PHRASES,
    NODE_FAULT_PHRASES,
    NODE_OOM_REASON,
    NODE_PRESSURE_REASONS,
    OOM_KILL_PHRASES,
    OOM_KILLED_REASON,
    POD_AUDIT_METHODS,
    PREEMPTED_REASON,
)

# The classifier's own lists: a phrase or audit method it learns is exported too.
_NODE_FAULTS = NODE_FAULT_PHRASES
_SYSTEM_EVENTS = tuple(sorted(AUDIT_METHODS))
#: Signatures of the application's own failures (NCCL and collective timeouts, crashes).
_TRAINING_FAULTS = (
    "Watchdog caught collective operation timeout",
    "Some NCCL operations have failed or timed out",
    "collective operation timeout",
    "DistBackendError",
    "ChildFailedError",
    "died with exit code",
    "connection reset by peer",
)
_TRAINING_LABELS = (
    "k8s-pod/jobset_sigs_k8s_io/jobset-name",
    "k8s-pod/training_kubeflow_org/job-name",
)
# "Restarting" is the JobSet controller's Warning on the JobSet ("restarting jobset,
# attempt N"); the others are the Kubeflow operator's.
_EVENT_REASONS = (
    "FailedScheduling",
    "TFJobRestarting",
    "PyTorchJobRestarting",
    "JobRestarting",
    "Restarting",
)


def _any(terms: tuple[str, ...]) -> str:
    return "(" + " OR ".join(f'"{t}"' for t in terms) + ")"


#: name -> filter. Names become sink names (``<prefix>-<name>``), so keep them short.
FILTERS: dict[str, str] = {
    "node-pool-events": (
        'resource.type=("gke_nodepool" OR "k8s_node")\n'
        'AND ("PreemptionEvent" OR "MaintenanceEvent" OR "TerminationEvent")'
    ),
    "node-faults": f'resource.type="k8s_node"\nAND {_any(_NODE_FAULTS)}',
    "compute-system-events": (
        'logName:"cloudaudit.googleapis.com%2Fsystem_event"\n'
        'AND resource.type="gce_instance"\n'
        f"AND protoPayload.methodName={_any(_SYSTEM_EVENTS)}"
    ),
    "training-faults": (
        'resource.type="k8s_container"\n'
        "AND (" + " OR ".join(f'labels."{label}":*' for label in _TRAINING_LABELS) + ")\n"
        f"AND ({_any(_TRAINING_FAULTS)[1:-1]}"
        ' OR ("NCCL WARN" AND ("timeout" OR "timed out"))'
        ' OR ("megascale" AND ("hang" OR "hung" OR "stuck" OR "timed out" OR "deadline")))'
    ),
    "scheduling-and-restarts": (
        'resource.type=("k8s_pod" OR "k8s_cluster")\n'
        'AND logName:"/logs/events"\n'
        f'AND (jsonPayload.reason={_any(_EVENT_REASONS)} OR "Insufficient")'
    ),
    # The workload's pods stopped by the scheduler, the kubelet or the registry.
    "pod-faults": (
        'resource.type="k8s_pod"\n'
        'AND logName:"/logs/events"\n'
        f"AND (jsonPayload.reason={_any((PREEMPTED_REASON, EVICTED_REASON))}"
        f" OR (jsonPayload.reason={_any(IMAGE_EVENT_REASONS)} AND {_any(IMAGE_PULL_PHRASES)}))"
    ),
    # Nodes short of memory, disk or PIDs, and the kernel's OOM kills on them.
    "node-pressure": (
        'resource.type="k8s_node"\n'
        "AND (jsonPayload.reason="
        f"{_any((*NODE_PRESSURE_REASONS, NODE_OOM_REASON))} OR {_any(OOM_KILL_PHRASES)})"
    ),
    # Containers the kernel killed at their memory limit, as the Kubernetes audit log
    # records the pod status (kubelet patches; the pod, with its labels, when deleted).
    "oom-killed": (
        'logName:"cloudaudit.googleapis.com%2Factivity"\n'
        'AND resource.type="k8s_cluster"\n'
        f"AND protoPayload.methodName={_any(POD_AUDIT_METHODS)}\n"
        f'AND "{OOM_KILLED_REASON}"'
    ),
}

#: Which kinds each filter is there for (documentation and the coverage test).
KINDS: dict[str, frozenset[SignalKind]] = {
    "node-pool-events": frozenset(
        {SignalKind.PREEMPTION, SignalKind.MAINTENANCE, SignalKind.TERMINATION}
    ),
    "node-faults": frozenset(
        {
            SignalKind.NODE_NOT_READY,
            SignalKind.KERNEL_PANIC,
            SignalKind.KERNEL_BUG,
            SignalKind.HARDWARE_FAILURE,
            SignalKind.HOST_ERROR,
            SignalKind.NODE_PROBLEM_DETECTOR_EXIT,
            SignalKind.TERMINATION,
        }
    ),
    "compute-system-events": frozenset(
        {
            SignalKind.PREEMPTION,
            SignalKind.MAINTENANCE,
            SignalKind.HOST_ERROR,
            SignalKind.AUTOMATIC_RESTART,
            SignalKind.GUEST_TERMINATE,
        }
    ),
    "training-faults": frozenset(
        {
            SignalKind.NCCL_TIMEOUT,
            SignalKind.CONNECTION_RESET,
            SignalKind.WORKER_CRASH,
            SignalKind.DIST_BACKEND_ERROR,
            SignalKind.MEGASCALE_HANG,
        }
    ),
    "scheduling-and-restarts": frozenset({SignalKind.UNSCHEDULABLE, SignalKind.JOB_RESTARTING}),
    "pod-faults": frozenset(
        {SignalKind.PRIORITY_PREEMPTED, SignalKind.EVICTED, SignalKind.IMAGE_PULL_FAILED}
    ),
    "node-pressure": frozenset({SignalKind.NODE_PRESSURE, SignalKind.OOM_KILLED}),
    "oom-killed": frozenset({SignalKind.OOM_KILLED}),
}

TERRAFORM_FILE = Path("infra") / "terraform" / "log-filters.json"


def render() -> str:
    return json.dumps(FILTERS, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[3]
    (root / TERRAFORM_FILE).write_text(render(), encoding="utf-8")
    print(f"wrote {TERRAFORM_FILE}")
