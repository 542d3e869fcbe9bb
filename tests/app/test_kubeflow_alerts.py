"""TFJob / PyTorchJob restart alerts: the namespace's incident, resolved to the jobs.

The alert labels are the shipped rules' (deploy/prometheus/loopbreaker-rules.yaml: ``sum by
(cluster, job_namespace)`` then ``namespace`` copied from ``job_namespace``) plus what
kube-prometheus-stack adds: its prometheus-operator sets the external label
``prometheus="<namespace>/<name>"`` on every alert (``prometheus_replica`` is dropped by
its ``alert_relabel_configs``), and a single-cluster Prometheus has no ``cluster``. A
user's own rule over the raw counter keeps the ServiceMonitor's target labels, among them
``namespace="kubeflow"`` (the operator's namespace) beside ``job_namespace``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeClock, FakeNotifier, FakeStore
from test_alert_webhook import payload

from loopbreaker.app.alert_webhook import AlertWebhook
from loopbreaker.diagnosis.evidence import TelemetryDirEvidence
from loopbreaker.diagnosis.scope import series_namespace
from loopbreaker.incidents import Incident, Scope
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.model import SignalKind
from loopbreaker.responder import kubeflow_alerts
from loopbreaker.responder.service import Responder
from loopbreaker.settings.load import Settings
from loopbreaker.signals import alerts
from loopbreaker.timeutil import format_rfc3339

T0 = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)
STARTS = "2026-05-20T07:58:45.828Z"
TOKEN = "am-token-kubeflow-1"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
NS, OPERATOR_NS = "ml-jobs", "kubeflow"
KPS = {"prometheus": "monitoring/kube-prometheus-stack-prometheus"}

TFJOB_ALERT = {
    "alertname": "LoopbreakerTFJobRestartLoop",
    "job_namespace": NS,
    "namespace": NS,
    "loopbreaker": "true",
    "loopbreaker_signal": "restart_loop",
    "workload_kind": "tfjob",
    "severity": "critical",
    **KPS,
}
PYTORCH_ALERT = {
    **TFJOB_ALERT,
    "alertname": "LoopbreakerPyTorchJobRestartLoop",
    "job_namespace": "team-pt",
    "namespace": "team-pt",
    "workload_kind": "pytorchjob",
}
# A rule of the user's own, `increase(training_operator_jobs_restarted_total[60m]) > 0`:
# the labels of the series as a ServiceMonitor on the operator's Service scraped it.
RAW_PYTORCH_ALERT = {
    "alertname": "TrainingJobsRestarting",
    "job_namespace": "team-pt",
    "framework": "pytorch",
    "namespace": OPERATOR_NS,
    "pod": "training-operator-7d9f8c6b5-x2m4q",
    "service": "training-operator",
    "endpoint": "monitoring-port",
    "job": "training-operator",
    "container": "training-operator",
    "instance": "10.8.1.17:8080",
    **KPS,
}


def alert(
    labels: dict[str, str],
    *,
    starts: str = STARTS,
    status: str = "firing",
    ends: str = "0001-01-01T00:00:00Z",
    fingerprint: str = "7c1e0b9f2a4d6e81",
) -> dict[str, Any]:
    return {
        "status": status,
        "labels": labels,
        "annotations": {"summary": f"TFJobs in namespace {labels.get('namespace')} restart"},
        "startsAt": starts,
        "endsAt": ends,
        "generatorURL": "http://prometheus:9090/graph?g0.expr=x",
        "fingerprint": fingerprint,
    }


def restart_event(
    kind: str, job: str, namespace: str, at: datetime, *, replica: str = "Worker", n: int = 0
) -> dict[str, Any]:
    """The operator's Event on the job, as the GKE events log holds it. Reason and message
    from kubeflow/training-operator v1.8.0: pkg/controller.v1/common/pod.go (TFJob:
    ``NewReason(jobKind, "Restarting")``, "job %s is restarting because %s replica(s)
    failed.") and pkg/controller.v1/pytorch/pytorchjob_controller.go ("PyTorchJob %s is
    restarting because %d %s replica(s) failed.")."""
    message = (
        f"PyTorchJob {job} is restarting because 1 {replica} replica(s) failed."
        if kind == "PyTorchJob"
        else f"job {job} is restarting because {replica} replica(s) failed."
    )
    stamp = format_rfc3339(at)
    return {
        "insertId": f"ev-{job}-{n}-{int(at.timestamp())}",
        "logName": "projects/proj/logs/events",
        "resource": {"type": "k8s_cluster", "labels": {"project_id": "proj", "location": "l"}},
        "severity": "WARNING",
        "timestamp": stamp,
        "jsonPayload": {
            "kind": "Event",
            "apiVersion": "v1",
            "involvedObject": {
                "apiVersion": "kubeflow.org/v1",
                "kind": kind,
                "name": job,
                "namespace": namespace,
            },
            "reason": f"{kind}Restarting",
            "message": message,
            "type": "Warning",
            "source": {"component": f"{kind.lower()}-controller"},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "metadata": {"name": f"{job}.17a1", "namespace": namespace},
        },
    }


def failed_pod(
    job: str, namespace: str, at: datetime, *, operator: str = "tfjob-controller"
) -> dict[str, Any]:
    """A replica pod with the operator's labels (kubeflow.org/v1 common_types.go:
    training.kubeflow.org/job-name, replica-type; operator-name), its container failed."""
    return {
        "metadata": {
            "name": f"{job}-worker-1",
            "namespace": namespace,
            "labels": {
                "training.kubeflow.org/job-name": job,
                "training.kubeflow.org/operator-name": operator,
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": "1",
            },
        },
        "spec": {"nodeName": "node-a", "containers": [{"name": "tensorflow", "image": "tf"}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "tensorflow",
                    "restartCount": 1,
                    "state": {"running": {}},
                    "lastState": {
                        "terminated": {
                            "reason": "Error",
                            "exitCode": 1,
                            "finishedAt": format_rfc3339(at),
                        }
                    },
                }
            ],
        },
    }


