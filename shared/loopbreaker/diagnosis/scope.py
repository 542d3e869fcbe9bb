"""What belongs to the question: evidence is kept only when it is of the context (pure).

A verdict rests only on evidence of the given project, cluster, namespace, workload and
kind. :func:`scope` drops everything that *positively* names something else: a log entry
whose resource labels name another cluster, an Event about another namespace or kind, a
series labelled with another cluster, a pod of another namespace or workload, a node
whose GKE name embeds another cluster. Unlabelled evidence stays (a ``kubectl`` dump
normally holds one cluster, and a self-managed cluster's node names follow no pattern).
One exception to the namespace: a pod that preempted one of the workload's pods (named by
an in-scope ``Preempted`` Event) is kept, with its ``kube_pod_info``, wherever it runs in
the cluster, since its PriorityClass is part of the evidence.

:func:`resolve` answers, before any verdict, whether the evidence speaks of the workload
at all, and which kind and namespace it is; it raises :class:`NoEvidence` when it does not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from loopbreaker.errors import InvalidInput
from loopbreaker.model import (
    Context,
    Evidence,
    NodeInfo,
    PodInfo,
    Series,
    Signal,
    SignalKind,
)
from loopbreaker.model import WorkloadKind as Kind
from loopbreaker.timeutil import format_rfc3339

CLUSTER_LABELS = ("cluster", "cluster_name")
NAMESPACE_LABELS = ("namespace", "namespace_name")
PROJECT_LABELS = ("project_id",)
#: The restart counters name their workload by these labels.
WORKLOAD_LABELS = {"jobset_name": Kind.JOBSET}
#: GKE node and VM names: ``gke-<cluster>-<pool>-<8 hex>-<4 chars>``, cluster and pool
#: possibly shortened to keep the name within Compute Engine's limit.
_GKE_NODE = re.compile(r"^gke-(?P<prefix>[a-z0-9-]+)-[0-9a-f]{8}-[a-z0-9]{4}$")
#: GKE shortens the cluster part only of long names; a shorter cluster appears whole.
_SHORTENED_AT_LEAST = 14


class NoEvidence(InvalidInput):
    """Every source was read and none speaks of the workload (or cluster) asked about."""


@dataclass(frozen=True, order=True)
class Seen:
    """A workload the evidence mentions, with as much of its identity as it gives."""

    name: str
    kind: Kind | None = None
    namespace: str | None = None
    cluster: str | None = None

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind.api_kind + ' ' if self.kind else ''}{where}{self.name}"


@dataclass
class Survey:
    """What the unscoped evidence names: clusters and workloads."""

    clusters: set[str] = field(default_factory=set)
    workloads: set[Seen] = field(default_factory=set)


# --- scoping --------------------------------------------------------------------------


def _label(labels: Mapping[str, str], names: Iterable[str]) -> str | None:
    return next((labels[n] for n in names if labels.get(n)), None)


def series_in_scope(series: Series, ctx: Context, *, any_namespace: bool = False) -> bool:
    labels = series.labels
    cluster = _label(labels, CLUSTER_LABELS)
    if cluster is not None and ctx.cluster and cluster != ctx.cluster:
        return False
    project = _label(labels, PROJECT_LABELS)
    if project is not None and ctx.project and project != ctx.project:
        return False
    if any_namespace:
        return True
    namespace = series_namespace(labels)
    return namespace is None or ctx.namespace is None or namespace == ctx.namespace


def series_namespace(labels: Mapping[str, str]) -> str | None:
    """The namespace a series is about. The training operator's series name the job's in
    ``job_namespace``; their ``namespace`` is where the operator runs when a ServiceMonitor
    scraped them (kube-prometheus-stack), so ``job_namespace`` wins."""
    return labels.get("job_namespace") or _label(labels, NAMESPACE_LABELS)


@dataclass(frozen=True)
class Preemptors:
    """The pods in-scope ``Preempted`` Events name as preemptors (``namespace/name``, uid)."""

    names: frozenset[str] = frozenset()
    uids: frozenset[str] = frozenset()

    @classmethod
    def of(cls, signals: Iterable[Signal]) -> Preemptors:
        found = [s for s in signals if s.kind is SignalKind.PRIORITY_PREEMPTED]
        return cls(
            frozenset(s.related_pod for s in found if s.related_pod),
            frozenset(s.related_uid for s in found if s.related_uid),
        )

    def pod(self, pod: PodInfo) -> bool:
        return (pod.uid is not None and pod.uid in self.uids) or (
            f"{pod.namespace}/{pod.name}" in self.names
        )

    def series(self, series: Series) -> bool:
        labels = series.labels
        named = f"{_label(labels, NAMESPACE_LABELS)}/{labels.get('pod')}"
        return labels.get("uid") in self.uids or named in self.names


def node_cluster(name: str, clusters: Iterable[str]) -> str | None:
    """The cluster a GKE node (or VM) name embeds, among the ``clusters`` known by name."""
    match = _GKE_NODE.match(name)
    if match is None:
        return None
    prefix = match["prefix"] + "-"
    best = None
    for cluster in clusters:
        if prefix.startswith(cluster + "-") and (best is None or len(cluster) > len(best)):
            best = cluster
    return best


def names_other_cluster(name: str, ctx: Context, others: Iterable[str]) -> bool:
    """True when a GKE node name positively belongs to another cluster than the context's.

    Either it embeds another cluster the evidence names (and not ours, more specifically),
    or it is GKE-shaped and cannot be ours even shortened: the cluster part of a node name
    is the cluster name whole, or (long names only) its first characters.
    """
    match = _GKE_NODE.match(name)
    if match is None or not ctx.cluster:  # an unknown cluster: nothing is positively another
        return False
    ours = f"gke-{ctx.cluster}-"
    if name.startswith(ours):
        return False
    if node_cluster(name, others) not in (None, ctx.cluster):
        return True
    if len(ctx.cluster) <= _SHORTENED_AT_LEAST:
        return True
    head = ctx.cluster[:_SHORTENED_AT_LEAST]
    return not name.startswith(f"gke-{head}")


def signal_in_scope(sig: Signal, ctx: Context, other_clusters: Iterable[str]) -> bool:
    if sig.cluster is not None and ctx.cluster and sig.cluster != ctx.cluster:
        return False
    if sig.project is not None and ctx.project and sig.project != ctx.project:
        return False
    if ctx.namespace and sig.namespace is not None and sig.namespace != ctx.namespace:
        return False
    if sig.workload == ctx.workload and not of_kind(_kind(sig.workload_kind), ctx.workload_kind):
        return False
    for name in (sig.node, sig.instance):
        if name and names_other_cluster(name, ctx, other_clusters):
            return False
    return True


def pod_in_scope(
    pod: PodInfo, ctx: Context, other_clusters: Iterable[str], *, any_namespace: bool = False
) -> bool:
    if not any_namespace and ctx.namespace and pod.namespace and pod.namespace != ctx.namespace:
        return False
    if pod.workload == ctx.workload and not of_kind(_kind(pod.workload_kind), ctx.workload_kind):
        return False
    return not (pod.node and names_other_cluster(pod.node, ctx, other_clusters))


def node_in_scope(node: NodeInfo, ctx: Context, other_clusters: Iterable[str]) -> bool:
    if node.project and ctx.project and node.project != ctx.project:
        return False
    return not names_other_cluster(node.name, ctx, other_clusters)


def of_kind(found: Kind | None, wanted: Kind) -> bool:
    """Evidence naming ``found`` (None: no kind) may be of a ``wanted`` workload: a
    TrainJob's evidence is also its JobSet's, which has the TrainJob's name."""
    return found in (None, wanted) or (wanted is Kind.TRAINJOB and found is Kind.JOBSET)


