"""Step 1 for a JobSet: its restarts counted from every place they show (pure).

Four sources, each on its own, then compared:

- ``kube_jobset_restarts``, a gauge of ``status.restarts``: its rises inside the window. A
  fall is a JobSet recreated under the same name (``status.restarts`` never decreases),
  counted as one restart of the loop, the new JobSet's own restarts on top;
- the JobSet object (``jobsets.json``, the live API): ``status.restarts``, the per-Job
  ``jobRestarts`` (RestartJob actions, which leave ``status.restarts`` alone), in-place
  restarts, the ``RestartingJobSet`` condition, its uid and creation time;
- the pods' ``jobset.sigs.k8s.io/restart-attempt`` and ``job-restart-attempt`` labels,
  from pods, their log entries and ``kube_pod_labels``;
- the JobSet controller's restart Events (``job_restarting`` signals).

The loop is the same JobSet name: a new uid continues it, its count carried over.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from loopbreaker.diagnosis.jobsets import metric_attempts
from loopbreaker.diagnosis.steps.common import Notes, covers, labels_match, short_list, window
from loopbreaker.model import Context, Evidence, EvidenceKind, Series, Signal
from loopbreaker.model.evidence import JobSetInfo, RestartAttemptSeen
from loopbreaker.timeutil import format_rfc3339

GAUGE = "kube_jobset_restarts"
LABEL = "restart-attempt label"
OBJECT = "JobSet status"
EVENTS = "restart Events"


@dataclass(frozen=True)
class Count:
    """What one source says: restarts inside the window (None: it cannot tell), the
    loop's lifetime count, whether a zero is evidence, and how it read it."""

    name: str
    source: str | None
    increase: float | None
    total: float | None
    proves_none: bool
    detail: str
    recreated: int = 0


@dataclass
class JobSetCount:
    counts: list[Count] = field(default_factory=list)
    #: Sources that could not be read, as "what (why)".
    missing: list[str] = field(default_factory=list)
    #: Per-Job and in-place restarts the JobSet object holds (the gauge never shows them).
    unseen_by_gauge: int = 0


def count(
    ctx: Context, ev: Evidence, events: Sequence[Signal], notes: Notes
) -> tuple[bool | None, float | None, float | None]:
    """Step 1's verdict for a JobSet: (loop, increase, lifetime total)."""
    found = JobSetCount()
    for read in (_gauge, _object):
        result = read(ctx, ev, found, notes)
        if result is not None:
            found.counts.append(result)
    logs = ev.source_of(EvidenceKind.LOGS)
    if events:
        found.counts.append(
            Count(
                EVENTS,
                logs,
                float(len(events)),
                None,
                False,
                f"{len(events)} JobSet controller restart Event(s) ({events[0].reason})",
            )
        )
    elif logs is None:
        found.missing.append(f"restart Events ({_why(ev, EvidenceKind.LOGS)})")
    labels = _labels(ctx, ev, found, notes)
    if labels is not None:
        found.counts.append(labels)
    return _decide(ctx, found, notes)


def _decide(
    ctx: Context, found: JobSetCount, notes: Notes
) -> tuple[bool | None, float | None, float | None]:
    verdict = _verdict(ctx, found, notes)
    if found.missing:
        notes.add(
            1,
            f"Restart sources not read for {ctx.workload}: {'; '.join(found.missing)}.",
            supports=False,
        )
    return verdict


