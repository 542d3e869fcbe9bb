"""Smoke tests for tests/harness: every real service starts, answers, and is cleaned up."""

from __future__ import annotations

import base64
import json
import os
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from harness import FirestoreEmulator, PubSubEmulator
from harness.fixtures import AlertmanagerFactory, FunctionServerFactory, PrometheusFactory
from harness.process import free_port, port_open

# 2026-05-20T10:40:00Z: back-filled data lies in the past; retention and queries must cope.
T0 = 1779273600


def _openmetrics(path: Path, pod: str, values: list[float], start: int = T0) -> Path:
    lines = ["# TYPE kube_pod_container_status_restarts counter"]
    lines += [
        f'kube_pod_container_status_restarts_total{{pod="{pod}"}} {value} {start + 60 * i}'
        for i, value in enumerate(values)
    ]
    path.write_text("\n".join([*lines, "# EOF", ""]))
    return path


def _raw_samples(result: dict[str, Any]) -> dict[str, list[list[Any]]]:
    assert result["status"] == "success", result
    return {series["metric"]["pod"]: series["values"] for series in result["data"]["result"]}


def test_prometheus_backfill_is_queryable(
    prometheus_factory: PrometheusFactory, tmp_path: Path
) -> None:
    files = [
        _openmetrics(tmp_path / "a.om", "trainer-0", [0, 1, 3]),
        _openmetrics(tmp_path / "b.om", "trainer-1", [5, 5], start=T0 + 30),
    ]
    prom = prometheus_factory(files)
    assert requests.get(f"{prom.url}/-/ready", timeout=10).status_code == 200
    samples = _raw_samples(prom.query("kube_pod_container_status_restarts_total[90m]", T0 + 600))
    assert samples == {
        "trainer-0": [[T0, "0"], [T0 + 60, "1"], [T0 + 120, "3"]],
        "trainer-1": [[T0 + 30, "5"], [T0 + 90, "5"]],
    }
    data_dir = prom.data_dir
    prom.stop()
    assert not data_dir.exists()
    assert not port_open(prom.port)()


def test_prometheus_route_prefix(prometheus_factory: PrometheusFactory, tmp_path: Path) -> None:
    prefix = "/v1/projects/P/location/global/prometheus"
    prom = prometheus_factory([_openmetrics(tmp_path / "a.om", "p", [1, 2])], prefix + "/")
    assert prom.url == f"http://127.0.0.1:{prom.port}{prefix}"
    response = requests.get(
        f"{prom.base_url}{prefix}/api/v1/query",
        params={"query": "kube_pod_container_status_restarts_total[90m]", "time": str(T0 + 300)},
        timeout=10,
    )
    assert response.status_code == 200
    assert _raw_samples(response.json()) == {"p": [[T0, "1"], [T0 + 60, "2"]]}
    # Without the prefix nothing is served.
    assert requests.get(f"{prom.base_url}/-/ready", timeout=10).status_code == 404


def test_prometheus_without_data(prometheus_factory: PrometheusFactory) -> None:
    prom = prometheus_factory()
    result = prom.query("vector(1)")
    assert result["status"] == "success"
    assert result["data"]["result"][0]["value"][1] == "1"


ALERTMANAGER_CONFIG = """\
route:
  receiver: blackhole
receivers:
  - name: blackhole
"""


def test_alertmanager_ready_and_accepts_alerts(alertmanager_factory: AlertmanagerFactory) -> None:
    am = alertmanager_factory(ALERTMANAGER_CONFIG)
    assert requests.get(f"{am.url}/-/ready", timeout=10).status_code == 200
    alert = {"labels": {"alertname": "HarnessSmoke", "severity": "none"}}
    assert requests.post(f"{am.url}/api/v2/alerts", json=[alert], timeout=10).status_code == 200
    alerts = requests.get(f"{am.url}/api/v2/alerts", timeout=10).json()
    assert [a["labels"]["alertname"] for a in alerts] == ["HarnessSmoke"]


@pytest.fixture
def pubsub_env(pubsub_emulator: PubSubEmulator, monkeypatch: pytest.MonkeyPatch) -> str:
    for key, value in pubsub_emulator.env.items():
        monkeypatch.setenv(key, value)
    return pubsub_emulator.project


def test_pubsub_pull_roundtrip(pubsub_env: str) -> None:
    from google.cloud.pubsub_v1 import PublisherClient, SubscriberClient

    suffix = uuid.uuid4().hex[:8]
    publisher = PublisherClient()
    subscriber = SubscriberClient()
    topic = publisher.topic_path(pubsub_env, f"smoke-{suffix}")
    subscription = subscriber.subscription_path(pubsub_env, f"smoke-pull-{suffix}")
    try:
        publisher.create_topic(name=topic)
        subscriber.create_subscription(name=subscription, topic=topic)
        publisher.publish(topic, b"hello", origin="harness").result(timeout=30)
        received: list[Any] = []
        deadline = time.monotonic() + 30
        while not received and time.monotonic() < deadline:
            response = subscriber.pull(subscription=subscription, max_messages=1, timeout=10)
            received = list(response.received_messages)
        assert received, "no message pulled within 30s"
        message = received[0].message
        assert (message.data, dict(message.attributes)) == (b"hello", {"origin": "harness"})
        subscriber.acknowledge(subscription=subscription, ack_ids=[received[0].ack_id])
    finally:
        subscriber.close()
        publisher.transport.close()


