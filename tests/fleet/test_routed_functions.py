"""Routes and served projects through the deployed path: a folder sink's entries published to
the Pub/Sub emulator, pushed to ``on_log_entry`` under functions-framework, diagnosed by
``on_schedule``, posted to a local Slack server.

The sink delivers two projects: the platform's bad host (``faulty-host``, served) and a
team's OOM loop in a project the responder does not serve (``jobset-oom-killed``)."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import chatkit as K
import pytest
from fakeservers.slack import SlackServer

from loopbreaker.incidents.store.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "functions" / "main.py"
EXAMPLES = ROOT / "examples" / "telemetry"
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
PLATFORM, TEAM = "C0PLATFORM", "C0TEAMLMA1"
LABELS = "logging.googleapis.com/labels"
ROUTES = f"""
routes:
  - name: team-llama
    match: {{namespaces: [default], causes: [out_of_memory, application]}}
    slack_channel: {TEAM}
default: {{name: platform, slack_channel: {PLATFORM}, approvers: [{K.APPROVER}]}}
"""


def http_post(url: str) -> dict[str, Any]:
    request = urllib.request.Request(url, data=b"{}", method="POST")
    request.add_header("Content-Type", "application/json")
    with DIRECT.open(request, timeout=60) as response:
        found: dict[str, Any] = json.loads(response.read())
        return found


def test_a_folder_sinks_two_projects_reach_only_the_served_ones_route(
    pubsub_emulator: Any,
    function_server_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    from google.cloud import pubsub_v1

    store_path = tmp_path / "incidents.sqlite"
    with SlackServer(token="xoxb-e2e", channels={PLATFORM, TEAM}) as slack:
        env = {
            **K.CHAT_ENV,
            "LOOPBREAKER_STORE": f"sqlite:{store_path}",
            "LOOPBREAKER_SETTLE_TIME": "0s",
            "LOOPBREAKER_LIVE_SOURCES": "false",
            "LOOPBREAKER_TELEMETRY_DIR": str(K.FAULTY),
            "LOOPBREAKER_PROJECTS": "customer-ai-project-123",
            "LOOPBREAKER_ROUTES": ROUTES,
            "LOOPBREAKER_NOTIFIER": "slack",
            "LOOPBREAKER_SLACK_BOT_TOKEN": "xoxb-e2e",
            "LOOPBREAKER_SLACK_CHANNEL": "C0UNUSED01",
            "LOOPBREAKER_SLACK_API_URL": slack.api_url,
            "LOOPBREAKER_REMEDIATION_TOPIC": "projects/gpu-platform-ops/topics/remediation",
        }
        on_log_entry = function_server_factory("on_log_entry", SOURCE, "cloudevent", env)
        for name, value in pubsub_emulator.env.items():
            monkeypatch.setenv(name, value)
        publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
        prefix = "fleet" + uuid.uuid4().hex[:10]
        topic = publisher.topic_path(pubsub_emulator.project, f"folder-sink-{prefix}")
        subscription = subscriber.subscription_path(pubsub_emulator.project, f"push-{prefix}")
        publisher.create_topic(name=topic)
        subscriber.create_subscription(
            request={
                "name": subscription,
                "topic": topic,
                "push_config": {"push_endpoint": on_log_entry.url},
            }
        )
        entries = [
            *json.loads((K.FAULTY / "logs.json").read_text()),
            *json.loads((EXAMPLES / "jobset-oom-killed" / "logs.json").read_text()),
        ]
        try:
            futures = [
                publisher.publish(
                    topic,
                    json.dumps(e).encode(),
                    **{"logging.googleapis.com/timestamp": e["timestamp"]},
                )
                for e in entries
            ]
            published = {f.result(timeout=30) for f in futures}
            deadline = time.monotonic() + 90
            while True:
                log = on_log_entry.log()
                handled = {
                    line[LABELS]["message_id"]
                    for line in map(
                        json.loads, filter(lambda s: s.startswith("{"), log.splitlines())
                    )
                    if line.get(LABELS, {}).get("message_id")
                }
                if handled >= published or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
        finally:
            subscriber.delete_subscription(request={"subscription": subscription})
            publisher.delete_topic(request={"topic": topic})
        assert handled >= published, log[-3000:]
        on_schedule = function_server_factory("on_schedule", SOURCE, "http", env)
        report = http_post(on_schedule.url)
        assert report["failed"] == [] and report["diagnosed"]
        channels = {m["channel"] for m in slack.messages.values()}

    store = SqliteStore(store_path)
    try:
        found = store.list_incidents()
    finally:
        store.close()
    # The unserved project opened nothing; the served one's host failure went to the platform.
    assert {i.key.project for i in found} == {"customer-ai-project-123"}
    routed = {i.id: i.route for i in found if i.chat is not None}
    assert routed and set(routed.values()) == {"platform"}
    assert channels == {PLATFORM}
    lines = [json.loads(s) for s in on_log_entry.log().splitlines() if s.startswith("{")]
    foreign = [line for line in lines if line.get("event") == "entry_foreign_project"]
    assert foreign and {line["project"] for line in foreign} == {"helios-ml-prod"}
