"""Where each kind of evidence comes from, and graceful degradation when a source fails.

Per kind of evidence, first match wins:

    metrics (restarts, interruptions, node_conditions, pod_phases, unschedulable,
             pod_reasons, memory, pod_info)
        --prometheus-url URL            explicit: wins over metrics.om
        --managed-prometheus on         explicit: Managed Prometheus of --project
        metrics.om in --telemetry DIR
        --project (managed-prometheus auto)
    logs
        --live-logs on                  explicit: Cloud Logging of --project
        logs.json / *.jsonl in DIR
        --project (live-logs auto)
    nodes, pods (each on its own)
        --kubeconfig PATH               explicit
        --live-kube on                  explicit: GKE API of --project/--location/--cluster
        nodes.json / pods.json in DIR
        --project and --location (live-kube auto)

``--offline`` turns every ``auto`` into ``off``. Nodes read live get their physical host
from the node label, else Compute Engine ``physicalHost``, else Cloud Monitoring metadata.

Degradation (the workflow's 403 rule): a 401/403, a network error or a timeout marks the
kinds that source would have provided unavailable, with the reason; an unreachable source is
asked once, never again in the same run; nothing here raises SourceUnavailable. Only bad
input (an unreadable telemetry file, a kubeconfig that does not exist, a live source
requested without the context it needs) raises, as InvalidInput.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from loopbreaker.diagnosis import maintenance
from loopbreaker.diagnosis.jobsets import restart_series_seen
from loopbreaker.diagnosis.metric_vocabulary import canonical
from loopbreaker.diagnosis.readers import discovery
from loopbreaker.diagnosis.readers.builders import Builder, cluster_label
from loopbreaker.diagnosis.readers.discovery import Discovery
from loopbreaker.diagnosis.readers.flags import add_flags, options_from_args
from loopbreaker.diagnosis.readers.options import (
    DEFAULT_MAX_LOG_ENTRIES,
    DEFAULT_SOURCE_TIMEOUT,
    METRIC_ATTR,
    METRIC_KINDS,
    OPTIONAL_KINDS,
    Mode,
    Origin,
    Readers,
    SourceOptions,
)
from loopbreaker.errors import ConfigError, SourceUnavailable
from loopbreaker.model import (
    Context,
    Evidence,
    EvidenceKind,
    NodeInfo,
    Signal,
    SourceStatus,
)
from loopbreaker.model.evidence import NodeMaintenance

if TYPE_CHECKING:
    import argparse

    from loopbreaker.diagnosis.evidence import QueryBudget
    from loopbreaker.diagnosis.readers import (
        HostLookup,
        LogReader,
    )
    from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials

# --- planning -------------------------------------------------------------------------


def plan(
    context: Context, options: SourceOptions, files: Evidence | None
) -> dict[EvidenceKind, Origin]:
    """Decide the origin of each kind of evidence. Raises ConfigError on impossible asks."""

    def has_file(kind: EvidenceKind) -> bool:
        status = files.sources.get(kind) if files else None
        return bool(status and status.available)

    project = context.project
    if options.managed_prometheus is Mode.ON and not options.prometheus_url and not project:
        raise ConfigError("--managed-prometheus on needs --project")
    if options.live_logs is Mode.ON and not project:
        raise ConfigError("--live-logs on needs --project")
    if (
        options.live_kube is Mode.ON
        and not options.kubeconfig
        and not (project and context.location)
    ):
        raise ConfigError("--live-kube on needs --project and --location (or give --kubeconfig)")

    out: dict[EvidenceKind, Origin] = {}
    for kind in METRIC_KINDS:
        if options.prometheus_url:
            out[kind] = Origin.PROMETHEUS
        elif options.managed_prometheus is Mode.ON:
            out[kind] = Origin.MANAGED_PROMETHEUS
        elif has_file(kind):
            out[kind] = Origin.FILE
        elif kind in OPTIONAL_KINDS and any(has_file(k) for k in METRIC_KINDS):
            # The metrics came from a file without it: the cluster's dump holds none.
            out[kind] = Origin.NONE
        elif options.managed_prometheus is Mode.AUTO and project:
            out[kind] = Origin.MANAGED_PROMETHEUS
        else:
            out[kind] = Origin.NONE

    if options.live_logs is Mode.ON:
        out[EvidenceKind.LOGS] = Origin.CLOUD_LOGGING
    elif has_file(EvidenceKind.LOGS):
        out[EvidenceKind.LOGS] = Origin.FILE
    elif options.live_logs is Mode.AUTO and project:
        out[EvidenceKind.LOGS] = Origin.CLOUD_LOGGING
    else:
        out[EvidenceKind.LOGS] = Origin.NONE

    for kind in (EvidenceKind.NODES, EvidenceKind.PODS):
        if options.kubeconfig:
            out[kind] = Origin.KUBECONFIG
        elif options.live_kube is Mode.ON:
            out[kind] = Origin.GKE
        elif has_file(kind):
            out[kind] = Origin.FILE
        elif options.live_kube is Mode.AUTO and project and context.location:
            out[kind] = Origin.GKE
        else:
            out[kind] = Origin.NONE
    return out


# --- gathering ------------------------------------------------------------------------


def gather(
    context: Context,
    options: SourceOptions | None = None,
    *,
    readers: Readers | None = None,
    credentials: GoogleCredentials | None = None,
    budget: QueryBudget | None = None,
) -> Evidence:
    """Collect evidence from files and live readers; never raises SourceUnavailable."""
    options = options or SourceOptions()
    files = None
    if options.telemetry_dir is not None:
        from loopbreaker.diagnosis.telemetry import load_directory

        files = load_directory(options.telemetry_dir)
    origins = plan(context, options, files)
    builder = Builder(context, options, readers or Readers(), credentials)
    values: dict[str, Any] = {}
    sources: dict[EvidenceKind, SourceStatus] = {}
    rejected: list[tuple[str, str]] = list(files.rejected_entries) if files else []

    def file_status(kind: EvidenceKind) -> SourceStatus | None:
        return files.sources.get(kind) if files else None

    explicit = _explicit_kinds(options)

    def failed(kind: EvidenceKind, source: str, reason: str) -> None:
        previous = file_status(kind)
        # A live reader that stood in for a missing file: say both were tried.
        if kind not in explicit and previous and not previous.available and previous.reason:
            reason = f"{reason} (and {previous.source}: {previous.reason})"
        sources[kind] = SourceStatus(source, False, reason)

    # Files first: they cost nothing.
    for kind, origin in origins.items():
        if origin is Origin.FILE and files is not None:
            sources[kind] = files.sources[kind]
            attr = (
                METRIC_ATTR.get(kind)
                or {
                    EvidenceKind.LOGS: "signals",
                    EvidenceKind.NODES: "nodes",
                    EvidenceKind.PODS: "pods",
                }[kind]
            )
            values[attr] = getattr(files, attr)
        elif origin is Origin.NONE:
            status = file_status(kind)
            sources[kind] = (
                status
                if status is not None
                else SourceStatus(
                    "none", False, "no source: give --telemetry DIR, a live source or --project"
                )
            )

    # Metrics: one reader for every metric kind; an unreachable one is asked once.
    metric_kinds = [
        k for k in METRIC_KINDS if origins[k] in (Origin.PROMETHEUS, Origin.MANAGED_PROMETHEUS)
    ]
    if metric_kinds:
        reader, label = builder.metrics(origins[metric_kinds[0]])
        stop: SourceUnavailable | None = None
        found: Discovery | None = None
        if reader is not None:
            found, stop = discovery.safely(
                reader,
                context,
                options.prometheus_cluster_label,
                budget.take if budget is not None else (lambda n: True),
            )
        for kind in metric_kinds:
            if reader is None:
                failed(kind, label, "not configured")
                continue
            if stop is not None:
                failed(kind, reader.source, stop.reason)
                continue
            choice = (
                found.choice(kind, context)
                if found is not None
                else discovery.fallback(kind, context, options.prometheus_cluster_label)
            )
            if choice.selector is None:
                if choice.available:
                    values[METRIC_ATTR[kind]] = ()
                    sources[kind] = SourceStatus(reader.source, True, choice.reason)
                else:
                    failed(kind, reader.source, choice.reason or "no series")
                continue
            if budget is not None and not budget.take():
                failed(kind, reader.source, "query budget exhausted")
                continue
            selectors = (choice.selector, *choice.extra)
            if budget is not None and len(selectors) > 1 and not budget.take(len(selectors) - 1):
                selectors = selectors[:1]
            try:
                series = tuple(
                    s
                    for text in selectors
                    for s in reader.raw_series(text, context.start_time, context.end_time)
                )
            except SourceUnavailable as exc:
                if _unreachable(exc):
                    stop = exc
                failed(kind, reader.source, exc.reason)
                continue
            values[METRIC_ATTR[kind]] = tuple(canonical(s) for s in series)
            sources[kind] = SourceStatus(reader.source, True, choice.reason)

    # Logs.
    if origins[EvidenceKind.LOGS] is Origin.CLOUD_LOGGING:
        log_reader = builder.logs()
        if log_reader is None:
            failed(EvidenceKind.LOGS, "cloud-logging", "not configured")
        elif budget is not None and not budget.take(_log_query_count(log_reader, context)):
            failed(EvidenceKind.LOGS, log_reader.source, "query budget exhausted")
        else:
            try:
                result = log_reader.read(context)
            except SourceUnavailable as exc:
                failed(EvidenceKind.LOGS, log_reader.source, exc.reason)
            else:
                values["signals"] = result.signals
                rejected.extend(result.rejected)
                sources[EvidenceKind.LOGS] = SourceStatus(
                    log_reader.source, True, _log_note(result.failures, result.truncated)
                )

    # Kubernetes objects.
    live_cluster = [
        k
        for k in (EvidenceKind.NODES, EvidenceKind.PODS)
        if origins[k] in (Origin.KUBECONFIG, Origin.GKE)
    ]
    nodes_live = False
    if live_cluster:
        try:
            cluster = builder.cluster(origins[live_cluster[0]])
        except SourceUnavailable as exc:
            for kind in live_cluster:
                failed(kind, cluster_label(origins[kind], context), exc.reason)
        else:
            stop = None
            for kind in live_cluster:
                if stop is not None:
                    failed(kind, cluster.source, stop.reason)
                    continue
                try:
                    if kind is EvidenceKind.NODES:
                        values["nodes"] = cluster.nodes()
                        nodes_live = True
                    else:
                        values["pods"] = cluster.pods(context.namespace)
                except SourceUnavailable as exc:
                    if _unreachable(exc):
                        stop = exc
                    failed(kind, cluster.source, exc.reason)
                    continue
                sources[kind] = SourceStatus(cluster.source, True)
            list_jobsets = getattr(cluster, "jobsets", None)  # KubernetesReader has it
            if (
                EvidenceKind.PODS in live_cluster
                and stop is None
                and list_jobsets is not None
                and context.workload_kind.jobset_backed
            ):
                # The JobSet's own restart counters, read where its pods are; a cluster
                # that serves no JobSet resource records nothing, as no jobsets.json does.
                try:
                    jobsets = list_jobsets(context.namespace)
                    if jobsets is not None:
                        values["jobsets"] = jobsets
                        sources[EvidenceKind.JOBSETS] = SourceStatus(cluster.source, True)
                except SourceUnavailable as exc:
                    sources[EvidenceKind.JOBSETS] = SourceStatus(cluster.source, False, exc.reason)
            list_trainjobs = getattr(cluster, "trainjobs", None)  # KubernetesReader has it
            if (
                EvidenceKind.PODS in live_cluster
                and stop is None
                and list_trainjobs is not None
                and context.workload_kind.jobset_backed
                and "signals" in values
            ):
                # The TrainJob's Failed condition joins the signals the logs gave; without
                # logs it stays unread, as no signal source means no claim about them.
                with contextlib.suppress(SourceUnavailable):
                    values["signals"] = tuple(values["signals"]) + tuple(
                        list_trainjobs(context.namespace)
                    )

    # Physical hosts of nodes whose labels do not name one.
    nodes: tuple[NodeInfo, ...] | None = values.get("nodes")
    wants_hosts = options.host_lookup is Mode.ON or (
        options.host_lookup is Mode.AUTO and nodes_live
    )
    if nodes and wants_hosts and any(not n.physical_host for n in nodes):
        resolved, note = resolve_hosts(
            nodes,
            builder.host_lookups(),
            priority=_interesting_nodes(values.get("pods"), values.get("signals")),
        )
        values["nodes"] = resolved
        status = sources[EvidenceKind.NODES]
        sources[EvidenceKind.NODES] = replace(
            status, reason="; ".join(r for r in (status.reason, note) if r) or None
        )

    for kind in OPTIONAL_KINDS:
        status = sources.get(kind)
        if status is not None and not status.available:
            # No dcgm-exporter is no gap: the kind counts only where a source holds it.
            del sources[kind]
    base = files or Evidence()
    if EvidenceKind.JOBSETS not in sources and file_status(EvidenceKind.JOBSETS) is not None:
        sources[EvidenceKind.JOBSETS] = file_status(EvidenceKind.JOBSETS)  # type: ignore[assignment]
        values["jobsets"] = base.jobsets
    return replace(
        base,
        jobsets=values.get("jobsets"),
        # The restart-attempt labels of log entries come with the logs they were read from.
        log_restart_attempts=base.log_restart_attempts
        if origins[EvidenceKind.LOGS] is Origin.FILE
        else None,
        checkpoints=base.checkpoints if origins[EvidenceKind.LOGS] is Origin.FILE else None,
        restart_series_seen=restart_series_seen(values.get("restarts")),
        restarts=values.get("restarts"),
        interruptions=values.get("interruptions"),
        node_conditions=values.get("node_conditions"),
        pod_phases=values.get("pod_phases"),
        unschedulable=values.get("unschedulable"),
        pod_reasons=values.get("pod_reasons"),
        memory=values.get("memory"),
        pod_info=values.get("pod_info"),
        gpu_xids=values.get("gpu_xids"),
        signals=values.get("signals"),
        nodes=values.get("nodes"),
        pods=values.get("pods"),
        sources=sources,
        rejected_entries=tuple(rejected),
    )


def resolve_hosts(
    nodes: Sequence[NodeInfo],
    lookups: Sequence[HostLookup],
    *,
    priority: Callable[[NodeInfo], bool] | None = None,
) -> tuple[tuple[NodeInfo, ...], str | None]:
    """Fill ``physical_host`` in order: node label (already set), then each lookup.

    Nodes for which ``priority`` is true are asked first, so a lookup cap spends its calls on
    the nodes that matter. Returns the nodes and a note naming what each lookup did.
    """
    hosts: dict[str, str] = {n.name: n.physical_host for n in nodes if n.physical_host}
    planned: dict[str, NodeMaintenance] = {}
    notes: list[str] = []
    for lookup in lookups:
        missing = [n for n in nodes if n.name not in hosts]
        if not missing:
            break
        if priority is not None:
            missing.sort(key=lambda n: not priority(n))
        result = lookup.hosts(missing)
        new = {k: v for k, v in result.hosts.items() if k not in hosts}
        hosts.update(new)
        planned.update({k: v for k, v in result.maintenance.items() if k not in planned})
        note = f"{len(new)} host(s) from {lookup.source}"
        if result.failure:
            note += f" (stopped: {result.failure})"
        notes.append(note)
    resolved = tuple(
        replace(n, physical_host=hosts[n.name]) if not n.physical_host and n.name in hosts else n
        for n in nodes
    )
    # Compute's upcomingMaintenance beside GKE's labels, from the same instances.get.
    resolved = tuple(
        replace(n, maintenance=maintenance.merged(n.maintenance, planned[n.name]))
        if n.name in planned
        else n
        for n in resolved
    )
    return resolved, ("; ".join(notes) or None)


def _interesting_nodes(
    pods: Sequence[Any] | None, signals: Sequence[Signal] | None
) -> Callable[[NodeInfo], bool]:
    names = {p.node for p in pods or () if p.node} | {s.node for s in signals or () if s.node}
    return lambda node: node.name in names or node.ready is False


def _explicit_kinds(options: SourceOptions) -> set[EvidenceKind]:
    """Kinds whose source the user named, so files never entered into it."""
    kinds: set[EvidenceKind] = set()
    if options.prometheus_url or options.managed_prometheus is Mode.ON:
        kinds.update(METRIC_KINDS)
    if options.live_logs is Mode.ON:
        kinds.add(EvidenceKind.LOGS)
    if options.kubeconfig or options.live_kube is Mode.ON:
        kinds.update((EvidenceKind.NODES, EvidenceKind.PODS))
    return kinds


def _unreachable(exc: SourceUnavailable) -> bool:
    from loopbreaker.diagnosis.readers import SourceUnreachable

    return isinstance(exc, SourceUnreachable)


def _log_query_count(reader: LogReader, context: Context) -> int:
    filters = getattr(reader, "filters", None)
    return len(filters(context)) if callable(filters) else 1


def _log_note(failures: Sequence[tuple[str, str]], truncated: bool) -> str | None:
    parts = [f"{qid}: {why}" for qid, why in failures]
    if truncated:
        parts.append("entry cap reached; later entries not read")
    return ("partial: " + "; ".join(parts)) if parts else None


# --- EvidenceProvider for the event pipeline ---------------------------------------------


@dataclass
class LiveEvidence:
    """``EvidenceProvider`` (loopbreaker.diagnosis.evidence) over :func:`gather`."""

    options: SourceOptions = field(default_factory=SourceOptions)
    readers: Readers | None = None

    def collect(self, context: Context, budget: QueryBudget) -> Evidence:
        return gather(context, self.options, readers=self.readers, budget=budget)


__all__ = [
    "DEFAULT_MAX_LOG_ENTRIES",
    "DEFAULT_SOURCE_TIMEOUT",
    "LiveEvidence",
    "Mode",
    "Origin",
    "Readers",
    "SourceOptions",
    "add_flags",
    "gather",
    "gather_from_args",
    "options_from_args",
    "plan",
    "resolve_hosts",
]


def gather_from_args(args: argparse.Namespace, context: Context) -> Evidence:
    """What ``loopbreaker diagnose`` calls: options from its flags, then :func:`gather`."""
    return gather(context, options_from_args(args))
