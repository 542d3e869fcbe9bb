"""A query template of the workflow, and how a diagnosis context fills it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from loopbreaker.diagnosis.metric_vocabulary import Vocabulary
from loopbreaker.model import Context, QueryLanguage, WorkloadKind

_PLACEHOLDER = re.compile(
    r"\{(project_id|location|cluster_name|namespace|workload_name|job_kind|framework|"
    r"issue_time|start_time|end_time)\}"
)


@dataclass(frozen=True)
class Template:
    id: str
    step: int
    language: QueryLanguage
    text: str
    description: str
    deprecated: bool = False
    #: The workload kinds the template serves; an id may have one variant per kind.
    kinds: frozenset[WorkloadKind] = frozenset(WorkloadKind)
    #: The metric names it reads (PromQL only; None for LQL and MQL).
    vocabulary: Vocabulary | None = None

    def serves(self, kind: WorkloadKind) -> bool:
        return kind in self.kinds

    @property
    def qualified_id(self) -> str:
        """The id, plus the kinds of a kind-specific variant and a kube-prometheus-stack
        form: ``restarts[kubeflow]``, ``nodes_not_ready[kube-prometheus-stack]``."""
        tags = []
        if self.kinds != frozenset(WorkloadKind):
            named = {_KUBEFLOW: "kubeflow", _JOBSET: "jobset"}
            tags.append(named.get(self.kinds) or ",".join(sorted(self.kinds)))
        if self.vocabulary is Vocabulary.KUBE_PROMETHEUS_STACK:
            tags.append(self.vocabulary.value)
        return f"{self.id}[{','.join(tags)}]" if tags else self.id


#: JobSet and the kinds that run as a JobSet of their own name (TrainJob).
_JOBSET = frozenset(k for k in WorkloadKind if k.jobset_backed)
_KUBEFLOW = frozenset(k for k in WorkloadKind if k.kubeflow)


def fill(text: str, values: Mapping[str, str | None]) -> str:
    """Replace known placeholders; an unknown value keeps its ``{placeholder}``."""

    def sub(match: re.Match[str]) -> str:
        value = values.get(match.group(1))
        return match.group(0) if value is None or value == "" else value

    return _PLACEHOLDER.sub(sub, text)


#: Clauses that pin the namespace: a line of LQL, or one PromQL matcher.
_NAMESPACE_CLAUSES = (
    re.compile(r"\nAND [^\n]*\{namespace\}[^\n]*"),
    re.compile(r', [a-z_]+="\{namespace\}"'),
    re.compile(r'[a-z_]+="\{namespace\}", '),
)


def scoped(text: str, context: Context) -> str:
    """The template for this context: without a namespace, its namespace clauses go (every
    namespace is searched and the evidence is scoped afterwards), and the rest is filled."""
    if not context.namespace:
        for clause in _NAMESPACE_CLAUSES:
            text = clause.sub("", text)
    return fill(text, context.placeholders())
