"""End to end: approve in chat -> request on Pub/Sub -> on_remediation_request, dry run then live.

``on_chat_action`` and ``on_remediation_request`` are served by functions-framework; the
approval goes to a topic on the Pub/Sub emulator whose push subscription delivers to the
remediation function (through a relay that keeps each envelope, so it can be delivered
again exactly as Pub/Sub redelivers). The cluster, the VM and the Support API are local
servers the real kubernetes and google-cloud clients talk to. The dry run sends no
mutating request; the live run isolates the host once, however often it is delivered.
"""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import chatkit as K
import pytest
import remedkit as R
from fakes import FakeClock

from loopbreaker.approval.repair import RepairPath
from loopbreaker.incidents import Incident, State
from loopbreaker.incidents.store.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "functions" / "main.py"
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with DIRECT.open(request, timeout=60) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


class Relay:
    """Push endpoint: records envelopes, forwards each to ``self.target``."""

    def __init__(self) -> None:
        self.target = ""
        self.envelopes: list[bytes] = []
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers["Content-Length"]))
                relay.envelopes.append(body)
                status = post(relay.target, body, {"Content-Type": "application/json"})
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@contextmanager
def remediation_topic(pubsub_emulator: Any) -> Iterator[tuple[str, Relay]]:
    """A remediation topic on the emulator whose push subscription delivers to a relay."""
    from google.cloud import pubsub_v1

    suffix = uuid.uuid4().hex[:8]
    topic = f"projects/{pubsub_emulator.project}/topics/remediation-{suffix}"
    subscription = f"projects/{pubsub_emulator.project}/subscriptions/push-{suffix}"
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    publisher.create_topic(name=topic)
    relay = Relay()
    subscriber.create_subscription(
        request={
            "name": subscription,
            "topic": topic,
            "push_config": {"push_endpoint": relay.url},
            "ack_deadline_seconds": 30,
        }
    )
    try:
        yield topic, relay
    finally:
        subscriber.delete_subscription(request={"subscription": subscription})
        publisher.delete_topic(request={"topic": topic})
        relay.close()


def function_env(store_path: Path, lab: R.Lab, topic: str, emulator: Any) -> dict[str, str]:
    return {
        **K.CHAT_ENV,
        **emulator.env,
        "LOOPBREAKER_STORE": f"sqlite:{store_path}",
        "LOOPBREAKER_LIVE_SOURCES": "false",
        "LOOPBREAKER_REMEDIATION_TOPIC": topic,
        "LOOPBREAKER_KUBECONFIG": str(lab.kubeconfig),
        "LOOPBREAKER_COMPUTE_ENDPOINT": lab.compute.url,
        "LOOPBREAKER_SUPPORT_PARENT": f"projects/{R.PROJECT}",
        "LOOPBREAKER_SUPPORT_ENDPOINT": lab.support.url,
    }


def stored(store_path: Path, incident_id: str) -> Incident | None:
    store = SqliteStore(store_path)
    try:
        return store.get(incident_id)
    finally:
        store.close()


def approve(chat: Any, incident: Incident) -> None:
    """A signed Slack click on the served on_chat_action."""
    headers, body = K.slack_request(K.slack_payload(K.token_of(incident)), datetime.now(UTC))
    assert post(chat.url, body, headers) == 200, chat.log()[-2000:]


