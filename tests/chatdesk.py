"""A light on_chat_action service for boundary tests: no replay, no store file.

``ChatActions`` built directly from its ports (the recording fakes, an in-memory store,
an injected clock) with the real verifiers: Slack's signature checked by slack_sdk over
requests signed as Slack documents it, Google Chat's token by google-auth against
certificates served locally. Log records are kept, fields and all, for the tests that
read them. Clicks need an incident awaiting approval: chatkit's faulty-host template.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import chatkit as K
from fakes import FakeClock, FakeNotifier, FakeQueue, FakeStore
from fakeservers.certs import CertsServer
from google.auth.transport.requests import Request as GoogleRequest

from loopbreaker.app.chat_actions import ChatActions
from loopbreaker.app.replies import Reply
from loopbreaker.approval.verify import GoogleChatVerifier, SlackVerifier
from loopbreaker.incidents.store.base import IncidentStore

NOW = datetime(2026, 5, 20, 8, 40, tzinfo=UTC)


class Records(logging.Handler):
    """Keeps every record a logger emits (``fields`` and ``labels`` included)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def events(self) -> list[dict[str, Any]]:
        """Each record as the structured line carries it: fields, labels, severity."""
        return [
            {
                **getattr(r, "fields", {}),
                "labels": dict(getattr(r, "labels", {})),
                "severity": r.levelname,
            }
            for r in self.records
        ]


@dataclass
class Desk:
    service: ChatActions
    store: IncidentStore
    queue: FakeQueue
    notifier: FakeNotifier
    clock: FakeClock
    records: Records
    certs: CertsServer | None = None
    replies: list[tuple[str, str]] = field(default_factory=list)

    def slack_command(self, text: str, *, user: str = K.APPROVER, name: str = "alice") -> Reply:
        form = {
            "team_id": "T0123",
            "channel_id": K.CHANNEL,
            "user_id": user,
            "user_name": name,
            "command": "/loopbreaker",
            "text": text,
            "response_url": "http://127.0.0.1:9/commands/T0123/1/abc",
        }
        body = urlencode(form).encode()
        headers, _ = K.slack_request(body, self.clock())
        return self.service.handle(headers, body)

    def chat_command(self, text: str, *, email: str = K.CHAT_APPROVER) -> Reply:
        assert self.certs is not None
        event = {
            "type": "MESSAGE",
            "message": {
                "name": "spaces/AAAA/messages/abc.abc",
                "argumentText": f" {text}",
                "slashCommand": {"commandId": "1"},
            },
            "user": {"displayName": "Alice", "email": email, "type": "HUMAN"},
        }
        headers = {"Authorization": f"Bearer {self.certs.token(K.AUDIENCE)}"}
        return self.service.handle(headers, json.dumps(event).encode())

    def slack_click(self, token: object, **kw: Any) -> Reply:
        return self.service.handle(*K.slack_request(K.slack_payload(token, **kw), self.clock()))

    def chat_click(self, token: object, **kw: Any) -> Reply:
        assert self.certs is not None
        headers = {"Authorization": f"Bearer {self.certs.token(K.AUDIENCE)}"}
        return self.service.handle(headers, K.chat_event(token, **kw))


class RecordingReplies:
    """ClickReplies that keeps each ephemeral answer (url, text)."""

    def __init__(self, into: list[tuple[str, str]]) -> None:
        self.into = into

    def ephemeral(self, url: str, text: str) -> None:
        self.into.append((url, text))


def make_desk(
    *,
    store: IncidentStore | None = None,
    now: datetime = NOW,
    certs: CertsServer | None = None,
    signing_key: bytes | None = K.SIGNING_KEY.encode(),
    approvers: frozenset[str] = frozenset({K.APPROVER, K.CHAT_APPROVER}),
) -> Desk:
    clock = FakeClock(now)
    records = Records()
    logger = logging.getLogger(f"chatdesk.{id(records)}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(records)
    queue, notifier = FakeQueue(), FakeNotifier()
    answers: list[tuple[str, str]] = []
    google_chat = (
        GoogleChatVerifier(K.AUDIENCE, certs.certs_url, request=GoogleRequest()) if certs else None
    )
    service = ChatActions(
        store=store if store is not None else FakeStore(),
        queue=queue,
        notifier=notifier,
        clock=clock,
        signing_key=signing_key,
        approvers=approvers,
        slack=SlackVerifier(K.SLACK_SECRET, clock),
        google_chat=google_chat,
        slack_replies=RecordingReplies(answers),
        logger=logger,
    )
    return Desk(service, service.store, queue, notifier, clock, records, certs, answers)