def _as_trainjob(ctx: Context, ev: Evidence) -> Evidence:
    """A TrainJob's JobSet's signals and pods, relabelled as the TrainJob's: the steps
    match the context's kind, and the JobSet of the TrainJob's name is the TrainJob's."""
    if ctx.workload_kind is not Kind.TRAINJOB:
        return ev
    jobset = Kind.JOBSET.value

    def owned(workload: str | None, kind: str | None) -> bool:
        return workload == ctx.workload and kind == jobset

    trainjob = Kind.TRAINJOB.value
    signals = ev.signals and tuple(
        replace(s, workload_kind=trainjob) if owned(s.workload, s.workload_kind) else s
        for s in ev.signals
    )
    pods = ev.pods and tuple(
        replace(p, workload_kind=trainjob) if owned(p.workload, p.workload_kind) else p
        for p in ev.pods
    )
    return replace(ev, signals=signals, pods=pods)


def scope(ctx: Context, ev: Evidence) -> Evidence:
    """The evidence with everything that positively belongs elsewhere dropped."""
    return _as_trainjob(ctx, _scope(ctx, ev))


def _scope(ctx: Context, ev: Evidence) -> Evidence:
    others = survey(ev).clusters - {ctx.cluster}

    def series(
        values: tuple[Series, ...] | None, *, any_namespace: bool = False
    ) -> tuple[Series, ...] | None:
        if values is None:
            return None
        return tuple(s for s in values if series_in_scope(s, ctx, any_namespace=any_namespace))

    signals = (
        None
        if ev.signals is None
        else tuple(s for s in ev.signals if signal_in_scope(s, ctx, others))
    )
    preemptors = Preemptors.of(signals or ())
    pod_info = (
        None
        if ev.pod_info is None
        else tuple(
            s
            for s in ev.pod_info
            if series_in_scope(s, ctx)
            or (series_in_scope(s, ctx, any_namespace=True) and preemptors.series(s))
        )
    )
    pods = (
        None
        if ev.pods is None
        else tuple(
            p
            for p in ev.pods
            if pod_in_scope(p, ctx, others)
            or (preemptors.pod(p) and pod_in_scope(p, ctx, others, any_namespace=True))
        )
    )
    return replace(
        ev,
        restarts=series(ev.restarts),
        # Nodes belong to no namespace: a node series' namespace label is its exporter's
        # (kube-prometheus-stack: kube-state-metrics' target namespace="monitoring").
        interruptions=series(ev.interruptions, any_namespace=True),
        node_conditions=series(ev.node_conditions, any_namespace=True),
        # A GPU's series carry the exporter's namespace, or the pod's that used the GPU.
        gpu_xids=series(ev.gpu_xids, any_namespace=True),
        pod_phases=series(ev.pod_phases),
        unschedulable=series(ev.unschedulable),
        pod_reasons=series(ev.pod_reasons),
        memory=series(ev.memory),
        pod_info=pod_info,
        signals=signals,
        nodes=None
        if ev.nodes is None
        else tuple(n for n in ev.nodes if node_in_scope(n, ctx, others)),
        pods=pods,
    )


