"""Kubeflow restart alerts: the operator's counter names a namespace, the diagnosis the jobs.

``training_operator_jobs_restarted_total`` has the labels ``job_namespace`` and
``framework`` only (kubeflow/training-operator v1.7.0 and v1.8.0, pkg/common/metrics.go:
``[]string{"job_namespace", "framework"}``), so a TFJob or PyTorchJob restart alert names
no job. It opens an incident keyed by the namespace alone (the workload key
``<namespace>/``, its job part empty), and settling resolves it to the jobs of that
kind that restarted in the alert's hour, from what names them positively:

- the operator's Event on the job, reason ``<Kind>Restarting`` (pkg/controller.v1/common/
  pod.go: ``commonutil.NewReason(jobKind, commonutil.JobRestartingReason)``, with
  ``JobRestartingReason = "Restarting"`` in pkg/util/status.go), and the job's
  ``Restarting`` condition (``jobs.json``), which the classifier reads as restart signals;
- a pod labelled ``training.kubeflow.org/job-name`` (of that kind: its
  ``training.kubeflow.org/operator-name``) whose container failed inside that hour: the
  operator restarts a job when a replica's pod failed (the same pod.go).

One job: the incident is that job's diagnosis. Several: each is diagnosed and named, and
the one with the most restarts carries the incident's verdict. None: the incident says
so, and what could not be read; nothing is guessed. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from loopbreaker.diagnosis.queries import STEP_TITLES
from loopbreaker.incidents import Incident, IncidentKey, Scope
from loopbreaker.incidents.keys import key_for
from loopbreaker.model import (
    Context,
    Diagnosis,
    Evidence,
    EvidenceKind,
    Finding,
    PodInfo,
    Remediation,
    RemediationPath,
    Risk,
    RootCause,
    Signal,
    SignalKind,
    StepReport,
    StepStatus,
    WorkloadKind,
)
from loopbreaker.timeutil import format_rfc3339

#: The range of the shipped rules' ``increase(...[60m])``: a job that restarted this long
#: before the alert started firing is one the alert counted.
RULE_RANGE = timedelta(minutes=60)
#: Jobs diagnosed one by one at most; more are named, not diagnosed (the query budget).
MAX_DIAGNOSED = 4
#: Reports of one restart (the Event and the condition) lie seconds apart.
SAME_RESTART = timedelta(seconds=60)
_POD_SOURCES = (EvidenceKind.PODS,)
_EVENT_SOURCES = (EvidenceKind.LOGS,)

Diagnose = Callable[[Context, Evidence], Diagnosis]
Collect = Callable[[Context], Evidence]


def namespace_restart(signal: Signal) -> bool:
    """A TFJob / PyTorchJob restart alert that names its namespace but no job."""
    kind = _kind(signal.workload_kind)
    # A resolved alert has the same identity: it joins the namespace's incident.
    return (
        signal.kind in (SignalKind.JOB_RESTARTING, SignalKind.ALERT_RESOLVED)
        and signal.resource_type == "alert"
        and not signal.workload
        and bool(signal.namespace)
        and kind is not None
        and kind.kubeflow
    )


def namespace_key(signal: Signal, project: str | None) -> IncidentKey | None:
    """The key of such an alert: ``<namespace>/`` in the workload scope, so every restart
    alert of the namespace, re-sent or firing anew, joins one incident."""
    if not namespace_restart(signal):
        return None
    # key_for escapes the project and cluster; only the name is replaced.
    named = key_for(replace(signal, workload="-"), project)
    return None if named is None else replace(named, name=f"{signal.namespace}/")


def namespace_incident(incident: Incident) -> bool:
    """An incident opened by such an alert: only :func:`namespace_key` makes a workload
    key whose job part is empty."""
    name = incident.key.name
    return incident.key.scope is Scope.WORKLOAD and name.endswith("/") and name.count("/") == 1


def job_incidents(incident: Incident, others: Iterable[Incident]) -> list[Incident]:
    """The incidents of jobs of the namespace incident's namespace (``<namespace>/<job>``),
    which the log sink's ``<Kind>Restarting`` Events opened: their signals are those
    Events. An alert without a cluster takes them only when they are all of one cluster."""
    key = incident.key
    found = [
        o
        for o in others
        if o.id != incident.id
        and o.key.scope is Scope.WORKLOAD
        and o.key.project == key.project
        and o.key.name.startswith(key.name)
        and len(o.key.name) > len(key.name)
        and (key.cluster is None or o.key.cluster == key.cluster)
    ]
    if key.cluster is None and len({o.key.cluster for o in found}) > 1:
        return []  # several clusters share the namespace's name: nothing says which
    return found


def kinds_of(incident: Incident, signals: Iterable[Signal]) -> tuple[WorkloadKind, ...]:
    """The Kubeflow kinds the incident's alerts name, from its head and its signals (a
    store that counts at settle may not keep the kinds on the head)."""
    values = [*incident.workload_kinds, *(s.workload_kind for s in signals if s.workload_kind)]
    kinds = (_kind(v) for v in dict.fromkeys(values))
    return tuple(k for k in kinds if k is not None and k.kubeflow)


def widened(context: Context) -> Context:
    """The namespace context, reaching back over the rule's range before the first alert."""
    return replace(context, window=context.window + RULE_RANGE / 2)


