"""Only the approvers of an incident's own route decide its repair: through ``on_chat_action``
served by functions-framework, for Slack and Google Chat alike. An approver of another route
is refused with the route's name, nothing is published and the incident stays as it was; a
route without approvers gets a card with no buttons that says why."""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import chatkit as K
import pytest
from fakeservers.certs import CertsServer
from fakeservers.slack import SlackServer

from loopbreaker.app.chat_actions import REFUSAL_HEADER
from loopbreaker.incidents import Incident, State
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.settings.load import load_settings

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "functions" / "main.py"
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
TEAM_LEAD, TEAM_EMAIL = "U0TEAMLEAD", "lead@team.example.com"
ONCALL, ONCALL_EMAIL = "U0ONCALL01", "oncall@platform.example.com"
# The faulty host's node-pool incident names no namespace: the platform's route takes it.
ROUTES = f"""
routes:
  - name: team-llama
    match: {{namespaces: [default], causes: [out_of_memory, application]}}
    approvers: [{TEAM_LEAD}, {TEAM_EMAIL}]
default:
  name: platform
  approvers: [{ONCALL}, {ONCALL_EMAIL}]
"""


@dataclass
class Served:
    url: str
    store: Path
    incident: Incident
    subscription: str
    subscriber: Any


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Incident]:
    path = tmp_path_factory.mktemp("routed") / "template.sqlite"
    return path, K.make_faulty_store(path, LOOPBREAKER_ROUTES=ROUTES)


@pytest.fixture
def served(
    template: tuple[Path, Incident],
    tmp_path: Path,
    pubsub_emulator: Any,
    function_server_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[Served, CertsServer]]:
    from google.cloud import pubsub_v1

    for name, value in pubsub_emulator.env.items():
        monkeypatch.setenv(name, value)
    prefix = "route" + uuid.uuid4().hex[:10]
    topic = f"projects/{pubsub_emulator.project}/topics/remediation-{prefix}"
    subscription = f"projects/{pubsub_emulator.project}/subscriptions/pull-{prefix}"
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    publisher.create_topic(name=topic)
    subscriber.create_subscription(request={"name": subscription, "topic": topic})
    store = K.copy_store(template[0], tmp_path / "incidents.sqlite")
    with SlackServer() as hooks, CertsServer() as certs:
        env = {
            **K.CHAT_ENV,
            **pubsub_emulator.env,
            "LOOPBREAKER_STORE": f"sqlite:{store}",
            "LOOPBREAKER_LIVE_SOURCES": "false",
            "LOOPBREAKER_ROUTES": ROUTES,
            "LOOPBREAKER_REMEDIATION_TOPIC": topic,
            "LOOPBREAKER_GOOGLE_CHAT_CERTS_URL": certs.certs_url,
            "LOOPBREAKER_SLACK_RESPONSE_URL_PREFIX": hooks.url + "/actions/",
        }
        server = function_server_factory("on_chat_action", SOURCE, "http", env)
        yield Served(server.url, store, template[1], subscription, subscriber), certs
    subscriber.delete_subscription(request={"subscription": subscription})
    publisher.delete_topic(request={"topic": topic})


def post(url: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any], Any]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with DIRECT.open(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}"), response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}"), exc.headers


def stored(served: Served) -> Incident:
    store = SqliteStore(served.store)
    try:
        found = store.get(served.incident.id)
    finally:
        store.close()
    assert found is not None
    return found


def published(served: Served) -> list[dict[str, Any]]:
    pulled = served.subscriber.pull(
        request={"subscription": served.subscription, "max_messages": 10}, timeout=10
    )
    return [json.loads(m.message.data) for m in pulled.received_messages]


def slack_click(served: Served, user: str) -> tuple[int, dict[str, Any], Any]:
    payload = K.slack_payload(K.token_of(served.incident), user=user)
    return post(served.url, *K.slack_request(payload, datetime.now(UTC)))


def chat_click(served: Served, certs: CertsServer, email: str) -> tuple[int, dict[str, Any], Any]:
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {certs.token(K.AUDIENCE, email=email)}",
    }
    return post(served.url, headers, K.chat_event(K.token_of(served.incident), email=email))


def test_the_incident_was_routed_to_the_platform(template: tuple[Path, Incident]) -> None:
    incident = template[1]
    assert incident.route == "platform" and incident.state is State.AWAITING_APPROVAL