# --- what the evidence names ------------------------------------------------------------


def _kind(value: str | None) -> Kind | None:
    return next((k for k in Kind if k.value == value), None)


def survey(ev: Evidence) -> Survey:
    found = Survey()
    for s in _all_series(ev):
        cluster = _label(s.labels, CLUSTER_LABELS)
        if cluster:
            found.clusters.add(cluster)
        for label, kind in WORKLOAD_LABELS.items():
            if s.labels.get(label):
                namespace = _label(s.labels, NAMESPACE_LABELS)
                found.workloads.add(Seen(s.labels[label], kind, namespace, cluster))
    for sig in ev.signals or ():
        if sig.cluster:
            found.clusters.add(sig.cluster)
        if sig.workload:
            found.workloads.add(
                Seen(sig.workload, _kind(sig.workload_kind), sig.namespace, sig.cluster)
            )
    for pod in ev.pods or ():
        if pod.workload:
            found.workloads.add(Seen(pod.workload, _kind(pod.workload_kind), pod.namespace))
    for jobset in ev.jobsets or ():
        found.workloads.add(Seen(jobset.name, Kind.JOBSET, jobset.namespace))
        # The Trainer's runtime makes each TrainJob's JobSet, of its name, owned by it.
        if jobset.owner_kind == Kind.TRAINJOB.api_kind and jobset.owner_name == jobset.name:
            found.workloads.add(Seen(jobset.name, Kind.TRAINJOB, jobset.namespace))
    return found


