"""What a restart loop cost: accelerator-hours lost, with the evidence each figure rests on
(pure).

For every outage of the workload inside the window:

* **downtime**: from the failure to the moment the workload runs again. The outage is read
  from ``kube_pod_status_phase``: the number of the workload's pods that are Running falls
  below its healthy level (the most seen in the window) and comes back to it. The failure
  is the earliest failure line of the workload or its nodes in the few minutes before the
  fall; without one, the first sample of the fall.
* **lost progress**: from the last checkpoint save before the failure (the job's own log
  lines, :mod:`loopbreaker.diagnosis.progress`), or from when it ran again after the
  previous outage if that is later, to the failure. Unknown (None, with why) when the logs
  show no checkpoint to measure from.
* **accelerator-hours**: the accelerators the workload's pods request ×
  (downtime + lost progress), downtime only when lost progress is unknown.
* **ETTR**: productive time over wall time inside the window.

A figure the evidence does not give is None, and ``missing`` says what would give it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from loopbreaker.diagnosis import progress
from loopbreaker.diagnosis.steps.common import is_workload, named_after
from loopbreaker.model import Context, Evidence, Signal, SignalKind
from loopbreaker.model.diagnosis import Cost
from loopbreaker.model.evidence import CheckpointMark, PodInfo, Series
from loopbreaker.timeutil import format_rfc3339

#: A failure line this long before the pods fell is the failure that felled them.
FAILURE_LEAD = timedelta(minutes=15)
#: Signals that report progress or bookkeeping, not a failure.
_NOT_FAILURES = frozenset(
    {SignalKind.JOB_RESTARTING, SignalKind.UNRECOGNIZED, SignalKind.ALERT_RESOLVED}
)


@dataclass(frozen=True)
class Outage:
    failed_at: datetime
    #: How the failure time was found: a failure line, or the pods' fall.
    failed_by: str
    running_again: datetime | None
    #: The window's last sample when the workload never ran again inside it.
    counted_to: datetime

    @property
    def downtime_s(self) -> float:
        return (self.counted_to - self.failed_at).total_seconds()


def estimate(ctx: Context, ev: Evidence, signals: Sequence[Signal], restarts: float | None) -> Cost:
    """The cost of the workload's restart loop inside the window."""
    basis: list[str] = []
    missing: list[str] = []
    count = int(restarts) if restarts is not None and restarts > 0 else 0
    basis.append(f"restarts: {count}, as step 1 counted them")
    accelerator, accelerators = _accelerators(ctx, ev, basis, missing)
    outages, span = _outages(ctx, ev, signals, basis, missing)
    downtime = sum(o.downtime_s for o in outages) if outages is not None else None
    lost = inside = None
    if outages is not None and span is not None:
        lost, inside = _lost_progress(ctx, ev, outages, span[0], basis, missing)
    wall = (span[1] - span[0]).total_seconds() if span else None
    hours = None
    if accelerators is not None and downtime is not None:
        spent = downtime + (lost or 0.0)
        hours = accelerators * spent / 3600
        what = "downtime + lost progress" if lost is not None else "downtime only"
        basis.append(f"accelerator-hours: {accelerators} × {_span(spent)} ({what})")
    ettr = None
    if wall and downtime is not None and span is not None:
        # Inside the window only: work lost before the first sample is not this window's.
        wasted = downtime + (inside or 0.0)
        productive = max(wall - wasted, 0.0)
        ettr = productive / wall
        bound = "" if lost is not None else "; an upper bound: lost progress unknown"
        basis.append(f"ETTR: {_span(productive)} productive of {_span(wall)} observed{bound}")
    return Cost(
        accelerator,
        accelerators,
        count,
        downtime,
        lost,
        hours,
        ettr,
        tuple(basis),
        tuple(missing),
    )


def _accelerators(
    ctx: Context, ev: Evidence, basis: list[str], missing: list[str]
) -> tuple[str | None, int | None]:
    if ev.pods is None:
        missing.append("accelerators: no pod objects were read (pods.json or the live API)")
        return None, None
    pods = [p for p in ev.pods if _pod_of(p, ctx)]
    asked = [p for p in pods if p.accelerators]
    if not asked:
        missing.append(
            f"accelerators: none of the {len(pods)} pod(s) of {ctx.workload} read request "
            "nvidia.com/gpu or google.com/tpu"
        )
        return None, None
    total = sum(p.accelerators or 0 for p in asked)
    nodes = {n.name: n.accelerator for n in ev.nodes or ()}
    kinds = Counter(nodes.get(p.node or "") for p in asked)
    kinds.pop(None, None)
    accelerator = kinds.most_common(1)[0][0] if len(kinds) == 1 else None
    per = sorted({p.accelerators or 0 for p in asked})
    shape = f"{len(asked)} pod(s) × {per[0]}" if len(per) == 1 else f"{len(asked)} pod(s)"
    basis.append(
        f"accelerators: {total} ({shape}, the pods' resource requests)"
        + (f", {accelerator} by the nodes' GKE labels" if accelerator else "")
    )
    if accelerator is None:
        missing.append(
            "accelerator type: the nodes' cloud.google.com/gke-accelerator or "
            "gke-tpu-accelerator labels " + ("disagree" if len(kinds) > 1 else "were not read")
        )
    return accelerator, total