@dataclass
class RestartedJob:
    name: str
    kind: WorkloadKind
    #: Distinct restarts the operator reported (Events / condition); 0 when only pods tell.
    restarts: int = 0
    last: datetime | None = None
    evidence: list[str] = field(default_factory=list)


def restarted_jobs(
    context: Context, kinds: Sequence[WorkloadKind], evidence: Evidence
) -> list[RestartedJob]:
    """The jobs of ``kinds`` in the context's namespace that restarted inside its window,
    most restarts first. Only evidence that names the job, its kind and namespace counts."""
    namespace = context.namespace
    found: dict[tuple[WorkloadKind, str], RestartedJob] = {}
    times: dict[tuple[WorkloadKind, str], list[datetime]] = {}
    for sig in evidence.signals or ():
        kind = _kind(sig.workload_kind)
        if (
            sig.kind is not SignalKind.JOB_RESTARTING
            or sig.resource_type == "alert"
            or not sig.workload
            or kind not in kinds
            or sig.namespace != namespace
            or (sig.cluster is not None and context.cluster and sig.cluster != context.cluster)
            or not context.in_window(sig.timestamp)
        ):
            continue
        assert kind is not None and sig.timestamp is not None
        job = found.setdefault((kind, sig.workload), RestartedJob(sig.workload, kind))
        times.setdefault((kind, sig.workload), []).append(sig.timestamp)
        job.evidence.append(f"{format_rfc3339(sig.timestamp)} {sig.reason}: {sig.excerpt or ''}")
    for key, moments in times.items():
        job = found[key]
        job.restarts = _distinct(moments)
        job.last = max(moments)
    for pod in evidence.pods or ():
        kind = _kind(pod.workload_kind)
        if not pod.workload or kind not in kinds or pod.namespace != namespace:
            continue
        assert kind is not None
        failed = _failure(pod, context)
        if failed is None:
            continue
        job = found.setdefault((kind, pod.workload), RestartedJob(pod.workload, kind))
        job.evidence.append(failed)
        if job.last is None:
            job.last = _failed_at(pod, context)
    return sorted(
        found.values(),
        key=lambda j: (-j.restarts, -(j.last.timestamp() if j.last else 0), j.name),
    )


def _distinct(moments: Iterable[datetime]) -> int:
    count, last = 0, None
    for moment in sorted(moments):
        if last is None or moment - last > SAME_RESTART:
            count += 1
        last = moment
    return count


def _failures(pod: PodInfo, context: Context) -> list[tuple[datetime, str]]:
    out = []
    for container in pod.containers:
        for ended in (container.terminated, container.last_terminated):
            if ended is None or not context.in_window(ended.finished_at):
                continue
            if ended.exit_code in (None, 0) and ended.reason in (None, "Completed"):
                continue
            assert ended.finished_at is not None
            text = (
                f"pod {pod.name}: container {container.name} terminated "
                f"{ended.reason or 'with an error'} (exit code {ended.exit_code}) at "
                f"{format_rfc3339(ended.finished_at)}"
            )
            out.append((ended.finished_at, text))
    if pod.disruption_reason and context.in_window(pod.disruption_at):
        assert pod.disruption_at is not None
        text = f"pod {pod.name}: {pod.disruption_reason} at {format_rfc3339(pod.disruption_at)}"
        out.append((pod.disruption_at, text))
    return sorted(out)


def _failure(pod: PodInfo, context: Context) -> str | None:
    found = _failures(pod, context)
    return found[-1][1] if found else None


def _failed_at(pod: PodInfo, context: Context) -> datetime | None:
    found = _failures(pod, context)
    return found[-1][0] if found else None


