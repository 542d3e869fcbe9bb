"""Step 1: is there a restart loop at all? Restart series, restart Events, conditions (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from loopbreaker.diagnosis.queries import KUBEFLOW_RESTARTS_METRIC
from loopbreaker.diagnosis.scope import series_namespace
from loopbreaker.diagnosis.steps import jobset_restarts
from loopbreaker.diagnosis.steps.common import (
    EPOCH,
    Notes,
    covers,
    increase,
    is_workload,
    labels_match,
    last_value,
    short_list,
    window,
)
from loopbreaker.model import (
    Context,
    Evidence,
    EvidenceKind,
    RootCause,
    Signal,
    SignalKind,
    WorkloadKind,
)

#: Restart reports of one job this close together are one restart.
_SAME_RESTART = timedelta(seconds=90)


def _jobset_of(ctx: Context) -> tuple[str, ...]:
    return (WorkloadKind.JOBSET.value,) if ctx.workload_kind.jobset_backed else ()


@dataclass(frozen=True)
class Restarts:
    loop: bool | None
    increase: float | None
    total: float | None


def step1(ctx: Context, ev: Evidence, signals: Sequence[Signal], notes: Notes) -> Restarts:
    events = _restart_events(
        s
        for s in signals
        if s.kind is SignalKind.JOB_RESTARTING
        and is_workload(s, ctx)
        # A TFJob's restart Events say nothing about a JobSet of the same name; a
        # TrainJob's restarts are its JobSet's.
        and s.workload_kind in (None, ctx.workload_kind.value, *_jobset_of(ctx))
    )
    if ctx.workload_kind.kubeflow:
        return _step1_kubeflow(ctx, ev, signals, events, notes)
    loop, inc, total = jobset_restarts.count(ctx, ev, events, notes)
    return Restarts(loop, inc, total)


def _restart_events(signals: Iterable[Signal]) -> list[Signal]:
    """One per restart: the operator's Event and the job's condition (and a repeated
    Event) report the same restart within seconds of each other."""
    out: list[Signal] = []
    for sig in sorted(signals, key=lambda s: (s.timestamp is None, s.timestamp or EPOCH)):
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
    notes: Notes,
) -> Restarts:
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
            and labels_match(s.labels, {"cluster": ctx.cluster})
            and series_namespace(s.labels) in (None, ctx.namespace or series_namespace(s.labels))
        ]
        where = f"namespace {ctx.namespace}" if ctx.namespace else "all namespaces"
        if series and not covers(series, ctx):
            notes.no_data(
                1,
                f"restarts: {metric}{{framework={kind.framework}}} in {where} has no sample "
                f"inside the window {window(ctx)}",
                source,
            )
        elif series:
            inc = sum(increase(s, ctx.start_time, ctx.end_time, from_zero=True) for s in series)
            total = last_value(series, ctx.end_time)
            verb = f"rose by {inc:g}" if inc > 0 else "did not increase"
            notes.add(
                1,
                f"{metric}{{framework={kind.framework}}} in {where} {verb} inside the window "
                f"(lifetime count {total or 0:g}); the counter names no job.",
                None if inc > 0 else RootCause.NO_RESTART_LOOP,
                source=source,
            )
        else:
            notes.no_data(
                1,
                f"restarts: {metric} has no {kind.framework} series in {where} of "
                f"{ctx.cluster} ({_seen_hint(ev, metric, source)})",
                source,
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
        return Restarts(True, float(len(events)), total)
    if inc is not None and inc > 0:
        if logs_seen and others and len(others) >= inc:
            notes.add(
                1,
                f"The counter's {inc:g} restart(s) belong to other jobs of the namespace "
                f"({short_list(sorted({s.workload for s in others if s.workload}))}); "
                f"{ctx.workload} reported none.",
                RootCause.NO_RESTART_LOOP,
                source=logs,
            )
            return Restarts(False, 0.0, total)
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
        return Restarts(True, inc, total)
    if inc is not None:
        return Restarts(False, 0.0, total)
    if logs_seen and ctx.workload:
        # No counter, but the Events were read: a job that restarted would have said so.
        notes.add(
            1,
            f"No {kind.api_kind}Restarting event for {ctx.workload} inside the window.",
            RootCause.NO_RESTART_LOOP,
            source=logs,
        )
    return Restarts(None, None, None)


def _seen_hint(ev: Evidence, metric: str, source: str | None) -> str:
    """What the restart source gave before scoping, so the gap can be placed: no operator
    series at all, or series of other frameworks, namespaces (``job_namespace`` first) or
    clusters."""
    seen = ev.restart_series_seen
    where = source or "the source"
    if seen is None:
        return "is the training operator's /metrics endpoint scraped?"
    ours = [s for s in seen if s.startswith(metric + "{")]
    if not seen:
        return f"{where} gave no restart series at all; is the training operator scraped?"
    if not ours:
        return (
            f"{where} gave no {metric} series, only {short_list(list(seen), 4)}; "
            "is the training operator's /metrics endpoint scraped?"
        )
    return f"{where} holds {short_list(ours, 4)}; its namespace is job_namespace, else namespace"
