"""Kubeflow Trainer v2 TrainJobs: detection, the JobSet path, naming, the Failed reason.

The objects are shaped as kubeflow/trainer v2.1.0 serves them
(``pkg/apis/trainer/v1alpha1/trainjob_types.go``; the JobSet its runtime builds in
``pkg/runtime/framework/plugins/jobset/jobset.go``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loopbreaker.diagnosis import engine, trainjobs
from loopbreaker.diagnosis.queries import queries_for, templates_for
from loopbreaker.diagnosis.scope import NoEvidence, resolve, scope
from loopbreaker.diagnosis.telemetry import load_directory
from loopbreaker.errors import InvalidContext
from loopbreaker.model import (
    Context,
    Evidence,
    EvidenceKind,
    PodInfo,
    SignalKind,
    SourceStatus,
    WorkloadKind,
)
from loopbreaker.model.evidence import JobSetInfo

T = datetime(2026, 11, 17, 9, 30, tzinfo=UTC)
CTX = Context(cluster="c1", workload="llama-ft", issue_time=T, namespace="ml")
FAILED_MESSAGE = (
    "jobset failed due to reaching max number of restarts (first failed job: llama-ft-node-0)"
)


def stamp(minutes: float) -> str:
    return (T + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def trainjob(
    name: str = "llama-ft", namespace: str = "ml", conditions: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace, "uid": "tj-uid"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": {"conditions": conditions or []},
    }


def failed(reason: str = "ReachedMaxRestarts", at: float = 6.9, status: str = "True") -> Any:
    return {
        "type": "Failed",
        "status": status,
        "reason": reason,
        "message": FAILED_MESSAGE,
        "lastTransitionTime": stamp(at),
    }


def jobset(name: str, owner: str | None, *, owner_kind: str = "TrainJob") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml"}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": owner_kind,
                "name": owner,
                "uid": "tj-uid",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta}


def jobset_pod(name: str = "llama-ft-node-0-0-abcde", namespace: str = "ml") -> PodInfo:
    return PodInfo(
        name=name, namespace=namespace, workload="llama-ft", workload_kind="jobset", phase="Running"
    )


def evidence(**values: Any) -> Evidence:
    sources = {k: SourceStatus("file:x", True) for k in (EvidenceKind.LOGS, EvidenceKind.PODS)}
    return Evidence(sources=sources, **values)


# --- the kind -------------------------------------------------------------------------


def test_trainjob_is_jobset_backed_and_not_operator_counted() -> None:
    kind = WorkloadKind.TRAINJOB
    assert kind.api_kind == "TrainJob" and kind.value == "trainjob"
    assert kind.jobset_backed and not kind.kubeflow and kind.framework is None
    assert WorkloadKind.JOBSET.jobset_backed and not WorkloadKind.TFJOB.jobset_backed
    assert WorkloadKind.parse("TrainJob") is kind and WorkloadKind.parse("train-job") is kind
    assert WorkloadKind.from_api_kind("TrainJob") is kind
    with pytest.raises(InvalidContext, match="trainjob"):
        WorkloadKind.parse("trainjobs")


def test_queries_follow_the_jobset_it_owns() -> None:
    jobset = [t.qualified_id for t in templates_for(WorkloadKind.JOBSET)]
    assert [t.qualified_id for t in templates_for(WorkloadKind.TRAINJOB)] == jobset
    ctx = replace(CTX, workload_kind=WorkloadKind.TRAINJOB)
    restarts = next(q for q in queries_for(ctx) if q.id == "restarts")
    assert 'jobset_name="llama-ft"' in restarts.text
    assert "training_operator" not in "\n".join(q.text for q in queries_for(ctx))


# --- reading the objects ----------------------------------------------------------------


def test_a_trainjob_names_itself_and_its_failed_condition() -> None:
    found = trainjobs.signals([trainjob(conditions=[failed()])], "file:jobs.json")
    seen, fail = found
    assert (seen.workload, seen.namespace, seen.workload_kind) == ("llama-ft", "ml", "trainjob")
    assert seen.timestamp is None and seen.signature == trainjobs.SEEN
    assert fail.signature == trainjobs.FAILED and fail.reason == "ReachedMaxRestarts"
    assert fail.excerpt == FAILED_MESSAGE
    assert fail.timestamp == T + timedelta(seconds=414)
    assert fail.log_name == "file:jobs.json"
    assert all(s.kind is SignalKind.UNRECOGNIZED for s in found)  # decides nothing alone


@pytest.mark.parametrize(
    "conditions",
    [
        [],
        [failed(status="False")],
        [{"type": "Suspended", "status": "True", "reason": "Suspended"}],
        [{"type": "Complete", "status": "True", "reason": "AllJobsCompleted"}],
    ],
)
def test_only_a_true_failed_condition_is_a_failure(conditions: list[dict[str, Any]]) -> None:
    found = trainjobs.signals([trainjob(conditions=conditions)], "file:jobs.json")
    assert [s.signature for s in found] == [trainjobs.SEEN]


def test_a_failed_condition_without_a_readable_time_keeps_its_reason() -> None:
    cond = {**failed("TrainingRuntimeNotSupported"), "lastTransitionTime": "yesterday"}
    (_, fail) = trainjobs.signals([trainjob(conditions=[cond])], "k")
    assert fail.timestamp is None and fail.reason == "TrainingRuntimeNotSupported"


def test_a_jobset_names_the_trainjob_that_owns_it() -> None:
    (sig,) = trainjobs.signals([jobset("llama-ft", "llama-ft")], "file:jobs.json")
    assert (sig.workload, sig.workload_kind, sig.signature) == (
        "llama-ft",
        "trainjob",
        trainjobs.OWNS_JOBSET,
    )
    # Another owner's name, another owner kind, no owner, another kind of object: nothing.
    assert trainjobs.signals([jobset("llama-ft", "other")], "f") == ()
    assert trainjobs.signals([jobset("llama-ft", "llama-ft", owner_kind="Workload")], "f") == ()
    assert trainjobs.signals([jobset("llama-ft", None)], "f") == ()
    tfjob = {**trainjob(), "apiVersion": "kubeflow.org/v1", "kind": "TFJob"}
    assert trainjobs.signals([tfjob], "f") == ()


# --- detection ----------------------------------------------------------------------------


def test_a_trainjob_object_makes_its_jobset_evidence_a_trainjob() -> None:
    ev = evidence(signals=trainjobs.signals([trainjob()], "file:jobs.json"), pods=(jobset_pod(),))
    resolved = resolve(replace(CTX, namespace=None), ev, kind_given=False)
    assert resolved.context.workload_kind is WorkloadKind.TRAINJOB
    assert resolved.context.namespace == "ml"
    assert "workload kind TrainJob detected from the evidence" in (resolved.note or "")


def test_a_jobset_owned_by_a_trainjob_is_detected_from_jobsets() -> None:
    owned = JobSetInfo(
        name="llama-ft", namespace="ml", owner_kind="TrainJob", owner_name="llama-ft"
    )
    resolved = resolve(CTX, evidence(pods=(jobset_pod(),), jobsets=(owned,)), kind_given=False)
    assert resolved.context.workload_kind is WorkloadKind.TRAINJOB
    plain = replace(owned, owner_kind=None, owner_name=None)
    resolved = resolve(CTX, evidence(pods=(jobset_pod(),), jobsets=(plain,)), kind_given=False)
    assert resolved.context.workload_kind is WorkloadKind.JOBSET


def test_jobset_evidence_alone_is_not_taken_for_a_trainjob() -> None:
    resolved = resolve(CTX, evidence(pods=(jobset_pod(),)), kind_given=False)
    assert resolved.context.workload_kind is WorkloadKind.JOBSET


def test_a_trainjob_in_another_namespace_does_not_claim_the_jobset() -> None:
    ev = evidence(
        signals=trainjobs.signals([trainjob(namespace="other")], "f"),
        pods=(jobset_pod(),),
    )
    with pytest.raises(NoEvidence, match="names JobSet and TrainJob"):
        resolve(replace(CTX, namespace=None), ev, kind_given=False)


def test_kind_given_trainjob_over_jobset_evidence_says_it_read_no_trainjob() -> None:
    ctx = replace(CTX, workload_kind=WorkloadKind.TRAINJOB)
    resolved = resolve(ctx, evidence(pods=(jobset_pod(),)), kind_given=True)
    assert resolved.context.workload_kind is WorkloadKind.TRAINJOB
    assert "no TrainJob object read" in (resolved.note or "")


def test_kind_given_as_the_jobset_or_another_kind() -> None:
    ev = evidence(signals=trainjobs.signals([trainjob()], "f"), pods=(jobset_pod(),))
    as_jobset = resolve(replace(CTX, workload_kind=WorkloadKind.JOBSET), ev, kind_given=True)
    assert as_jobset.context.workload_kind is WorkloadKind.JOBSET
    with pytest.raises(NoEvidence, match="no TFJob llama-ft .*seen: TrainJob ml/llama-ft"):
        resolve(replace(CTX, workload_kind=WorkloadKind.TFJOB), ev, kind_given=True)


def test_scope_keeps_the_jobsets_pods_as_the_trainjobs() -> None:
    ctx = replace(CTX, workload_kind=WorkloadKind.TRAINJOB)
    pods = (jobset_pod(), jobset_pod("llama-ft-node-0-1-zzzzz", namespace="elsewhere"))
    scoped = scope(ctx, evidence(pods=pods))
    assert [(p.name, p.workload_kind) for p in scoped.pods or ()] == [
        ("llama-ft-node-0-0-abcde", "trainjob")
    ]
    # As a JobSet, the same pod stays a JobSet's; a TFJob context drops it.
    assert scope(CTX, evidence(pods=pods)).pods == (jobset_pod(),)
    tf = replace(CTX, workload_kind=WorkloadKind.TFJOB)
    assert scope(tf, evidence(pods=pods)).pods == ()


# --- naming and the Failed finding --------------------------------------------------------


def test_the_text_names_the_trainjob_and_its_jobset() -> None:
    ctx = replace(CTX, workload_kind=WorkloadKind.TRAINJOB)
    assert trainjobs.describe(ctx) == "TrainJob c1/ml/llama-ft (JobSet ml/llama-ft)"
    assert trainjobs.describe(CTX) == "JobSet c1/ml/llama-ft"
    assert trainjobs.jobset_name(ctx) == trainjobs.jobset_name(CTX) == "llama-ft"
    assert trainjobs.jobset_name(replace(CTX, workload_kind=WorkloadKind.PYTORCHJOB)) is None


def _diagnosed(ctx: Context, signals: Any) -> Any:
    ev = evidence(signals=signals, pods=(jobset_pod(),))
    return engine.diagnose(ctx, ev)


def test_step_1_cites_the_failed_reason_and_message() -> None:
    ctx = replace(CTX, workload_kind=WorkloadKind.TRAINJOB)
    signals = trainjobs.signals(
        [trainjob(conditions=[failed()]), trainjob("other", conditions=[failed("FailedJobs")])],
        "file:jobs.json",
    )
    d = _diagnosed(ctx, signals)
    cited = [f for f in d.evidence if "TrainJob" in f.message]
    assert len(cited) == 1 and cited[0].step == 1 and cited[0].source == "file:jobs.json"
    assert "TrainJob ml/llama-ft is Failed since 2026-11-17T09:36:54Z" in cited[0].message
    assert "reason ReachedMaxRestarts" in cited[0].message and FAILED_MESSAGE in cited[0].message
    assert cited[0] in d.steps[0].findings
    # The same evidence, asked about as a plain JobSet: no TrainJob finding.
    plain = _diagnosed(CTX, signals)
    assert not any("TrainJob" in f.message for f in plain.evidence)


def test_a_failure_outside_the_window_says_so() -> None:
    ctx = replace(CTX, workload_kind=WorkloadKind.TRAINJOB)
    d = _diagnosed(ctx, trainjobs.signals([trainjob(conditions=[failed(at=-300)])], "f"))
    (cited,) = [f.message for f in d.evidence if "TrainJob" in f.message]
    assert "(outside the window)" in cited


def test_jobs_json_yields_the_trainjob_signals(tmp_path: Path) -> None:
    document = {"apiVersion": "v1", "kind": "List", "items": [trainjob(conditions=[failed()])]}
    (tmp_path / "jobs.json").write_text(json.dumps(document))
    ev = load_directory(tmp_path)
    assert [s.signature for s in ev.signals or ()] == [trainjobs.SEEN, trainjobs.FAILED]
    assert ev.sources[EvidenceKind.LOGS].source == "file:jobs.json"
