"""The pause switch from chat: a signed slash command, verified like a click.

While paused an approval is refused (409, nothing decided or published) and a rejection
is still taken; after ``resume`` the same buttons approve. Only approvers may pause, and
an unsigned command is a 401 that changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

import chatkit as K
import pytest
from fakes import FakeClock, FakeNotifier, FakeQueue
from fakeservers.certs import CertsServer
from google.auth.transport.requests import Request as GoogleRequest

from loopbreaker.app.bootstrap import build_chat_actions
from loopbreaker.app.chat_actions import REFUSAL_HEADER, ChatActions
from loopbreaker.app.replies import Reply
from loopbreaker.approval.requests import REJECT_ACTION
from loopbreaker.incidents import Incident, State
from loopbreaker.incidents.store.sqlite import SqliteStore


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Incident]:
    path = tmp_path_factory.mktemp("faulty") / "template.sqlite"
    return path, K.make_faulty_store(path)


@pytest.fixture(scope="module")
def certs() -> Iterator[CertsServer]:
    with CertsServer() as server:
        yield server


@dataclass
class Desk:
    service: ChatActions
    store: SqliteStore
    queue: FakeQueue
    clock: FakeClock
    incident: Incident
    certs: CertsServer

    def command(self, text: str, *, user: str = K.APPROVER, secret: str = K.SLACK_SECRET) -> Reply:
        form = {
            "token": "deprecated-verification-token",
            "team_id": "T0123",
            "channel_id": K.CHANNEL,
            "user_id": user,
            "user_name": "alice",
            "command": "/loopbreaker",
            "text": text,
            "response_url": "http://127.0.0.1:9/commands/T0123/1/abc",
            "trigger_id": "13345224609.738474920.8088930838d88f008e0",
        }
        body = urlencode(form).encode()
        headers, _ = K.slack_request(body, self.clock(), secret=secret)
        return self.service.handle(headers, body)

    def chat_command(self, text: str, email: str = K.CHAT_APPROVER) -> Reply:
        event = {
            "type": "MESSAGE",
            "eventTime": "2026-05-20T08:40:00.000000Z",
            "space": {"name": "spaces/AAAAX5_xtFM", "type": "ROOM"},
            "message": {
                "name": "spaces/AAAAX5_xtFM/messages/abc.abc",
                "text": f"/loopbreaker {text}",
                "argumentText": f" {text}",
                "slashCommand": {"commandId": "1"},
            },
            "user": {"name": "users/1181", "displayName": "Alice", "email": email, "type": "HUMAN"},
        }
        headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {self.certs.token(K.AUDIENCE)}",
        }
        return self.service.handle(headers, json.dumps(event).encode())

    def click(self, action: str | None = None) -> Reply:
        kw = {"action": action} if action else {}
        payload = K.slack_payload(K.token_of(self.incident), **kw)
        return self.service.handle(*K.slack_request(payload, self.clock()))

    def current(self) -> Incident:
        found = self.store.get(self.incident.id)
        assert found is not None
        return found


@pytest.fixture
def desk(template: tuple[Path, Incident], tmp_path: Path, certs: CertsServer) -> Iterator[Desk]:
    path, incident = template
    store = SqliteStore(K.copy_store(path, tmp_path / "incidents.sqlite"))
    clock = FakeClock(K.click_time(incident))
    queue = FakeQueue()
    settings = K.chat_settings(LOOPBREAKER_GOOGLE_CHAT_CERTS_URL=certs.certs_url)
    service = build_chat_actions(
        settings,
        store=store,
        queue=queue,
        notifier=FakeNotifier(),
        clock=clock,
        google_chat_request=GoogleRequest(),
    )
    yield Desk(service, store, queue, clock, incident, certs)
    store.close()


def test_pause_from_slack_refuses_approvals_until_resume(desk: Desk) -> None:
    reply = desk.command("pause until=2h GPU fleet upgrade in progress")
    assert reply.status == 200, reply.body
    assert "paused by alice (U0APPROVER) via slack" in reply.body["text"]
    pause = desk.store.current_pause(desk.clock())
    assert pause is not None and pause.reason == "GPU fleet upgrade in progress"
    assert pause.until == desk.clock() + timedelta(hours=2)
    assert "paused" in desk.command("status").body["text"]

    refused = desk.click()
    assert refused.status == 200 and refused.headers[REFUSAL_HEADER] == "409"
    assert "remediation is paused by alice" in refused.body["text"]
    assert "GPU fleet upgrade" in refused.body["text"]
    assert desk.queue.published == []
    assert desk.current().state is State.AWAITING_APPROVAL

    resumed = desk.command("resume")
    assert resumed.status == 200 and "Resumed by alice" in resumed.body["text"]
    assert desk.store.current_pause(desk.clock()) is None
    approved = desk.click()
    assert approved.status == 200 and REFUSAL_HEADER not in approved.headers
    assert desk.current().state is State.APPROVED and len(desk.queue.published) == 1
    periods = desk.store.pauses(desk.clock() - timedelta(days=1))
    assert [(p.by, p.resumed_by) for p in periods] == [
        ("alice (U0APPROVER) via slack", "alice (U0APPROVER) via slack")
    ]


def test_a_rejection_is_taken_while_paused(desk: Desk) -> None:
    assert desk.command("pause maintenance").status == 200
    reply = desk.click(REJECT_ACTION)
    assert reply.status == 200 and REFUSAL_HEADER not in reply.headers
    assert desk.current().state is State.REJECTED


def test_pause_from_google_chat(desk: Desk) -> None:
    reply = desk.chat_command("pause until=30m quota review")
    assert reply.status == 200 and set(reply.body) == {"text"}
    pause = desk.store.current_pause(desk.clock())
    assert pause is not None and pause.by == "Alice (alice@example.com) via google-chat"
    assert desk.chat_command("resume").status == 200
    assert desk.store.current_pause(desk.clock()) is None


@pytest.mark.parametrize(
    ("text", "user", "secret", "status", "reason"),
    [
        ("pause quota", K.OUTSIDER, K.SLACK_SECRET, 403, "you are not an approver"),
        ("pause quota", K.APPROVER, "wrong-secret-0123456789abcdef", 401, "Signature"),
        ("pause", K.APPROVER, K.SLACK_SECRET, 400, "needs a reason"),
        ("pause until=soon quota", K.APPROVER, K.SLACK_SECRET, 400, "until='soon'"),
        ("reboot everything", K.APPROVER, K.SLACK_SECRET, 400, "usage: /loopbreaker"),
    ],
)
def test_a_bad_or_unauthorised_command_changes_nothing(
    desk: Desk, text: str, user: str, secret: str, status: int, reason: str
) -> None:
    reply = desk.command(text, user=user, secret=secret)
    assert reason in reply.body["text"], reply.body
    if status == 401:
        assert reply.status == 401
    else:
        assert reply.status == 200 and reply.headers[REFUSAL_HEADER] == str(status)
    assert desk.store.current_pause(desk.clock()) is None
