"""The two metric vocabularies loopbreaker reads, and how their series become one.

*Managed Service for Prometheus* on GKE serves GKE's system metrics under PromQL names
(``kubernetes.io/node/status_condition`` -> ``kubernetes_io:node_status_condition``, labels
``cluster_name``, ``node_name``, ``status="True"``) next to its kube-state-metrics package
(``kube_*`` with ``cluster``). A self-run *kube-prometheus-stack* has only kube-state-metrics
and cAdvisor, usually without any cluster label (one Prometheus per cluster).

Sources of the names and labels:
- GKE system metrics: https://cloud.google.com/monitoring/api/metrics_kubernetes and the
  PromQL naming rule of https://cloud.google.com/stackdriver/docs/managed-prometheus/promql
  (``/`` and ``.`` become ``_``, the domain ends in ``:``).
- kube-state-metrics v2.13.0 docs/metrics/workload/pod-metrics.md and
  docs/metrics/cluster/node-metrics.md: ``kube_node_status_condition{node, condition,
  status="true|false|unknown"}``, ``kube_pod_status_unschedulable{namespace, pod, uid}``.

Every step reads the canonical form (the Managed Prometheus labels); :func:`canonical`
turns a kube-state-metrics series into it, for the live reader and for metrics.om alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from loopbreaker.model import EvidenceKind, Series


class Vocabulary(StrEnum):
    """Where a metric name comes from."""

    MANAGED = "managed-prometheus"
    KUBE_PROMETHEUS_STACK = "kube-prometheus-stack"


#: The exporters behind the names; one scrape job each, so one cluster label each.
GKE_SYSTEM = "gke-system-metrics"
KUBE_STATE_METRICS = "kube-state-metrics"
CADVISOR = "cadvisor"
TRAINING_OPERATOR = "training-operator"
DCGM_EXPORTER = "dcgm-exporter"

#: The labels that name a cluster on a multi-cluster server, most common first.
CLUSTER_LABELS = ("cluster", "cluster_name")

# kube-state-metrics names (the same in both vocabularies).
JOBSET_RESTARTS_METRIC = "kube_jobset_restarts"
KUBEFLOW_RESTARTS_METRIC = "training_operator_jobs_restarted_total"
LAST_TERMINATED_METRIC = "kube_pod_container_status_last_terminated_reason"
TERMINATED_METRIC = "kube_pod_container_status_terminated_reason"
WAITING_METRIC = "kube_pod_container_status_waiting_reason"
POD_REASON_METRIC = "kube_pod_status_reason"
POD_REASON_METRICS = (LAST_TERMINATED_METRIC, TERMINATED_METRIC, WAITING_METRIC, POD_REASON_METRIC)
WORKING_SET_METRIC = "container_memory_working_set_bytes"
LIMITS_METRIC = "kube_pod_container_resource_limits"
MEMORY_METRICS = (WORKING_SET_METRIC, LIMITS_METRIC)
POD_INFO_METRIC = "kube_pod_info"
POD_LABELS_METRIC = "kube_pod_labels"
POD_PHASE_METRIC = "kube_pod_status_phase"
# GKE system metrics (Managed Prometheus only) and their kube-state-metrics counterparts.
GKE_INTERRUPTIONS_METRIC = "kubernetes_io:node_pool_interruption_count"
GKE_NODE_CONDITION_METRIC = "kubernetes_io:node_status_condition"
GKE_UNSCHEDULABLE_METRIC = "kubernetes_io:pod_status_unschedulable"
KSM_NODE_CONDITION_METRIC = "kube_node_status_condition"
KSM_UNSCHEDULABLE_METRIC = "kube_pod_status_unschedulable"
#: NVIDIA dcgm-exporter (4.5.3-4.8.2, etc/default-counters.csv): "Value of the last XID
#: error encountered", a gauge per GPU. One name wherever it is scraped: a kube-prometheus-
#: stack ServiceMonitor, Managed Service for Prometheus' PodMonitoring, GKE's managed DCGM
#: package (Cloud Monitoring ``prometheus.googleapis.com/DCGM_FI_DEV_XID_ERRORS/gauge``,
#: the same name in PromQL).
DCGM_XID_METRIC = "DCGM_FI_DEV_XID_ERRORS"

_NODE_CONDITIONS = 'condition=~"Ready|MemoryPressure|DiskPressure|PIDPressure"'
_WORKLOAD_PODS = 'namespace="{namespace}", pod=~"{workload_name}.*"'


def exporter(metric: str) -> str:
    """The exporter that writes ``metric`` (it decides which labels the series carry)."""
    if metric.startswith("kubernetes_io:"):
        return GKE_SYSTEM
    if metric.startswith("container_"):
        return CADVISOR
    if metric.startswith("training_operator_"):
        return TRAINING_OPERATOR
    if metric.startswith("DCGM_"):
        return DCGM_EXPORTER
    return KUBE_STATE_METRICS


@dataclass(frozen=True)
class Reading:
    """One way to read one kind of metric evidence: its names and matchers."""

    kind: EvidenceKind
    metrics: tuple[str, ...]
    #: Matchers besides the metric name and the cluster, with ``{placeholders}``.
    matchers: str = ""
    #: None: the names exist in both vocabularies.
    vocabulary: Vocabulary | None = None
    #: The label Managed Prometheus puts the cluster in for these names.
    cluster_label: str = "cluster"
    #: Further selectors of the same kind, read where the server has their names.
    extra: tuple[Reading, ...] = ()

    @property
    def exporter(self) -> str:
        return exporter(self.metrics[0])

    def selector(self, cluster_label: str | None) -> str:
        """The raw selector, the cluster pinned by ``cluster_label`` (None: not pinned)."""
        parts = []
        if len(self.metrics) > 1:
            parts.append('__name__=~"' + "|".join(self.metrics) + '"')
        if cluster_label:
            parts.append(f'{cluster_label}="{{cluster_name}}"')
        if self.matchers:
            parts.append(self.matchers)
        name = self.metrics[0] if len(self.metrics) == 1 else ""
        return name + "{" + ", ".join(parts) + "}"


_M, _K = Vocabulary.MANAGED, Vocabulary.KUBE_PROMETHEUS_STACK

#: Per kind, the readings in order of preference: Managed Prometheus' names first, used
#: only where the server has them.
READINGS: Mapping[EvidenceKind, tuple[Reading, ...]] = {
    EvidenceKind.RESTARTS: (
        Reading(
            EvidenceKind.RESTARTS,
            (JOBSET_RESTARTS_METRIC,),
            'namespace="{namespace}", jobset_name="{workload_name}"',
        ),
    ),
    EvidenceKind.INTERRUPTIONS: (
        Reading(EvidenceKind.INTERRUPTIONS, (GKE_INTERRUPTIONS_METRIC,), "", _M, "cluster_name"),
    ),
    EvidenceKind.NODE_CONDITIONS: (
        Reading(
            EvidenceKind.NODE_CONDITIONS,
            (GKE_NODE_CONDITION_METRIC,),
            _NODE_CONDITIONS,
            _M,
            "cluster_name",
        ),
        Reading(EvidenceKind.NODE_CONDITIONS, (KSM_NODE_CONDITION_METRIC,), _NODE_CONDITIONS, _K),
    ),
    EvidenceKind.POD_PHASES: (
        Reading(EvidenceKind.POD_PHASES, (POD_PHASE_METRIC,), _WORKLOAD_PODS),
    ),
    EvidenceKind.UNSCHEDULABLE: (
        Reading(
            EvidenceKind.UNSCHEDULABLE,
            (GKE_UNSCHEDULABLE_METRIC,),
            'namespace_name="{namespace}", pod_name=~"{workload_name}.*"',
            _M,
            "cluster_name",
        ),
        Reading(EvidenceKind.UNSCHEDULABLE, (KSM_UNSCHEDULABLE_METRIC,), _WORKLOAD_PODS, _K),
    ),
    # kube-state-metrics: why each container last stopped, why it waits, why the pod is down.
    EvidenceKind.POD_REASONS: (
        Reading(EvidenceKind.POD_REASONS, POD_REASON_METRICS, _WORKLOAD_PODS),
    ),
    # cAdvisor's working set against the limit kube-state-metrics reports, per container.
    EvidenceKind.MEMORY: (
        Reading(
            EvidenceKind.MEMORY,
            MEMORY_METRICS,
            _WORKLOAD_PODS + ', container!="", container!="POD", resource=~"memory|"',
        ),
    ),
    # Every pod that has a PriorityClass, in every namespace: a preemptor may run in
    # another one than the workload it preempts.
    # And the JobSet restart-attempt label of the workload's pods, where kube-state-metrics
    # allow-lists it (--metric-labels-allowlist; the key sanitized to label_<key>).
    EvidenceKind.POD_INFO: (
        Reading(
            EvidenceKind.POD_INFO,
            (POD_INFO_METRIC,),
            'priority_class!=""',
            extra=(
                Reading(
                    EvidenceKind.POD_INFO,
                    (POD_LABELS_METRIC,),
                    _WORKLOAD_PODS + ', label_jobset_sigs_k8s_io_restart_attempt!=""',
                ),
            ),
        ),
    ),
    # Every GPU's last Xid (a node's series carry the exporter's namespace, not the job's).
    EvidenceKind.GPU_XIDS: (Reading(EvidenceKind.GPU_XIDS, (DCGM_XID_METRIC,)),),
}

#: Kubeflow's operator counts restarts per job namespace and framework; it names no job.
KUBEFLOW_RESTARTS = Reading(
    EvidenceKind.RESTARTS,
    (KUBEFLOW_RESTARTS_METRIC,),
    'job_namespace="{namespace}", framework="{framework}"',
)


def readings(kind: EvidenceKind, *, kubeflow: bool = False) -> tuple[Reading, ...]:
    """The candidate readings of ``kind``, preferred first."""
    if kind is EvidenceKind.RESTARTS and kubeflow:
        return (KUBEFLOW_RESTARTS,)
    return READINGS[kind]


def default_selector(kind: EvidenceKind, *, kubeflow: bool = False) -> str:
    """The Managed Prometheus selector: what runs when the server cannot be asked."""
    first = readings(kind, kubeflow=kubeflow)[0]
    return first.selector(first.cluster_label)


def all_metric_names() -> tuple[str, ...]:
    """Every name any reading reads, for one lookup of what the server holds."""
    names = [
        m for group in READINGS.values() for r in group for x in (r, *r.extra) for m in x.metrics
    ]
    names += KUBEFLOW_RESTARTS.metrics
    return tuple(dict.fromkeys(names))


def choose(
    kind: EvidenceKind, present: Iterable[str], *, kubeflow: bool = False
) -> tuple[Reading, bool] | None:
    """The reading to use given the names the source holds, and whether any of its names is
    there (False: its exporter is there but wrote no series of it, e.g. no pod was ever
    unschedulable). None: neither the names nor their exporter are there."""
    names = set(present)
    exporters = {exporter(n) for n in names}
    candidates = readings(kind, kubeflow=kubeflow)
    for reading in candidates:
        if names.intersection(reading.metrics):
            return reading, True
    for reading in candidates:
        if exporters.intersection(exporter(m) for m in reading.metrics):
            return reading, False
    if kind is EvidenceKind.RESTARTS:
        # A counter series appears with the first restart; a gauge with its exporter's
        # config. Either way step 1 explains what it did not find.
        return candidates[0], False
    return None


def missing_reason(kind: EvidenceKind, where: str, *, kubeflow: bool = False) -> str:
    """Why ``kind`` cannot be read from ``where``, naming what was looked for."""
    candidates = readings(kind, kubeflow=kubeflow)
    names = " or ".join(m for r in candidates for m in r.metrics)
    if kind is EvidenceKind.INTERRUPTIONS:
        return (
            f"{where} has no GKE system metrics ({names}); node-pool interruptions are "
            "recorded by Managed Service for Prometheus only, not by kube-state-metrics"
        )
    return f"{where} has no {names} series, nor any other series of their exporter"


# --- one form for every step --------------------------------------------------------------

#: kube-state-metrics label -> the Managed Prometheus label the steps read, per metric.
_RENAMES: Mapping[str, Mapping[str, str]] = {
    KSM_NODE_CONDITION_METRIC: {"node": "node_name"},
    KSM_UNSCHEDULABLE_METRIC: {"pod": "pod_name", "namespace": "namespace_name"},
}
#: kube-state-metrics writes condition statuses in lower case; Kubernetes and GKE do not.
_STATUS = {"true": "True", "false": "False", "unknown": "Unknown"}


def canonical(series: Series) -> Series:
    """``series`` with the labels the steps read: kube-state-metrics' ``node`` as
    ``node_name``, ``status="true"`` as ``True``, and its cluster under GKE's name too."""
    renames = _RENAMES.get(series.metric)
    if renames is None:
        return series
    labels = dict(series.labels)
    for source, target in renames.items():
        if source in labels and target not in labels:
            labels[target] = labels[source]
    if "status" in labels:
        labels["status"] = _STATUS.get(labels["status"], labels["status"])
    if "cluster" in labels and "cluster_name" not in labels:
        labels["cluster_name"] = labels["cluster"]
    return Series(series.metric, labels, series.samples)