def _verdict(
    ctx: Context, found: JobSetCount, notes: Notes
) -> tuple[bool | None, float | None, float | None]:
    counts = found.counts
    # The lifetime count: the highest the gauge, the object or the pods' current labels
    # give (the gauge misses per-Job restarts; log sightings may miss early attempts).
    totals = [c.total for c in counts if c.total is not None]
    total = max(totals) if totals else None
    rising = [c for c in counts if c.increase is not None and c.increase > 0]
    if rising:
        # The first source that rose counts, in the order read (the gauge, the JobSet
        # object, the Events, the labels): each counts its own kind of restart, and a
        # label sighting only bounds when its attempt began.
        best = rising[0]
        inc = best.increase or 0.0
        notes.add(
            1,
            f"{best.name} counted {inc:g} restart(s) of {ctx.workload} inside the window "
            f"({best.detail}): the JobSet is in a restart loop.",
            source=best.source,
        )
        others = [c for c in counts if c is not best]
        agree = [c.name for c in others if c.increase == inc]
        if agree:
            verb = "agrees" if len(agree) == 1 else "agree"
            notes.add(1, f"{', '.join(agree)} {verb}: {inc:g} restart(s).", source=best.source)
        for c in others:
            if c.increase == inc:
                continue
            if c.increase is None:
                what = "cannot place a restart inside the window"
            else:
                what = f"differs, {c.increase:g} restart(s)"
            why = _GAUGE_MISSES if c.name == GAUGE else ""
            notes.add(1, f"{c.name} {what} ({c.detail}){why}.", supports=False, source=c.source)
        return True, inc, total
    proof = next((c for c in counts if c.proves_none), None)
    hidden = found.unseen_by_gauge
    if proof is not None and proof.name == GAUGE and hidden:
        # The gauge is status.restarts: flat, it says nothing of per-Job or in-place ones.
        notes.add(
            1,
            f"{GAUGE} is flat, but the JobSet has {hidden} per-Job or in-place restart(s) "
            "it does not count, and no source places them in time.",
            supports=False,
            source=proof.source,
        )
        proof = None
    if proof is not None:
        from loopbreaker.model import RootCause

        notes.add(
            1,
            f"{proof.name} {proof.detail}: no restart of {ctx.workload} inside the window "
            "(an old non-zero count is not a loop).",
            RootCause.NO_RESTART_LOOP,
            source=proof.source,
        )
        for c in counts:
            if c is not proof:
                notes.add(1, f"{c.name}: {c.detail}.", supports=False, source=c.source)
        return False, 0.0, total
    for c in counts:
        notes.add(1, f"{c.name}: {c.detail}.", supports=False, source=c.source)
    return None, None, total


#: Why the gauge may stay flat while the JobSet restarts (jobset_types.go v0.12.0: RestartJob
#: bumps replicatedJobsStatus[].jobRestarts, in-place restarts currentInPlaceRestartAttempt).
_GAUGE_MISSES = (
    "; it is status.restarts only, which RestartJob actions and in-place restarts leave alone"
)


def _why(ev: Evidence, kind: EvidenceKind, absent: str = "not given") -> str:
    status = ev.sources.get(kind)
    if status is None:
        return absent
    return status.reason or "unavailable"


# --- the gauge -------------------------------------------------------------------------


def _gauge(ctx: Context, ev: Evidence, found: JobSetCount, notes: Notes) -> Count | None:
    source = ev.source_of(EvidenceKind.RESTARTS)
    if ev.restarts is None:
        found.missing.append(f"{GAUGE} ({_why(ev, EvidenceKind.RESTARTS)})")
        return None
    series = [
        s
        for s in ev.restarts
        if s.labels.get("jobset_name") == ctx.workload
        and labels_match(s.labels, {"cluster": ctx.cluster, "namespace": ctx.namespace})
    ]
    if not series:
        notes.no_data(
            1,
            f"restarts: {GAUGE} has no series for {ctx.workload} in {ctx.cluster} (is the "
            "JobSet metrics package of managed kube-state-metrics, or a customResourceState "
            "config, in place?)",
            source,
        )
        return None
    if not covers(series, ctx):
        notes.no_data(
            1,
            f"restarts: {GAUGE} of {ctx.workload} has no sample inside the window {window(ctx)}",
            source,
        )
        return None
    inc, total, recreated = gauge_count(series, ctx.start_time, ctx.end_time)
    if inc > recreated:
        detail = f"rose by {inc - recreated:g}, lifetime count {total:g}"
    else:
        detail = f"{'did not rise' if recreated else 'flat'}, lifetime count {total:g}"
    if recreated:
        detail += (
            f"; fell back to a new JobSet of the same name {recreated} time(s) inside the "
            "window, the count carried over"
        )
    return Count(GAUGE, source, inc, total, True, detail, recreated)


def gauge_count(
    series: Sequence[Series], start: datetime, end: datetime
) -> tuple[float, float, int]:
    """(restarts inside [start, end], lifetime count carried across recreations, JobSets
    recreated inside the window). Series of one JobSet uid (a ``uid`` label, else all of
    them: duplicates of one scrape merge) form one timeline; uids follow each other in
    time, and a fall inside one timeline is a new JobSet of the same name too."""
    timelines: dict[str | None, dict[datetime, float]] = defaultdict(dict)
    for s in series:
        key = s.labels.get("uid") or s.labels.get("jobset_uid")
        line = timelines[key]
        for x in s.samples:
            if x.at <= end:
                line[x.at] = max(x.value, line.get(x.at, x.value))
    ordered = sorted((sorted(t.items()) for t in timelines.values() if t), key=lambda t: t[0][0])
    carried = inc = 0.0
    recreated = 0
    previous: float | None = None
    for samples in ordered:
        fresh = previous is not None  # another uid of the same name follows
        for at, value in samples:
            inside = start < at
            if previous is not None and (fresh or value < previous):
                # status.restarts never falls: a new JobSet. The old count carries on.
                carried += previous + 1
                if inside:
                    recreated += 1
                    inc += 1 + value
            elif previous is not None and inside:
                inc += value - previous
            previous, fresh = value, False
    return inc, carried + (previous or 0.0), recreated


