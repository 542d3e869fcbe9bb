"""Slack and Google Chat notifiers through the real slack_sdk and requests, on local fakes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from fakeservers import ChatServer, Fault, SlackServer

from loopbreaker.approval.requests import APPROVE_ACTION, REJECT_ACTION
from loopbreaker.chat.clients import GoogleChatNotifier, NotifierMisconfigured, SlackNotifier
from loopbreaker.chat.notify import ApprovalPrompt, Notification
from loopbreaker.errors import InvalidInput, TransientError

CHANNEL = "C0LOOPBRK"
TOKEN = "xoxb-test-token"
SPACE = "AAAAloopbrk"
INCIDENT = "inc-20260520-node-n1"

PROMPT = ApprovalPrompt(
    token="v1.eyJpbmNpZGVudCI6ImluYy0xIn0.c2lnbmF0dXJl",
    request_id="req-1",
    node="gke-pool-n1",
    instance="gke-pool-n1",
    instance_id="1234567890",
    zone="us-central1-a",
    project="proj",
    physical_host="host-a",
    expires_at="2026-05-20T08:45:00Z",
)


def notification(
    *, state: str = "diagnosed", approval: ApprovalPrompt | None = None, incident: str = INCIDENT
) -> Notification:
    return Notification(
        incident_id=incident,
        title=f"[{state}] bad_host: node gke-pool-n1 in c1",
        text=f"3 signals; state {state}.",
        severity="WARNING",
        state=state,
        verdict="bad_host -> isolate_host",
        summary=f"Host host-a failed 3 times ({state}).",
        facts=(("Cluster", "c1"), ("Signals", "3 (3 xid)")),
        hosts=({"host": "host-a", "nodes": "gke-pool-n1", "failures": "3"},),
        approval=approval,
        approval_note=None if approval else "Approvals are off: no signing key is configured.",
    )


# --- Slack -------------------------------------------------------------------------------


@pytest.fixture
def slack() -> Iterator[SlackServer]:
    with SlackServer() as server:
        yield server


def slack_notifier(
    server: SlackServer, *, token: str = TOKEN, channel: str = CHANNEL
) -> SlackNotifier:
    return SlackNotifier(token, channel, base_url=server.api_url, timeout=1)


def header(message: dict[str, Any]) -> str:
    return str(message["blocks"][0]["text"]["text"])


def test_slack_first_post_creates_a_message(slack: SlackServer) -> None:
    where = slack_notifier(slack).post(notification())
    message = slack.latest()
    assert where == {"platform": "slack", "channel": CHANNEL, "ts": message["ts"]}
    assert slack.methods() == ["chat.postMessage"]
    request = slack.requests[0]
    assert request.path == "/api/chat.postMessage"
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["content-type"].startswith("application/json")
    body = request.json()
    assert body["channel"] == CHANNEL
    assert header(message) == "[diagnosed] bad_host: node gke-pool-n1 in c1"
    assert message["text"].startswith("[diagnosed] bad_host")
    assert "host-a" in str(message["blocks"])


def test_slack_second_post_updates_in_place(slack: SlackServer) -> None:
    notifier = slack_notifier(slack)
    where = notifier.post(notification())
    again = notifier.post(notification(state="remediated"), where)
    assert slack.methods() == ["chat.postMessage", "chat.update"]
    method, body = slack.calls[1]
    assert (body["channel"], body["ts"]) == (where["channel"], where["ts"])  # type: ignore[index]
    assert again == where
    assert len(slack.messages) == 1
    message = slack.latest()
    assert header(message) == "[remediated] bad_host: node gke-pool-n1 in c1"
    assert "(remediated)" in str(message["blocks"]) and "(diagnosed)" not in str(message["blocks"])


def test_slack_where_of_another_platform_posts_anew(slack: SlackServer) -> None:
    notifier = slack_notifier(slack)
    notifier.post(notification(), {"platform": "google-chat", "message": "spaces/S/messages/M"})
    assert slack.methods() == ["chat.postMessage"]


def test_slack_deleted_message_is_posted_again(slack: SlackServer) -> None:
    notifier = slack_notifier(slack)
    where = notifier.post(notification())
    assert where is not None
    del slack.messages[(where["channel"], where["ts"])]  # someone deleted it in Slack
    again = notifier.post(notification(state="remediated"), where)
    assert slack.methods() == ["chat.postMessage", "chat.update", "chat.postMessage"]
    assert again is not None and again["ts"] != where["ts"]
    assert list(slack.messages) == [(CHANNEL, again["ts"])]
    assert header(slack.latest()).startswith("[remediated]")


def test_slack_rate_limit_is_transient_and_not_retried(slack: SlackServer) -> None:
    slack.inject(Fault.TOO_MANY_REQUESTS, times=5)
    with pytest.raises(TransientError, match=r"rate limited \(retry after 1s\)"):
        slack_notifier(slack).post(notification())
    assert len(slack.requests) == 1  # no retry storm: the next settle posts again
    assert slack.messages == {}


def test_slack_rate_limit_on_update_is_transient(slack: SlackServer) -> None:
    notifier = slack_notifier(slack)
    where = notifier.post(notification())
    slack.inject(Fault.TOO_MANY_REQUESTS, path="chat.update")
    with pytest.raises(TransientError):
        notifier.post(notification(state="remediated"), where)
    # Throttled is not gone: no duplicate message is posted.
    assert [r.path for r in slack.requests] == ["/api/chat.postMessage", "/api/chat.update"]
    assert len(slack.messages) == 1


@pytest.mark.parametrize("fault", [Fault.SERVER_ERROR, Fault.UNAVAILABLE])
def test_slack_server_errors_are_transient(slack: SlackServer, fault: Fault) -> None:
    slack.inject(fault)
    with pytest.raises(TransientError, match=f"HTTP {fault.value}"):
        slack_notifier(slack).post(notification())
    assert len(slack.requests) == 1
    # The fault was one-off: the next settle succeeds.
    assert slack_notifier(slack).post(notification()) is not None
    assert len(slack.messages) == 1


def test_slack_unreachable_is_transient() -> None:
    server = SlackServer().start()
    url = server.api_url
    server.stop()
    with pytest.raises(TransientError, match="Slack chat.postMessage"):
        SlackNotifier(TOKEN, CHANNEL, base_url=url, timeout=1).post(notification())


def test_slack_dropped_connection_is_transient(slack: SlackServer) -> None:
    slack.inject(Fault.RESET, times=5)
    with pytest.raises(TransientError, match="Slack chat.postMessage"):
        slack_notifier(slack).post(notification())
    # slack_sdk's default ConnectionErrorRetryHandler retries a dropped connection once
    # (SlackNotifier passes no retry_handlers=[]); never more than that.
    assert len(slack.requests) == 1
    assert slack.messages == {}


def test_slack_wrong_token_is_misconfigured(slack: SlackServer) -> None:
    with pytest.raises(NotifierMisconfigured, match="invalid_auth"):
        slack_notifier(slack, token="xoxb-wrong").post(notification())
    assert len(slack.requests) == 1
    assert slack.calls == [] and slack.messages == {}


def test_slack_unknown_channel_is_misconfigured(slack: SlackServer) -> None:
    with pytest.raises(NotifierMisconfigured, match="channel_not_found"):
        slack_notifier(slack, channel="C0NOWHERE").post(notification())
    assert slack.messages == {}


def test_slack_other_refusals_are_invalid_input(slack: SlackServer) -> None:
    slack.inject(Fault.FORBIDDEN)  # {"ok": false, "error": "access_denied"}, HTTP 403
    with pytest.raises(InvalidInput, match="access_denied") as caught:
        slack_notifier(slack).post(notification())
    assert not isinstance(caught.value, NotifierMisconfigured)


def test_slack_buttons_only_with_an_approval(slack: SlackServer) -> None:
    notifier = slack_notifier(slack)
    where = notifier.post(notification())
    assert not [b for b in slack.latest()["blocks"] if b["type"] == "actions"]
    with pytest.raises(AssertionError):
        slack.button(APPROVE_ACTION)
    notifier.post(notification(state="awaiting_approval", approval=PROMPT), where)
    approve, reject = slack.button(APPROVE_ACTION), slack.button(REJECT_ACTION)
    assert approve["value"] == reject["value"] == PROMPT.token
    assert approve["style"] == "danger" and "host-a" in approve["confirm"]["text"]["text"]
    # Decided: the buttons go away again in the same message.
    notifier.post(notification(state="remediated"), where)
    assert len(slack.messages) == 1
    assert not [b for b in slack.latest()["blocks"] if b["type"] == "actions"]


def test_slack_fake_accepts_form_encoded_calls(slack: SlackServer) -> None:
    """The fake also speaks form encoding (slack_sdk's ``data=``/``params=``)."""
    from slack_sdk import WebClient

    client = WebClient(token=TOKEN, base_url=slack.api_url, retry_handlers=[])
    posted = client.api_call(
        "chat.postMessage", params={"channel": CHANNEL, "text": "hi", "blocks": "[]"}
    )
    assert slack.requests[0].headers["content-type"] == "application/x-www-form-urlencoded"
    assert slack.messages[(CHANNEL, posted["ts"])]["text"] == "hi"


# --- Google Chat: incoming webhook ---------------------------------------------------------


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def webhook(server: ChatServer, url: str | None = None) -> GoogleChatNotifier:
    return GoogleChatNotifier(webhook_url=url or server.webhook_url(SPACE), timeout=1)


def card_title(message: dict[str, Any]) -> str:
    return str(message["cardsV2"][0]["card"]["header"]["title"])


def test_webhook_posts_of_one_incident_share_a_thread(chat: ChatServer) -> None:
    notifier = webhook(chat)
    first = notifier.post(notification())
    second = notifier.post(notification(state="remediated"), first)
    assert first is not None and second is not None
    assert first["platform"] == second["platform"] == "google-chat"
    assert first["thread"] == second["thread"]
    assert first["message"] != second["message"]  # a webhook cannot edit: a reply
    thread = chat.in_thread(first["thread"])
    assert [card_title(m) for m in thread] == [
        "[diagnosed] bad_host: node gke-pool-n1 in c1",
        "[remediated] bad_host: node gke-pool-n1 in c1",
    ]
    request = chat.requests[0]
    assert request.method == "POST" and request.path == f"/v1/spaces/{SPACE}/messages"
    assert request.param("threadKey") == INCIDENT
    assert request.param("messageReplyOption") == "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"
    assert request.param("token") == chat.webhook_token


def test_webhook_threads_per_incident(chat: ChatServer) -> None:
    notifier = webhook(chat)
    a = notifier.post(notification(incident="inc-a"))
    b = notifier.post(notification(incident="inc-b"))
    assert a is not None and b is not None and a["thread"] != b["thread"]


@pytest.mark.parametrize("fault", [Fault.TOO_MANY_REQUESTS, Fault.SERVER_ERROR, Fault.UNAVAILABLE])
def test_webhook_throttling_and_outages_are_transient(chat: ChatServer, fault: Fault) -> None:
    chat.inject(fault, times=3)
    with pytest.raises(TransientError, match=f"HTTP {fault.value}"):
        webhook(chat).post(notification())
    assert len(chat.requests) == 1
    assert chat.messages == {}


@pytest.mark.parametrize("fault", [Fault.FORBIDDEN, Fault.UNAUTHORIZED])
def test_webhook_refused_is_misconfigured(chat: ChatServer, fault: Fault) -> None:
    chat.inject(fault)
    with pytest.raises(NotifierMisconfigured, match=f"HTTP {fault.value}"):
        webhook(chat).post(notification())


def test_webhook_wrong_token_is_misconfigured(chat: ChatServer) -> None:
    url = chat.webhook_url(SPACE).replace(chat.webhook_token, "revoked")
    with pytest.raises(NotifierMisconfigured, match="HTTP 401"):
        webhook(chat, url).post(notification())
    assert chat.messages == {}


def test_webhook_unreachable_is_transient() -> None:
    server = ChatServer().start()
    url = server.webhook_url(SPACE)
    server.stop()
    with pytest.raises(TransientError, match="ConnectionError"):
        GoogleChatNotifier(webhook_url=url, timeout=1).post(notification())


def test_webhook_timeout_is_transient(chat: ChatServer) -> None:
    chat.inject(Fault.TIMEOUT)
    notifier = GoogleChatNotifier(webhook_url=chat.webhook_url(SPACE), timeout=0.2)
    with pytest.raises(TransientError, match="Timeout"):
        notifier.post(notification())
    assert len(chat.requests) == 1


def test_webhook_reset_is_transient(chat: ChatServer) -> None:
    chat.inject(Fault.RESET)
    with pytest.raises(TransientError):
        webhook(chat).post(notification())


# --- Google Chat: the Chat API -------------------------------------------------------------


def api(server: ChatServer) -> GoogleChatNotifier:
    return GoogleChatNotifier(
        space=f"spaces/{SPACE}", api_url=server.url, session=requests.Session(), timeout=1
    )


CLIENT_ID = f"client-{INCIDENT}"


def test_api_first_post_creates_with_a_client_id(chat: ChatServer) -> None:
    where = api(chat).post(notification())
    assert where is not None
    [(name, message)] = chat.messages.items()
    assert where == {
        "platform": "google-chat",
        "message": name,
        "thread": message["thread"]["name"],
    }
    assert message["clientAssignedMessageId"] == CLIENT_ID
    request = chat.requests[0]
    assert (request.method, request.path) == ("POST", f"/v1/spaces/{SPACE}/messages")
    assert request.param("messageId") == CLIENT_ID
    assert card_title(message) == "[diagnosed] bad_host: node gke-pool-n1 in c1"


def test_api_second_post_patches_the_message(chat: ChatServer) -> None:
    notifier = api(chat)
    where = notifier.post(notification())
    assert where is not None
    again = notifier.post(notification(state="remediated"), where)
    assert again == where
    patch = chat.requests[1]
    assert patch.method == "PATCH" and patch.path == f"/v1/{where['message']}"
    assert patch.param("updateMask") == "text,cardsV2"
    [message] = chat.messages.values()
    assert card_title(message) == "[remediated] bad_host: node gke-pool-n1 in c1"
    assert message["text"].startswith("[remediated]")


def test_api_existing_message_without_where_is_patched_by_client_id(chat: ChatServer) -> None:
    notifier = api(chat)
    first = notifier.post(notification())
    assert first is not None
    # The name was never stored (say the store write failed): POST finds the client id taken.
    again = notifier.post(notification(state="remediated"))
    assert [(r.method, r.path) for r in chat.requests[1:]] == [
        ("POST", f"/v1/spaces/{SPACE}/messages"),
        ("PATCH", f"/v1/spaces/{SPACE}/messages/{CLIENT_ID}"),
    ]
    assert chat.requests[2].param("updateMask") == "text,cardsV2"
    assert again == first  # the PATCH answer names the message by its server id
    [message] = chat.messages.values()
    assert card_title(message).startswith("[remediated]")


def test_api_deleted_message_is_posted_again(chat: ChatServer) -> None:
    notifier = api(chat)
    where = notifier.post(notification())
    assert where is not None
    chat.delete(where["message"])
    again = notifier.post(notification(state="remediated"), where)
    assert [r.method for r in chat.requests] == ["POST", "PATCH", "POST"]
    assert again is not None and again["message"] != where["message"]
    assert list(chat.messages) == [again["message"]]
    assert card_title(chat.messages[again["message"]]).startswith("[remediated]")


@pytest.mark.parametrize("fault", [Fault.TOO_MANY_REQUESTS, Fault.SERVER_ERROR])
def test_api_patch_failures_are_transient(chat: ChatServer, fault: Fault) -> None:
    notifier = api(chat)
    where = notifier.post(notification())
    chat.inject(fault)
    with pytest.raises(TransientError):
        notifier.post(notification(state="remediated"), where)
    assert [r.method for r in chat.requests] == ["POST", "PATCH"]  # no repost, no retry
    assert len(chat.messages) == 1


def test_api_forbidden_is_misconfigured(chat: ChatServer) -> None:
    chat.inject(Fault.FORBIDDEN)
    with pytest.raises(NotifierMisconfigured, match="HTTP 403"):
        api(chat).post(notification())


def test_api_unknown_space_is_misconfigured(chat: ChatServer) -> None:
    chat.spaces.clear()
    with pytest.raises(NotifierMisconfigured, match="HTTP 404"):
        api(chat).post(notification())


def test_api_bad_request_is_invalid_input(chat: ChatServer) -> None:
    # An empty incident id gives the client id "client-", which the API refuses (400).
    with pytest.raises(InvalidInput, match="HTTP 400") as caught:
        api(chat).post(notification(incident=""))
    assert not isinstance(caught.value, NotifierMisconfigured)


def chat_buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for section in message["cardsV2"][0]["card"]["sections"]:
        for widget in section["widgets"]:
            found.extend(widget.get("buttonList", {}).get("buttons", []))
    return found


def test_api_buttons_only_with_an_approval(chat: ChatServer) -> None:
    notifier = api(chat)
    where = notifier.post(notification())
    assert chat_buttons(next(iter(chat.messages.values()))) == []
    notifier.post(notification(state="awaiting_approval", approval=PROMPT), where)
    [message] = chat.messages.values()
    buttons = chat_buttons(message)
    assert [b["onClick"]["action"]["function"] for b in buttons] == [
        APPROVE_ACTION,
        REJECT_ACTION,
    ]
    for button in buttons:
        assert button["onClick"]["action"]["parameters"] == [
            {"key": "action_request", "value": PROMPT.token}
        ]


def test_webhook_buttons_carry_the_token(chat: ChatServer) -> None:
    webhook(chat).post(notification(state="awaiting_approval", approval=PROMPT))
    [message] = chat.messages.values()
    parameters = [b["onClick"]["action"]["parameters"] for b in chat_buttons(message)]
    assert len(parameters) == 2
    values = {p["value"] for params in parameters for p in params}
    assert values == {PROMPT.token}
