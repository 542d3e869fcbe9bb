"""The security table's desk: one on_chat_action service over a copy of the faulty-host store.

Built by ``bootstrap.build_chat_actions`` with the real verifiers (slack_sdk's
SignatureVerifier, google-auth against locally served certificates), a SQLite copy of
chatkit's faulty-host incident awaiting approval, and a local Slack server where clicks'
response_url points. ``tests/app/conftest.py`` serves it as the ``desk`` fixture.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chatkit as K
from fakes import FakeClock, FakeNotifier, FakeQueue
from fakeservers.certs import CertsServer
from fakeservers.slack import SlackServer
from google.auth.transport.requests import Request as GoogleRequest

from loopbreaker.app.bootstrap import build_chat_actions
from loopbreaker.app.chat_actions import REFUSAL_HEADER, ChatActions
from loopbreaker.app.replies import Reply
from loopbreaker.incidents import Incident
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.settings.load import Settings


@dataclass
class Desk:
    """One on_chat_action service over a copy of the faulty-host store."""

    service: ChatActions
    store: SqliteStore
    queue: FakeQueue
    notifier: FakeNotifier
    clock: FakeClock
    incident: Incident
    certs: CertsServer
    #: The Approve button's value, as posted while the incident awaited approval.
    token: str
    hooks: SlackServer
    last_platform: str = ""
    #: The response_url the last Slack click carried, and the hooks' posts before it.
    response_url: str | None = None
    posts_before: int = 0

    def slack(self, payload: dict[str, Any] | bytes, **kw: Any) -> Reply:
        self.response_url = None
        if isinstance(payload, dict) and "response_url" in payload:
            self.response_url = f"{self.hooks.url}/actions/T0123/123/xyz"
            payload = {**payload, "response_url": self.response_url}
        headers, body = K.slack_request(payload, self.clock(), **kw)
        self.last_platform = "slack"
        self.posts_before = len(self.hooks.responses)
        return self.service.handle(headers, body)

    def approve(self, **kw: Any) -> Reply:
        return self.slack(K.slack_payload(self.token, **kw))

    def chat(self, body: bytes, bearer: str | None) -> Reply:
        headers = {"Content-Type": "application/json"}
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        self.last_platform = "google-chat"
        self.posts_before = len(self.hooks.responses)
        return self.service.handle(headers, body)

    def current(self) -> Incident:
        found = self.store.get(self.incident.id)
        assert found is not None
        return found

    def assert_refused(
        self, reply: Reply, status: int, reason: str, *, verified: bool = True
    ) -> None:
        """Refused, nothing changed or published, and the clicker told where they read it:
        an unverified request gets its 401; a verified clicker a 200 whose security status
        is in the header, with the reason in Slack's response_url or Chat's own reply."""
        assert reason in reply.body["text"], reply.body["text"]
        assert self.queue.published == []
        assert self.current().to_dict() == self.incident.to_dict()
        if status == 401 or not verified:
            assert reply.status == status, reply.body
            assert len(self.hooks.responses) == self.posts_before  # nothing posted for it
            return
        assert reply.status == 200, reply.body
        assert reply.headers[REFUSAL_HEADER] == str(status)
        if self.last_platform == "google-chat":
            assert set(reply.body) == {"text"}  # a Chat message, nothing else
        elif self.response_url is None:
            assert len(self.hooks.responses) == self.posts_before  # no response_url to use
        else:
            assert len(self.hooks.responses) == self.posts_before + 1
            path, told = self.hooks.responses[-1]
            assert path == "/actions/T0123/123/xyz"
            assert told["response_type"] == "ephemeral" and told["replace_original"] is False
            assert reason in told["text"]


def make_desk(
    template: tuple[Path, Incident],
    tmp_path: Path,
    certs: CertsServer,
    settings: Settings,
    hooks: SlackServer,
) -> Desk:
    path, incident = template
    store = SqliteStore(K.copy_store(path, tmp_path / "incidents.sqlite"))
    clock = FakeClock(K.click_time(incident))
    queue, notifier = FakeQueue(), FakeNotifier()
    service = build_chat_actions(
        settings,
        store=store,
        queue=queue,
        notifier=notifier,
        clock=clock,
        google_chat_request=GoogleRequest(),
    )
    return Desk(
        service, store, queue, notifier, clock, incident, certs, K.token_of(incident), hooks
    )