@pytest.fixture
def push_endpoint() -> Iterator[tuple[str, queue.Queue[tuple[dict[str, str], bytes]]]]:
    """A tiny HTTP server on 127.0.0.1 that records every POST it receives."""
    received: queue.Queue[tuple[dict[str, str], bytes]] = queue.Queue()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            received.put((dict(self.headers.items()), body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep pytest output clean

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/push", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_pubsub_push_delivery(
    pubsub_env: str,
    push_endpoint: tuple[str, queue.Queue[tuple[dict[str, str], bytes]]],
) -> None:
    from google.cloud import pubsub_v1

    endpoint, received = push_endpoint
    suffix = uuid.uuid4().hex[:8]
    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()
    topic = publisher.topic_path(pubsub_env, f"smoke-{suffix}")
    subscription = subscriber.subscription_path(pubsub_env, f"smoke-push-{suffix}")
    try:
        publisher.create_topic(name=topic)
        subscriber.create_subscription(
            name=subscription, topic=topic, push_config={"push_endpoint": endpoint}
        )
        message_id = publisher.publish(topic, b'{"k": 1}', origin="harness").result(timeout=30)
    finally:
        subscriber.close()
        publisher.transport.close()
    headers, body = received.get(timeout=30)
    envelope = json.loads(body)
    print("push headers:", headers)
    print("push body:", body.decode())
    assert headers["Content-Type"].startswith("application/json")
    assert envelope["subscription"] == subscription
    assert envelope["message"]["messageId"] == message_id
    assert envelope["message"]["attributes"] == {"origin": "harness"}
    assert base64.b64decode(envelope["message"]["data"]) == b'{"k": 1}'


def test_firestore_transaction_and_reset(
    firestore_emulator: FirestoreEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import firestore

    for key, value in firestore_emulator.env.items():
        monkeypatch.setenv(key, value)
    client = firestore.Client(
        project=firestore_emulator.project,
        credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
    )
    ref = client.collection("harness-smoke").document(uuid.uuid4().hex)

    @firestore.transactional
    def bump(transaction: Any) -> int:
        snapshot = ref.get(transaction=transaction)
        count = int(snapshot.get("count")) + 1 if snapshot.exists else 1
        transaction.set(ref, {"count": count})
        return count

    try:
        assert bump(client.transaction()) == 1
        assert bump(client.transaction()) == 2
        assert ref.get().to_dict() == {"count": 2}
        firestore_emulator.reset()
        assert not ref.get().exists
    finally:
        client.close()  # type: ignore[no-untyped-call]


FUNCTION_SOURCE = """\
import json
import os
from pathlib import Path


def hello(request):
    print("hello ran", flush=True)
    return {"method": request.method, "greeting": os.environ.get("HARNESS_GREETING")}


def on_event(cloud_event):
    print(f"event ran id={cloud_event['id']}", flush=True)
    Path(os.environ["HARNESS_OUT"]).write_text(
        json.dumps({"id": cloud_event["id"], "type": cloud_event["type"], "data": cloud_event.data})
    )
"""


def test_function_server_http_and_cloudevent(
    function_server_factory: FunctionServerFactory, tmp_path: Path
) -> None:
    source = tmp_path / "main.py"
    source.write_text(FUNCTION_SOURCE)
    out = tmp_path / "event.json"
    env = {"HARNESS_GREETING": "hi", "HARNESS_OUT": str(out)}

    http_fn = function_server_factory("hello", source, "http", env)
    response = requests.post(http_fn.url, json={}, timeout=10)
    assert response.status_code == 200
    assert response.json() == {"method": "POST", "greeting": "hi"}

    event_fn = function_server_factory("on_event", source, "cloudevent", env)
    event = {
        "specversion": "1.0",
        "id": "evt-1",
        "source": "//harness/test",
        "type": "com.example.smoke",
        "datacontenttype": "application/json",
        "data": {"k": "v"},
    }
    response = requests.post(
        event_fn.url,
        data=json.dumps(event),
        headers={"Content-Type": "application/cloudevents+json"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    assert json.loads(out.read_text()) == {
        "id": "evt-1",
        "type": "com.example.smoke",
        "data": {"k": "v"},
    }
    assert "hello ran" in http_fn.log()
    assert "event ran id=evt-1" in event_fn.log()

    event_fn.stop()
    assert "event ran id=evt-1" in event_fn.log()  # the log outlives the process
    assert not port_open(event_fn.port)()


def test_startup_failure_reports_log_tail(prometheus_factory: PrometheusFactory) -> None:
    from harness import HarnessError

    with pytest.raises(HarnessError, match=r"(?s)exited with code .*flag-does-not-exist"):
        prometheus_factory(extra_args=["--flag-does-not-exist"])


def test_no_service_outlives_its_stop(prometheus_factory: PrometheusFactory) -> None:
    prom = prometheus_factory()
    pid = prom.process.pid
    prom.stop()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


def test_port_race_is_retried(
    prometheus_factory: PrometheusFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    import harness.prometheus

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        taken = squatter.getsockname()[1]
        ports = iter([taken, free_port()])
        monkeypatch.setattr(harness.prometheus, "free_port", lambda: next(ports))
        prom = prometheus_factory()
    assert prom.port != taken
    assert prom.query("vector(1)")["status"] == "success"