def telemetry(
    tmp_path: Path, logs: list[dict[str, Any]], pods: list[dict[str, Any]] | None = None
) -> Path:
    directory = tmp_path / "telemetry"
    directory.mkdir()
    (directory / "logs.json").write_text(json.dumps(logs))
    if pods is not None:
        (directory / "pods.json").write_text(json.dumps({"kind": "List", "items": pods}))
    return directory


def service(
    store: IncidentStore, directory: Path | None, clock: FakeClock
) -> tuple[AlertWebhook, Responder]:
    from loopbreaker.diagnosis.evidence import NoEvidence

    responder = Responder(
        settings=Settings(project="proj"),
        store=store,
        notifier=FakeNotifier(),
        evidence=TelemetryDirEvidence(directory) if directory else NoEvidence("none here"),
        clock=clock,
    )
    return AlertWebhook(responder, token=TOKEN, basic_auth=None), responder


def settled(responder: Responder, clock: FakeClock, store: IncidentStore) -> Incident:
    clock.advance(minutes=10)
    report = responder.settle()
    assert not report.failed, report.failed
    [incident] = store.list_incidents()
    assert incident.diagnosis is not None
    return incident


# --- the alert as a signal ------------------------------------------------------------


@pytest.mark.parametrize(
    "labels, namespace, kind",
    [
        (TFJOB_ALERT, NS, "tfjob"),
        (PYTORCH_ALERT, "team-pt", "pytorchjob"),
        (RAW_PYTORCH_ALERT, "team-pt", "pytorchjob"),
    ],
)
def test_a_kubeflow_restart_alert_names_the_jobs_namespace_and_kind(
    labels: dict[str, str], namespace: str, kind: str
) -> None:
    [parsed] = alerts.parse(payload(alert(labels))).alerts
    assert parsed.reason is None  # acted on, not ignored
    signal = parsed.signal
    assert signal is not None and signal.kind is SignalKind.JOB_RESTARTING
    # job_namespace, never the operator's own namespace, and the same rule as the diagnosis'.
    assert signal.namespace == namespace == series_namespace(labels)
    assert signal.workload is None and signal.workload_kind == kind
    assert signal.cluster is None  # a single-cluster Prometheus has no cluster label


