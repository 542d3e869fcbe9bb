"""The kube-prometheus-stack form of each PromQL template.

A self-run kube-prometheus-stack has kube-state-metrics and cAdvisor but not GKE's system
metrics, and one Prometheus per cluster has no cluster label (metric_vocabulary). Each
Managed Prometheus template is rewritten by the same rules the live reader applies:

- ``kubernetes_io:node_status_condition{node_name, status="False"}`` becomes
  ``kube_node_status_condition{node, status="false"}`` (kube-state-metrics v2.13.0,
  docs/metrics/cluster/node-metrics.md; it has no node-pool label);
- ``kubernetes_io:pod_status_unschedulable{namespace_name, pod_name}`` becomes
  ``kube_pod_status_unschedulable{namespace, pod}`` (docs/metrics/workload/pod-metrics.md);
- the cluster matcher goes;
- the node-pool interruption count has no counterpart, so its templates have no form here.
"""

from __future__ import annotations

import re
from dataclasses import replace

from loopbreaker.diagnosis import metric_vocabulary as mv
from loopbreaker.diagnosis.queries.templates import Template
from loopbreaker.model import QueryLanguage

_CLUSTER = r'(?:cluster|cluster_name)="\{cluster_name\}"'
_CLUSTER_MATCHERS = (
    re.compile(_CLUSTER + r",\s*"),
    re.compile(r",\s*" + _CLUSTER),
    re.compile(_CLUSTER),
)
_BY_CLUSTER = (
    re.compile(r",\s*cluster(?:_name)?\b(?=[^(]*\))"),
    re.compile(r"\bcluster(?:_name)?,\s*"),
)
_STATUS = re.compile(r'\bstatus(=~|!=|=)"([^"]*)"')
_RENAMES = {
    mv.GKE_NODE_CONDITION_METRIC: (
        mv.KSM_NODE_CONDITION_METRIC,
        ((r"\bnode_name\b", "node"), (r",\s*node_pool_name\b", ""), (r"\bnode_pool_name,\s*", "")),
    ),
    mv.GKE_UNSCHEDULABLE_METRIC: (
        mv.KSM_UNSCHEDULABLE_METRIC,
        ((r"\bpod_name\b", "pod"), (r"\bnamespace_name\b", "namespace")),
    ),
}
_NO_COUNTERPART = (mv.GKE_INTERRUPTIONS_METRIC,)


def translate(text: str) -> str | None:
    """``text`` in kube-prometheus-stack's names and labels; None when it has no form."""
    if any(name in text for name in _NO_COUNTERPART):
        return None
    for gke, (ksm, renames) in _RENAMES.items():
        if gke not in text:
            continue
        text = text.replace(gke, ksm)
        for pattern, new in renames:
            text = re.sub(pattern, new, text)
        if ksm == mv.KSM_NODE_CONDITION_METRIC:
            # kube-state-metrics writes the statuses in lower case.
            text = _STATUS.sub(lambda m: f'status{m[1]}"{m[2].lower()}"', text)
    for clause in (*_CLUSTER_MATCHERS, *_BY_CLUSTER):
        text = clause.sub("", text)
    return text


def with_vocabularies(templates: tuple[Template, ...]) -> tuple[Template, ...]:
    """``templates`` with each PromQL one marked Managed Prometheus, followed by its
    kube-prometheus-stack form wherever that differs."""
    managed: list[Template] = []
    variants: list[Template] = []
    for template in templates:
        if template.language is not QueryLanguage.PROMQL:
            managed.append(template)
            continue
        text = translate(template.text)
        if text == template.text:
            managed.append(template)  # the same on both
            continue
        managed.append(replace(template, vocabulary=mv.Vocabulary.MANAGED))
        if text is not None:
            variants.append(
                replace(
                    template,
                    text=text,
                    vocabulary=mv.Vocabulary.KUBE_PROMETHEUS_STACK,
                    description=template.description
                    + " kube-prometheus-stack form: kube-state-metrics names, no cluster "
                    "label (add yours on a multi-cluster server).",
                )
            )
    return (*managed, *variants)