def _series_groups(ev: Evidence) -> tuple[tuple[Series, ...] | None, ...]:
    return (
        ev.restarts,
        ev.interruptions,
        ev.node_conditions,
        ev.pod_phases,
        ev.unschedulable,
        ev.pod_reasons,
        ev.memory,
        ev.pod_info,
    )


def _all_series(ev: Evidence) -> list[Series]:
    return [s for group in _series_groups(ev) for s in group or ()]


def _data(ev: Evidence) -> int:
    """How many items of evidence there are at all."""
    groups = (ev.signals, ev.nodes, ev.pods)
    return len(_all_series(ev)) + sum(len(g) for g in groups if g)


def failed_sources(ev: Evidence) -> list[str]:
    """Sources that were asked and could not be read (not files that are simply absent)."""
    return sorted(
        {
            f"{status.source}: {status.reason or 'unavailable'}"
            for status in ev.sources.values()
            if not status.available
            and status.source != "none"
            and not (status.source.startswith("file:") and _absent(status.reason))
        }
    )


def _absent(reason: str | None) -> bool:
    return reason is not None and ("not found" in reason or reason.startswith("no "))


def time_span(ev: Evidence) -> tuple[datetime, datetime] | None:
    """The first and last moment of the timed evidence (series samples, log entries)."""
    first: datetime | None = None
    last: datetime | None = None
    moments = [x.at for s in _all_series(ev) for x in s.samples[:1] + s.samples[-1:]]
    moments += [sig.timestamp for sig in ev.signals or () if sig.timestamp is not None]
    for moment in moments:
        first = moment if first is None or moment < first else first
        last = moment if last is None or moment > last else last
    return (first, last) if first is not None and last is not None else None


def _overlaps(span: tuple[datetime, datetime], ctx: Context) -> bool:
    return span[0] <= ctx.end_time and span[1] >= ctx.start_time


def _empty(available: bool) -> str:
    return "no data" if available else "unavailable"


def _nothing_read(ev: Evidence) -> str:
    lines = sorted(
        {
            f"{status.source}: {status.reason or _empty(status.available)}"
            for status in ev.sources.values()
        }
    )
    return "; ".join(lines) or "no source"


@dataclass(frozen=True)
class Resolved:
    context: Context
    #: How the kind (and namespace) were chosen, for the text output; None when given.
    note: str | None = None