def test_a_cloud_monitoring_policy_on_the_counter_names_the_jobs_namespace() -> None:
    """Managed Prometheus: the series' ``namespace`` is a label of its ``prometheus_target``
    resource (project_id, location, cluster, namespace, job, instance), the operator's."""
    body = {
        "version": "1.2",
        "incident": {
            "incident_id": "0.kf7restart",
            "started_at": int(T0.timestamp()),
            "state": "open",
            "summary": "PyTorchJob restarts",
            "policy_name": "PyTorchJobs restarting",
            "resource": {
                "type": "prometheus_target",
                "labels": {
                    "project_id": "proj",
                    "location": "us-east5",
                    "cluster": "gpu-prod",
                    "namespace": OPERATOR_NS,
                    "job": "training-operator",
                    "instance": "10.8.1.17:8080",
                },
            },
            "metric": {
                "type": "prometheus.googleapis.com/training_operator_jobs_restarted_total/counter",
                "labels": {"job_namespace": "team-pt", "framework": "pytorch"},
            },
        },
    }
    [parsed] = alerts.parse(json.dumps(body).encode()).alerts
    signal = parsed.signal
    assert signal is not None and signal.kind is SignalKind.JOB_RESTARTING
    assert (signal.namespace, signal.workload_kind, signal.cluster) == (
        "team-pt",
        "pytorchjob",
        "gpu-prod",
    )


def test_without_job_namespace_the_namespace_label_is_the_namespace() -> None:
    labels = {k: v for k, v in TFJOB_ALERT.items() if k != "job_namespace"}
    [parsed] = alerts.parse(payload(alert(labels))).alerts
    assert parsed.signal is not None and parsed.signal.namespace == NS


# --- the incident -----------------------------------------------------------------------


def test_the_alert_opens_one_namespace_incident_and_redelivery_opens_none() -> None:
    store, clock = FakeStore(), FakeClock(T0)
    hook, _ = service(store, None, clock)
    first = hook.handle(BEARER, payload(alert(TFJOB_ALERT)))
    assert first.body["alerts"][0]["outcome"] == "accepted"
    [incident] = store.list_incidents()
    assert incident.key.scope is Scope.WORKLOAD and incident.key.name == f"{NS}/"
    assert incident.workload_kinds == ("tfjob",)
    # Alertmanager re-sends the group (repeat_interval, a retry): duplicates.
    again = hook.handle(BEARER, payload(alert(TFJOB_ALERT)))
    assert again.body["alerts"][0]["outcome"] == "duplicate"
    # The same alert firing anew joins the same incident; its resolution does too.
    later = alert(TFJOB_ALERT, starts="2026-05-20T08:20:00Z")
    assert hook.handle(BEARER, payload(later)).body["alerts"][0]["incident_id"] == (incident.id)
    resolved = alert(TFJOB_ALERT, status="resolved", ends="2026-05-20T08:40:00Z")
    reply = hook.handle(BEARER, payload(resolved, status="resolved"))
    assert reply.body["alerts"][0]["incident_id"] == incident.id
    assert [i.id for i in store.list_incidents()] == [incident.id]
    # Another namespace's PyTorchJob alert is another incident.
    hook.handle(BEARER, payload(alert(PYTORCH_ALERT, fingerprint="99")))
    assert sorted(i.key.name for i in store.list_incidents()) == [f"{NS}/", "team-pt/"]


