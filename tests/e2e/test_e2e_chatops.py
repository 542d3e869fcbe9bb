"""End to end: diagnose -> Slack message with buttons -> signed clicks -> one Pub/Sub request.

Real pieces: the faulty-host log entries replayed through the responder into the Firestore
emulator, the real slack_sdk posting to a local Slack Web API, ``on_chat_action`` served
by functions-framework (gunicorn, two worker processes), and the Pub/Sub emulator holding
the remediation topic. Eight clicks arrive at once: exactly one approval, one publish.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import chatkit as K
import pytest
from fakes import FakeEvidence
from fakeservers.slack import SlackServer

from loopbreaker.app.bootstrap import build_responder
from loopbreaker.approval.requests import APPROVE_ACTION
from loopbreaker.cli.main import main
from loopbreaker.diagnosis.evidence import TelemetryDirEvidence
from loopbreaker.incidents import State
from loopbreaker.incidents.store.firestore import FirestoreStore
from loopbreaker.settings.load import load_settings

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "functions" / "main.py"
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post(url: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with DIRECT.open(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@pytest.fixture
def slack() -> Iterator[SlackServer]:
    with SlackServer(token="xoxb-e2e", channels={K.CHANNEL}) as server:
        yield server


def test_approve_in_slack_publishes_exactly_one_remediation_request(
    pubsub_emulator: Any,
    firestore_emulator: Any,
    function_server_factory: Any,
    slack: SlackServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from google.cloud import pubsub_v1

    for name, value in {**pubsub_emulator.env, **firestore_emulator.env}.items():
        monkeypatch.setenv(name, value)
    prefix = "chat" + uuid.uuid4().hex[:10]
    topic_id = f"remediation-{prefix}"
    topic = f"projects/{pubsub_emulator.project}/topics/{topic_id}"
    subscription = f"projects/{pubsub_emulator.project}/subscriptions/pull-{prefix}"
    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()
    publisher.create_topic(name=topic)
    subscriber.create_subscription(
        request={"name": subscription, "topic": topic, "enable_message_ordering": True}
    )
    env = {
        **K.CHAT_ENV,
        "LOOPBREAKER_STORE": "firestore",
        "LOOPBREAKER_PROJECT": firestore_emulator.project,
        "LOOPBREAKER_COLLECTION_PREFIX": prefix,
        "LOOPBREAKER_SETTLE_TIME": "0s",
        "LOOPBREAKER_LIVE_SOURCES": "false",
        "LOOPBREAKER_NOTIFIER": "slack",
        "LOOPBREAKER_SLACK_BOT_TOKEN": "xoxb-e2e",
        "LOOPBREAKER_SLACK_CHANNEL": K.CHANNEL,
        "LOOPBREAKER_SLACK_API_URL": slack.api_url,
        "LOOPBREAKER_SLACK_RESPONSE_URL_PREFIX": slack.url + "/actions/",
        "LOOPBREAKER_REMEDIATION_TOPIC": topic,
    }

    # 1. The responder diagnoses the faulty host and posts the message with buttons.
    store = FirestoreStore.connect(
        project=firestore_emulator.project, database="(default)", prefix=prefix
    )
    responder = build_responder(
        load_settings(env), store=store, evidence=TelemetryDirEvidence(K.FAULTY)
    )
    for i, entry in enumerate(json.loads((K.FAULTY / "logs.json").read_text())):
        responder.handle_entry(f"m-{i}", entry)
    report = responder.settle()
    assert report.failed == [] and len(report.notified) == 1
    [incident] = store.list_incidents(states={State.AWAITING_APPROVAL})
    assert incident.chat is not None and incident.chat["platform"] == "slack"
    approve = slack.button(APPROVE_ACTION)
    assert "confirm" in approve and incident.chat["ts"] == slack.latest()["ts"]

    # 2. Eight people click Approve at once on the function served by functions-framework.
    served = function_server_factory(
        "on_chat_action", SOURCE, "http", {**env, "WORKERS": "2", "THREADS": "4"}
    )
    payload = K.slack_payload(
        approve["value"],
        message_ts=incident.chat["ts"],
        response_url=slack.url + "/actions/T0123/123/xyz",
    )
    clicks = [K.slack_request(payload, datetime.now(UTC)) for _ in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(lambda c: post(served.url, *c), clicks))
    # Slack shows nothing of a reply body: every click gets 200, and the seven refused
    # ones are told "already approved by …" in an ephemeral message.
    assert [status for status, _ in replies] == [200] * 8, (replies, served.log()[-3000:])
    told = [body["text"] for _, body in slack.responses]
    assert len(told) == 7 and all("already approved by alice" in t for t in told), told

    # 3. Exactly one remediation request is on the topic, with its dedup attributes.
    pulled = subscriber.pull(request={"subscription": subscription, "max_messages": 10}, timeout=30)
    [message] = pulled.received_messages
    body = json.loads(message.message.data)
    assert body["incident_id"] == incident.id and body["approved_by"] == K.APPROVER
    assert body["target"]["instance_id"] == "5464165239889847435"
    assert message.message.ordering_key == incident.id
    assert message.message.attributes["dedup_id"] == body["dedup_id"]
    subscriber.acknowledge(request={"subscription": subscription, "ack_ids": [message.ack_id]})
    again = subscriber.pull(request={"subscription": subscription, "max_messages": 10}, timeout=5)
    assert list(again.received_messages) == []

    # 4. The Slack message was updated in place: who approved, and no buttons any more.
    approved = store.get(incident.id)
    assert approved is not None and approved.state is State.APPROVED
    assert (
        approved.approval is not None
        and approved.approval.published_id == message.message.message_id
    )
    assert slack.methods().count("chat.postMessage") == 1
    updated = slack.latest()
    assert not [b for b in updated["blocks"] if b["type"] == "actions"]
    assert "Approved by alice via slack" in json.dumps(updated["blocks"])

    # 5. A settle afterwards publishes nothing more.
    later = build_responder(load_settings(env), store=store, evidence=FakeEvidence())
    assert later.settle().published == []
    store.close()
    subscriber.delete_subscription(request={"subscription": subscription})
    publisher.delete_topic(request={"topic": topic})


def test_incidents_show_reads_the_firestore_store(
    firestore_emulator: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in firestore_emulator.env.items():
        monkeypatch.setenv(name, value)
    prefix = "cli" + uuid.uuid4().hex[:10]
    monkeypatch.setenv("LOOPBREAKER_COLLECTION_PREFIX", prefix)
    store = FirestoreStore.connect(
        project=firestore_emulator.project, database="(default)", prefix=prefix
    )
    responder = build_responder(
        K.chat_settings(LOOPBREAKER_SETTLE_TIME="0s"),
        store=store,
        evidence=TelemetryDirEvidence(K.FAULTY),
    )
    for i, entry in enumerate(json.loads((K.FAULTY / "logs.json").read_text())):
        responder.handle_entry(f"m-{i}", entry)
    responder.settle()
    [incident] = store.list_incidents()
    store.close()
    assert main(["incidents", "show", incident.id, "--store", "firestore", "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["state"] == "awaiting_approval" and shown["approval_request"]["target"]["node"]
