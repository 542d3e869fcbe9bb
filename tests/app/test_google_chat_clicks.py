"""The security table of on_chat_action for Google Chat: the token is verified, refusals change
nothing, and every reply is a message Chat accepts.

Each case starts from the bundled faulty-host incident awaiting approval (see chatkit),
clicks through the real service with real verifiers (slack_sdk's SignatureVerifier,
google-auth against locally served certificates) and asserts the status, that the
remediation queue saw nothing, and that the stored incident is byte-for-byte unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import chatkit as K
import pytest
from clickdesk import Desk, make_desk
from fakeservers.certs import CertsServer, SigningKey
from fakeservers.slack import SlackServer

from loopbreaker.app.chat_actions import REFUSAL_HEADER
from loopbreaker.approval.requests import APPROVE_ACTION, Platform
from loopbreaker.incidents import Incident

# --- Google Chat ------------------------------------------------------------------------


def test_a_google_chat_approval_verifies_the_token_and_replaces_the_card(desk: Desk) -> None:
    bearer = desk.certs.token(K.AUDIENCE)
    reply = desk.chat(K.chat_event(desk.token), bearer)
    assert reply.status == 200, reply.body
    assert reply.body["actionResponse"] == {"type": "UPDATE_MESSAGE"}
    card = json.dumps(reply.body["cardsV2"])
    assert "Approved by Alice via google-chat" in card and APPROVE_ACTION not in card
    after = desk.current()
    assert after.approval is not None and after.approval.actor == K.CHAT_APPROVER
    assert after.approval.platform is Platform.GOOGLE_CHAT and len(desk.queue.published) == 1


def test_an_oidc_token_for_the_chat_service_account_is_accepted(desk: Desk) -> None:
    bearer = desk.certs.token(
        K.AUDIENCE,
        issuer="https://accounts.google.com",
        email="chat@system.gserviceaccount.com",
        email_verified=True,
    )
    assert desk.chat(K.chat_event(desk.token), bearer).status == 200


TokenMaker = Callable[[CertsServer], str | None]


@pytest.mark.parametrize(
    ("make_token", "reason"),
    [
        (lambda c: None, "not a chat platform"),
        (lambda c: "not-a-jwt", "does not verify"),
        (lambda c: c.token("987654321098"), "does not verify"),  # wrong audience
        (lambda c: c.token(K.AUDIENCE, issuer="attacker@evil.example"), "not issued by"),
        (
            lambda c: c.token(
                K.AUDIENCE, issuer="https://accounts.google.com", email="x@evil.example"
            ),
            "not issued by",
        ),
        # Exactly one check fails in each of these: another service account's valid,
        # verified token for our audience; the Chat account's but unverified email.
        (
            lambda c: c.token(
                K.AUDIENCE,
                issuer="https://accounts.google.com",
                email="other@project.iam.gserviceaccount.com",
                email_verified=True,
            ),
            "not issued by",
        ),
        (
            lambda c: c.token(
                K.AUDIENCE,
                issuer="https://accounts.google.com",
                email="chat@system.gserviceaccount.com",
                email_verified=False,
            ),
            "not issued by",
        ),
        # Signed with another key under the served key id: the signature fails.
        (
            lambda c: c.token(K.AUDIENCE, signer=SigningKey("chat-key-1").signer),
            "does not verify",
        ),
        (lambda c: c.token(K.AUDIENCE, expires_in=-120), "does not verify"),  # expired
    ],
    ids=[
        "missing",
        "garbage",
        "audience",
        "issuer",
        "email",
        "email-only",
        "email-unverified-only",
        "signature",
        "expired",
    ],
)
def test_bad_google_chat_tokens_are_401(desk: Desk, make_token: TokenMaker, reason: str) -> None:
    reply = desk.chat(K.chat_event(desk.token), make_token(desk.certs))
    desk.assert_refused(reply, 401, reason)


def test_a_google_chat_user_not_in_the_approvers_is_403(desk: Desk) -> None:
    reply = desk.chat(
        K.chat_event(desk.token, email="mallory@example.com"), desk.certs.token(K.AUDIENCE)
    )
    desk.assert_refused(reply, 403, "mallory@example.com")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"[]", "not a JSON object"),
        (b'{"type": "MESSAGE"}', "is not CARD_CLICKED"),
        ("unknown", "unknown action"),
    ],
)
def test_malformed_google_chat_events_are_400(desk: Desk, body: Any, reason: str) -> None:
    if body == "unknown":
        body = K.chat_event(desk.token, action="launch_missiles")
    desk.assert_refused(desk.chat(body, desk.certs.token(K.AUDIENCE)), 400, reason)


def test_without_a_signing_key_every_click_is_refused(
    template: tuple[Path, Incident], tmp_path: Path, certs: CertsServer, hooks: SlackServer
) -> None:
    from loopbreaker.settings.load import load_settings

    env = {k: v for k, v in K.CHAT_ENV.items() if k != "LOOPBREAKER_ACTION_SIGNING_KEY"}
    env["LOOPBREAKER_SLACK_RESPONSE_URL_PREFIX"] = hooks.url + "/actions/"
    desk = make_desk(template, tmp_path, certs, load_settings(env), hooks)
    desk.assert_refused(desk.approve(), 400, "approvals are off")


# --- approvers per platform, and replies a chat platform accepts --------------------------


def test_a_slack_click_never_matches_a_google_chat_approver(desk: Desk) -> None:
    # Signed Slack payloads carry U… ids; one naming an approver's email is not that person.
    desk.assert_refused(desk.approve(user=K.CHAT_APPROVER), 403, "you are not an approver")


def test_approver_entries_may_name_their_platform() -> None:
    from loopbreaker.approval.requests import is_approver, parse_approvers

    approvers = parse_approvers("slack:U0APPROVER, google-chat:Alice@Example.com")
    assert approvers == {"U0APPROVER", "alice@example.com"}
    assert is_approver(approvers, Platform.SLACK, "U0APPROVER")
    assert is_approver(approvers, Platform.GOOGLE_CHAT, "alice@example.com")
    assert not is_approver(approvers, Platform.SLACK, "alice@example.com")
    assert not is_approver(approvers, Platform.GOOGLE_CHAT, "U0APPROVER")
    for wrong in ("slack:alice@example.com", "google-chat:U0APPROVER"):
        with pytest.raises(ValueError, match="neither a Slack user id"):
            parse_approvers(wrong)


#: The fields of a Google Chat ``Message`` (Chat API v1 reference) and of its
#: ``actionResponse.type``; a reply to a CARD_CLICKED event carries nothing else.
CHAT_MESSAGE_FIELDS = frozenset(
    {
        "name", "sender", "createTime", "lastUpdateTime", "deleteTime", "text",
        "formattedText", "cards", "cardsV2", "annotations", "thread", "space",
        "fallbackText", "actionResponse", "argumentText", "slashCommand", "attachment",
        "matchedUrl", "threadReply", "clientAssignedMessageId", "emojiReactionSummaries",
        "privateMessageViewer", "deletionMetadata", "quotedMessageMetadata",
        "attachedGifs", "accessoryWidgets",
    }
)  # fmt: skip
ACTION_RESPONSE_TYPES = frozenset(
    {"TYPE_UNSPECIFIED", "NEW_MESSAGE", "UPDATE_MESSAGE", "UPDATE_USER_MESSAGE_CARDS",
     "REQUEST_CONFIG", "DIALOG", "UPDATE_WIDGET"}
)  # fmt: skip


def assert_chat_message(body: Any) -> None:
    assert isinstance(body, dict) and set(body) <= CHAT_MESSAGE_FIELDS, set(body)
    if "actionResponse" in body:
        assert set(body["actionResponse"]) <= {"type", "url", "dialogAction", "updatedWidget"}
        assert body["actionResponse"]["type"] in ACTION_RESPONSE_TYPES
    for card in body.get("cardsV2", []):
        assert set(card) == {"cardId", "card"} and "sections" in card["card"]


def test_google_chat_replies_are_chat_messages_and_nothing_else(desk: Desk) -> None:
    bearer = desk.certs.token(K.AUDIENCE)
    refused = desk.chat(K.chat_event(desk.token, email="mallory@example.com"), bearer)
    assert_chat_message(refused.body)
    approved = desk.chat(K.chat_event(desk.token), bearer)
    assert approved.status == 200 and approved.body["actionResponse"]["type"] == "UPDATE_MESSAGE"
    assert_chat_message(approved.body)
    again = desk.chat(K.chat_event(desk.token), bearer)
    assert again.headers[REFUSAL_HEADER] == "409" and "already approved" in again.body["text"]
    assert_chat_message(again.body)
