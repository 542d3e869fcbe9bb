"""What a LogEntry names of its workload, pod role and node: pod labels, pod names, and
the node or node pool its text mentions (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from loopbreaker.model import KUBEFLOW_CHIEF_TYPES, WorkloadKind

_NODE_IN_TEXT = (
    re.compile(r"\bNode '(?P<node>[^']+)'"),
    re.compile(r"\bNode (?P<node>[a-z0-9][a-z0-9.-]*) status is now", re.I),
    re.compile(r"^[A-Z][a-z]{2} +\d+ [\d:]{8} (?P<node>[a-z0-9][a-z0-9.-]*) ", re.M),
)
# Guards of _NODE_IN_TEXT, in order (None: the syslog pattern, checked by its shape).
_NODE_GUARDS = ("node '", "status is now", None)
_NODE_GUARDED = tuple(zip(_NODE_IN_TEXT, _NODE_GUARDS, strict=True))
_POOL_IN_TEXT = re.compile(r"node pool '(?P<pool>[^']+)'", re.I)
_POD_NAME = re.compile(r"^(?P<rest>.+)-(?P<job>\d+)-(?P<pod>\d+)-[a-z0-9]{5}$")


def fill_from_text(text: str, fields: dict[str, Any], lowered: str | None = None) -> None:
    """The node and node pool a text names, where the entry's labels named none;
    ``lowered``: the text lowered, when the caller has it."""
    lowered = text.lower() if lowered is None else lowered
    # The first two node patterns and the pool's name "node": most texts hold none.
    named = "node" in lowered
    if not fields.get("node"):
        for pattern, guard in _NODE_GUARDED:
            if guard is None:
                # The syslog pattern anchors at line starts: a one-line text can only
                # match at 0, and only if it starts like "May".
                if "\n" not in text and not (text[:1].isupper() and text[1:3].islower()):
                    continue
            elif not named or guard not in lowered:
                continue
            match = pattern.search(text)
            if match:
                fields["node"] = match["node"]
                break
    if named and not fields.get("node_pool") and "node pool '" in lowered:
        match = _POOL_IN_TEXT.search(text)
        if match:
            fields["node_pool"] = match["pool"]


def workload_fields(labels: Mapping[str, str], fields: dict[str, Any]) -> None:
    if not labels:  # node, node-pool and audit entries carry no pod labels
        fields["workload"] = fields["coordinator"] = None
        return
    workload, kind, kubeflow = workload_of(labels)
    fields["workload"] = workload
    get = labels.get  # every container entry's labels: bound once
    if kind is not None or kubeflow:
        fields["workload_kind"] = kind
    # Each label read only when the answer still depends on it (most pods are JobSet's,
    # whose two indexes decide).
    replica_type = get("k8s-pod/training_kubeflow_org/replica-type") if kubeflow else None
    if kubeflow:
        fields["replica_type"] = replica_type.lower() if replica_type else None
    coordinator: bool | None = None
    job_index = get("k8s-pod/jobset_sigs_k8s_io/job-index")
    pod_index = get("k8s-pod/batch_kubernetes_io/job-completion-index")
    if job_index is not None and pod_index is not None:
        fields["coordinator"] = job_index == "0" and pod_index == "0"
        return
    endpoint = get("k8s-pod/jobset_sigs_k8s_io/coordinator")
    pod = fields.get("pod")
    if endpoint and isinstance(pod, str):
        # The label holds the coordinator's endpoint "<jobset>-<rjob>-<job>-<pod>.<subdomain>";
        # pod names add a random suffix to that first part.
        coordinator = pod.rsplit("-", 1)[0] == endpoint.split(".", 1)[0]
    if not kubeflow:
        replica_type = get("k8s-pod/training_kubeflow_org/replica-type")
    if coordinator is None and replica_type is not None:
        replica_index = get("k8s-pod/training_kubeflow_org/replica-index")
        coordinator = replica_type.lower() in KUBEFLOW_CHIEF_TYPES or (
            replica_type.lower() == "worker" and replica_index == "0"
        )
    fields["coordinator"] = coordinator


def workload_of(labels: Mapping[str, str]) -> tuple[str | None, str | None, bool]:
    """The workload a pod's labels name, its kind, and whether Kubeflow's labels name it."""
    jobset = labels.get("k8s-pod/jobset_sigs_k8s_io/jobset-name")
    if jobset:
        return jobset, WorkloadKind.JOBSET.value, False
    kubeflow = labels.get("k8s-pod/training_kubeflow_org/job-name")
    if kubeflow:
        operator = labels.get("k8s-pod/training_kubeflow_org/operator-name")
        replica_type = labels.get("k8s-pod/training_kubeflow_org/replica-type")
        kind = kubeflow_kind(operator, replica_type)
        return kubeflow, kind.value if kind else None, True
    return jobset or kubeflow, None, False


def kubeflow_kind(operator: str | None, replica_type: str | None) -> WorkloadKind | None:
    """The Kubeflow kind from the operator's pod labels: ``operator-name`` names the
    controller (``tfjob-controller``); failing that, TensorFlow-only replica types."""
    if operator:
        kind = operator.removesuffix("-controller")
        for candidate in WorkloadKind:
            if candidate.kubeflow and candidate.value == kind:
                return candidate
    if replica_type and replica_type.lower() in ("chief", "ps", "evaluator"):
        return WorkloadKind.TFJOB
    return None


def fill_coordinator(fields: dict[str, Any]) -> None:
    """Fall back on the JobSet pod naming ``<jobset>-<rjob>-<job>-<pod>-<suffix>``."""
    if fields.get("coordinator") is not None:
        return
    pod, workload = fields.get("pod"), fields.get("workload")
    if not isinstance(pod, str) or not isinstance(workload, str):
        return
    if not pod.startswith(workload + "-"):
        return
    match = _POD_NAME.match(pod)
    if match:
        fields["coordinator"] = match["job"] == "0" and match["pod"] == "0"


# Kubeflow's pod naming: ``<job>-<replica type, lower case>-<index>`` (training-operator
# v1 pkg/common/util GenGeneralName; the replica types of TFJob, PyTorchJob, MPIJob...).
_KUBEFLOW_POD = re.compile(
    r"^(?P<job>[a-z0-9][a-z0-9.-]*?)-(?:chief|master|worker|ps|evaluator|launcher)-\d+$"
)


def workload_candidates(pod: str) -> tuple[str, ...]:
    """The workloads a pod's name may belong to, most specific first.

    A pod Event carries no pod labels, only the pod's name. JobSet names its pods
    ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>-<suffix>`` (both names may hold
    hyphens, so every split is a candidate); Kubeflow ``<job>-<replicaType>-<index>``.
    A caller keeps the candidate something else confirms (the incident store, the pod's
    own labels): a name alone proves nothing.
    """
    found: list[str] = []
    jobset = _POD_NAME.match(pod)
    if jobset:
        rest = jobset["rest"]
        cuts = [i for i, char in enumerate(rest) if char == "-"]
        found.extend(rest[:i] for i in reversed(cuts))
    kubeflow = _KUBEFLOW_POD.match(pod)
    if kubeflow and kubeflow["job"] not in found:
        found.insert(0, kubeflow["job"])
    return tuple(name for name in found if name)
