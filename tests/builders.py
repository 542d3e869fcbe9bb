"""Small builders for evidence in engine tests: readable scenarios in a few lines."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from loopbreaker.model import (
    Context,
    Evidence,
    EvidenceKind,
    NodeInfo,
    Sample,
    Series,
    Signal,
    SignalKind,
    SourceStatus,
)
from loopbreaker.timeutil import parse_rfc3339

T = parse_rfc3339("2026-05-20T08:15:00Z")
CLUSTER = "tpu-cluster-prod"
WORKLOAD = "llama3-70b-training"
STEP = timedelta(minutes=1)


def ctx(**overrides: object) -> Context:
    values: dict[str, object] = {
        "cluster": CLUSTER,
        "workload": WORKLOAD,
        "issue_time": T,
        "project": "proj",
        "namespace": "default",
    }
    values.update(overrides)
    return Context(**values)  # type: ignore[arg-type]


def at(minutes: float) -> datetime:
    """A time relative to the issue time T, in minutes."""
    return T + timedelta(minutes=minutes)


def series(metric: str, labels: Mapping[str, str], points: Iterable[tuple[float, float]]) -> Series:
    return Series(metric, dict(labels), tuple(Sample(at(m), v) for m, v in points))


def steps(
    values: Mapping[float, float], start: float = -90, end: float = 35
) -> list[tuple[float, float]]:
    """A step function sampled every minute: value changes at the given minutes."""
    out = []
    current = 0.0
    minute = start
    changes = sorted(values.items())
    while minute <= end:
        for when, value in changes:
            if when <= minute:
                current = value
        out.append((minute, current))
        minute += 1
    return out


def restarts(changes: Mapping[float, float], **labels: str) -> Series:
    base = {"cluster": CLUSTER, "namespace": "default", "jobset_name": WORKLOAD}
    base.update(labels)
    return series("kube_jobset_restarts", base, steps(changes))


def looping() -> Series:
    return restarts({-90: 3, -20: 4, 5: 5})


def not_ready(
    node: str, down: Iterable[tuple[float, float]], pool: str = "tpu-pool"
) -> list[Series]:
    """Ready condition series (True/False) for a node that is down in the given ranges."""

    def is_down(minute: float) -> bool:
        return any(a <= minute < b for a, b in down)

    minutes = [m for m, _ in steps({})]
    labels = {
        "cluster_name": CLUSTER,
        "node_name": node,
        "node_pool_name": pool,
        "condition": "Ready",
    }
    return [
        series(
            "kubernetes_io:node_status_condition",
            {**labels, "status": "True"},
            [(m, 0.0 if is_down(m) else 1.0) for m in minutes],
        ),
        series(
            "kubernetes_io:node_status_condition",
            {**labels, "status": "False"},
            [(m, 1.0 if is_down(m) else 0.0) for m in minutes],
        ),
    ]


def interruption(
    kind: str, count_at: Mapping[float, float], pool: str = "spot-pool", reason: str = "Eviction"
) -> Series:
    labels = {
        "cluster_name": CLUSTER,
        "node_pool_name": pool,
        "interruption_type": kind,
        "interruption_reason": reason,
    }
    return series("kubernetes_io:node_pool_interruption_count", labels, steps(count_at))


def signal(kind: SignalKind, minute: float, **fields: object) -> Signal:
    values: dict[str, object] = {"cluster": CLUSTER, "excerpt": f"{kind.value} line"}
    values.update(fields)
    return Signal(kind=kind, timestamp=at(minute), **values)  # type: ignore[arg-type]


def node(name: str, host: str | None, pool: str = "tpu-pool", zone: str = "us-east5-a") -> NodeInfo:
    return NodeInfo(
        name=name, node_pool=pool, physical_host=host, zone=zone, instance=name, ready=True
    )


def evidence(**values: object) -> Evidence:
    """Evidence where every kind is available (from 'test') unless given as None."""
    fields = {
        "restarts": (looping(),),
        "interruptions": (),
        "node_conditions": (),
        "pod_phases": (),
        "unschedulable": (),
        "signals": (),
        "nodes": (),
        "pods": (),
        "pod_reasons": (),
        "memory": (),
        "pod_info": (),
    }
    fields.update(values)
    for key in (
        "restarts",
        "interruptions",
        "node_conditions",
        "pod_phases",
        "unschedulable",
        "signals",
        "nodes",
        "pods",
        "pod_reasons",
        "memory",
        "pod_info",
    ):
        if isinstance(fields[key], list):
            fields[key] = tuple(fields[key])  # type: ignore[arg-type]
    kinds = {
        "restarts": EvidenceKind.RESTARTS,
        "interruptions": EvidenceKind.INTERRUPTIONS,
        "node_conditions": EvidenceKind.NODE_CONDITIONS,
        "pod_phases": EvidenceKind.POD_PHASES,
        "unschedulable": EvidenceKind.UNSCHEDULABLE,
        "signals": EvidenceKind.LOGS,
        "nodes": EvidenceKind.NODES,
        "pods": EvidenceKind.PODS,
        "pod_reasons": EvidenceKind.POD_REASONS,
        "memory": EvidenceKind.MEMORY,
        "pod_info": EvidenceKind.POD_INFO,
    }
    sources = {
        kind: SourceStatus(
            "test", fields[key] is not None, None if fields[key] is not None else "gone"
        )
        for key, kind in kinds.items()
    }
    extra = {k: v for k, v in fields.items() if k not in kinds}
    core = {k: v for k, v in fields.items() if k in kinds}
    return Evidence(sources=sources, **core, **extra)  # type: ignore[arg-type]
