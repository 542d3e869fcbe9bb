"""Step 3: nodes that went NotReady and the physical hosts behind them (pure)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from loopbreaker.diagnosis.metric_vocabulary import DCGM_XID_METRIC
from loopbreaker.diagnosis.steps import gpu_metrics, simultaneous
from loopbreaker.diagnosis.steps.common import Notes, Thresholds, hm, labels_match, short_list
from loopbreaker.diagnosis.steps.interruptions import Interruptions
from loopbreaker.diagnosis.steps.simultaneous import Group, Sighting
from loopbreaker.model import (
    EVIDENCE_ONLY_KINDS,
    HOST_FAULT_KINDS,
    Context,
    Evidence,
    EvidenceKind,
    FailureEpisode,
    NodeInfo,
    RootCause,
    Series,
    Signal,
    SignalKind,
    SuspectHost,
)
from loopbreaker.model.evidence import HEALTH_PREDICTION_LABEL

#: Signatures of GPU hardware faults (NVIDIA's driver and the CUDA runtime, catalog
#: ``nvidia.toml``): the host's fault reason is then an unrecoverable GPU error.
GPU_SIGNATURES = ("nvidia.",)
#: ``reportHostAsFaulty``'s ``faultReasons[].behavior`` for them (Compute Engine API).
GPU_FAULT_REASON = "UNRECOVERABLE_GPU_ERROR"
#: Kinds a node's own log may show that are the workload's or evidence only: they form
#: groups (a fault on every rank) and findings, never a host's failure.
_NODE_GPU_KINDS = EVIDENCE_ONLY_KINDS | {SignalKind.GPU_APPLICATION_ERROR}


@dataclass
class _Episode:
    node: str
    start: datetime
    end: datetime | None
    kinds: set[str]
    excerpts: list[str]
    sources: set[str]
    first: datetime | None = None
    #: When each log line of the episode was written (for the simultaneous groups).
    times: list[datetime] = field(default_factory=list)
    reasons: set[str] = field(default_factory=set)

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
class Hosts:
    suspects: tuple[SuspectHost, ...]
    single: tuple[SuspectHost, ...]
    #: The same fault on (nearly) every node of the workload at once: the workload's.
    simultaneous: tuple[Group, ...] = ()


def step3(
    ctx: Context,
    ev: Evidence,
    signals: Sequence[Signal],
    interruptions: Interruptions,
    th: Thresholds,
    notes: Notes,
    workload_nodes: frozenset[str] = frozenset(),
) -> Hosts:
    """``workload_nodes``: where the workload's pods ran (for faults on every rank)."""
    nodes: dict[str, NodeInfo] = {n.name: n for n in ev.nodes or ()}
    cond_source = ev.source_of(EvidenceKind.NODE_CONDITIONS) or "metrics"
    log_source = ev.source_of(EvidenceKind.LOGS) or "logs"
    gpu_source = ev.source_of(EvidenceKind.GPU_XIDS) or DCGM_XID_METRIC
    episodes: list[_Episode] = []

    conditions = [
        s
        for s in ev.node_conditions or ()
        if labels_match(s.labels, {"cluster_name": ctx.cluster, "condition": "Ready"})
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
        episode.times.append(sig.timestamp)
        if sig.reason and sig.reason.startswith("Xid "):
            episode.reasons.add(sig.reason)
        elif sig.signature and sig.signature.startswith(GPU_SIGNATURES):
            episode.reasons.add(sig.excerpt[:120])
        episode.sources.add(gpu_source if gpu_metrics.is_dcgm(sig) else log_source)
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
                f"Node {episode.node} went down at {hm(episode.began)}, explained by a "
                "preemption or maintenance event: not counted against its host.",
                RootCause.FAULTY_HOST,
                supports=False,
            )
            continue
        counted.append(episode)

    gpu = [
        s
        for s in signals
        if s.kind in _NODE_GPU_KINDS and s.node and s.timestamp and ctx.in_window(s.timestamp)
    ]
    together = simultaneous.groups(
        [
            Sighting(e.node, at, _what(e.kinds, e.reasons))
            for e in counted
            for at in e.times
            if e.kinds - {"NotReady"}
        ]
        + [
            Sighting(str(s.node), s.timestamp, _fault_name(s))
            for s in gpu
            if s.timestamp and not gpu_metrics.is_dcgm(s)
        ],
        workload_nodes,
    )
    # A gauge shows a fault at the next scrape: "at once" is within one scrape interval.
    by_dcgm = simultaneous.groups(
        [
            Sighting(str(s.node), s.timestamp, _fault_name(s))
            for s in gpu
            if s.timestamp and gpu_metrics.is_dcgm(s)
        ],
        workload_nodes,
        max(simultaneous.DEFAULT_WINDOW, gpu_metrics.scrape_step(ev.gpu_xids or ())),
    )
    for group, source in [(g, log_source) for g in together] + [(g, gpu_source) for g in by_dcgm]:
        notes.add(
            3,
            f"{group.describe()} ({short_list(list(group.nodes))}): one failure of the "
            "workload, the application, not of each host.",
            RootCause.APPLICATION,
            source=source,
        )
    together += by_dcgm
    explained = [
        e
        for e in counted
        if any(simultaneous.covered(together, e.node, at, timedelta(0)) for at in e.times)
    ]
    if explained:
        notes.add(
            3,
            f"{len(explained)} node failure(s) explained by a fault on every rank at once: "
            "not counted against their hosts.",
            RootCause.FAULTY_HOST,
            supports=False,
        )
    counted = [e for e in counted if e not in explained]
    _gpu_notes([s for s in gpu if s.pod is None], together, notes, log_source, gpu_source)

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
                    tuple(sorted(e.reasons)),
                )
                for e in sorted(host_episodes, key=lambda e: e.began)
            ),
            fault_reason=GPU_FAULT_REASON if any(e.reasons for e in host_episodes) else None,
            health_prediction=tuple(
                (i.name, "true" if i.recommended_for_training else "false")
                for i in infos
                if i.recommended_for_training is not None
            ),
        )
        suspects.append(suspect)
        label = "physical host" if known else "node (no physical host id known)"
        for e in host_episodes:
            xids = f": {'; '.join(sorted(e.reasons))}" if e.reasons else ""
            notes.add(
                3,
                f"Node {e.node} failed at {hm(e.began)} ({', '.join(sorted(e.kinds))}{xids}) "
                f"on {label} {host}.",
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
    # A failure shows as a NotReady run or in the node's logs; which node is on which host
    # needs the nodes (their gce-topology-host label): without them two nodes of one
    # host look like two hosts.
    shown_by = (EvidenceKind.NODE_CONDITIONS, EvidenceKind.LOGS)
    if not suspects:
        notes.absence(
            3,
            ev,
            shown_by,
            "No node failure inside the window.",
            "A node failure",
            RootCause.HOST_ERROR,
        )
    elif not faulty:
        notes.absence(
            3,
            ev,
            (*shown_by, EvidenceKind.NODES),
            "No host failed more than once: no host to quarantine.",
            "A second failure of the same host",
            RootCause.FAULTY_HOST,
        )
    _health_notes(
        faulty, single, nodes, workload_nodes, th, notes, ev.source_of(EvidenceKind.NODES)
    )
    not_ready_now = sorted(n.name for n in nodes.values() if n.ready is False)
    if not_ready_now:
        notes.add(3, f"Nodes not Ready now: {short_list(not_ready_now)}.")
    return Hosts(faulty, single, tuple(together))


def _health_notes(
    faulty: Sequence[SuspectHost],
    single: Sequence[SuspectHost],
    nodes: Mapping[str, NodeInfo],
    workload_nodes: frozenset[str],
    th: Thresholds,
    notes: Notes,
    source: str | None,
) -> None:
    """GKE's node health prediction as a hint: it supports a host's failures seen in the
    window and never stands for one (a forecast of degradation is not a failure)."""
    label = f"GKE's node health prediction ({HEALTH_PREDICTION_LABEL})"
    on_suspects: set[str] = set()
    for s in (*faulty, *single):
        cause = RootCause.FAULTY_HOST if s.failures >= th.faulty_host_failures else None
        gpu = f", beside the GPU faults seen ({'; '.join(s.gpu_faults)})" if s.gpu_faults else ""
        for node, value in s.health_prediction:
            on_suspects.add(node)
            if value == "false":
                notes.add(
                    3,
                    f"{label} is false on node {node}: GKE expects its GPUs to degrade within "
                    f"five hours. Supports the {s.failures} failure(s) of host {s.host}{gpu}; "
                    "it decides nothing alone.",
                    cause or RootCause.HOST_ERROR,
                    source=source,
                )
            else:
                notes.add(
                    3,
                    f"{label} is true on node {node} (predicted healthy): a forecast, so the "
                    f"{s.failures} failure(s) of host {s.host} seen count regardless.",
                    supports=False,
                    source=source,
                )
    flagged = sorted(
        n
        for n in workload_nodes - on_suspects
        if n in nodes and nodes[n].recommended_for_training is False
    )
    if flagged:
        notes.add(
            3,
            f"{label} is false on node(s) {short_list(flagged)} of the workload, but none of "
            "them failed inside the window: a forecast, not a verdict.",
            supports=False,
            source=source,
        )


def _fault_name(sig: Signal) -> str:
    """What a node's GPU line says: its Xid and class when it has one, else its kind."""
    return (
        sig.reason.split(" (", 1)[0]
        if sig.reason and sig.reason.startswith("Xid ")
        else sig.kind.value
    )


def _what(kinds: set[str], reasons: set[str]) -> str:
    if len(reasons) == 1:
        return next(iter(reasons)).split(" (", 1)[0]
    return ", ".join(sorted(kinds - {"NotReady"}))


def _gpu_notes(
    gpu: Sequence[Signal], together: Sequence[Group], notes: Notes, source: str, gpu_source: str
) -> None:
    """The workload's and the unknown GPU faults of nodes that no group explains."""
    for sig in gpu:
        assert sig.node is not None and sig.timestamp is not None
        if simultaneous.covered(together, sig.node, sig.timestamp, timedelta(0)):
            continue
        what = sig.reason or sig.kind.value
        dcgm = gpu_metrics.is_dcgm(sig)
        said = "DCGM reported" if dcgm else "logged"
        if sig.kind is SignalKind.GPU_APPLICATION_ERROR:
            notes.add(
                3,
                f"Node {sig.node} {said} {what} at {hm(sig.timestamp)}: NVIDIA's Xid catalog "
                "puts it on the application, not the host.",
                RootCause.APPLICATION,
                source=gpu_source if dcgm else source,
            )
        else:
            notes.add(
                3,
                f"Node {sig.node} {said} {what} at {hm(sig.timestamp)}: evidence only, not a "
                "host fault by NVIDIA's Xid catalog.",
                supports=False,
                source=gpu_source if dcgm else source,
            )


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