def test_the_diagnosis_resolves_the_alert_to_the_tfjob_of_its_events(tmp_path: Path) -> None:
    logs = [
        restart_event("TFJob", "resnet50-ps", NS, T0 - timedelta(minutes=40), n=1),
        restart_event("TFJob", "resnet50-ps", NS, T0 - timedelta(minutes=8), n=2),
        # Not this alert's: another namespace, another kind, long before its hour.
        restart_event("TFJob", "other-tf", "team-b", T0 - timedelta(minutes=5)),
        restart_event("PyTorchJob", "bert-pt", NS, T0 - timedelta(minutes=5)),
        restart_event("TFJob", "old-tf", NS, T0 - timedelta(hours=4)),
    ]
    store, clock = FakeStore(), FakeClock(T0)
    hook, responder = service(store, telemetry(tmp_path, logs), clock)
    hook.handle(BEARER, payload(alert(TFJOB_ALERT)))
    incident = settled(responder, clock, store)
    assert incident.diagnosis is not None
    found = incident.diagnosis.document["kubeflow_alert"]
    assert [(j["kind"], j["name"], j["restarts"]) for j in found["jobs"]] == [
        ("tfjob", "resnet50-ps", 2)
    ]
    assert incident.diagnosis.summary.startswith(
        f"The TFJob restart alert of namespace {NS} is TFJob resnet50-ps"
    )
    # The job's own diagnosis: its restart loop, from its TFJobRestarting Events.
    context = incident.diagnosis.document["context"]
    assert (context["workload"], context["namespace"]) == ("resnet50-ps", NS)
    assert incident.diagnosis.document["restart_loop"] is True
    # The chat title names the namespace the alert is about, not a truncated workload.
    from loopbreaker.chat.notify import render

    assert f"workloads in namespace {NS} in " in render(incident).title


def test_several_jobs_are_each_named_and_diagnosed(tmp_path: Path) -> None:
    logs = [
        restart_event("TFJob", "resnet50-ps", NS, T0 - timedelta(minutes=30), n=1),
        restart_event("TFJob", "resnet50-ps", NS, T0 - timedelta(minutes=10), n=2),
        restart_event("TFJob", "wide-deep-ctr", NS, T0 - timedelta(minutes=50)),
    ]
    store, clock = FakeStore(), FakeClock(T0)
    hook, responder = service(store, telemetry(tmp_path, logs), clock)
    hook.handle(BEARER, payload(alert(TFJOB_ALERT)))
    incident = settled(responder, clock, store)
    assert incident.diagnosis is not None
    jobs = incident.diagnosis.document["kubeflow_alert"]["jobs"]
    assert [j["name"] for j in jobs] == ["resnet50-ps", "wide-deep-ctr"]
    assert all(j["root_cause"] for j in jobs)
    summary = incident.diagnosis.summary
    assert "covers 2 jobs" in summary and "resnet50-ps (" in summary
    assert "wide-deep-ctr (" in summary
    # One incident, one message: not one per job.
    assert len(store.list_incidents()) == 1


def test_a_pytorchjob_is_resolved_from_its_failed_pod(tmp_path: Path) -> None:
    pods = [
        failed_pod(
            "bert-pt", "team-pt", T0 - timedelta(minutes=3), operator="pytorchjob-controller"
        ),
        # The operator's own pod, and a TFJob's of the same namespace: not this alert's.
        failed_pod("tf-x", "team-pt", T0 - timedelta(minutes=3)),
        failed_pod("bert-pt", OPERATOR_NS, T0 - timedelta(minutes=3)),
    ]
    store, clock = FakeStore(), FakeClock(T0)
    hook, responder = service(store, telemetry(tmp_path, [], pods), clock)
    hook.handle(BEARER, payload(alert(RAW_PYTORCH_ALERT)))
    incident = settled(responder, clock, store)
    assert incident.key.name == "team-pt/"
    assert incident.diagnosis is not None
    [job] = incident.diagnosis.document["kubeflow_alert"]["jobs"]
    assert (job["kind"], job["name"], job["restarts"]) == ("pytorchjob", "bert-pt", 0)
    assert "container tensorflow terminated Error (exit code 1)" in job["evidence"][0]
    assert "PyTorchJob bert-pt (a failed pod" in incident.diagnosis.summary


def test_a_pytorchjob_restart_event_names_its_job(tmp_path: Path) -> None:
    logs = [restart_event("PyTorchJob", "bert-pt", "team-pt", T0 - timedelta(minutes=4))]
    store, clock = FakeStore(), FakeClock(T0)
    hook, responder = service(store, telemetry(tmp_path, logs), clock)
    hook.handle(BEARER, payload(alert(PYTORCH_ALERT)))
    incident = settled(responder, clock, store)
    assert incident.diagnosis is not None
    [job] = incident.diagnosis.document["kubeflow_alert"]["jobs"]
    assert (job["name"], job["restarts"]) == ("bert-pt", 1)
    assert (
        "PyTorchJob bert-pt is restarting because 1 Worker replica(s) failed."
        in (job["evidence"][0])
    )


