"""The metric names and raw series selectors the live readers run (PromQL), one place."""

from __future__ import annotations

from collections.abc import Mapping

from loopbreaker.model import EvidenceKind

#: kube-state-metrics series that give a pod's or a container's reason (one series per
#: reason, 1 while it holds).
LAST_TERMINATED_METRIC = "kube_pod_container_status_last_terminated_reason"
TERMINATED_METRIC = "kube_pod_container_status_terminated_reason"
WAITING_METRIC = "kube_pod_container_status_waiting_reason"
POD_REASON_METRIC = "kube_pod_status_reason"
POD_REASON_METRICS = (LAST_TERMINATED_METRIC, TERMINATED_METRIC, WAITING_METRIC, POD_REASON_METRIC)
WORKING_SET_METRIC = "container_memory_working_set_bytes"
LIMITS_METRIC = "kube_pod_container_resource_limits"
MEMORY_METRICS = (WORKING_SET_METRIC, LIMITS_METRIC)
POD_INFO_METRIC = "kube_pod_info"
#: Container waiting reasons that mean the image could not be pulled.
IMAGE_WAITING_REASONS = (
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
)

#: Raw range-vector selectors the readers run; the engine computes deltas from raw samples,
#: so a live Prometheus and a metrics.om file give the same answer.
RAW_SELECTORS: Mapping[EvidenceKind, str] = {
    EvidenceKind.RESTARTS: (
        'kube_jobset_restarts{cluster="{cluster_name}", namespace="{namespace}", '
        'jobset_name="{workload_name}"}'
    ),
    EvidenceKind.INTERRUPTIONS: (
        'kubernetes_io:node_pool_interruption_count{cluster_name="{cluster_name}"}'
    ),
    EvidenceKind.NODE_CONDITIONS: (
        'kubernetes_io:node_status_condition{cluster_name="{cluster_name}", '
        'condition=~"Ready|MemoryPressure|DiskPressure|PIDPressure"}'
    ),
    EvidenceKind.POD_PHASES: (
        'kube_pod_status_phase{cluster="{cluster_name}", namespace="{namespace}", '
        'pod=~"{workload_name}.*"}'
    ),
    EvidenceKind.UNSCHEDULABLE: (
        'kubernetes_io:pod_status_unschedulable{cluster_name="{cluster_name}", '
        'namespace_name="{namespace}", pod_name=~"{workload_name}.*"}'
    ),
    # kube-state-metrics: why each container last stopped, why it waits, why the pod is down.
    EvidenceKind.POD_REASONS: (
        '{__name__=~"' + "|".join(POD_REASON_METRICS) + '", cluster="{cluster_name}", '
        'namespace="{namespace}", pod=~"{workload_name}.*"}'
    ),
    # cAdvisor's working set against the limit kube-state-metrics reports, per container.
    EvidenceKind.MEMORY: (
        '{__name__=~"' + "|".join(MEMORY_METRICS) + '", cluster="{cluster_name}", '
        'namespace="{namespace}", pod=~"{workload_name}.*", container!="", container!="POD", '
        'resource=~"memory|"}'
    ),
    # Every pod that has a PriorityClass, in every namespace: a preemptor may run in
    # another one than the workload it preempts.
    EvidenceKind.POD_INFO: 'kube_pod_info{cluster="{cluster_name}", priority_class!=""}',
}

#: Kubeflow's operator counts restarts per namespace and framework; it has no job label.
KUBEFLOW_RESTARTS_METRIC = "training_operator_jobs_restarted_total"
KUBEFLOW_RESTARTS_SELECTOR = (
    KUBEFLOW_RESTARTS_METRIC + '{cluster="{cluster_name}", job_namespace="{namespace}", '
    'framework="{framework}"}'
)
