"""Which platform a request is from, and what it gets when that platform is switched off
or its credentials trip the verifier's library: always a 401 that names the reason, and
nothing decided.

Headers decide the platform before anything is verified: any ``X-Slack-*`` header makes
it Slack, else an ``Authorization`` header Google Chat, else it is no chat platform.
"""

from __future__ import annotations

import chatdesk as D
import chatkit as K
import pytest
from fakes import FakeClock, FakeNotifier, FakeQueue, FakeStore

from loopbreaker.app.chat_actions import ChatActions
from loopbreaker.app.replies import Reply
from loopbreaker.approval.verify import SlackVerifier

BODY = b"payload=%7B%7D"


def refused(reply: Reply, said: str) -> None:
    assert (reply.status, reply.headers) == (401, {})
    assert reply.body == {"text": f"Refused, nothing was changed: {said}", "status": 401}


def service(*, slack: bool) -> ChatActions:
    clock = FakeClock(D.NOW)
    return ChatActions(
        store=FakeStore(),
        queue=FakeQueue(),
        notifier=FakeNotifier(),
        clock=clock,
        signing_key=K.SIGNING_KEY.encode(),
        approvers=frozenset({K.APPROVER}),
        slack=SlackVerifier(K.SLACK_SECRET, clock) if slack else None,
    )


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Slack-Signature": "v0=00"},
        {"x-slack-signature": "v0=00", "Authorization": "Bearer x"},
        {"X-Slack-Request-Timestamp": "1779266400"},
    ],
)
def test_any_slack_header_makes_it_a_slack_request(headers: dict[str, str]) -> None:
    reply = service(slack=True).handle(headers, BODY)
    refused(reply, "missing X-Slack-Request-Timestamp or X-Slack-Signature")


def test_no_platform_header_is_no_chat_platform() -> None:
    reply = service(slack=True).handle({"Content-Type": "application/json"}, BODY)
    refused(
        reply, "neither X-Slack-Signature nor an Authorization bearer token: not a chat platform"
    )


def test_slack_switched_off_refuses_every_slack_request() -> None:
    headers, body = K.slack_request(K.slack_payload("token"), D.NOW)
    refused(
        service(slack=False).handle(headers, body),
        "Slack clicks are off: no LOOPBREAKER_SLACK_SIGNING_SECRET",
    )


def test_google_chat_switched_off_refuses_every_bearer_request() -> None:
    reply = service(slack=True).handle({"Authorization": "Bearer token"}, b"{}")
    refused(reply, "Google Chat clicks are off: no LOOPBREAKER_GOOGLE_CHAT_AUDIENCE")


def test_a_signature_the_library_cannot_compare_does_not_verify() -> None:
    # hmac.compare_digest refuses non-ASCII text with a TypeError: still a 401.
    headers, body = K.slack_request(K.slack_payload("token"), D.NOW)
    headers["X-Slack-Signature"] = "v0=é" + headers["X-Slack-Signature"][4:]
    refused(service(slack=True).handle(headers, body), "slack credentials do not verify: TypeError")
