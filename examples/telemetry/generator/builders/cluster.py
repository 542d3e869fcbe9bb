"""The cluster model: nodes, JobSet and Kubeflow specs, their pods by minute, the context."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .deterministic import NS, parse_time, rand_int, rand_uuid

#: Metric sample range relative to the issue time, in minutes (inclusive).
FIRST_MINUTE, LAST_MINUTE = -90, 35


GKE_VERSION = "v1.32.4-gke.1767000"


@dataclass
class Node:
    name: str
    pool: str
    zone: str
    machine: str
    project: str
    instance_id: str
    ip: str
    pod_cidr: str
    created_ns: int
    boot_ns: int
    spot: bool = False
    host: str | None = None
    block: str | None = None
    subblock: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    #: minute -> "False" | "Unknown" for minutes where Ready is not True
    not_ready: dict[int, str] = field(default_factory=dict)
    ready_since_ns: int = 0

    @property
    def ready_again(self) -> int:
        """The first Ready minute after its last outage so far."""
        return max(self.not_ready) + 1


@dataclass
class JobSetSpec:
    name: str
    rjob: str
    replicas: int
    parallelism: int
    container: str
    image: str
    resources: dict[str, str]
    node_selector: dict[str, str]
    tolerations: list[dict[str, str]]
    coordinator_label: bool = False
    priority_class: str | None = None
    #: The controller kind (``logging.gke.io/top_level_controller_type`` of its pods' logs).
    api_kind: ClassVar[str] = "JobSet"

    @property
    def size(self) -> int:
        return self.replicas * self.parallelism

    def job_name(self, j: int) -> str:
        return f"{self.name}-{self.rjob}-{j}"


@dataclass(kw_only=True)
class PodPhases:
    """One pod object by minute: where it runs, when it exists, its phases and the minutes it
    is unschedulable (JobSet and Kubeflow pods)."""

    node: Node | None
    start_m: int
    created_ns: int
    phases: list[tuple[int, str]]
    end_m: int | None = None
    unsched: list[tuple[int, int]] = field(default_factory=list)
    sched_message: str | None = None
    ip: str = ""

    def phase_at(self, m: int) -> str | None:
        if m < self.start_m or (self.end_m is not None and m >= self.end_m):
            return None
        current = None
        for start, phase in self.phases:
            if start <= m:
                current = phase
        return current

    def unsched_at(self, m: int) -> bool:
        return any(a <= m < b for a, b in self.unsched)


@dataclass(kw_only=True)
class Pod(PodPhases):
    """One pod of a JobSet attempt: Job ``j``, completion index ``p``."""

    spec: JobSetSpec
    namespace: str
    j: int
    p: int
    attempt: int
    name: str

    @property
    def coordinator(self) -> bool:
        return self.j == 0 and self.p == 0

    @property
    def job_uid(self) -> str:
        return rand_uuid("job", self.spec.name, self.j, self.attempt)

    @property
    def uid(self) -> str:
        return rand_uuid("pod", self.name)

    def labels(self, jobset_uid: str) -> dict[str, str]:
        s = self.spec
        out = {
            "batch.kubernetes.io/controller-uid": self.job_uid,
            "batch.kubernetes.io/job-completion-index": str(self.p),
            "batch.kubernetes.io/job-name": s.job_name(self.j),
            "controller-uid": self.job_uid,
            "job-name": s.job_name(self.j),
            "jobset.sigs.k8s.io/global-replicas": str(s.replicas),
            "jobset.sigs.k8s.io/job-global-index": str(self.j),
            "jobset.sigs.k8s.io/job-index": str(self.j),
            "jobset.sigs.k8s.io/job-key": hashlib.sha1(
                f"{self.namespace}/{s.job_name(self.j)}".encode()
            ).hexdigest(),
            "jobset.sigs.k8s.io/jobset-name": s.name,
            "jobset.sigs.k8s.io/jobset-uid": jobset_uid,
            "jobset.sigs.k8s.io/replicatedjob-name": s.rjob,
            "jobset.sigs.k8s.io/replicatedjob-replicas": str(s.replicas),
            "jobset.sigs.k8s.io/restart-attempt": str(self.attempt),
        }
        if s.coordinator_label:
            out["jobset.sigs.k8s.io/coordinator"] = f"{s.name}-{s.rjob}-0-0.{s.name}"
        return out


#: Kubeflow training operator: API kind -> (framework label, controller, container, port).
KUBEFLOW_KINDS: dict[str, tuple[str, str, str, tuple[str, int]]] = {
    "TFJob": ("tensorflow", "tfjob-controller", "tensorflow", ("tfjob-port", 2222)),
    "PyTorchJob": ("pytorch", "pytorchjob-controller", "pytorch", ("pytorchjob-port", 23456)),
}


#: Replica types that coordinate a Kubeflow job (Worker 0 does when there is none).
KUBEFLOW_CHIEFS = ("Chief", "Master")


@dataclass
class KubeflowSpec:
    """A TFJob or PyTorchJob: replica types in the operator's order, each with its count."""

    name: str
    api_kind: str
    replicas: dict[str, int]
    image: str
    #: replica type -> container resources (requests = limits)
    resources: dict[str, dict[str, str]]
    node_selector: dict[str, dict[str, str]]
    tolerations: dict[str, list[dict[str, str]]]
    env: list[dict[str, str]] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    restart_policy: str = "ExitCode"
    #: (replica type, index) -> the node the replica runs on
    placement: dict[tuple[str, int], Node] = field(default_factory=dict)

    @property
    def framework(self) -> str:
        return KUBEFLOW_KINDS[self.api_kind][0]

    @property
    def operator(self) -> str:
        return KUBEFLOW_KINDS[self.api_kind][1]

    @property
    def container(self) -> str:
        return KUBEFLOW_KINDS[self.api_kind][2]

    @property
    def port(self) -> tuple[str, int]:
        return KUBEFLOW_KINDS[self.api_kind][3]

    @property
    def has_chief(self) -> bool:
        return any(r in self.replicas for r in KUBEFLOW_CHIEFS)

    def pod_name(self, rtype: str, index: int) -> str:
        return f"{self.name}-{rtype.lower()}-{index}"


