"""A replay's evidence as it stood at the replay clock.

An offline telemetry directory holds the whole story, both failures of a host included;
a diagnosis the live system made after the first one could not see the second. So a
replay trims what the directory gives to what had happened by the diagnosis' moment:
samples, signals, checkpoints and restart attempts after it are dropped. Snapshots
without a time (nodes, pods, JobSets) are kept as they are.

The pods snapshot (``pods.json``) was taken at the end: the pods of a workload's earlier
attempts are gone from it. Live, the Kubernetes API listed them while they ran; a replay
in event order meets them first. :class:`SnapshotPods` confirms them by the workload's
pod naming, for a workload the snapshot shows in that namespace.
"""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from loopbreaker.diagnosis.evidence import EvidenceProvider, QueryBudget
from loopbreaker.model import Context, Evidence, PodInfo, Series, Signal
from loopbreaker.responder.outcomes import Clock
from loopbreaker.responder.pod_owners import TelemetryPods
from loopbreaker.signals.labels import workload_candidates


class AsOfClock:
    """An evidence provider that sees nothing later than ``clock()``."""

    def __init__(self, inner: EvidenceProvider, clock: Clock) -> None:
        self.inner = inner
        self.clock = clock

    def collect(self, context: Context, budget: QueryBudget) -> Evidence:
        return as_of(self.inner.collect(context, budget), self.clock())


def as_of(evidence: Evidence, now: datetime) -> Evidence:
    """``evidence`` without what happened after ``now``."""
    changes: dict[str, Any] = {}
    for f in fields(evidence):
        value = getattr(evidence, f.name)
        if not isinstance(value, tuple) or not value:
            continue
        if isinstance(value[0], Series):
            changes[f.name] = tuple(_trimmed(s, now) for s in value)
            continue
        stamp = "timestamp" if hasattr(value[0], "timestamp") else "at"
        if not hasattr(value[0], stamp):
            continue  # a snapshot: no time to trim by
        changes[f.name] = tuple(
            v for v in value if getattr(v, stamp) is None or getattr(v, stamp) <= now
        )
    return replace(evidence, **changes)


def _trimmed(series: Series, now: datetime) -> Series:
    if not series.samples or series.samples[-1].at <= now:
        return series
    return replace(series, samples=tuple(s for s in series.samples if s.at <= now))


class SnapshotPods:
    """``pods.json``, plus the signal's pod when its name is one of a workload the
    snapshot lists in the same namespace (JobSet's or Kubeflow's pod naming)."""

    def __init__(self, directory: Path) -> None:
        self.inner = TelemetryPods(directory)

    def pods(self, signal: Signal) -> tuple[PodInfo, ...]:
        listed = self.inner.pods(signal)
        if not signal.pod or any(p.name == signal.pod for p in listed):
            return listed
        by_workload = {p.workload: p for p in listed if p.workload}
        for name in workload_candidates(signal.pod):  # most specific first
            known = by_workload.get(name)
            if known is not None:
                return (*listed, replace(known, name=signal.pod, node=None))
        return listed