def resolve(ctx: Context, ev: Evidence, *, kind_given: bool) -> Resolved:
    """Check the evidence speaks of the context; detect the kind and namespace.

    Raises :class:`NoEvidence` when no source yielded anything, when every source was read
    and none names the cluster or the workload, when two kinds share the workload's name
    (without ``kind_given``), or when the workload is in several namespaces and none was
    given. A source that could not be read makes absence inconclusive: the diagnosis goes
    on, partial, as the engine reports it.
    """
    if _data(ev) == 0:
        raise NoEvidence(f"no source yielded any data ({_nothing_read(ev)})")
    seen = survey(ev)
    conclusive = not failed_sources(ev)
    span = time_span(ev)
    if conclusive and span and not _overlaps(span, ctx):
        raise NoEvidence(
            f"no evidence inside the window {format_rfc3339(ctx.start_time)} to "
            f"{format_rfc3339(ctx.end_time)}; the evidence covers {format_rfc3339(span[0])} "
            f"to {format_rfc3339(span[1])} (check --issue-time)"
        )
    if conclusive and seen.clusters and ctx.cluster not in seen.clusters:
        raise NoEvidence(
            f"no cluster {ctx.cluster} in the evidence; seen: {', '.join(sorted(seen.clusters))}"
        )
    here = [w for w in seen.workloads if w.cluster in (None, ctx.cluster)]
    named = [
        w
        for w in here
        if w.name == ctx.workload
        and (ctx.namespace is None or w.namespace in (None, ctx.namespace))
    ]
    named = _fold_owned_jobsets(named)
    kinds = {w.kind for w in named if w.kind is not None}
    note: list[str] = []
    if kind_given:
        # A TrainJob's JobSet is a JobSet too: it may be diagnosed as one.
        jobset = ctx.workload_kind is Kind.JOBSET
        matching = [
            w
            for w in named
            if of_kind(w.kind, ctx.workload_kind) or (jobset and w.kind is Kind.TRAINJOB)
        ]
        if ctx.workload_kind is Kind.TRAINJOB and matching and kinds == {Kind.JOBSET}:
            note.append(
                f"no TrainJob object read; {ctx.workload} taken as the TrainJob that runs "
                "as the JobSet of its name"
            )
        if named and not matching and conclusive:
            raise NoEvidence(
                f"no {ctx.workload_kind.api_kind} {ctx.workload} in cluster {ctx.cluster}; "
                f"seen: {_listing(named)}"
            )
        named = matching
    elif len(kinds) > 1:
        raise NoEvidence(
            f"{ctx.workload} names {' and '.join(sorted(k.api_kind for k in kinds))} "
            "workloads; pass --workload-kind"
        )
    elif kinds:
        (kind,) = kinds
        ctx = replace(ctx, workload_kind=kind)
        note.append(f"workload kind {kind.api_kind} detected from the evidence")
    if not named:
        if conclusive:
            what = ctx.workload_kind.api_kind if kind_given else "workload"
            where = f" in namespace {ctx.namespace}" if ctx.namespace else ""
            raise NoEvidence(
                f"no {what} {ctx.workload} in cluster {ctx.cluster}{where}; "
                f"seen: {_listing(here) or 'no workload at all'}"
            )
        return Resolved(ctx, "; ".join(note) or None)
    if not kinds and not kind_given:
        note.append(
            f"workload kind not named by the evidence; assumed {ctx.workload_kind.api_kind}"
        )
    namespaces = {w.namespace for w in named if w.namespace}
    if ctx.namespace is None and len(namespaces) > 1:
        raise NoEvidence(
            f"{ctx.workload} exists in namespaces {', '.join(sorted(namespaces))}; pass --namespace"
        )
    if ctx.namespace is None and namespaces:
        (namespace,) = namespaces
        ctx = replace(ctx, namespace=namespace)
        note.append(f"namespace {namespace} detected from the evidence")
    return Resolved(ctx, "; ".join(note) or None)


def _fold_owned_jobsets(named: list[Seen]) -> list[Seen]:
    """A JobSet of a TrainJob's name and namespace is that TrainJob's (the runtime creates
    it so): one workload, the TrainJob, not two kinds sharing a name."""
    spaces = {w.namespace for w in named if w.kind is Kind.TRAINJOB}
    if not spaces:
        return named

    def owned(w: Seen) -> bool:
        return w.kind is Kind.JOBSET and (None in spaces or w.namespace in spaces | {None})

    return [replace(w, kind=Kind.TRAINJOB) if owned(w) else w for w in named]


def _listing(workloads: Iterable[Seen]) -> str:
    names = sorted({w.describe() for w in workloads})
    more = f" (+{len(names) - 8} more)" if len(names) > 8 else ""
    return ", ".join(names[:8]) + more