def _outages(
    ctx: Context,
    ev: Evidence,
    signals: Sequence[Signal],
    basis: list[str],
    missing: list[str],
) -> tuple[list[Outage] | None, tuple[datetime, datetime] | None]:
    """The workload's outages from its pods' Running samples, and the span they cover."""
    if ev.pod_phases is None:
        missing.append("downtime: no pod phase series (kube_pod_status_phase) were read")
        return None, None
    running = _running(ctx, ev.pod_phases)
    if not running:
        missing.append(
            f"downtime: no kube_pod_status_phase sample of {ctx.workload}'s pods in the window"
        )
        return None, None
    times = sorted(running)
    healthy = max(running.values())
    outages: list[Outage] = []
    down_at: datetime | None = None
    placed = {p.node for p in ev.pods or () if p.node and _pod_of(p, ctx)}
    nodes = frozenset(placed) if placed else None
    back: datetime | None = None
    for at in times:
        up = running[at] >= healthy
        if not up and down_at is None:
            down_at = at
        elif up and down_at is not None:
            outages.append(_outage(ctx, signals, down_at, at, at, back, nodes))
            down_at, back = None, at
    if down_at is not None:
        outages.append(_outage(ctx, signals, down_at, None, times[-1], back, nodes))
    step = _sample_step(times)
    basis.append(
        f"downtime: {len(outages)} outage(s) of {ctx.workload} read from "
        f"kube_pod_status_phase (healthy: {healthy} pod(s) Running; sampled every "
        f"{_span(step)}), " + "; ".join(_describe(o) for o in outages)
        if outages
        else f"downtime: {ctx.workload}'s {healthy} pod(s) kept Running in every sample"
    )
    return outages, (times[0], times[-1]) if times[-1] > times[0] else None


def _outage(
    ctx: Context,
    signals: Sequence[Signal],
    fell_at: datetime,
    back_at: datetime | None,
    counted_to: datetime,
    previous_back: datetime | None,
    nodes: frozenset[str] | None,
) -> Outage:
    # A line before the previous outage ended belongs to that outage.
    since = max(fell_at - FAILURE_LEAD, previous_back or fell_at - FAILURE_LEAD)
    lead = [
        s.timestamp
        for s in signals
        if s.timestamp is not None
        and s.kind not in _NOT_FAILURES
        and since < s.timestamp <= fell_at
        and _about(s, ctx, nodes)
    ]
    if lead:
        return Outage(min(lead), "the first failure line", back_at, counted_to)
    return Outage(fell_at, "the pods' fall", back_at, counted_to)


def _lost_progress(
    ctx: Context,
    ev: Evidence,
    outages: list[Outage],
    first: datetime,
    basis: list[str],
    missing: list[str],
) -> tuple[float | None, float | None]:
    """Progress lost to the outages, in all and inside the observed span (from ``first``)."""
    if not outages:
        return 0.0, 0.0
    if ev.checkpoints is None:
        missing.append(
            "lost progress: the job's log lines were not read (live logs are queried for "
            "failures only)"
        )
        return None, None
    marks = progress.of_workload(ev.checkpoints, ctx.workload, ctx.namespace)
    if not marks:
        missing.append(f"lost progress: the logs show no checkpoint save of {ctx.workload}")
        return None, None
    total = inside = 0.0
    parts = []
    previous: Outage | None = None
    for outage in outages:
        found = _since(marks, outage, previous)
        if found is None:
            missing.append(
                "lost progress: no checkpoint save before the failure at "
                f"{format_rfc3339(outage.failed_at)}"
            )
            return None, None
        start, by = found
        inside += max((outage.failed_at - max(start, first)).total_seconds(), 0.0)
        total += max((outage.failed_at - start).total_seconds(), 0.0)
        parts.append(f"{_span((outage.failed_at - start).total_seconds())} since {by}")
        previous = outage
    basis.append(f"lost progress: {'; '.join(parts)}")
    return total, inside


