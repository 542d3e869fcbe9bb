"""``on_alertmanager_webhook``'s service: auth, payloads, idempotency, one store with the sinks."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fakes import FakeClock, FakeEvidence, FakeNotifier, FakeStore

from loopbreaker.app.alert_webhook import AlertWebhook
from loopbreaker.errors import TransientError
from loopbreaker.incidents import Scope
from loopbreaker.incidents.store.base import IncidentStore, refresh
from loopbreaker.responder import service as responder_module
from loopbreaker.responder.service import Responder
from loopbreaker.settings.load import Settings

T0 = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)
TOKEN = "am-token-5c1f0e9a7b"
BASIC = "alertmanager:pa55:word"
CLUSTER, NS, JOB = "tpu-cluster-prod", "default", "llama3-70b-training"
NODE = "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-x7k2"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def webhook(
    store: IncidentStore, clock: FakeClock | None = None, **kwargs: Any
) -> tuple[AlertWebhook, Responder]:
    responder = Responder(
        settings=Settings(project="proj"),
        store=store,
        notifier=FakeNotifier(),
        evidence=FakeEvidence(),
        clock=clock or FakeClock(T0),
    )
    options: dict[str, Any] = {"token": TOKEN, "basic_auth": BASIC, **kwargs}
    return AlertWebhook(responder, **options), responder


def alert(
    labels: dict[str, str],
    *,
    status: str = "firing",
    starts: str = "2026-05-20T07:58:45.828Z",
    ends: str = "0001-01-01T00:00:00Z",
    fingerprint: str = "1a30ba71cca2921f",
) -> dict[str, Any]:
    return {
        "status": status,
        "labels": labels,
        "annotations": {"summary": "restarts", "description": "kube_jobset_restarts increased"},
        "startsAt": starts,
        "endsAt": ends,
        "generatorURL": "http://prometheus:9090/graph?g0.expr=x",
        "fingerprint": fingerprint,
    }


def payload(*alerts: dict[str, Any], status: str = "firing") -> bytes:
    return json.dumps(
        {
            "receiver": "loopbreaker",
            "status": status,
            "alerts": list(alerts),
            "groupLabels": {"alertname": "x"},
            "commonLabels": {"loopbreaker": "true"},
            "commonAnnotations": {},
            "externalURL": "http://alertmanager:9093",
            "version": "4",
            "groupKey": '{}/{loopbreaker="true"}:{alertname="x"}',
            "truncatedAlerts": 0,
        }
    ).encode()


JOBSET_LABELS = {
    "alertname": "LoopbreakerJobSetRestartLoop",
    "loopbreaker": "true",
    "loopbreaker_signal": "restart_loop",
    "severity": "critical",
    "cluster": CLUSTER,
    "namespace": NS,
    "workload": JOB,
    "jobset_name": JOB,
    "workload_kind": "jobset",
}


@pytest.mark.parametrize(
    "headers, query",
    [
        ({}, {}),
        ({"Authorization": "Bearer wrong"}, {}),
        ({"Authorization": f"Bearer {TOKEN}x"}, {}),
        ({"Authorization": f"Basic {base64.b64encode(b'alertmanager:nope').decode()}"}, {}),
        ({"Authorization": "Basic !!!not-base64"}, {}),
        ({"Authorization": TOKEN}, {}),
        ({}, {"auth_token": "wrong"}),
    ],
)
def test_wrong_or_missing_credentials_get_401_and_change_nothing(
    store: IncidentStore, headers: dict[str, str], query: dict[str, str]
) -> None:
    hook, _ = webhook(store)
    reply = hook.handle(headers, payload(alert(JOBSET_LABELS)), query)
    assert reply.status == 401 and "WWW-Authenticate" in reply.headers
    assert store.list_incidents() == []


@pytest.mark.parametrize(
    "headers, query",
    [
        (BEARER, {}),
        ({"authorization": f"bearer {TOKEN}"}, {}),
        ({"Authorization": f"Basic {base64.b64encode(BASIC.encode()).decode()}"}, {}),
        ({}, {"auth_token": TOKEN}),  # Cloud Monitoring webhook_tokenauth channels
    ],
)
def test_each_configured_credential_is_accepted(
    store: IncidentStore, headers: dict[str, str], query: dict[str, str]
) -> None:
    hook, _ = webhook(store)
    assert hook.handle(headers, payload(alert(JOBSET_LABELS)), query).status == 200


def test_an_unconfigured_webhook_refuses_everyone(store: IncidentStore) -> None:
    hook, _ = webhook(store, token=None, basic_auth=None)
    assert hook.handle(BEARER, payload(alert(JOBSET_LABELS))).status == 401
    assert hook.handle({"Authorization": "Bearer "}, payload(alert(JOBSET_LABELS))).status == 401


@pytest.mark.parametrize(
    "body, words",
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"version": "4"}', "neither an Alertmanager"),
        (json.dumps({"version": "3", "alerts": []}).encode(), "version '3'"),
        (json.dumps({"version": "4", "alerts": {}}).encode(), "'alerts' must be a list"),
        (json.dumps({"version": "4", "alerts": [7]}).encode(), "alerts[0]: expected an object"),
        (payload({**alert(JOBSET_LABELS), "status": "pending"}), "alerts[0].status 'pending'"),
        (payload({**alert(JOBSET_LABELS), "startsAt": "yesterday"}), "alerts[0].startsAt"),
        (payload({**alert(JOBSET_LABELS), "labels": ["x"]}), "alerts[0].labels"),
        (b"[" * 100_000 + b"]" * 100_000, "nests too deeply"),
    ],
)
def test_malformed_payloads_get_400_naming_the_problem(
    store: IncidentStore, body: bytes, words: str
) -> None:
    hook, _ = webhook(store)
    reply = hook.handle(BEARER, body)
    assert reply.status == 400, reply.body
    assert words in reply.body["error"]
    assert store.list_incidents() == []


def test_an_oversized_body_gets_413(store: IncidentStore) -> None:
    hook, _ = webhook(store)
    assert hook.handle(BEARER, b" " * (2 << 20)).status == 413


def test_a_firing_alert_opens_an_incident_once_per_fingerprint_and_start(
    store: IncidentStore,
) -> None:
    hook, _ = webhook(store)
    first = hook.handle(BEARER, payload(alert(JOBSET_LABELS)))
    assert first.status == 200
    outcome = first.body["alerts"][0]
    assert outcome["outcome"] == "accepted" and outcome["status"] == "firing"
    [incident] = store.list_incidents()
    assert incident.key.scope is Scope.WORKLOAD and incident.key.name == f"{NS}/{JOB}"
    assert incident.cluster == CLUSTER and incident.workload_kinds == ("jobset",)
    # Alertmanager re-sends firing alerts every repeat_interval: duplicates.
    again = hook.handle(BEARER, payload(alert(JOBSET_LABELS)))
    assert again.body["alerts"][0]["outcome"] == "duplicate"
    # The same alert firing anew (a new startsAt) is a new signal of the same incident.
    later = hook.handle(BEARER, payload(alert(JOBSET_LABELS, starts="2026-05-20T08:20:00Z")))
    assert later.body["alerts"][0]["incident_id"] == incident.id
    current = refresh(store, incident.id, 500)
    assert current is not None and current.counts == {"job_restarting": 2}


def test_a_resolved_alert_updates_its_incident_and_opens_none(store: IncidentStore) -> None:
    hook, _ = webhook(store)
    resolved = alert(JOBSET_LABELS, status="resolved", ends="2026-05-20T08:30:00Z")
    nothing = hook.handle(BEARER, payload(resolved, status="resolved"))
    assert nothing.body["alerts"][0]["outcome"] == "ignored"
    assert store.list_incidents() == []
    hook.handle(BEARER, payload(alert(JOBSET_LABELS, fingerprint="aaaa0000bbbb1111")))
    resolved = alert(
        JOBSET_LABELS,
        status="resolved",
        ends="2026-05-20T08:30:00Z",
        fingerprint="aaaa0000bbbb1111",
    )
    reply = hook.handle(BEARER, payload(resolved, status="resolved"))
    [incident] = store.list_incidents()
    assert reply.body["alerts"][0]["incident_id"] == incident.id
    current = refresh(store, incident.id, 500)
    assert current is not None
    assert current.counts == {"job_restarting": 1, "alert_resolved": 1}
    assert current.settle_at is not None  # re-diagnosed: the chat message gets updated


def test_a_group_mixes_accepted_ignored_and_namespace_alerts(store: IncidentStore) -> None:
    hook, _ = webhook(store)
    other = {"alertname": "Watchdog", "severity": "none"}
    tfjob = {
        "alertname": "LoopbreakerTFJobRestartLoop",
        "loopbreaker": "true",
        "loopbreaker_signal": "restart_loop",
        "namespace": "ml-jobs",
        "job_namespace": "ml-jobs",
        "workload_kind": "tfjob",
        "cluster": CLUSTER,
    }
    named = {**tfjob, "workload": "resnet50-ps"}
    reply = hook.handle(
        BEARER,
        payload(
            alert(other, fingerprint="01"),
            alert(tfjob, fingerprint="02"),
            alert(named, fingerprint="03"),
        ),
    )
    outcomes = [a["outcome"] for a in reply.body["alerts"]]
    assert reply.status == 200 and outcomes == ["ignored", "accepted", "accepted"]
    # The alert naming no job opens the namespace's incident (the diagnosis names the job).
    by_name = {i.key.name: i for i in store.list_incidents()}
    assert sorted(by_name) == ["ml-jobs/", "ml-jobs/resnet50-ps"]
    assert reply.body["alerts"][1]["incident_id"] == by_name["ml-jobs/"].id
    assert by_name["ml-jobs/resnet50-ps"].workload_kinds == ("tfjob",)
    # An ignored alert is remembered too: its re-send is a duplicate, not logged again.
    again = hook.handle(BEARER, payload(alert(other, fingerprint="01")))
    assert again.body["alerts"][0]["outcome"] == "duplicate"


def test_node_and_gpu_alerts_join_the_pool_incident_of_the_node(store: IncidentStore) -> None:
    hook, _ = webhook(store)
    not_ready = {
        "alertname": "LoopbreakerTrainingNodeNotReady",
        "loopbreaker_signal": "node_not_ready",
        "node": NODE,
        "cluster": CLUSTER,
    }
    xid = {
        "alertname": "LoopbreakerGPUXidError",
        "loopbreaker_signal": "gpu_health",
        "Hostname": NODE,
        "gpu": "3",
    }
    hook.handle(BEARER, payload(alert(not_ready, fingerprint="n1"), alert(xid, fingerprint="x1")))
    [incident] = store.list_incidents()
    assert incident.key.scope is Scope.POOL
    assert incident.key.name == "gke-tpu-cluster-prod-tpu-pool" and incident.nodes == (NODE,)
    current = refresh(store, incident.id, 500)
    assert current is not None
    assert current.counts == {"node_not_ready": 1, "hardware_failure": 1}


def test_the_upstream_kube_node_not_ready_alert_is_understood(store: IncidentStore) -> None:
    hook, _ = webhook(store, default_cluster=CLUSTER)
    labels = {"alertname": "KubeNodeNotReady", "node": NODE, "condition": "Ready"}
    assert hook.handle(BEARER, payload(alert(labels))).body["alerts"][0]["outcome"] == "accepted"
    [incident] = store.list_incidents()
    assert incident.cluster == CLUSTER  # LOOPBREAKER_ALERT_CLUSTER: the alert names none


def test_one_failure_from_a_log_sink_and_an_alert_is_one_incident(store: IncidentStore) -> None:
    hook, responder = webhook(store)
    entry = {
        "insertId": "nccl-1",
        "logName": "projects/proj/logs/stderr",
        "resource": {
            "type": "k8s_container",
            "labels": {
                "project_id": "proj",
                "cluster_name": CLUSTER,
                "namespace_name": NS,
                "pod_name": f"{JOB}-workers-0-0-abcde",
            },
        },
        "labels": {"k8s-pod/jobset_sigs_k8s_io/jobset-name": JOB},
        "timestamp": "2026-05-20T07:58:00Z",
        "severity": "ERROR",
        "textPayload": "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7)",
    }
    from_sink = responder.handle_entry("m-1", entry)
    from_alert = hook.handle(BEARER, payload(alert({**JOBSET_LABELS, "project_id": "proj"})))
    assert from_alert.body["alerts"][0]["incident_id"] == from_sink.incident_id
    assert len(store.list_incidents()) == 1


def cloud_monitoring(state: str = "open", **incident: Any) -> dict[str, Any]:
    body = {
        "incident": {
            "incident_id": "0.opqiw61fsv7p",
            "scoping_project_id": "proj",
            "url": "https://console.cloud.google.com/monitoring/alerting/incidents/0.opqiw61fsv7p",
            "started_at": 1779264000,
            "ended_at": 1779265800 if state == "closed" else None,
            "state": state,
            "summary": "JobSet restarted in the last 10 minutes.",
            "policy_name": "loopbreaker: JobSet restarting",
            "condition_name": "A JobSet restarted in the last 10 minutes",
            "resource": {
                "type": "prometheus_target",
                "labels": {
                    "project_id": "proj",
                    "location": "us-east5",
                    "cluster": CLUSTER,
                    "namespace": NS,
                },
            },
            "metric": {
                "type": "prometheus.googleapis.com/kube_jobset_restarts/gauge",
                "labels": {"jobset_name": JOB},
            },
            **incident,
        },
        "version": "1.2",
    }
    return body


def test_cloud_monitoring_notifications_feed_the_same_pipeline(store: IncidentStore) -> None:
    hook, _ = webhook(store)
    opened = hook.handle(BEARER, json.dumps(cloud_monitoring()).encode())
    assert opened.status == 200 and opened.body["payload"] == "cloud_monitoring"
    [incident] = store.list_incidents()
    assert incident.key.name == f"{NS}/{JOB}" and incident.key.project == "proj"
    assert incident.location == "us-east5"
    # The Pub/Sub channel, pushed to the function: the same notification in an envelope.
    data = base64.b64encode(json.dumps(cloud_monitoring("closed")).encode()).decode()
    push = {"message": {"data": data, "messageId": "9001"}, "subscription": "projects/p/s/x"}
    closed = hook.handle(BEARER, json.dumps(push).encode())
    assert closed.body["alerts"][0]["status"] == "resolved"
    assert closed.body["alerts"][0]["incident_id"] == incident.id
    redelivered = hook.handle(BEARER, json.dumps(push).encode())
    assert redelivered.body["alerts"][0]["outcome"] == "duplicate"


@pytest.mark.parametrize(
    "change, words",
    [
        ({"state": "acknowledged"}, "incident.state"),
        ({"incident_id": ""}, "incident_id"),
        ({"started_at": "soon"}, "incident.started_at"),
    ],
)
def test_malformed_cloud_monitoring_notifications_get_400(
    store: IncidentStore, change: dict[str, Any], words: str
) -> None:
    hook, _ = webhook(store)
    reply = hook.handle(BEARER, json.dumps(cloud_monitoring(**change)).encode())
    assert reply.status == 400 and words in reply.body["error"]


def test_a_transient_store_failure_is_503_and_the_retry_counts_each_alert_once() -> None:
    store = FakeStore(fail={"ingest": [TransientError("contention")]})
    hook, _ = webhook(store, clock=FakeClock(T0 + timedelta(minutes=1)))
    first, second = (
        alert(JOBSET_LABELS, fingerprint="f1"),
        alert(
            {**JOBSET_LABELS, "workload": "other-job", "jobset_name": "other-job"}, fingerprint="f2"
        ),
    )
    assert hook.handle(BEARER, payload(first, second)).status == 503
    retried = hook.handle(BEARER, payload(first, second))
    assert retried.status == 200
    assert sorted(i.key.name for i in store.list_incidents()) == [f"{NS}/{JOB}", f"{NS}/other-job"]
    assert all(i.signal_count == 1 for i in store.list_incidents())


def test_many_alert_names_are_each_answered_with_their_own_name(store: IncidentStore) -> None:
    # Ignored outcomes without a messageId are shared per name and reason, but only the
    # first few: alert names are the sender's, and a long-lived instance must not keep
    # one for every name it was ever sent.
    hook, _ = webhook(store)
    names = [f"Other{n}" for n in range(3 * responder_module.MAX_SHARED_OUTCOMES)]
    alerts = [
        alert({"alertname": name, "severity": "none"}, fingerprint=f"{n:04x}")
        for n, name in enumerate(names)
    ]
    reply = hook.handle(BEARER, payload(*alerts))
    assert reply.status == 200
    assert [a["outcome"] for a in reply.body["alerts"]] == ["ignored"] * len(names)
    assert [a["alertname"] for a in reply.body["alerts"]] == names
    assert len(responder_module._IGNORED_WITHOUT_ID) <= responder_module.MAX_SHARED_OUTCOMES