@dataclass(kw_only=True)
class KfPod(PodPhases):
    """One pod object of a Kubeflow replica. With restartPolicy ExitCode the operator
    deletes a failed pod and creates it again under the same name (a new ``incarnation``,
    with a new uid)."""

    spec: KubeflowSpec
    namespace: str
    rtype: str
    index: int
    incarnation: int

    @property
    def name(self) -> str:
        return self.spec.pod_name(self.rtype, self.index)

    @property
    def coordinator(self) -> bool:
        if self.spec.has_chief:
            return self.rtype in KUBEFLOW_CHIEFS
        return self.rtype == "Worker" and self.index == 0

    @property
    def uid(self) -> str:
        return rand_uuid("kfpod", self.namespace, self.name, self.incarnation)

    def labels(self, job_uid: str = "") -> dict[str, str]:
        """The operator's pod labels (the job uid is in ownerReferences, not in labels)."""
        out = {
            "training.kubeflow.org/job-name": self.spec.name,
            "training.kubeflow.org/operator-name": self.spec.operator,
            "training.kubeflow.org/replica-index": str(self.index),
            "training.kubeflow.org/replica-type": self.rtype.lower(),
        }
        if self.coordinator:
            out["training.kubeflow.org/job-role"] = "master"
        return out


AnyPod = Pod | KfPod


@dataclass
class PlainPod:
    """A pod of neither a JobSet nor a Kubeflow job (a Deployment's), for metrics."""

    name: str
    namespace: str
    node: Node | None
    start_m: int
    end_m: int | None
    ip: str

    @property
    def uid(self) -> str:
        return rand_uuid("plainpod", self.namespace, self.name)


@dataclass
class Context:
    project: str
    location: str
    zone: str
    cluster: str
    namespace: str
    workload: str
    issue_time: str
    #: ``loopbreaker diagnose --workload-kind``; None (JobSet) writes no key.
    workload_kind: str | None = None

    @property
    def t_ns(self) -> int:
        return parse_time(self.issue_time)

    def at(self, minutes: float, *key: object) -> int:
        """Issue time + ``minutes``; the sub-second part is derived from ``key``."""
        whole = self.t_ns + math.floor(minutes * 60) * NS
        return whole + rand_int(0, NS, "ns", self.cluster, minutes, *key)

    def second(self, minutes: float) -> int:
        """The start of the whole second T+``minutes`` falls in."""
        return self.t_ns + math.floor(minutes * 60) * NS

    def sample_s(self, m: int) -> int:
        return self.t_ns // NS + m * 60

    def pod_ip(self, *key: object) -> str:
        """A pod IP of this cluster's pod range, derived from ``key``."""
        return (
            f"10.{rand_int(64, 120, 'pods', self.cluster)}."
            f"{rand_int(2, 250, 'pip', *key)}.{rand_int(2, 250, 'pip2', *key)}"
        )


def lifecycle(start: int, running: int | None, failed: int | None) -> list[tuple[int, str]]:
    """A pod's phases: Pending from ``start``, then Running and Failed where given."""
    phases = [(start, "Pending")]
    if running is not None:
        phases.append((running, "Running"))
    if failed is not None:
        phases.append((failed, "Failed"))
    return phases


def spans(starts: list[int]) -> Iterator[tuple[int, int, int | None]]:
    """(k, start, end) of each attempt: one ends where the next starts, the last runs on."""
    for k, start in enumerate(starts):
        yield k, start, starts[k + 1] if k + 1 < len(starts) else None


def kube_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``kubectl get -o json`` prints for several objects."""
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