def _since(
    marks: list[CheckpointMark], outage: Outage, previous: Outage | None
) -> tuple[datetime, str] | None:
    """Where the lost work began: the last save before the failure, or the restart after
    the previous outage when that is later (the work redone since it is this one's)."""
    before = [m for m in marks if m.at <= outage.failed_at]
    save = before[-1] if before else None
    again = previous.running_again if previous is not None else None
    if save is not None and (again is None or save.at >= again):
        step = f" (step {save.step})" if save.step is not None else ""
        return save.at, f"the checkpoint saved at {format_rfc3339(save.at)}{step}"
    if again is not None and save is not None:
        return again, f"it ran again at {format_rfc3339(again)}"
    return None


def _running(ctx: Context, phases: Sequence[Series]) -> dict[datetime, int]:
    """Sample time -> how many of the workload's pods were Running, inside the window."""
    start, end = ctx.start_time, ctx.end_time
    counts: dict[datetime, int] = {}
    for series in phases:
        labels = series.labels
        pod = labels.get("pod") or labels.get("pod_name")
        if not pod or not _mine(pod, labels.get("namespace"), ctx):
            continue
        for sample in series.samples:
            if not start <= sample.at <= end:
                continue
            counts.setdefault(sample.at, 0)
            if labels.get("phase") == "Running" and sample.value >= 1:
                counts[sample.at] += 1
    return counts


def _mine(pod: str, namespace: str | None, ctx: Context) -> bool:
    """A pod name (a series label) of the workload, in its namespace."""
    if ctx.namespace and namespace and namespace != ctx.namespace:
        return False
    return named_after(pod, ctx.workload)


def _pod_of(pod: PodInfo, ctx: Context) -> bool:
    """The workload's pod: by its controller's label, else by its name."""
    if pod.workload is not None:
        in_namespace = not ctx.namespace or pod.namespace in (None, ctx.namespace)
        return pod.workload == ctx.workload and in_namespace
    return _mine(pod.name, pod.namespace, ctx)


def _about(signal: Signal, ctx: Context, nodes: frozenset[str] | None) -> bool:
    """A failure line of the workload, or of a node its pods ran on (any node when no pod
    placement was read)."""
    if signal.pod or signal.workload:
        return is_workload(signal, ctx)
    return signal.node is not None and (nodes is None or signal.node in nodes)


def _describe(o: Outage) -> str:
    back = (
        f"running again at {format_rfc3339(o.running_again)}"
        if o.running_again
        else f"still down at {format_rfc3339(o.counted_to)}, the last sample (at least)"
    )
    return f"failed at {format_rfc3339(o.failed_at)} ({o.failed_by}), {back}"


def _sample_step(times: list[datetime]) -> float:
    gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
    return min(gaps) if gaps else 0.0


def _span(seconds: float) -> str:
    minutes = seconds / 60
    if minutes < 90:
        return f"{minutes:.0f} min"
    return f"{minutes / 60:.1f} h"


def line(cost: Cost, accelerator_short: str | None = None) -> str:
    """One line under the verdict: ``cost: 3 restarts × 32 H100 ≈ 41 accelerator-hours ...``."""
    what = accelerator_short or cost.accelerator or "accelerators"
    parts = []
    if cost.downtime_s is not None:
        parts.append(f"downtime {_span(cost.downtime_s)}")
    if cost.lost_progress_s is not None:
        parts.append(f"lost progress {_span(cost.lost_progress_s)} since the last checkpoint")
    else:
        parts.append("lost progress unknown")
    head = f"cost: {cost.restarts} restart(s)"
    if cost.accelerators is not None:
        head += f" × {cost.accelerators} {what}"
    if cost.accelerator_hours is not None:
        head += f" ≈ {cost.accelerator_hours:.0f} accelerator-hours"
    else:
        head += " (accelerator-hours unknown)"
    return f"{head} ({', '.join(parts)})"


def impact(cost: Cost) -> str:
    """The business-impact sentence of a support case."""
    what = cost.accelerator or "accelerators"
    if cost.accelerator_hours is None:
        return (
            f"{cost.restarts} restart(s) of the training job; the accelerator time lost is "
            f"unknown ({'; '.join(cost.missing) or 'no figure'})."
        )
    lost = (
        f" and {_span(cost.lost_progress_s)} of progress since the last checkpoint"
        if cost.lost_progress_s is not None
        else " (progress lost since the last checkpoint unknown)"
    )
    return (
        f"{cost.restarts} restart(s) of a training job on {cost.accelerators} {what} cost "
        f"about {cost.accelerator_hours:.0f} accelerator-hours: "
        f"{_span(cost.downtime_s or 0.0)} of downtime{lost}."
    )
