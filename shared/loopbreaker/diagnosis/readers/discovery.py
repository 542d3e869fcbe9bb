"""What a Prometheus holds: which vocabulary, which cluster label, once per run.

A kube-prometheus-stack Prometheus has kube-state-metrics' names and, being one per
cluster, no cluster label; Managed Prometheus has GKE's system metrics and ``cluster`` /
``cluster_name``; a Thanos or Mimir in front of many clusters has some label of its own.
Rather than guess, the server is asked, with the label endpoints of its HTTP API
(https://prometheus.io/docs/prometheus/latest/querying/api/#querying-label-values; Managed
Prometheus serves the same: cloud.google.com/monitoring/api/ref_v3/rest/v1/
projects.location.prometheus.api.v1.label/values):

1. ``/api/v1/label/__name__/values?match[]={__name__=~"<every name a step reads>"}``: the
   names present in the window pick the vocabulary per kind of evidence;
2. per exporter, ``/api/v1/labels?match[]=<one of its names>``: whether its series carry
   ``cluster``, ``cluster_name`` or neither;
3. with a cluster label, ``/api/v1/label/<label>/values?match[]=<name>``: a server that does
   not know the context's cluster gives no evidence of it, which is said, not read as
   "nothing happened".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from loopbreaker.diagnosis import metric_vocabulary as mv
from loopbreaker.diagnosis.queries import scoped
from loopbreaker.diagnosis.readers import QueryRejected
from loopbreaker.errors import SourceUnavailable
from loopbreaker.model import Context, EvidenceKind

#: ``--prometheus-cluster-label none``: the series carry no cluster label.
NO_CLUSTER_LABEL = "none"
#: Values named in a reason at most.
_SHOWN = 5


@runtime_checkable
class LabelLookup(Protocol):
    """The label endpoints of a Prometheus HTTP API."""

    def label_values(
        self, label: str, matches: tuple[str, ...], start: datetime, end: datetime
    ) -> tuple[str, ...]: ...

    def label_names(
        self, matches: tuple[str, ...], start: datetime, end: datetime
    ) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Choice:
    """How one kind of metric evidence is read from this server."""

    selector: str | None  # filled; None: nothing to read (see ``reason``)
    available: bool
    reason: str | None = None
    #: Further selectors of the kind whose names the server has (Reading.extra).
    extra: tuple[str, ...] = ()


@dataclass
class Discovery:
    """The server's vocabulary and cluster labels, found once and kept for the run."""

    names: frozenset[str]
    #: exporter -> the label its series name the cluster in (None: no such label).
    cluster_labels: dict[str, str | None] = field(default_factory=dict)
    #: exporter -> why its series are no evidence of the context's cluster.
    refusals: dict[str, str] = field(default_factory=dict)
    requests: int = 0

    def choice(self, kind: EvidenceKind, context: Context) -> Choice:
        kubeflow = context.workload_kind.kubeflow
        found = mv.choose(kind, self.names, kubeflow=kubeflow)
        if found is None:
            return Choice(None, False, mv.missing_reason(kind, "the server", kubeflow=kubeflow))
        reading, present = found
        refusal = self.refusals.get(reading.exporter)
        if refusal is not None:
            return Choice(None, False, refusal)
        if not present:
            names = " or ".join(reading.metrics)
            # The exporter is scraped and wrote none of these series in the window.
            return Choice(None, True, f"no {names} series in the window")
        label = self.cluster_labels.get(reading.exporter, reading.cluster_label)
        extra = tuple(
            scoped(x.selector(self.cluster_labels.get(x.exporter, x.cluster_label)), context)
            for x in reading.extra
            if self.names.intersection(x.metrics) and x.exporter not in self.refusals
        )
        return Choice(scoped(reading.selector(label), context), True, extra=extra)


def discover(
    reader: LabelLookup,
    context: Context,
    *,
    cluster_label: str | None = None,
    take: Callable[[int], bool] = lambda n: True,
) -> Discovery | None:
    """Ask ``reader`` what it holds for ``context``'s window; None when it cannot say (an
    API without the label endpoints, or the budget): the Managed Prometheus selectors run."""
    # The raw reads look back this far too; requests is imported only where it is used.
    from loopbreaker.diagnosis.readers.prometheus import RAW_LOOKBACK

    start, end = context.start_time - RAW_LOOKBACK, context.end_time
    wanted = mv.all_metric_names()
    if not take(1):
        return None
    try:
        names = reader.label_values(
            "__name__", ('{__name__=~"' + "|".join(wanted) + '"}',), start, end
        )
    except QueryRejected:
        return None
    found = Discovery(frozenset(names) & frozenset(wanted), requests=1)
    override = None if cluster_label in (None, "") else cluster_label
    for exporter, probe in _probes(found.names):
        label: str | None
        if override is not None:
            label = None if override == NO_CLUSTER_LABEL else override
        else:
            if not take(1):
                return None
            found.requests += 1
            present = set(reader.label_names((probe,), start, end))
            label = next((n for n in mv.CLUSTER_LABELS if n in present), None)
        found.cluster_labels[exporter] = label
        if label is None or not context.cluster:
            continue
        if not take(1):
            return None
        found.requests += 1
        values = reader.label_values(label, (probe,), start, end)
        if context.cluster not in values:
            shown = ", ".join(sorted(values)[:_SHOWN]) or "no value"
            more = f" and {len(values) - _SHOWN} more" if len(values) > _SHOWN else ""
            found.refusals[exporter] = (
                f"{probe} names {label}={shown}{more}, not {label}={context.cluster!r}: no "
                f"evidence of this cluster (--prometheus-cluster-label names another label)"
            )
    return found


def _probes(names: Iterable[str]) -> list[tuple[str, str]]:
    """One present name per exporter (its series carry the exporter's labels)."""
    probes: dict[str, str] = {}
    for name in sorted(names):
        probes.setdefault(mv.exporter(name), name)
    return sorted(probes.items())


def safely(
    reader: object,
    context: Context,
    cluster_label: str | None,
    take: Callable[[int], bool],
) -> tuple[Discovery | None, SourceUnavailable | None]:
    """:func:`discover` when ``reader`` has the label endpoints; a failure is returned (the
    caller marks the metric kinds unavailable), never raised."""
    if not isinstance(reader, LabelLookup):
        return None, None
    try:
        return discover(reader, context, cluster_label=cluster_label, take=take), None
    except SourceUnavailable as exc:
        return None, exc


def fallback(kind: EvidenceKind, context: Context, cluster_label: str | None) -> Choice:
    """The Managed Prometheus reading, for a reader that cannot be asked what it holds;
    ``--prometheus-cluster-label`` still decides the cluster label."""
    reading = mv.readings(kind, kubeflow=context.workload_kind.kubeflow)[0]
    label: str | None = reading.cluster_label
    if cluster_label:
        label = None if cluster_label == NO_CLUSTER_LABEL else cluster_label
    return Choice(scoped(reading.selector(label), context), True)