# --- the JobSet object ------------------------------------------------------------------


def _object(ctx: Context, ev: Evidence, found: JobSetCount, notes: Notes) -> Count | None:
    source = ev.source_of(EvidenceKind.JOBSETS)
    if ev.jobsets is None:
        why = _why(ev, EvidenceKind.JOBSETS, "no jobsets.json or live listing")
        found.missing.append(f"the JobSet object ({why})")
        return None
    mine = [
        j
        for j in ev.jobsets
        if j.name == ctx.workload
        and (ctx.namespace is None or j.namespace in (None, ctx.namespace))
    ]
    if not mine:
        notes.no_data(1, f"jobsets: no JobSet {ctx.workload} among the objects read", source)
        return None
    current = max(mine, key=lambda j: j.created_at or ctx.start_time)
    own = _own_restarts(current)
    found.unseen_by_gauge = (current.job_restarts or 0) + (current.in_place_restarts or 0)
    parts = [f"uid {current.uid or '?'}"]
    if current.created_at:
        parts.append(f"created {format_rfc3339(current.created_at)}")
    parts.append(f"status.restarts {current.restarts if current.restarts is not None else '?'}")
    if current.restarts_count_towards_max is not None:
        parts.append(f"restartsCountTowardsMax {current.restarts_count_towards_max}")
    if current.job_restarts is not None:
        parts.append(f"jobRestarts {current.job_restarts}")
    if current.in_place_restarts is not None:
        parts.append(f"in-place restart attempt {current.in_place_restarts}")
    if current.failed_reason:
        parts.append(f"Failed ({current.failed_reason})")
    detail = ", ".join(parts)
    older = _earlier_generations(ctx, ev, current)
    created_inside = current.created_at is not None and ctx.in_window(current.created_at)
    inc: float | None = None
    proves = False
    recreated = 0
    if created_inside and older:
        recreated = 1
        inc = 1.0 + own
        detail += f"; recreated inside the window (earlier: {short_list(sorted(older))})"
    elif created_inside:
        inc = float(own)
        detail += "; created inside the window, all its restarts since"
    elif current.restarting_since and ctx.in_window(current.restarting_since):
        inc = 1.0
        detail += f"; RestartingJobSet since {format_rfc3339(current.restarting_since)}"
    elif own == 0 and current.created_at is not None and current.created_at <= ctx.start_time:
        inc, proves = 0.0, True
        detail += "; never restarted since before the window"
    total = float(own) + (float(len(older)) if older else 0.0)
    return Count(OBJECT, source, inc, total, proves, detail, recreated)


def _own_restarts(js: JobSetInfo) -> int:
    """Global, per-Job and in-place restarts of one JobSet: each its own recreation."""
    return (js.restarts or 0) + (js.job_restarts or 0) + (js.in_place_restarts or 0)


def _earlier_generations(ctx: Context, ev: Evidence, current: JobSetInfo) -> set[str]:
    """Other uids of the same name that pods or their logs show (JobSet v0.9+ labels
    pods with ``jobset-uid``), or JobSet objects older than this one."""
    uids = {j.uid for j in ev.jobsets or () if j.name == ctx.workload and j.uid}
    uids |= {a.jobset_uid for a in _attempts(ctx, ev) if a.jobset_uid}
    return {u for u in uids if u != current.uid}


# --- the restart-attempt labels ----------------------------------------------------------