def test_approve_in_chat_then_remediate_dry_run_and_live(
    pubsub_emulator: Any,
    function_server_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    for name, value in pubsub_emulator.env.items():
        monkeypatch.setenv(name, value)
    store_path = tmp_path / "incidents.sqlite"
    incident = K.make_faulty_store(store_path)
    with (
        remediation_topic(pubsub_emulator) as (topic, relay),
        R.lab(store_path, FakeClock(datetime.now(UTC)), tmp_path) as lab,
    ):
        lab.store.close()  # the functions open the store themselves
        env = function_env(store_path, lab, topic, pubsub_emulator)
        dry = function_server_factory("on_remediation_request", SOURCE, "cloudevent", env)
        relay.target = dry.url
        chat = function_server_factory("on_chat_action", SOURCE, "http", env)

        # 1. Approve in chat.
        approve(chat, incident)

        # 2. Pub/Sub pushes the request to the dry-run remediation: a plan, no mutation.
        def planned() -> bool:
            found = stored(store_path, incident.id)
            return found is not None and found.remediation is not None

        wait_for("the dry-run plan", planned)
        plan = stored(store_path, incident.id)
        assert plan is not None and plan.state is State.APPROVED
        assert plan.remediation is not None and plan.remediation.dry_run
        calls = [c for s in plan.remediation.steps for c in s.calls]
        assert any(c.startswith(f"DELETE /compute/v1/projects/{R.PROJECT}") for c in calls)
        assert lab.kube.mutations == [] and lab.compute.deletes == [] and lab.support.created == []
        [envelope] = relay.envelopes

        # 3. The same request, redelivered three times to the live function: one isolation.
        live = function_server_factory(
            "on_remediation_request", SOURCE, "cloudevent", {**env, "LOOPBREAKER_DRY_RUN": "false"}
        )
        statuses = [
            post(live.url, envelope, {"Content-Type": "application/json"}) for _ in range(3)
        ]
        assert statuses == [200, 200, 200], live.log()[-3000:]
        done = stored(store_path, incident.id)
        assert done is not None and done.state is State.REMEDIATED, live.log()[-3000:]
        assert lab.node()["spec"]["unschedulable"] is True
        assert len([p for p in lab.kube.patches if p[0] == R.NODE]) == 1
        assert len(lab.compute.deletes) == 1 and len(lab.support.created) == 1
        assert [ns_pod[:2] for ns_pod in lab.kube.evictions] == [
            ("default", "llama3-70b-training-slice-0-2-7zpkt")
        ]
        assert R.HOST in lab.support.created[0]["description"]


def test_a_qualifying_a3_node_is_handed_to_gke_through_pubsub(
    pubsub_emulator: Any,
    function_server_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The gke path the whole way: approval in chat, the request pushed by the emulator, the
    served on_remediation_request following GKE's report-and-replace; nothing evicted or
    deleted by loopbreaker."""
    for name, value in pubsub_emulator.env.items():
        monkeypatch.setenv(name, value)
    store_path = tmp_path / "incidents.sqlite"
    incident = K.make_faulty_store(store_path, R.A3)
    assert incident.approval_request is not None
    target = incident.approval_request.target
    assert target.repair_path is RepairPath.GKE
    with (
        remediation_topic(pubsub_emulator) as (topic, relay),
        R.gke_lab(store_path, FakeClock(datetime.now(UTC)), tmp_path, target) as lab,
    ):
        lab.store.close()
        env = function_env(store_path, lab, topic, pubsub_emulator)
        dry = function_server_factory("on_remediation_request", SOURCE, "cloudevent", env)
        relay.target = dry.url
        approve(function_server_factory("on_chat_action", SOURCE, "http", env), incident)

        def planned() -> bool:
            found = stored(store_path, incident.id)
            return found is not None and found.remediation is not None

        wait_for("the dry-run plan", planned)
        plan = stored(store_path, incident.id)
        assert plan is not None and plan.remediation is not None
        calls = [c for s in plan.remediation.steps for c in s.calls]
        label = f"PATCH /api/v1/nodes/{target.node} labels cloud.google.com/fault-behavior=XID"
        assert any(c.startswith(label) for c in calls), calls
        assert lab.kube.mutations == [] and lab.kube.statuses == {}
        [envelope] = relay.envelopes

        live = function_server_factory(
            "on_remediation_request", SOURCE, "cloudevent", {**env, "LOOPBREAKER_DRY_RUN": "false"}
        )
        statuses = [
            post(live.url, envelope, {"Content-Type": "application/json"}) for _ in range(2)
        ]
        assert statuses == [200, 200], live.log()[-3000:]
        done = stored(store_path, incident.id)
        assert done is not None and done.state is State.REMEDIATED, live.log()[-3000:]
        assert lab.kube.statuses[target.node] == [
            "PodsEvicted",
            "OperationRUNNING",
            "OperationDone",
        ]
        # One label patch by loopbreaker; GKE evicted and reported; no VM was deleted.
        assert [p[0] for p in lab.kube.patches] == [target.node]
        assert lab.kube.evictions == [] and lab.kube.gke_evictions
        assert lab.compute.deletes == [] and len(lab.compute.fault_reports) == 1
        assert "report-and-replace" in lab.support.created[0]["description"]