def test_no_job_found_is_said_plainly_and_nothing_is_guessed(tmp_path: Path) -> None:
    # Events of other jobs only: other namespace, other kind.
    logs = [
        restart_event("TFJob", "other-tf", "team-b", T0 - timedelta(minutes=5)),
        restart_event("PyTorchJob", "bert-pt", NS, T0 - timedelta(minutes=5)),
    ]
    store, clock = FakeStore(), FakeClock(T0)
    hook, responder = service(store, telemetry(tmp_path, logs), clock)
    hook.handle(BEARER, payload(alert(TFJOB_ALERT)))
    incident = settled(responder, clock, store)
    diagnosis = incident.diagnosis
    assert diagnosis is not None
    assert diagnosis.root_cause == "unknown" and not diagnosis.requires_approval
    assert diagnosis.document["kubeflow_alert"]["jobs"] == []
    assert diagnosis.summary.startswith(
        f"The training operator counted TFJob restarts in namespace {NS}, but no job could "
        "be named: no TFJobRestarting Event"
    )
    # pods.json is absent: said, since the job may be in it.
    assert "Not read: pods (file:pods.json: pods.json not found)" in diagnosis.summary
    assert diagnosis.document["restart_loop"] is None
    assert diagnosis.document["context"]["workload"] == ""


def test_with_no_telemetry_at_all_the_incident_says_what_was_not_read() -> None:
    store, clock = FakeStore(), FakeClock(T0)
    hook, responder = service(store, None, clock)
    hook.handle(BEARER, payload(alert(TFJOB_ALERT)))
    incident = settled(responder, clock, store)
    assert incident.diagnosis is not None
    assert "no job could be named" in incident.diagnosis.summary
    assert "Not read: pods (none: none here)" in incident.diagnosis.summary


def test_the_log_sinks_events_name_the_job_when_no_telemetry_does() -> None:
    """Live, the job's TFJobRestarting Events reach the responder through the log sink and
    open the job's incident; the namespace's incident reads them from the store."""
    store, clock = FakeStore(), FakeClock(T0)
    hook, responder = service(store, None, clock)
    for n, minutes in enumerate((30, 6)):
        entry = restart_event("TFJob", "resnet50-ps", NS, T0 - timedelta(minutes=minutes), n=n)
        assert responder.handle_entry(f"m{n}", entry).status.value == "accepted"
    # Another namespace's job incident is not this alert's.
    responder.handle_entry("m9", restart_event("TFJob", "x", "team-b", T0))
    hook.handle(BEARER, payload(alert(TFJOB_ALERT)))
    clock.advance(minutes=10)
    assert not responder.settle().failed
    by_name = {i.key.name: i for i in store.list_incidents()}
    assert sorted(by_name) == [f"{NS}/", f"{NS}/resnet50-ps", "team-b/x"]
    diagnosis = by_name[f"{NS}/"].diagnosis
    assert diagnosis is not None
    [job] = diagnosis.document["kubeflow_alert"]["jobs"]
    assert (job["name"], job["restarts"]) == ("resnet50-ps", 2)
    assert diagnosis.document["restart_loop"] is True


def test_the_kinds_come_from_the_signals_when_the_head_has_none() -> None:
    """A store that counts at settle (Firestore) may hand over a head without kinds."""
    from dataclasses import replace

    store, clock = FakeStore(), FakeClock(T0)
    hook, _ = service(store, None, clock)
    hook.handle(BEARER, payload(alert(PYTORCH_ALERT)))
    [incident] = store.list_incidents()
    bare = replace(incident, workload_kinds=())
    assert kubeflow_alerts.namespace_incident(bare)
    kinds = kubeflow_alerts.kinds_of(bare, store.signals(incident.id))
    assert [k.value for k in kinds] == ["pytorchjob"]