@dataclass(frozen=True)
class Resolution:
    """The incident's diagnosis and what the resolution adds to its stored document."""

    diagnosis: Diagnosis
    document: Mapping[str, Any]


def diagnose_namespace(
    context: Context,
    kinds: Sequence[WorkloadKind],
    evidence: Evidence,
    collect: Collect,
    diagnose: Diagnose,
) -> Resolution:
    """Resolve the namespace incident to its jobs and diagnose each (see the module)."""
    wide = widened(context)
    jobs = restarted_jobs(wide, kinds, evidence)
    what = " or ".join(k.api_kind for k in kinds) or "Kubeflow job"
    where = f"namespace {context.namespace}"
    period = f"{format_rfc3339(wide.start_time)} to {format_rfc3339(wide.end_time)}"
    document: dict[str, Any] = {
        "namespace": context.namespace,
        "kinds": [k.value for k in kinds],
        "window": [format_rfc3339(wide.start_time), format_rfc3339(wide.end_time)],
        "jobs": [],
    }
    if not jobs:
        diagnosis = _unresolved(wide, kinds, evidence, what, where, period)
        document["unresolved"] = diagnosis.summary
        return Resolution(diagnosis, {"kubeflow_alert": document})
    diagnoses: list[Diagnosis] = []
    for job in jobs:
        entry: dict[str, Any] = {
            "kind": job.kind.value,
            "name": job.name,
            "restarts": job.restarts,
            "last_restart": format_rfc3339(job.last) if job.last else None,
            "evidence": job.evidence[:5],
        }
        if len(diagnoses) < MAX_DIAGNOSED:
            own = replace(context, workload=job.name, workload_kind=job.kind)
            found = diagnose(own, collect(own))
            diagnoses.append(found)
            entry.update(root_cause=found.root_cause.value, summary=found.summary)
        document["jobs"].append(entry)
    primary = diagnoses[0]
    if len(jobs) == 1:
        lead = (
            f"The {what} restart alert of {where} is {jobs[0].kind.api_kind} "
            f"{jobs[0].name} ({_how(jobs[0])}). "
        )
    else:
        named = ", ".join(
            f"{j['name']} ({j.get('root_cause', 'not diagnosed')})" for j in document["jobs"]
        )
        lead = (
            f"The {what} restart alert of {where} covers {len(jobs)} jobs that restarted "
            f"from {period}: {named}. Diagnosis of {jobs[0].name} (most restarts, then latest): "
        )
    return Resolution(
        replace(primary, summary=lead + primary.summary), {"kubeflow_alert": document}
    )


def _how(job: RestartedJob) -> str:
    if job.restarts:
        return f"{job.restarts} {job.kind.api_kind}Restarting report(s)"
    return "a failed pod; no Restarting Event read"


def _unresolved(
    context: Context,
    kinds: Sequence[WorkloadKind],
    evidence: Evidence,
    what: str,
    where: str,
    period: str,
) -> Diagnosis:
    reasons = " or ".join(f"{k.api_kind}Restarting" for k in kinds) or "<Kind>Restarting"
    unread = sorted(
        f"{kind.value} ({status.source}: {status.reason or 'unavailable'})"
        for kind, status in evidence.sources.items()
        if kind in (*_EVENT_SOURCES, *_POD_SOURCES) and not status.available
    )
    summary = (
        f"The training operator counted {what} restarts in {where}, but no job could be "
        f"named: no {reasons} Event or Restarting condition of a {what} in {where}, and no "
        f"failed pod labelled training.kubeflow.org/job-name, from {period}."
    )
    if unread:
        summary += f" Not read: {'; '.join(unread)}; the job may be in what was not read."
    finding = Finding(1, summary, supports=False, source="kubeflow restart alert")
    step = StepReport(
        1,
        STEP_TITLES[1],
        StepStatus.UNAVAILABLE,
        (finding,),
        (),
        reason="no job of the alert could be named",
    )
    return Diagnosis(
        context=context,
        restart_loop=None,
        restart_increase=None,
        restart_total=None,
        root_cause=RootCause.UNKNOWN,
        remediation=Remediation(RemediationPath.NONE, Risk.NONE, False, ()),
        suspect_hosts=(),
        steps=(step,),
        evidence=(finding,),
        ticket_draft=None,
        missing_evidence=tuple(unread) or ("the job the alert counted",),
        summary=summary,
    )


def _kind(value: str | None) -> WorkloadKind | None:
    return next((k for k in WorkloadKind if k.value == value), None)
