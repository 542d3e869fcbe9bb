"""The four-step decision engine of the JobSet restart-loop workflow (pure, stdlib only).

Step 1 decides whether there is a restart loop at all; steps 2-4 collect findings for
every cause; the first rule that matches, in the workflow's order, names the root cause:
spot_preemption, maintenance, faulty_host, host_error, capacity, application, unknown.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from loopbreaker import ticket
from loopbreaker.model import (
    HOST_FAULT_KINDS,
    INTERRUPTION_KINDS,
    KUBEFLOW_CHIEF_TYPES,
    WORKLOAD_FAULT_KINDS,
    Context,
    Diagnosis,
    Evidence,
    EvidenceKind,
    FailureEpisode,
    Finding,
    NodeInfo,
    Query,
    Remediation,
    RemediationPath,
    Risk,
    RootCause,
    Series,
    Signal,
    SignalKind,
    StepReport,
    StepStatus,
    SuspectHost,
)
from loopbreaker.queries import KUBEFLOW_RESTARTS_METRIC, STEP_TITLES, queries_for

#: Failures of one host, inside the window plus remembered history, that make it faulty.
DEFAULT_FAULTY_HOST_FAILURES = 2
#: Observations of one node this close together are one failure episode.
DEFAULT_MERGE_WINDOW = timedelta(minutes=10)
#: How far back remembered host failures (from earlier incidents) still count.
DEFAULT_HOST_HISTORY = timedelta(days=7)
#: Pods Pending this long without being scheduled point to missing capacity; shorter
#: Pending spells are the normal gap while a restarted JobSet recreates its pods.
DEFAULT_PENDING_FOR = timedelta(minutes=5)


@dataclass(frozen=True)
class Thresholds:
    faulty_host_failures: int = DEFAULT_FAULTY_HOST_FAILURES
    merge_window: timedelta = DEFAULT_MERGE_WINDOW
    host_history: timedelta = DEFAULT_HOST_HISTORY
    pending_for: timedelta = DEFAULT_PENDING_FOR


DEFAULT_THRESHOLDS = Thresholds()

#: Restart reports of one job this close together are one restart.
_SAME_RESTART = timedelta(seconds=90)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_STEP_SOURCES: Mapping[int, tuple[EvidenceKind, ...]] = {
    1: (EvidenceKind.RESTARTS,),
    2: (EvidenceKind.INTERRUPTIONS, EvidenceKind.LOGS),
    3: (EvidenceKind.NODE_CONDITIONS, EvidenceKind.LOGS, EvidenceKind.NODES),
    4: (EvidenceKind.POD_PHASES, EvidenceKind.UNSCHEDULABLE, EvidenceKind.PODS, EvidenceKind.LOGS),
}


@dataclass
class _Notes:
    """Findings per step, collected while the rules look at the evidence."""

    by_step: dict[int, list[Finding]] = field(default_factory=lambda: defaultdict(list))

    def add(
        self,
        step: int,
        message: str,
        cause: RootCause | None = None,
        *,
        supports: bool = True,
        source: str | None = None,
    ) -> None:
        self.by_step[step].append(Finding(step, message, cause, supports, source))


# --- Series arithmetic ---------------------------------------------------------------


def _labels_match(labels: Mapping[str, str], wanted: Mapping[str, str | None]) -> bool:
    """A label that the series carries must equal the wanted value, when one is known."""
    return all(
        value is None or key not in labels or labels[key] == value for key, value in wanted.items()
    )


def increase(series: Series, start: datetime, end: datetime, *, from_zero: bool) -> float:
    """Increase of a counter-like series inside [start, end], counting resets.

    The baseline is the last sample at or before ``start``. A series with no sample before
    the window starts from its first sample (like PromQL ``increase``), or from zero when
    ``from_zero`` (a series that appears when its first event happens).
    """
    before = [s for s in series.samples if s.at <= start]
    inside = [s for s in series.samples if start < s.at <= end]
    if before:
        previous = before[-1].value
    elif from_zero:
        previous = 0.0
    elif inside:
        previous, inside = inside[0].value, inside[1:]
    else:
        return 0.0
    total = 0.0
    for sample in inside:
        if sample.value >= previous:
            total += sample.value - previous
        else:  # reset: the counter (or a recreated JobSet) started again from zero
            total += sample.value
        previous = sample.value
    return total


def _last_value(series: Iterable[Series], end: datetime) -> float | None:
    values = [s.samples[-1].value for s in (_upto(x, end) for x in series) if s.samples]
    return max(values) if values else None


def _upto(series: Series, end: datetime) -> Series:
    return replace(series, samples=tuple(s for s in series.samples if s.at <= end))


# --- Step 1: restarts ----------------------------------------------------------------


@dataclass(frozen=True)
class _Restarts:
    loop: bool | None
    increase: float | None
    total: float | None


def _step1(ctx: Context, ev: Evidence, signals: Sequence[Signal], notes: _Notes) -> _Restarts:
    events = _restart_events(
        s
        for s in signals
        if s.kind is SignalKind.JOB_RESTARTING
        and _is_workload(s, ctx)
        # A TFJob's restart Events say nothing about a JobSet of the same name.
        and s.workload_kind in (None, ctx.workload_kind.value)
    )
    if ctx.workload_kind.kubeflow:
        return _step1_kubeflow(ctx, ev, signals, events, notes)
    source = ev.source_of(EvidenceKind.RESTARTS)
    inc: float | None = None
    total: float | None = None
    if ev.restarts is not None:
        series = [
            s
            for s in ev.restarts
            if s.labels.get("jobset_name") == ctx.workload
            and _labels_match(s.labels, {"cluster": ctx.cluster, "namespace": ctx.namespace})
        ]
        if series:
            inc = sum(increase(s, ctx.start_time, ctx.end_time, from_zero=False) for s in series)
            total = _last_value(series, ctx.end_time)
            if inc > 0:
                notes.add(
                    1,
                    f"kube_jobset_restarts of {ctx.workload} rose by {inc:g} inside the window "
                    f"(lifetime count {total:g}): the JobSet is in a restart loop.",
                    source=source,
                )
            else:
                notes.add(
                    1,
                    f"kube_jobset_restarts of {ctx.workload} did not increase inside the window "
                    f"(lifetime count {total:g}); an old non-zero count is not a loop.",
                    RootCause.NO_RESTART_LOOP,
                    source=source,
                )
        else:
            notes.add(
                1,
                f"kube_jobset_restarts has no series for {ctx.workload} in {ctx.cluster}: "
                "is the JobSet metrics package of managed kube-state-metrics enabled?",
                source=source,
            )
    if events:
        notes.add(
            1,
            f"{len(events)} controller restart event(s) "
            f"({events[0].reason}) for {ctx.workload} inside the window.",
            source=ev.source_of(EvidenceKind.LOGS),
        )
    if inc is not None and inc > 0 or events:
        return _Restarts(True, inc, total)
    if inc is not None:
        return _Restarts(False, inc, total)
    return _Restarts(None, None, None)


def _restart_events(signals: Iterable[Signal]) -> list[Signal]:
    """One per restart: the operator's Event and the job's condition (and a repeated
    Event) report the same restart within seconds of each other."""
    out: list[Signal] = []
    for sig in sorted(signals, key=lambda s: (s.timestamp is None, s.timestamp or _EPOCH)):
        last = out[-1] if out else None
        if (
            last is not None
            and last.timestamp is not None
            and sig.timestamp is not None
            and sig.timestamp - last.timestamp <= _SAME_RESTART
        ):
            continue
        out.append(sig)
    return out


def _step1_kubeflow(
    ctx: Context,
    ev: Evidence,
    signals: Sequence[Signal],
    events: Sequence[Signal],
    notes: _Notes,
) -> _Restarts:
    """The operator counts restarts per namespace and framework, not per job: the job's
    own ``<Kind>Restarting`` events attribute them. A counter that rose while only other
    jobs of the namespace reported restarts is theirs, not a loop of this job."""
    kind = ctx.workload_kind
    metric = KUBEFLOW_RESTARTS_METRIC
    source = ev.source_of(EvidenceKind.RESTARTS)
    logs_seen = ev.signals is not None
    inc: float | None = None
    total: float | None = None
    if ev.restarts is not None:
        series = [
            s
            for s in ev.restarts
            if s.metric == metric
            and s.labels.get("framework") == kind.framework
            and _labels_match(s.labels, {"cluster": ctx.cluster, "job_namespace": ctx.namespace})
        ]
        where = f"namespace {ctx.namespace}" if ctx.namespace else "all namespaces"
        if series:
            inc = sum(increase(s, ctx.start_time, ctx.end_time, from_zero=True) for s in series)
            total = _last_value(series, ctx.end_time)
            verb = f"rose by {inc:g}" if inc > 0 else "did not increase"
            notes.add(
                1,
                f"{metric}{{framework={kind.framework}}} in {where} {verb} inside the window "
                f"(lifetime count {total:g}); the counter names no job.",
                None if inc > 0 else RootCause.NO_RESTART_LOOP,
                source=source,
            )
        else:
            notes.add(
                1,
                f"{metric} has no {kind.framework} series in {where} of {ctx.cluster}: is the "
                "training operator's /metrics endpoint scraped?",
                source=source,
            )
    others = _restart_events(
        s
        for s in signals
        if s.kind is SignalKind.JOB_RESTARTING
        and s.workload
        and s.workload != ctx.workload
        and (s.workload_kind in (None, kind.value))
        and (ctx.namespace is None or s.namespace in (None, ctx.namespace))
    )
    logs = ev.source_of(EvidenceKind.LOGS)
    if events:
        notes.add(
            1,
            f"{len(events)} restart(s) of {kind.api_kind} {ctx.workload} inside the window "
            f"({events[0].reason}): the job is in a restart loop.",
            source=logs,
        )
        return _Restarts(True, float(len(events)), total)
    if inc is not None and inc > 0:
        if logs_seen and others and len(others) >= inc:
            notes.add(
                1,
                f"The counter's {inc:g} restart(s) belong to other jobs of the namespace "
                f"({_short_list(sorted({s.workload for s in others if s.workload}))}); "
                f"{ctx.workload} reported none.",
                RootCause.NO_RESTART_LOOP,
                source=logs,
            )
            return _Restarts(False, 0.0, total)
        why = (
            "no restart event of any job was read"
            if not logs_seen
            else "no other job of the namespace reported as many"
        )
        notes.add(
            1,
            f"Attributed the namespace's {inc:g} restart(s) to {ctx.workload}: {why}.",
            source=source,
        )
        return _Restarts(True, inc, total)
    if inc is not None:
        return _Restarts(False, 0.0, total)
    if logs_seen and ctx.workload:
        # No counter, but the Events were read: a job that restarted would have said so.
        notes.add(
            1,
            f"No {kind.api_kind}Restarting event for {ctx.workload} inside the window.",
            RootCause.NO_RESTART_LOOP,
            source=logs,
        )
    return _Restarts(None, None, None)


# --- Step 2: interruptions -----------------------------------------------------------


@dataclass(frozen=True)
class _Interruptions:
    preemptions: int
    maintenance: int
    explained_nodes: Mapping[str, list[datetime]]


def _step2(ctx: Context, ev: Evidence, signals: Sequence[Signal], notes: _Notes) -> _Interruptions:
    counts: dict[tuple[str, str, str], float] = defaultdict(float)
    metric_source = ev.source_of(EvidenceKind.INTERRUPTIONS)
    for series in ev.interruptions or ():
        if not _labels_match(series.labels, {"cluster_name": ctx.cluster}):
            continue
        value = increase(series, ctx.start_time, ctx.end_time, from_zero=True)
        if value > 0:
            key = (
                series.labels.get("interruption_type", "unknown"),
                series.labels.get("interruption_reason", "unknown"),
                series.labels.get("node_pool_name", "unknown"),
            )
            counts[key] += value
    by_type: dict[str, float] = defaultdict(float)
    for (kind, reason, pool), value in sorted(counts.items()):
        by_type[kind] += value
        notes.add(
            2,
            f"{value:g} {kind} interruption(s) in node pool {pool} (reason {reason}).",
            _interruption_cause(kind),
            source=metric_source,
        )

    log_source = ev.source_of(EvidenceKind.LOGS)
    explained: dict[str, list[datetime]] = defaultdict(list)
    log_counts: dict[SignalKind, int] = defaultdict(int)
    for sig in signals:
        if sig.kind not in INTERRUPTION_KINDS:
            continue
        log_counts[sig.kind] += 1
        if sig.node and sig.timestamp:
            explained[sig.node].append(sig.timestamp)
    for kind, number in sorted(log_counts.items()):
        cause = (
            RootCause.SPOT_PREEMPTION if kind is SignalKind.PREEMPTION else RootCause.MAINTENANCE
        )
        nodes = sorted({s.node for s in signals if s.kind is kind and s.node})
        where = f" on {_short_list(nodes)}" if nodes else ""
        notes.add(2, f"{number} {kind.value} log signal(s){where}.", cause, source=log_source)

    preemptions = int(by_type.get("PreemptionEvent", 0)) + log_counts[SignalKind.PREEMPTION]
    maintenance = int(by_type.get("MaintenanceEvent", 0)) + log_counts[SignalKind.MAINTENANCE]
    if by_type.get("TerminationEvent"):
        notes.add(
            2,
            f"{by_type['TerminationEvent']:g} TerminationEvent interruption(s): host failures; "
            "step 3 attributes them to hosts.",
            RootCause.FAULTY_HOST,
            source=metric_source,
        )
    # Only claim an absence where the evidence could have shown the event.
    seen = ev.interruptions is not None or ev.signals is not None
    if not preemptions and seen:
        notes.add(2, "No preemption inside the window.", RootCause.SPOT_PREEMPTION, supports=False)
    if not maintenance and seen:
        notes.add(
            2, "No host maintenance inside the window.", RootCause.MAINTENANCE, supports=False
        )
    return _Interruptions(preemptions, maintenance, explained)


def _interruption_cause(kind: str) -> RootCause | None:
    return {
        "PreemptionEvent": RootCause.SPOT_PREEMPTION,
        "MaintenanceEvent": RootCause.MAINTENANCE,
        "TerminationEvent": RootCause.FAULTY_HOST,
    }.get(kind)


# --- Step 3: nodes and hosts ---------------------------------------------------------


@dataclass
class _Episode:
    node: str
    start: datetime
    end: datetime | None
    kinds: set[str]
    excerpts: list[str]
    sources: set[str]
    first: datetime | None = None

    @property
    def began(self) -> datetime:
        return min(self.first or self.start, self.start)


def not_ready_runs(series: Iterable[Series]) -> dict[str, list[tuple[datetime, datetime | None]]]:
    """NotReady runs per node from Ready-condition series: [(start, recovered_at | None)]."""
    states: dict[str, dict[datetime, bool]] = defaultdict(dict)
    for s in series:
        node = s.labels.get("node_name")
        status = s.labels.get("status")
        if not node or status not in ("True", "False", "Unknown"):
            continue
        timeline = states[node]
        for sample in s.samples:
            if status == "True":
                ready_now = sample.value > 0
                # Another series may already say NotReady at this instant; NotReady wins.
                timeline[sample.at] = timeline.get(sample.at, True) and ready_now
            elif sample.value > 0:
                timeline[sample.at] = False
            else:
                timeline.setdefault(sample.at, True)
    runs: dict[str, list[tuple[datetime, datetime | None]]] = {}
    for node, timeline in states.items():
        node_runs: list[tuple[datetime, datetime | None]] = []
        start: datetime | None = None
        for at in sorted(timeline):
            if not timeline[at] and start is None:
                start = at
            elif timeline[at] and start is not None:
                node_runs.append((start, at))
                start = None
        if start is not None:
            node_runs.append((start, None))
        if node_runs:
            runs[node] = node_runs
    return runs


@dataclass(frozen=True)
class _Hosts:
    suspects: tuple[SuspectHost, ...]
    single: tuple[SuspectHost, ...]


def _step3(
    ctx: Context,
    ev: Evidence,
    signals: Sequence[Signal],
    interruptions: _Interruptions,
    th: Thresholds,
    notes: _Notes,
) -> _Hosts:
    nodes: dict[str, NodeInfo] = {n.name: n for n in ev.nodes or ()}
    cond_source = ev.source_of(EvidenceKind.NODE_CONDITIONS) or "metrics"
    log_source = ev.source_of(EvidenceKind.LOGS) or "logs"
    episodes: list[_Episode] = []

    conditions = [
        s
        for s in ev.node_conditions or ()
        if _labels_match(s.labels, {"cluster_name": ctx.cluster, "condition": "Ready"})
    ]
    for node, runs in sorted(not_ready_runs(conditions).items()):
        for start, end in runs:
            episodes.append(_Episode(node, start, end, {"NotReady"}, [], {cond_source}))

    observations = sorted(
        (s for s in signals if s.kind in HOST_FAULT_KINDS and s.node and s.timestamp),
        key=lambda s: (s.node or "", s.timestamp),
    )
    for sig in observations:
        assert sig.node is not None and sig.timestamp is not None
        episode = _matching_episode(episodes, sig.node, sig.timestamp, th.merge_window)
        if episode is None:
            episode = _Episode(sig.node, sig.timestamp, None, set(), [], set())
            episodes.append(episode)
        # Kernel lines usually precede the NotReady sample: the failure began with them.
        episode.first = min(episode.first or episode.start, sig.timestamp)
        episode.kinds.add(sig.kind.value)
        episode.sources.add(log_source)
        if sig.excerpt and len(episode.excerpts) < 3:
            episode.excerpts.append(sig.excerpt)

    counted: list[_Episode] = []
    for episode in sorted(episodes, key=lambda e: (e.node, e.began)):
        if not ctx.in_window(episode.began):
            continue
        explained_at = [
            t
            for t in interruptions.explained_nodes.get(episode.node, ())
            if abs(t - episode.began) <= th.merge_window
        ]
        if explained_at:
            notes.add(
                3,
                f"Node {episode.node} went down at {_hm(episode.began)}, explained by a "
                "preemption or maintenance event: not counted against its host.",
                RootCause.FAULTY_HOST,
                supports=False,
            )
            continue
        counted.append(episode)

    per_host: dict[str, list[_Episode]] = defaultdict(list)
    for episode in counted:
        per_host[_host_of(episode.node, nodes, signals)].append(episode)

    suspects: list[SuspectHost] = []
    history_source = "incident history"
    for host, host_episodes in per_host.items():
        past = [
            r
            for r in ev.host_history
            if r.host == host
            and ctx.start_time - th.host_history <= r.at <= ctx.end_time
            and all(abs(r.at - e.began) > th.merge_window for e in host_episodes)
        ]
        failures = len(host_episodes) + len(past)
        node_names = sorted({e.node for e in host_episodes} | {r.node for r in past if r.node})
        infos = [nodes[n] for n in node_names if n in nodes]
        known = any(i.physical_host for i in infos) or host not in node_names
        suspect = SuspectHost(
            host=host,
            nodes=tuple(node_names),
            failures=failures,
            instances=tuple(sorted({i.instance or i.name for i in infos} or set(node_names))),
            zone=next((i.zone for i in infos if i.zone), None)
            or next((s.zone for s in signals if s.node in node_names and s.zone), None),
            node_pool=next((i.node_pool for i in infos if i.node_pool), None)
            or next((s.node_pool for s in signals if s.node in node_names and s.node_pool), None),
            host_known=known,
            first_failure=min([e.began for e in host_episodes] + [r.at for r in past]),
            last_failure=max([e.began for e in host_episodes] + [r.at for r in past]),
            episodes=tuple(
                FailureEpisode(
                    e.node,
                    host,
                    e.began,
                    tuple(sorted(e.kinds)),
                    tuple(e.excerpts),
                    ",".join(sorted(e.sources)),
                )
                for e in sorted(host_episodes, key=lambda e: e.began)
            ),
        )
        suspects.append(suspect)
        label = "physical host" if known else "node (no physical host id known)"
        for e in host_episodes:
            notes.add(
                3,
                f"Node {e.node} failed at {_hm(e.began)} ({', '.join(sorted(e.kinds))}) on "
                f"{label} {host}.",
                RootCause.HOST_ERROR,
                source=",".join(sorted(e.sources)),
            )
        if past:
            notes.add(
                3,
                f"{label.capitalize()} {host} also failed {len(past)} time(s) in earlier "
                "incidents.",
                RootCause.FAULTY_HOST,
                source=history_source,
            )
    suspects.sort(key=lambda s: (-s.failures, s.host))
    faulty = tuple(s for s in suspects if s.failures >= th.faulty_host_failures)
    single = tuple(s for s in suspects if s.failures < th.faulty_host_failures)
    for s in faulty:
        notes.add(
            3,
            f"Host {s.host} failed {s.failures} times ({', '.join(s.nodes)}): the same host "
            "fails repeatedly.",
            RootCause.FAULTY_HOST,
        )
    observed = ev.node_conditions is not None or ev.signals is not None
    if not suspects and observed:
        notes.add(3, "No node failure inside the window.", RootCause.HOST_ERROR, supports=False)
    elif suspects and not faulty:
        notes.add(
            3,
            "No host failed more than once: no host to quarantine.",
            RootCause.FAULTY_HOST,
            supports=False,
        )
    not_ready_now = sorted(n.name for n in nodes.values() if n.ready is False)
    if not_ready_now:
        notes.add(3, f"Nodes not Ready now: {_short_list(not_ready_now)}.")
    return _Hosts(faulty, single)


def _matching_episode(
    episodes: list[_Episode], node: str, at: datetime, merge: timedelta
) -> _Episode | None:
    best: _Episode | None = None
    for episode in episodes:
        if episode.node != node:
            continue
        upper = (episode.end or episode.start) + merge
        if episode.start - merge <= at <= upper and (
            best is None or abs(at - episode.start) < abs(at - best.start)
        ):
            best = episode
    return best


def _host_of(node: str, nodes: Mapping[str, NodeInfo], signals: Sequence[Signal]) -> str:
    info = nodes.get(node)
    if info and info.physical_host:
        return info.physical_host
    for sig in signals:
        if sig.node == node and sig.physical_host:
            return sig.physical_host
    return node


# --- Step 4: pods and workers --------------------------------------------------------


@dataclass(frozen=True)
class _Pods:
    capacity: bool
    application: bool


class _PodOwner:
    """Decides whether a pod belongs to the workload.

    Names alone are ambiguous (``train-eval-w-0-0-x`` may be a pod of ``train``), so pods
    that pods.json labels with another workload are excluded, and labelled pods of ours
    are included whatever their name.
    """

    def __init__(self, ctx: Context, ev: Evidence) -> None:
        self.workload = ctx.workload
        self.ours = {p.name for p in ev.pods or () if p.workload == ctx.workload}
        self.others = {p.name for p in ev.pods or () if p.workload and p.workload != ctx.workload}

    def __call__(self, pod: str | None) -> bool:
        if not pod:
            return False
        if pod in self.ours:
            return True
        return pod not in self.others and pod.startswith(self.workload + "-")


def _step4(
    ctx: Context, ev: Evidence, signals: Sequence[Signal], th: Thresholds, notes: _Notes
) -> _Pods:
    owns = _PodOwner(ctx, ev)
    unschedulable: set[str] = set()
    for series in ev.unschedulable or ():
        pod = series.labels.get("pod_name", "")
        if not owns(pod) or not _labels_match(
            series.labels, {"cluster_name": ctx.cluster, "namespace_name": ctx.namespace}
        ):
            continue
        if any(ctx.in_window(s.at) and s.value > 0 for s in series.samples):
            unschedulable.add(pod)
    if unschedulable:
        notes.add(
            4,
            f"{len(unschedulable)} pod(s) unschedulable inside the window: "
            f"{_short_list(sorted(unschedulable))}.",
            RootCause.CAPACITY,
            source=ev.source_of(EvidenceKind.UNSCHEDULABLE),
        )

    long_pending = _long_pending(ctx, ev.pod_phases or (), th.pending_for, owns)
    if long_pending:
        notes.add(
            4,
            f"{len(long_pending)} pod(s) stayed Pending for {th.pending_for} or longer: "
            f"{_short_list(sorted(long_pending))}.",
            RootCause.CAPACITY,
            source=ev.source_of(EvidenceKind.POD_PHASES),
        )

    sched = [
        s for s in signals if s.kind is SignalKind.UNSCHEDULABLE and (s.pod is None or owns(s.pod))
    ]
    if sched:
        notes.add(
            4,
            f"{len(sched)} scheduling failure(s), e.g. {sched[0].excerpt!r}.",
            RootCause.CAPACITY,
            source=ev.source_of(EvidenceKind.LOGS),
        )
    pending_pods = [p for p in ev.pods or () if owns(p.name) and p.unschedulable]
    if pending_pods:
        notes.add(
            4,
            f"{len(pending_pods)} pod(s) not scheduled now: {pending_pods[0].message or '-'}",
            RootCause.CAPACITY,
            source=ev.source_of(EvidenceKind.PODS),
        )
    capacity = bool(unschedulable or long_pending or sched or pending_pods)
    pod_evidence = (ev.unschedulable, ev.pod_phases, ev.pods, ev.signals)
    if not capacity and any(e is not None for e in pod_evidence):
        notes.add(4, "Every pod of the workload was scheduled.", RootCause.CAPACITY, supports=False)

    faults = [
        _with_role(s, ctx, ev, signals)
        for s in signals
        if s.kind in WORKLOAD_FAULT_KINDS and _is_workload(s, ctx)
    ]
    coordinator = [s for s in faults if s.coordinator is True]
    unknown_role = [s for s in faults if s.coordinator is None]
    deciding = coordinator or unknown_role
    source = ev.source_of(EvidenceKind.LOGS)
    if coordinator:
        kinds = sorted({s.kind.value for s in coordinator})
        notes.add(
            4,
            f"The coordinator ({_COORDINATOR[ctx.workload_kind.kubeflow]}, "
            f"{coordinator[0].pod}) logged "
            f"{', '.join(kinds)}: {coordinator[0].excerpt}",
            RootCause.APPLICATION,
            source=source,
        )
    elif unknown_role:
        kinds = sorted({s.kind.value for s in unknown_role})
        notes.add(
            4,
            f"Workers logged {', '.join(kinds)} (worker role unknown): {unknown_role[0].excerpt}",
            RootCause.APPLICATION,
            source=source,
        )
    others = [s for s in faults if s.coordinator is False]
    if others:
        pods = sorted({s.pod for s in others if s.pod})
        notes.add(
            4,
            f"{len(others)} fault line(s) from other workers ({_short_list(pods)}).",
            RootCause.APPLICATION if deciding else None,
            supports=bool(deciding),
            source=source,
        )
    if not deciding and ev.signals is not None:
        notes.add(
            4,
            "No NCCL, collective or worker-crash signal in the coordinator's logs.",
            RootCause.APPLICATION,
            supports=False,
        )
    return _Pods(capacity, bool(deciding))


_MAINTENANCE_POLICY = {
    False: "Add a JobSet failurePolicy rule with action RestartJobSetAndIgnoreMaxRestarts "
    "for disruption failures, so maintenance does not use up maxRestarts.",
    True: "Use restartPolicy ExitCode so disruption exits (128-255) are retried without "
    "counting as permanent failures, and size backoffLimit for planned maintenance.",
}
_COORDINATOR = {False: "worker 0 of slice 0", True: "the Chief or Master, else Worker 0"}


def _with_role(sig: Signal, ctx: Context, ev: Evidence, signals: Sequence[Signal]) -> Signal:
    """Kubeflow: Worker 0 coordinates only when the job has no Chief or Master."""
    if sig.replica_type != "worker" or not sig.coordinator:
        return sig
    chief = any(
        p.replica_type in KUBEFLOW_CHIEF_TYPES for p in ev.pods or () if p.workload == ctx.workload
    ) or any(s.replica_type in KUBEFLOW_CHIEF_TYPES for s in signals if _is_workload(s, ctx))
    return replace(sig, coordinator=False) if chief else sig


def _long_pending(
    ctx: Context, series: Iterable[Series], minimum: timedelta, owns: _PodOwner
) -> set[str]:
    found: set[str] = set()
    for s in series:
        pod = s.labels.get("pod", "")
        if s.labels.get("phase") != "Pending" or not owns(pod):
            continue
        if not _labels_match(s.labels, {"cluster": ctx.cluster, "namespace": ctx.namespace}):
            continue
        run_start: datetime | None = None
        for sample in s.samples:
            if sample.value > 0 and ctx.in_window(sample.at):
                run_start = run_start or sample.at
                if sample.at - run_start >= minimum:
                    found.add(pod)
                    break
            else:
                run_start = None
    return found


# --- Decision ------------------------------------------------------------------------


def diagnose(
    context: Context, evidence: Evidence, thresholds: Thresholds = DEFAULT_THRESHOLDS
) -> Diagnosis:
    """Run the four steps over the evidence and decide the root cause."""
    notes = _Notes()
    signals = [s for s in _unique(evidence.signals or ()) if _in_scope(s, context, evidence)]
    if evidence.rejected_entries:
        where, why = evidence.rejected_entries[0]
        notes.add(
            4,
            f"{len(evidence.rejected_entries)} log entr(y/ies) skipped as unreadable, "
            f"first {where}: {why}",
        )
    restarts = _step1(context, evidence, signals, notes)
    all_queries = queries_for(context)
    missing = _missing(evidence)

    if restarts.loop is False:
        steps = (
            _report(1, evidence, notes, all_queries),
            *(_skipped(n) for n in (2, 3, 4)),
        )
        return Diagnosis(
            context=context,
            restart_loop=False,
            restart_increase=restarts.increase,
            restart_total=restarts.total,
            root_cause=RootCause.NO_RESTART_LOOP,
            remediation=_remediation(RootCause.NO_RESTART_LOOP, (), context),
            suspect_hosts=(),
            steps=steps,
            evidence=tuple(notes.by_step[1]),
            ticket_draft=None,
            missing_evidence=tuple(m for m in missing if m.startswith(EvidenceKind.RESTARTS)),
            summary=f"No restart loop: {context.workload} did not restart inside the window.",
            queries_run=_run_count(steps),
        )

    interruptions = _step2(context, evidence, signals, notes)
    hosts = _step3(context, evidence, signals, interruptions, thresholds, notes)
    pods = _step4(context, evidence, signals, thresholds, notes)

    if interruptions.preemptions:
        cause = RootCause.SPOT_PREEMPTION
    elif interruptions.maintenance:
        cause = RootCause.MAINTENANCE
    elif hosts.suspects:
        cause = RootCause.FAULTY_HOST
    elif hosts.single:
        cause = RootCause.HOST_ERROR
    elif pods.capacity:
        cause = RootCause.CAPACITY
    elif pods.application:
        cause = RootCause.APPLICATION
    else:
        cause = RootCause.UNKNOWN

    if cause is RootCause.HOST_ERROR:
        suspects = hosts.single
    elif cause is RootCause.FAULTY_HOST:
        suspects = hosts.suspects + hosts.single
    else:
        suspects = hosts.suspects
    steps = tuple(_report(n, evidence, notes, all_queries) for n in (1, 2, 3, 4))
    findings = tuple(f for n in (1, 2, 3, 4) for f in notes.by_step[n])
    draft = None
    if cause is RootCause.FAULTY_HOST:
        draft = ticket.draft(context, hosts.suspects[0], restarts.increase, restarts.total, steps)
    return Diagnosis(
        context=context,
        restart_loop=restarts.loop,
        restart_increase=restarts.increase,
        restart_total=restarts.total,
        root_cause=cause,
        remediation=_remediation(cause, suspects, context),
        suspect_hosts=suspects,
        steps=steps,
        evidence=findings,
        ticket_draft=draft,
        missing_evidence=missing,
        summary=_summary(cause, context, restarts, suspects, interruptions),
        queries_run=_run_count(steps),
    )


def _unique(signals: Iterable[Signal]) -> list[Signal]:
    """Drop repeats of one entry: log export does not de-duplicate (logName, timestamp,
    insertId), and the same entry may sit in two dumped files."""
    seen: set[tuple[str | None, datetime | None, str]] = set()
    out: list[Signal] = []
    for sig in signals:
        if sig.insert_id is not None:
            key = (sig.log_name, sig.timestamp, sig.insert_id)
            if key in seen:
                continue
            seen.add(key)
        out.append(sig)
    return out


def _in_scope(sig: Signal, ctx: Context, ev: Evidence) -> bool:
    """Inside the window and about this cluster (Compute audit entries name no cluster)."""
    if not ctx.in_window(sig.timestamp):
        return False
    if sig.cluster is not None:
        return sig.cluster == ctx.cluster
    if ctx.project and sig.project and sig.project != ctx.project:
        return False
    if sig.node is None:
        return sig.kind in (SignalKind.JOB_RESTARTING, SignalKind.UNRECOGNIZED) or _is_workload(
            sig, ctx
        )
    known = {n.name for n in ev.nodes or ()}
    return sig.node in known or sig.node.startswith(f"gke-{ctx.cluster}-") or not known


def _is_workload(sig: Signal, ctx: Context) -> bool:
    if sig.workload is not None:
        return sig.workload == ctx.workload
    return bool(sig.pod and sig.pod.startswith(ctx.workload + "-"))


def _missing(ev: Evidence) -> tuple[str, ...]:
    """Unavailable evidence, and evidence only partly read (a reader's "partial: ..." note)."""
    return tuple(
        f"{kind.value}: {status.reason or 'unavailable'} ({status.source})"
        for kind, status in sorted(ev.sources.items())
        if not status.available or (status.reason or "").startswith("partial")
    )


def _report(number: int, ev: Evidence, notes: _Notes, queries: Sequence[Query]) -> StepReport:
    kinds = _STEP_SOURCES[number]
    statuses = [ev.sources.get(k) for k in kinds]
    available = [s for s in statuses if s is not None and s.available]
    unavailable = [s for s in statuses if s is not None and not s.available]
    status = StepStatus.DONE if available or not statuses else StepStatus.UNAVAILABLE
    if not any(s is not None for s in statuses):
        status = StepStatus.UNAVAILABLE
    reason = "; ".join(f"{s.source}: {s.reason}" for s in unavailable) or None
    return StepReport(
        number=number,
        title=STEP_TITLES[number],
        status=status,
        findings=tuple(notes.by_step[number]),
        queries=tuple(q for q in queries if q.step == number),
        sources=tuple(sorted({s.source for s in available})),
        reason=reason,
    )


def _skipped(number: int) -> StepReport:
    return StepReport(
        number=number,
        title=STEP_TITLES[number],
        status=StepStatus.SKIPPED,
        findings=(),
        queries=(),
        reason="no restart loop: nothing further to query",
    )


def _run_count(steps: Iterable[StepReport]) -> int:
    return sum(
        1
        for step in steps
        if step.status is StepStatus.DONE
        for q in step.queries
        if not q.deprecated
    )


def _remediation(cause: RootCause, suspects: Sequence[SuspectHost], ctx: Context) -> Remediation:
    target = suspects[0] if suspects else None
    if cause is RootCause.NO_RESTART_LOOP:
        return Remediation(RemediationPath.NONE, Risk.NONE, False, ("No action needed.",))
    if cause is RootCause.SPOT_PREEMPTION:
        return Remediation(
            RemediationPath.AVOID_PREEMPTION,
            Risk.LOW,
            False,
            (
                "Run long training on reserved or on-demand capacity instead of Spot VMs.",
                "Use a compact placement policy to cut defragmentation interruptions.",
                "Checkpoint more often so each preemption loses less work.",
                "Do not cordon nodes or quarantine hosts for preemptions.",
            ),
        )
    if cause is RootCause.MAINTENANCE:
        return Remediation(
            RemediationPath.PLAN_MAINTENANCE,
            Risk.LOW,
            False,
            (
                "Set maintenance windows and exclusions on the cluster for the training period.",
                _MAINTENANCE_POLICY[ctx.workload_kind.kubeflow],
                "Watch the cloud.google.com/scheduled-maintenance-time node label and "
                "checkpoint before it.",
            ),
        )
    if cause is RootCause.FAULTY_HOST and target is not None:
        nodes = ", ".join(target.nodes)
        zone = target.zone or "ZONE"
        instances = ", ".join(f"zones/{zone}/instances/{i}" for i in target.instances)
        return Remediation(
            RemediationPath.ISOLATE_HOST,
            Risk.HIGH,
            True,
            (
                f"After human approval: cordon node(s) {nodes}.",
                f"Drain node(s) {nodes} through the Eviction API, respecting PodDisruptionBudgets.",
                f"Delete the GCE VM(s) {instances} so the managed instance group recreates "
                "them on healthy hardware (never shrink the group).",
                f"Open a Google Cloud support case naming physical host {target.host} "
                "(draft attached).",
            ),
        )
    if cause is RootCause.HOST_ERROR and target is not None:
        return Remediation(
            RemediationPath.WATCH_HOST,
            Risk.LOW,
            False,
            (
                f"Watch host {target.host} ({', '.join(target.nodes)}): one more failure makes "
                "it a faulty host.",
                "No destructive action for a single failure; GKE auto-repair handles the node.",
            ),
        )
    if cause is RootCause.CAPACITY:
        return Remediation(
            RemediationPath.ADD_CAPACITY,
            Risk.LOW,
            False,
            (
                "Check quota and reservations for the accelerator the pods request.",
                "Scale the node pool or enable node auto-provisioning.",
                "Review placement, topology and affinity constraints of the pods.",
            ),
        )
    return Remediation(
        RemediationPath.INSPECT_APPLICATION,
        Risk.LOW,
        False,
        (
            f"Read the coordinator's logs ({_COORDINATOR[ctx.workload_kind.kubeflow]}) and "
            "the tracebacks of the first failing worker.",
            "For NCCL timeouts: rerun with NCCL_DEBUG=INFO and check collective sizes, "
            "timeouts and the network between slices.",
            "No node action: the infrastructure shows no cause.",
        ),
    )


def _summary(
    cause: RootCause,
    ctx: Context,
    restarts: _Restarts,
    suspects: Sequence[SuspectHost],
    interruptions: _Interruptions,
) -> str:
    if restarts.loop and restarts.increase is not None:
        head = f"{ctx.workload} restarted {restarts.increase:g} time(s) inside the window"
    elif restarts.loop:
        head = f"{ctx.workload} is restarting"
    elif ctx.workload:
        head = f"Restart data for {ctx.workload} is unavailable"
    else:  # an incident keyed on a node pool or host names no workload
        head = f"In {ctx.cluster or 'a cluster not yet named by any entry'}"
    tail = {
        RootCause.SPOT_PREEMPTION: f"{interruptions.preemptions} Spot preemption(s) explain it.",
        RootCause.MAINTENANCE: f"{interruptions.maintenance} host maintenance event(s) explain it.",
        RootCause.CAPACITY: "pods cannot be scheduled: capacity is missing.",
        RootCause.APPLICATION: "the application itself fails (NCCL / collective / worker crash).",
        RootCause.UNKNOWN: "no infrastructure cause found; inspect the application.",
    }.get(cause, "")
    if cause is RootCause.FAULTY_HOST:
        tail = f"physical host {suspects[0].host} failed {suspects[0].failures} times."
    elif cause is RootCause.HOST_ERROR:
        tail = f"host {suspects[0].host} failed once."
    return f"{head}; {tail}"


def _hm(moment: datetime) -> str:
    return moment.strftime("%H:%M:%SZ")


def _short_list(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
