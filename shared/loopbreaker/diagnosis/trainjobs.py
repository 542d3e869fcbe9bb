"""Kubeflow Trainer v2 TrainJobs and the JobSets they own, as evidence (pure).

What the trainer does, from kubeflow/trainer v2.1.0 (the same in v2.0.0 to v2.3.0):

- ``pkg/apis/trainer/v1alpha1/trainjob_types.go``: kind ``TrainJob`` of
  ``trainer.kubeflow.org/v1alpha1``, resource ``trainjobs``; ``status.conditions`` are
  ``metav1.Condition`` of types ``Suspended`` (reasons ``Suspended``, ``Resumed``),
  ``Complete`` and ``Failed`` (reason ``TrainingRuntimeNotSupported`` from the
  controller; ``DeadlineExceeded`` since v2.3.0). There is no ``Created`` condition.
- ``pkg/runtime/framework/plugins/jobset/jobset.go``: ``Build`` applies a JobSet named and
  namespaced as the TrainJob, labelled with the TrainJob's ``spec.labels``, with a
  controller ownerReference (``trainer.kubeflow.org/v1alpha1``, ``TrainJob``, name, uid);
  ``Status`` copies the JobSet's ``Completed`` / ``Failed`` condition, reason and message
  unchanged, as ``Complete`` / ``Failed``: sigs.k8s.io/jobset v0.10.1
  ``pkg/constants/constants.go`` ``FailedJobs`` ("jobset failed due to one or more job
  failures"), ``ReachedMaxRestarts`` ("jobset failed due to reaching max number of
  restarts"), ``FailJobSetFailurePolicyAction``.

The pods carry the JobSet's labels (``jobset.sigs.k8s.io/jobset-name``), not the TrainJob's,
so a TrainJob is known from its object or from its JobSet's ownerReference. Both become
signals without a timestamp (they name the workload; the engine keeps only timed signals),
and a true ``Failed`` condition becomes a timed signal that :func:`annotate` cites.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from loopbreaker.errors import InvalidContext
from loopbreaker.model import Context, Diagnosis, Finding, Signal, SignalKind, WorkloadKind
from loopbreaker.timeutil import format_rfc3339, parse_rfc3339

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
PLURAL = "trainjobs"
KIND = WorkloadKind.TRAINJOB.api_kind
RESOURCE_TYPE = f"{GROUP}/{KIND}"
#: The signature of each kind of TrainJob signal (``Signal.signature``).
SEEN = "trainer.trainjob"
OWNS_JOBSET = "trainer.trainjob.owner"
FAILED = "trainer.trainjob.failed"


def signals(objects: Iterable[Mapping[str, Any]], source: str) -> tuple[Signal, ...]:
    """What TrainJobs, and JobSets a TrainJob owns, say (other objects say nothing here).

    ``source`` (``file:jobs.json``, the Kubernetes reader) is kept in ``log_name``: it is
    where the object was listed, cited by the findings."""
    out: list[Signal] = []
    for obj in objects:
        kind = obj.get("kind")
        if kind == KIND and _api_group(obj) in (None, GROUP):
            out += trainjob_signals(obj, source)
        elif kind == "JobSet":
            owner = owning_trainjob(obj)
            if owner is not None:
                out.append(_seen(owner, _namespace(obj), source, OWNS_JOBSET))
    return tuple(out)


def owning_trainjob(jobset: Mapping[str, Any]) -> str | None:
    """The TrainJob a JobSet's ownerReferences name, when it is the JobSet's namesake.

    The runtime names the JobSet after its TrainJob (``JobSet(trainJob.Name, ...)``); an
    owner of another name is not a TrainJob whose queries follow this JobSet."""
    meta = _map(jobset.get("metadata"))
    name = meta.get("name")
    for ref in _list(meta.get("ownerReferences")):
        if not isinstance(ref, Mapping) or ref.get("kind") != KIND:
            continue
        api_version = ref.get("apiVersion")
        if isinstance(api_version, str) and api_version.split("/")[0] != GROUP:
            continue
        if isinstance(name, str) and ref.get("name") == name:
            return name
    return None


def jobset_name(ctx: Context) -> str | None:
    """The JobSet the workload runs as: itself, or a TrainJob's namesake; None for the
    Kubeflow operator's jobs."""
    return ctx.workload if ctx.workload_kind.jobset_backed else None