@pytest.mark.parametrize(
    ("platform", "who"),
    [
        ("slack", TEAM_LEAD),  # an approver of the team's route
        ("google-chat", TEAM_EMAIL),
        # In LOOPBREAKER_APPROVERS, which the platform route's approvers replace.
        ("slack", K.APPROVER),
        ("google-chat", K.CHAT_APPROVER),
    ],
)
def test_an_approver_of_another_route_is_refused_and_nothing_is_published(
    served: tuple[Served, CertsServer], platform: str, who: str
) -> None:
    lab, certs = served
    before = stored(lab).to_dict()
    if platform == "slack":
        status, body, headers = slack_click(lab, who)
    else:
        status, body, headers = chat_click(lab, certs, who)
    # A verified clicker is answered 200 with the reason; the security status is a header.
    assert (status, headers[REFUSAL_HEADER]) == (200, "403"), body
    assert "not an approver of route platform" in body["text"]
    assert stored(lab).to_dict() == before
    assert published(lab) == []


@pytest.mark.parametrize("platform", ["slack", "google-chat"])
def test_an_approver_of_the_incidents_route_approves_and_one_request_is_published(
    served: tuple[Served, CertsServer], platform: str
) -> None:
    lab, certs = served
    if platform == "slack":
        status, body, headers = slack_click(lab, ONCALL)
    else:
        status, body, headers = chat_click(lab, certs, ONCALL_EMAIL)
    assert status == 200 and REFUSAL_HEADER not in headers, body
    if platform == "google-chat":
        # The card Chat shows in place of the clicked one still names the route.
        facts = [
            w["decoratedText"]
            for s in body["cardsV2"][0]["card"]["sections"]
            for w in s["widgets"]
            if "decoratedText" in w
        ]
        assert {"topLabel": "Route", "text": "platform"} in facts
    after = stored(lab)
    assert after.state is State.APPROVED and after.approval is not None
    [request] = published(lab)
    assert request["incident_id"] == lab.incident.id


def test_a_route_without_approvers_asks_nobody_and_its_card_says_so(tmp_path: Path) -> None:
    from fakes import FakeNotifier

    from loopbreaker.replay import run as replay

    # The platform's route names no approvers; the team's does, for its own causes only.
    routes = f"""
routes:
  - name: team-llama
    match: {{causes: [out_of_memory]}}
    approvers: [{TEAM_LEAD}]
default: {{name: platform}}
"""
    notifier = FakeNotifier()
    store = tmp_path / "incidents.sqlite"
    settings = load_settings({**K.CHAT_ENV, "LOOPBREAKER_ROUTES": routes})
    replay.run(
        [K.FAULTY / "logs.json"],
        settings=settings,
        telemetry=K.FAULTY,
        store_path=store,
        notifier=notifier,
    )
    opened = SqliteStore(store)
    try:
        [pool] = [i for i in opened.list_incidents() if i.key.scope.value == "pool"]
    finally:
        opened.close()
    # The faulty host is diagnosed as before, but no request is opened that nobody could
    # decide: as with approvals off, it waits for a human outside chat (loopbreaker
    # remediate) with no signed request and no buttons.
    assert pool.diagnosis is not None and pool.diagnosis.root_cause == "faulty_host"
    assert pool.approval_request is None and pool.state is State.AWAITING_APPROVAL
    assert pool.route == "platform"
    card = notifier.messages[pool.id]
    assert card.approval is None and ("Route", "platform") in card.facts
    assert (
        card.approval_note is not None and "route platform names no approvers" in card.approval_note
    )


def test_the_remediation_thread_keeps_the_incidents_route(tmp_path: Path) -> None:
    import remedkit as R
    from fakes import FakeClock
    from google.auth.credentials import AnonymousCredentials

    from loopbreaker.app.bootstrap import build_actuators, build_remediator
    from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials
    from loopbreaker.remediation.rules import RemediationPolicy

    approved, request = R.approve_faulty(tmp_path / "incidents.sqlite", LOOPBREAKER_ROUTES=ROUTES)
    assert approved.route == "platform"
    assert approved.approval is not None
    clock = FakeClock(approved.approval.at + timedelta(minutes=1))
    with R.lab(tmp_path / "incidents.sqlite", clock, tmp_path) as lab:
        settings = load_settings({**K.CHAT_ENV, "LOOPBREAKER_ROUTES": ROUTES})
        remediation = replace(
            settings.remediation,
            policy=RemediationPolicy(),  # the dry run: the plan is posted, nothing is changed
            kubeconfig=lab.kubeconfig,
            compute_endpoint=lab.compute.url,
        )
        settings = replace(settings, remediation=remediation)
        credentials = GoogleCredentials(AnonymousCredentials())
        remediator = build_remediator(
            settings,
            store=lab.store,
            notifier=lab.notifier,
            clock=clock,
            actuators=build_actuators(settings, credentials),
            sleep=lab.sleep,
        )
        R.handle_until_done(remediator, request)
        posted = lab.notifier.messages[approved.id]
    assert ("Route", "platform") in posted.facts and posted.remediation
