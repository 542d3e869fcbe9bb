"""Rewrite a Managed Prometheus metrics.om into what a kube-prometheus-stack Prometheus stores.

``python examples/telemetry/kube_prometheus_stack.py`` writes the bundled scenario
``pytorchjob-kube-prometheus-stack``; the tests rewrite every scenario the same way.

What changes, and where each rule comes from:
- GKE system metrics do not exist there. ``kubernetes_io:node_status_condition`` becomes
  kube-state-metrics' ``kube_node_status_condition{node, condition, status}`` with lower-case
  statuses, ``kubernetes_io:pod_status_unschedulable`` becomes
  ``kube_pod_status_unschedulable{namespace, pod}`` (kube-state-metrics v2.13.0,
  docs/metrics/cluster/node-metrics.md and docs/metrics/workload/pod-metrics.md), and
  ``kubernetes_io:node_pool_interruption_count`` has no counterpart at all.
- One Prometheus per cluster: no ``cluster`` label anywhere.
- The chart's ServiceMonitors scrape with ``honorLabels: true`` (prometheus-community/
  helm-charts, charts/kube-state-metrics/templates/servicemonitor.yaml and
  kube-prometheus-stack's kubelet ServiceMonitor), so each target's labels (``job``,
  ``instance``, ``endpoint``, ``service``, ``container``, ``namespace``, ``pod``) are added
  only where the series does not carry them.
- The training operator is scraped by a ServiceMonitor in its own namespace without
  honorLabels: its series get ``namespace="kubeflow"``; the job's namespace stays in
  ``job_namespace`` (kubeflow/training-operator v1.8.1, pkg/common/metrics.go).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

#: Target labels of kube-prometheus-stack's scrape jobs (release "kube-prometheus-stack").
KSM_TARGET = {
    "container": "kube-state-metrics",
    "endpoint": "http",
    "instance": "10.52.3.14:8080",
    "job": "kube-state-metrics",
    "namespace": "monitoring",
    "pod": "kube-prometheus-stack-kube-state-metrics-6c8d9f7b5d-2xk4q",
    "service": "kube-prometheus-stack-kube-state-metrics",
}
KUBELET_TARGET = {
    "endpoint": "https-metrics",
    "instance": "10.128.0.21:10250",
    "job": "kubelet",
    "metrics_path": "/metrics/cadvisor",
    "namespace": "kube-system",
    "service": "kube-prometheus-stack-kubelet",
}
#: kubeflow/training-operator v1.8.1 manifests/base/service.yaml: port "monitoring-port", 8080.
OPERATOR_TARGET = {
    "container": "training-operator",
    "endpoint": "monitoring-port",
    "instance": "10.52.1.9:8080",
    "job": "training-operator",
    "namespace": "kubeflow",
    "pod": "training-operator-7f9c5b8d64-qm2lp",
    "service": "training-operator",
}
_RENAMED = {
    "kubernetes_io:node_status_condition": "kube_node_status_condition",
    "kubernetes_io:pod_status_unschedulable": "kube_pod_status_unschedulable",
}
_DROPPED = ("kubernetes_io:node_pool_interruption_count",)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(.+)$")
_META = re.compile(r"^# (HELP|TYPE|UNIT) ([a-zA-Z_:][a-zA-Z0-9_:]*)(.*)$")


def rewrite(text: str) -> str:
    """``text`` (OpenMetrics with timestamps) as kube-prometheus-stack would hold it."""
    out: list[str] = []
    for line in text.splitlines():
        meta = _META.match(line)
        if meta:
            name = meta[2]
            if any(name.startswith(d) for d in _DROPPED):
                continue
            out.append(f"# {meta[1]} {_RENAMED.get(name, name)}{meta[3]}")
            continue
        sample = _SAMPLE.match(line)
        if sample is None:
            out.append(line)
            continue
        name, labels_text, rest = sample[1], sample[2] or "", sample[3]
        if name in _DROPPED:
            continue
        labels = dict(_LABEL.findall(labels_text))
        name, labels = _series(name, labels)
        body = ",".join(f'{k}="{v}"' for k, v in labels.items())
        out.append(f"{name}{{{body}}} {rest}")
    return "\n".join(out) + "\n"


def _series(name: str, labels: dict[str, str]) -> tuple[str, dict[str, str]]:
    labels.pop("cluster", None)
    labels.pop("cluster_name", None)
    if name == "kubernetes_io:node_status_condition":
        labels = {
            "node": labels["node_name"],
            "condition": labels["condition"],
            "status": labels["status"].lower(),
        }
    elif name == "kubernetes_io:pod_status_unschedulable":
        labels = {"namespace": labels["namespace_name"], "pod": labels["pod_name"]}
    name = _RENAMED.get(name, name)
    if name.startswith("training_operator_"):
        return name, {**labels, **OPERATOR_TARGET}  # no honorLabels: the target wins
    target: Mapping[str, str] = KUBELET_TARGET if name.startswith("container_") else KSM_TARGET
    return name, {**target, **labels}  # honorLabels: the series wins


# --- the bundled scenario -------------------------------------------------------------------

SOURCE = "pytorchjob-nccl-timeout"
TARGET = "pytorchjob-kube-prometheus-stack"


def write_scenario(root: Path, target: Path | None = None) -> Path:
    """``pytorchjob-nccl-timeout`` as a team on kube-prometheus-stack would dump it."""
    source, target = root / SOURCE, target or root / TARGET
    target.mkdir(exist_ok=True)
    for name in ("logs.json", "nodes.json", "pods.json"):
        shutil.copyfile(source / name, target / name)
    (target / "metrics.om").write_text(rewrite((source / "metrics.om").read_text()))
    spec = json.loads((source / "scenario.json").read_text())
    spec["description"] = (
        f"{SOURCE}'s cluster and failure, with its metrics as a self-run kube-prometheus-stack "
        "Prometheus stores them (kube_prometheus_stack.py): kube-state-metrics names, no "
        "cluster label, the chart's target labels, no GKE system metrics, and the training "
        "operator's counter labelled namespace=\"kubeflow\" by its ServiceMonitor, the job's "
        "namespace in job_namespace. Both PyTorchJobs' counter series sit in namespace "
        "kubeflow; only job_namespace tells bert-ddp's (nlp-train) from roberta-sweep-3's "
        "(nlp-eval). Node-pool interruptions are not recorded on this stack."
    )
    # What this stack cannot hold: the scenario says so, and the tests hold it to that.
    spec["expect"]["unavailable"] = ["interruptions"]
    (target / "scenario.json").write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")
    return target


if __name__ == "__main__":
    print(write_scenario(Path(__file__).resolve().parent))