def describe(ctx: Context) -> str:
    """``TrainJob c/ml/llama-ft (JobSet ml/llama-ft)``; ``JobSet c/ml/x`` for the others."""
    namespace = ctx.namespace or "*"
    text = f"{ctx.workload_kind.api_kind} {ctx.cluster}/{namespace}/{ctx.workload}"
    if ctx.workload_kind is WorkloadKind.TRAINJOB:
        text += f" (JobSet {namespace}/{ctx.workload})"
    return text


def annotate(diagnosis: Diagnosis, evidence_signals: Iterable[Signal] | None) -> Diagnosis:
    """Step 1 cites the TrainJob's ``Failed`` condition, reason and message, when read."""
    ctx = diagnosis.context
    if ctx.workload_kind is not WorkloadKind.TRAINJOB:
        return diagnosis
    failed = [
        s
        for s in evidence_signals or ()
        if s.signature == FAILED
        and s.workload == ctx.workload
        and (ctx.namespace is None or s.namespace in (None, ctx.namespace))
    ]
    if not failed:
        return diagnosis
    findings = tuple(_finding(s, ctx) for s in failed)
    steps = tuple(
        replace(step, findings=step.findings + findings) if step.number == 1 else step
        for step in diagnosis.steps
    )
    return replace(diagnosis, steps=steps, evidence=findings + diagnosis.evidence)


def _finding(sig: Signal, ctx: Context) -> Finding:
    at = sig.timestamp
    when = f" since {format_rfc3339(at)}" if at else ""
    where = "" if at is None or ctx.in_window(at) else " (outside the window)"
    message = f": {sig.excerpt}" if sig.excerpt else ""
    return Finding(
        1,
        f"TrainJob {sig.namespace + '/' if sig.namespace else ''}{sig.workload} is Failed"
        f"{when}{where}, reason {sig.reason}{message}.",
        source=sig.log_name,
    )


def trainjob_signals(obj: Mapping[str, Any], source: str) -> list[Signal]:
    """One TrainJob object: that it exists, and its true ``Failed`` condition."""
    meta = _map(obj.get("metadata"))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return []
    namespace = _namespace(obj)
    out = [_seen(name, namespace, source, SEEN)]
    for cond in _list(_map(obj.get("status")).get("conditions")):
        if not isinstance(cond, Mapping) or cond.get("type") != "Failed":
            continue
        if cond.get("status") != "True":
            continue
        stamp = cond.get("lastTransitionTime")
        at = None  # without a readable moment the reason is still evidence
        if isinstance(stamp, str):
            with contextlib.suppress(InvalidContext, ValueError):
                at = parse_rfc3339(stamp, what=f"TrainJob {name} Failed condition")
        reason, message = cond.get("reason"), cond.get("message")
        out.append(
            replace(
                _seen(name, namespace, source, FAILED),
                timestamp=at,
                severity="ERROR",
                reason=reason if isinstance(reason, str) and reason else "Failed",
                excerpt=message[:300] if isinstance(message, str) else "",
            )
        )
    return out


def _seen(name: str, namespace: str | None, source: str, signature: str) -> Signal:
    return Signal(
        kind=SignalKind.UNRECOGNIZED,
        timestamp=None,
        namespace=namespace,
        workload=name,
        workload_kind=WorkloadKind.TRAINJOB.value,
        reason=KIND,
        excerpt=f"TrainJob {namespace + '/' if namespace else ''}{name}",
        signature=signature,
        log_name=source,
        resource_type=RESOURCE_TYPE,
    )


def _api_group(obj: Mapping[str, Any]) -> str | None:
    api_version = obj.get("apiVersion")
    return api_version.split("/")[0] if isinstance(api_version, str) and api_version else None


def _namespace(obj: Mapping[str, Any]) -> str | None:
    namespace = _map(obj.get("metadata")).get("namespace")
    return namespace if isinstance(namespace, str) and namespace else None


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