def _attempts(ctx: Context, ev: Evidence) -> list[RestartAttemptSeen]:
    seen = list(ev.log_restart_attempts or ())
    seen += metric_attempts(ev.pod_info or ())
    for pod in ev.pods or ():
        if pod.workload != ctx.workload or pod.created_at is None:
            continue
        if pod.restart_attempt is not None:
            seen.append(
                RestartAttemptSeen(
                    ctx.workload,
                    pod.namespace,
                    pod.created_at,
                    pod.restart_attempt,
                    pod.jobset_uid,
                    origin="pod",
                )
            )
        if pod.job_restart_attempt is not None and pod.job_key:
            seen.append(
                RestartAttemptSeen(
                    ctx.workload,
                    pod.namespace,
                    pod.created_at,
                    pod.job_restart_attempt,
                    pod.jobset_uid,
                    pod.job_key,
                    origin="pod",
                )
            )
    return [
        a
        for a in seen
        if a.workload == ctx.workload
        and (ctx.namespace is None or a.namespace in (None, ctx.namespace))
        and (ctx.cluster is None or a.cluster in (None, ctx.cluster))
    ]


def _labels(ctx: Context, ev: Evidence, found: JobSetCount, notes: Notes) -> Count | None:
    where = [
        name
        for name, present in (
            ("pods", ev.pods is not None),
            ("log entries", ev.log_restart_attempts is not None),
            ("kube_pod_labels", any(s.metric == "kube_pod_labels" for s in ev.pod_info or ())),
        )
        if present
    ]
    seen = _attempts(ctx, ev)
    if not seen:
        if not where:
            found.missing.append(f"the pods' {LABEL} (no pods, pod logs or kube_pod_labels)")
        return None
    inc, _, recreated, values = attempt_count(seen, ctx.start_time, ctx.end_time)
    # The lifetime count from the pods that exist, as every reader of pods sees them.
    on_pods = [a for a in seen if a.origin == "pod"]
    total = attempt_count(on_pods, ctx.start_time, ctx.end_time)[1] if on_pods else None
    detail = f"{values}, on {', '.join(where)}"
    if recreated:
        detail += f"; a new jobset-uid {recreated} time(s) inside the window: recreated"
    # One value seen says which attempt the pods are on, not that none began in the window.
    return Count(LABEL, _label_source(ev), inc if inc > 0 else None, total, False, detail)


def _label_source(ev: Evidence) -> str | None:
    names = [ev.source_of(k) for k in (EvidenceKind.PODS, EvidenceKind.LOGS)]
    return ",".join(n for n in names if n) or None


def attempt_count(
    seen: Iterable[RestartAttemptSeen], start: datetime, end: datetime
) -> tuple[float, float, int, str]:
    """(restarts certainly inside the window, lifetime count, recreations inside it, the
    values seen). A label is seen after its attempt began, so only a change between two
    sightings both inside the window is certainly inside it. Per JobSet uid and per Job; a
    new uid, or a JobSet-wide attempt that falls, is a JobSet recreated under the name."""
    by_gen: dict[str | None, list[RestartAttemptSeen]] = defaultdict(list)
    for a in sorted(seen, key=lambda a: a.at):
        if a.at <= end:
            by_gen[a.jobset_uid].append(a)
    gens = sorted(by_gen.values(), key=lambda g: g[0].at)
    inc = carried = 0.0
    recreated = 0
    values: list[str] = []
    last: RestartAttemptSeen | None = None  # the previous uid's last sighting
    gen_total = 0.0
    for gen in gens:
        if last is not None:
            carried += gen_total + 1
            if start < last.at:
                recreated += 1
                inc += 1 + next((a.attempt for a in gen if a.job is None), 0)
        per_job: dict[str | None, list[RestartAttemptSeen]] = defaultdict(list)
        for a in gen:
            per_job[a.job].append(a)
        gen_total = 0.0
        for job, obs in per_job.items():
            prev: RestartAttemptSeen | None = None
            top = 0
            for a in obs:
                if prev is not None and a.attempt < prev.attempt and job is None:
                    # status.restarts never falls: a new JobSet of the same name.
                    carried += top + 1
                    top = 0
                    if start < prev.at:
                        recreated += 1
                        inc += 1 + a.attempt
                elif prev is not None and a.attempt > prev.attempt and start < prev.at:
                    inc += a.attempt - prev.attempt
                top = max(top, a.attempt)
                prev = a
            gen_total += top
            shown = list(dict.fromkeys(a.attempt for a in obs))
            if job is None or len(shown) > 1:  # a Job that never restarted says nothing
                label = "restart-attempt" if job is None else f"job-restart-attempt of {job}"
                values.append(f"{label} {'/'.join(str(v) for v in shown)}")
        last = gen[-1]
    return inc, carried + gen_total, recreated, "; ".join(dict.fromkeys(values))
