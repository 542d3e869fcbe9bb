"""Every query of the workflow, as templates filled from a diagnosis context.

PromQL and LQL are what loopbreaker runs. MQL is kept for traceability and for users who
still have MQL dashboards; Google ended MQL support on 2025-07-22, so those entries are
marked deprecated and never executed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import TYPE_CHECKING

from loopbreaker.diagnosis.metric_vocabulary import Vocabulary
from loopbreaker.diagnosis.queries.catalog_terms import with_catalog_terms
from loopbreaker.diagnosis.queries.kube_prometheus_stack import with_vocabularies
from loopbreaker.diagnosis.queries.templates import (
    _JOBSET,
    _KUBEFLOW,
    Template,
    fill,
    scoped,
)
from loopbreaker.diagnosis.selectors import (
    IMAGE_WAITING_REASONS,
    KUBEFLOW_RESTARTS_METRIC,
    KUBEFLOW_RESTARTS_SELECTOR,
    LAST_TERMINATED_METRIC,
    LIMITS_METRIC,
    MEMORY_METRICS,
    POD_INFO_METRIC,
    POD_REASON_METRIC,
    POD_REASON_METRICS,
    RAW_SELECTORS,
    TERMINATED_METRIC,
    WAITING_METRIC,
    WORKING_SET_METRIC,
)
from loopbreaker.model import Context, EvidenceKind, Query, QueryLanguage, WorkloadKind
from loopbreaker.signals.kube_events import OOM_KILLED_REASON

__all__ = [
    "IMAGE_WAITING_REASONS",
    "KUBEFLOW_RESTARTS_METRIC",
    "KUBEFLOW_RESTARTS_SELECTOR",
    "LAST_TERMINATED_METRIC",
    "LIMITS_METRIC",
    "MEMORY_METRICS",
    "POD_INFO_METRIC",
    "POD_REASON_METRIC",
    "POD_REASON_METRICS",
    "RAW_SELECTORS",
    "TERMINATED_METRIC",
    "WAITING_METRIC",
    "WORKING_SET_METRIC",
    "STEP_TITLES",
    "Template",
    "fill",
    "queries_for",
    "render",
    "scoped",
    "templates",
    "templates_for",
]

P, L, M = QueryLanguage.PROMQL, QueryLanguage.LQL, QueryLanguage.MQL

STEP_TITLES: Mapping[int, str] = {
    1: "Workload restarts",
    2: "Node-pool interruptions",
    3: "Nodes and host VMs",
    4: "Pods and workers",
}

_KUBEFLOW_JOB_LABEL = 'labels."k8s-pod/training_kubeflow_org/job-name"'
_KUBEFLOW_TYPE_LABEL = 'labels."k8s-pod/training_kubeflow_org/replica-type"'
_KUBEFLOW_INDEX_LABEL = 'labels."k8s-pod/training_kubeflow_org/replica-index"'

_WINDOW_LQL = 'AND timestamp >= "{start_time}"\nAND timestamp <= "{end_time}"'

# What the classifier recognises is read off the catalog: the LQL below names it
# ``{catalog.<term>}``, filled on first use (catalog_terms), not at import.
_WORKLOAD_PODS = 'cluster="{cluster_name}", namespace="{namespace}", pod=~"{workload_name}.*"'


_MANAGED: tuple[Template, ...] = (
    # Step 1
    Template(
        "restarts",
        1,
        P,
        'kube_jobset_restarts{jobset_name="{workload_name}", cluster="{cluster_name}", '
        'namespace="{namespace}"}',
        "Lifetime restart count of the JobSet (a gauge of status.restarts).",
        kinds=_JOBSET,
    ),
    Template(
        "restarts_increase",
        1,
        P,
        'max by (jobset_name) (increase(kube_jobset_restarts{cluster="{cluster_name}", '
        'namespace="{namespace}", jobset_name="{workload_name}"}[60m]))',
        "Restarts inside the 60 minute window (evaluate at end_time).",
        kinds=_JOBSET,
    ),
    Template(
        "restarts_changes",
        1,
        P,
        'max by (jobset_name) (changes(kube_jobset_restarts{cluster="{cluster_name}", '
        'namespace="{namespace}", jobset_name="{workload_name}"}[60m]))',
        "How often the restart gauge changed inside the window.",
        kinds=_JOBSET,
    ),
    Template(
        "restarts_raw",
        1,
        P,
        RAW_SELECTORS[EvidenceKind.RESTARTS] + "[90m]",
        "Raw samples the engine reads (evaluate at end_time).",
        kinds=_JOBSET,
    ),
    Template(
        "restarts_mql",
        1,
        M,
        "fetch prometheus_target\n"
        "| metric 'prometheus.googleapis.com/kube_jobset_restarts/gauge'\n"
        "| filter resource.cluster_name == '{cluster_name}' && "
        "metric.jobset_name == '{workload_name}'\n"
        "| align next_older(1m)\n| every 1m\n"
        "| group_by [metric.jobset_name], [val: max(value)]",
        "Deprecated MQL form of the restart query.",
        deprecated=True,
        kinds=_JOBSET,
    ),
    # Step 1, Kubeflow training operator (TFJob, PyTorchJob)
    Template(
        "restarts",
        1,
        P,
        KUBEFLOW_RESTARTS_SELECTOR,
        "Restarts counted by the training operator for the namespace and framework (no job "
        "label: the job's own <Kind>Restarting events attribute them).",
        kinds=_KUBEFLOW,
    ),
    Template(
        "restarts_increase",
        1,
        P,
        "sum by (job_namespace, framework) (increase(" + KUBEFLOW_RESTARTS_SELECTOR + "[60m]))",
        "Operator restarts inside the 60 minute window (evaluate at end_time).",
        kinds=_KUBEFLOW,
    ),
    Template(
        "restarts_raw",
        1,
        P,
        KUBEFLOW_RESTARTS_SELECTOR + "[90m]",
        "Raw samples the engine reads (evaluate at end_time).",
        kinds=_KUBEFLOW,
    ),
    Template(
        "restart_events",
        1,
        L,
        'logName="projects/{project_id}/logs/events"\n'
        'AND resource.labels.cluster_name="{cluster_name}"\n'
        'AND jsonPayload.involvedObject.kind="{job_kind}"\n'
        'AND jsonPayload.involvedObject.namespace="{namespace}"\n'
        'AND jsonPayload.involvedObject.name="{workload_name}"\n'
        'AND jsonPayload.reason=("{job_kind}Restarting" OR "JobRestarting")\n' + _WINDOW_LQL,
        "The operator's restart events of this job (they name it; the counter does not).",
        kinds=_KUBEFLOW,
    ),
    Template(
        "jobset_restart_events",
        1,
        L,
        'logName="projects/{project_id}/logs/events"\n'
        'AND resource.labels.cluster_name="{cluster_name}"\n'
        'AND jsonPayload.involvedObject.kind="JobSet"\n'
        'AND jsonPayload.involvedObject.namespace="{namespace}"\n'
        'AND jsonPayload.involvedObject.name="{workload_name}"\n'
        # kubernetes-sigs/jobset pkg/constants/constants.go: Restarting (v0.2-v0.4; v0.5 put
        # "restarting jobset, attempt N" in the reason), the failure-policy actions (v0.6+,
        # RestartJob* v0.12+).
        'AND (jsonPayload.reason=("Restarting" OR "RestartJobSetFailurePolicyAction" OR '
        '"RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction" OR '
        '"RestartJobFailurePolicyAction" OR "RestartJobAndIgnoreMaxRestartsFailurePolicyAction")'
        ' OR jsonPayload.reason:"restarting jobset")\n' + _WINDOW_LQL,
        "The JobSet controller's restart Events: RestartJob actions leave kube_jobset_restarts "
        "flat.",
        kinds=_JOBSET,
    ),
    # Step 2
    Template(
        "interruptions",
        2,
        P,
        "sum by (interruption_type, interruption_reason, node_pool_name, cluster_name) (\n"
        '  avg_over_time(kubernetes_io:node_pool_interruption_count{cluster_name="{cluster_name}"}'
        "[10m])\n)",
        "Interruptions by type, reason and node pool (the published query).",
    ),
    Template(
        "interruptions_increase",
        2,
        P,
        "sum by (interruption_type, interruption_reason, node_pool_name) (\n"
        "  increase(kubernetes_io:node_pool_interruption_count"
        '{cluster_name="{cluster_name}"}[60m])\n)',
        "Interruptions counted inside the window (evaluate at end_time).",
    ),
    Template(
        "interruptions_raw",
        2,
        P,
        RAW_SELECTORS[EvidenceKind.INTERRUPTIONS] + "[90m]",
        "Raw samples the engine reads (evaluate at end_time).",
    ),
    Template(
        "interruptions_mql",
        2,
        M,
        "fetch k8s_node_pool\n| metric 'kubernetes.io/node_pool/interruption_count'\n"
        "| filter cluster_name == '{cluster_name}'\n| align next_older(10m)\n| every 10m\n"
        "| group_by [metric.interruption_type, metric.interruption_reason, "
        "metadata.system.node_pool_name], [val: sum(value)]",
        "Deprecated MQL form of the interruption query.",
        deprecated=True,
    ),
    Template(
        "nodepool_logs",
        2,
        L,
        'resource.type="gke_nodepool"\nAND resource.labels.cluster_name="{cluster_name}"\n'
        + _WINDOW_LQL,
        "Node-pool events: PreemptionEvent, MaintenanceEvent, TerminationEvent.",
    ),
    Template(
        "system_events",
        2,
        L,
        'logName="projects/{project_id}/logs/cloudaudit.googleapis.com%2Fsystem_event"\n'
        'AND resource.type="gce_instance"\n'
        "AND protoPayload.methodName=({catalog.audit_methods})\n" + _WINDOW_LQL,
        "Compute Engine system events for the VMs behind the nodes.",
    ),
    # Step 3
    Template(
        "nodes_not_ready",
        3,
        P,
        "sum by (status, condition, node_pool_name) (\n"
        '  kubernetes_io:node_status_condition{cluster_name="{cluster_name}", condition="Ready", '
        'status="False"}\n)',
        "Nodes whose Ready condition is False (the published query).",
    ),
    Template(
        "nodes_not_ready_by_node",
        3,
        P,
        "max by (node_name, node_pool_name, status) (\n"
        '  max_over_time(kubernetes_io:node_status_condition{cluster_name="{cluster_name}", '
        'condition="Ready", status=~"False|Unknown"}[60m])\n)',
        "Which nodes were not Ready at any point in the window.",
    ),
    Template(
        "node_conditions_raw",
        3,
        P,
        RAW_SELECTORS[EvidenceKind.NODE_CONDITIONS] + "[90m]",
        "Raw samples the engine reads (evaluate at end_time).",
    ),
    Template(
        "node_not_ready_mql",
        3,
        M,
        "fetch k8s_node\n| metric 'kubernetes.io/node/status_condition'\n"
        "| filter cluster_name == '{cluster_name}' && metric.condition == 'Ready' && "
        "metric.status == 'False'\n| align next_older(1m)\n| every 1m\n"
        "| group_by [node_name, metadata.user.gke_nodepool], [val: max(value)]",
        "Deprecated MQL form of the readiness query.",
        deprecated=True,
    ),
    Template(
        "node_host_mql",
        3,
        M,
        "fetch k8s_node\n| metric 'kubernetes.io/node/cpu/total_cores'\n"
        "| filter cluster_name == '{cluster_name}'\n| align next_older(1m)\n| every 1m\n"
        "| group_by [node_name, metadata.user.gce_topology_host, metadata.user.gke_nodepool], "
        "[val: max(value)]",
        "Deprecated MQL node to physical host mapping; loopbreaker reads node labels instead.",
        deprecated=True,
    ),
    Template(
        "node_fault_logs",
        3,
        L,
        'resource.type="k8s_node"\nAND resource.labels.cluster_name="{cluster_name}"\n'
        "AND ({catalog.node_fault_terms})\n" + _WINDOW_LQL,
        "Host, kernel and hardware faults, memory, disk and PID pressure, and kernel OOM "
        "kills on the nodes.",
    ),
    Template(
        "node_pressure",
        3,
        P,
        "max by (node_name, condition) (\n"
        '  max_over_time(kubernetes_io:node_status_condition{cluster_name="{cluster_name}", '
        'condition=~"MemoryPressure|DiskPressure|PIDPressure", status="True"}[60m])\n)',
        "Nodes whose MemoryPressure, DiskPressure or PIDPressure condition was true in the "
        "window (the kubelet evicts pods while it is).",
    ),
    # Step 4
    Template(
        "pod_phases",
        4,
        P,
        "sum by (phase) (\n"
        '  avg_over_time(kube_pod_status_phase{cluster="{cluster_name}", '
        'pod=~"{workload_name}.*"}[10m])\n)',
        "Pod phases of the workload (the published query).",
    ),
    Template(
        "pod_phases_raw",
        4,
        P,
        RAW_SELECTORS[EvidenceKind.POD_PHASES] + "[90m]",
        "Raw samples the engine reads (evaluate at end_time).",
    ),
    Template(
        "unschedulable",
        4,
        P,
        "max by (pod_name) (\n"
        '  max_over_time(kubernetes_io:pod_status_unschedulable{cluster_name="{cluster_name}", '
        'pod_name=~"{workload_name}.*"}[60m])\n)',
        "Unschedulable pods of the workload (PromQL name by the GMP naming rule).",
    ),
    Template(
        "unschedulable_raw",
        4,
        P,
        RAW_SELECTORS[EvidenceKind.UNSCHEDULABLE] + "[90m]",
        "Raw samples the engine reads (evaluate at end_time).",
    ),
    Template(
        "pod_phases_mql",
        4,
        M,
        "fetch k8s_pod\n| metric 'kubernetes.io/pod/status/phase'\n"
        "| filter cluster_name == '{cluster_name}' && pod_name ==~ '{workload_name}.*'\n"
        "| align next_older(10m)\n| every 10m\n| group_by [metric.phase], [val: count()]",
        "Deprecated MQL form of the pod phase query.",
        deprecated=True,
    ),
    Template(
        "unschedulable_mql",
        4,
        M,
        "fetch k8s_pod\n| metric 'kubernetes.io/pod/status/unschedulable'\n"
        "| filter cluster_name == '{cluster_name}' && pod_name ==~ '{workload_name}.*'\n"
        "| align next_older(10m)\n| every 10m\n| group_by [pod_name], [val: max(value)]",
        "Deprecated MQL form of the unschedulable query.",
        deprecated=True,
    ),
    Template(
        "scheduling_events",
        4,
        L,
        'logName="projects/{project_id}/logs/events"\n'
        'AND resource.type="k8s_pod"\nAND resource.labels.cluster_name="{cluster_name}"\n'
        "AND jsonPayload.reason=({catalog.pod_event_reasons})\n"
        'AND resource.labels.namespace_name="{namespace}"\n'
        'AND resource.labels.pod_name:"{workload_name}"\n' + _WINDOW_LQL,
        "Scheduling failures, preemptions, evictions and image-pull failures of the "
        "workload's pods.",
    ),
    Template(
        "capacity_audit",
        4,
        L,
        'logName="projects/{project_id}/logs/cloudaudit.googleapis.com%2Factivity"\n'
        'AND resource.type="gce_instance"\nAND severity>=ERROR\n'
        "AND protoPayload.methodName=({catalog.capacity_methods})\n"
        "AND ({catalog.capacity_words})\n" + _WINDOW_LQL,
        "VMs Compute Engine could not create (stockout, quota): the zone, machine type "
        "and accelerator that are missing.",
    ),
    Template(
        "autoscaler_visibility",
        4,
        L,
        'logName="projects/{project_id}/logs/container.googleapis.com%2Fcluster-autoscaler-'
        'visibility"\nAND resource.labels.cluster_name="{cluster_name}"\n'
        "AND ({catalog.autoscaler_ids})\n" + _WINDOW_LQL,
        "The cluster autoscaler's failed scale-ups and the reasons it did not scale up.",
    ),
    Template(
        "oom_audit",
        4,
        L,
        'logName="projects/{project_id}/logs/cloudaudit.googleapis.com%2Factivity"\n'
        'AND resource.type="k8s_cluster"\nAND resource.labels.cluster_name="{cluster_name}"\n'
        "AND protoPayload.methodName=({catalog.pod_audit_methods})\n"
        'AND protoPayload.resourceName:"namespaces/{namespace}/"\n'
        'AND protoPayload.resourceName:"/pods/{workload_name}"\n'
        f'AND "{OOM_KILLED_REASON}"\n' + _WINDOW_LQL,
        "Containers of the workload's pods that terminated OOMKilled, as the Kubernetes "
        "audit log records the pod status.",
    ),
    Template(
        "oom_killed",
        4,
        P,
        "max by (namespace, pod, container) (\n"
        f"  max_over_time({LAST_TERMINATED_METRIC}{{{_WORKLOAD_PODS}, "
        f'reason="{OOM_KILLED_REASON}"}}[60m])\n'
        f"  or max_over_time({TERMINATED_METRIC}{{{_WORKLOAD_PODS}, "
        f'reason="{OOM_KILLED_REASON}"}}[60m])\n)',
        "Containers of the workload whose last (or current) termination was OOMKilled; "
        "Kubeflow pods with restartPolicy Never have only the current one.",
    ),
    Template(
        "memory_peak",
        4,
        P,
        "max by (pod, container) (\n"
        f"  max_over_time({WORKING_SET_METRIC}{{{_WORKLOAD_PODS}, "
        'container!="", container!="POD"}[60m])\n)\n'
        "/ on (pod, container)\n"
        f"max by (pod, container) ({LIMITS_METRIC}{{{_WORKLOAD_PODS}, "
        'resource="memory"})',
        "Peak working set of each container as a fraction of its memory limit (1 = at the limit).",
    ),
    Template(
        "evicted",
        4,
        P,
        "max by (namespace, pod) (\n"
        f'  max_over_time({POD_REASON_METRIC}{{{_WORKLOAD_PODS}, reason="Evicted"}}[60m])\n)',
        "Pods of the workload the kubelet evicted.",
    ),
    Template(
        "image_pull_waiting",
        4,
        P,
        "max by (pod, container, reason) (\n"
        f"  max_over_time({WAITING_METRIC}{{{_WORKLOAD_PODS}, "
        f'reason=~"{"|".join(IMAGE_WAITING_REASONS)}"}}[60m])\n)',
        "Containers of the workload waiting on an image that cannot be pulled.",
    ),
    Template(
        "priority_classes",
        4,
        P,
        "max by (namespace, pod, uid, priority_class) (\n"
        f'  {POD_INFO_METRIC}{{cluster="{{cluster_name}}", priority_class!=""}}\n)',
        "PriorityClass of every pod that has one (the preempted pods and their preemptors).",
    ),
    Template(
        "pod_reasons_raw",
        4,
        P,
        RAW_SELECTORS[EvidenceKind.POD_REASONS] + "[90m]",
        "Raw samples the engine reads (evaluate at end_time).",
    ),
    Template(
        "memory_raw",
        4,
        P,
        RAW_SELECTORS[EvidenceKind.MEMORY] + "[90m]",
        "Raw samples the engine reads (evaluate at end_time).",
    ),
    Template(
        "pod_info_raw",
        4,
        P,
        RAW_SELECTORS[EvidenceKind.POD_INFO] + "[90m]",
        "Raw samples the engine reads (evaluate at end_time).",
    ),
    Template(
        "coordinator_logs",
        4,
        L,
        'resource.type="k8s_container"\nAND resource.labels.cluster_name="{cluster_name}"\n'
        'AND resource.labels.namespace_name="{namespace}"\n'
        'AND labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="{workload_name}"\n'
        'AND labels."k8s-pod/jobset_sigs_k8s_io/job-index"="0"\n'
        'AND labels."k8s-pod/batch_kubernetes_io/job-completion-index"="0"\n' + _WINDOW_LQL,
        "Logs of worker 0 in slice 0 (the coordinator), read first.",
        kinds=_JOBSET,
    ),
    Template(
        "worker_logs",
        4,
        L,
        'resource.type="k8s_container"\nAND resource.labels.cluster_name="{cluster_name}"\n'
        'AND resource.labels.namespace_name="{namespace}"\n'
        'AND labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="{workload_name}"\n' + _WINDOW_LQL,
        "Logs of every worker of the JobSet (the published query).",
        kinds=_JOBSET,
    ),
    Template(
        "coordinator_logs",
        4,
        L,
        'resource.type="k8s_container"\nAND resource.labels.cluster_name="{cluster_name}"\n'
        f'AND {_KUBEFLOW_JOB_LABEL}="{{workload_name}}"\n'
        f'AND ({_KUBEFLOW_TYPE_LABEL}=("chief" OR "Chief" OR "master" OR "Master")\n'
        f'  OR ({_KUBEFLOW_TYPE_LABEL}=("worker" OR "Worker") AND {_KUBEFLOW_INDEX_LABEL}="0"))\n'
        + _WINDOW_LQL,
        "Logs of the Chief or Master (the coordinator), and of Worker 0, read first.",
        kinds=_KUBEFLOW,
    ),
    Template(
        "worker_logs",
        4,
        L,
        'resource.type="k8s_container"\nAND resource.labels.cluster_name="{cluster_name}"\n'
        f'AND {_KUBEFLOW_JOB_LABEL}="{{workload_name}}"\n' + _WINDOW_LQL,
        "Logs of every replica of the job.",
        kinds=_KUBEFLOW,
    ),
)


@cache
def templates() -> tuple[Template, ...]:
    """Every template; each PromQL one also in its kube-prometheus-stack form (queries_kps).
    Built on first use, with the catalog's terms filled in."""
    return with_vocabularies(with_catalog_terms(_MANAGED))


if TYPE_CHECKING:
    #: templates(), under the name it had when it was built at import.
    TEMPLATES: tuple[Template, ...]
else:

    def __getattr__(name: str) -> object:
        if name == "TEMPLATES":
            return templates()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def render(template: Template, context: Context) -> Query:
    return Query(
        id=template.id,
        step=template.step,
        language=template.language,
        text=scoped(template.text, context),
        description=template.description,
        deprecated=template.deprecated,
    )


def templates_for(kind: WorkloadKind) -> tuple[Template, ...]:
    return tuple(t for t in templates() if t.serves(kind))


def queries_for(context: Context, *, steps: Iterable[int] | None = None) -> tuple[Query, ...]:
    """The workflow's queries for a report: Managed Prometheus' forms (``loopbreaker
    queries`` lists the kube-prometheus-stack ones too)."""
    wanted = set(steps) if steps is not None else None
    return tuple(
        render(t, context)
        for t in templates_for(context.workload_kind)
        if (wanted is None or t.step in wanted)
        and t.vocabulary is not Vocabulary.KUBE_PROMETHEUS_STACK
    )
