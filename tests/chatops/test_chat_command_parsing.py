"""The pause command's text, word by word: ``pause [until=2h] REASON | resume | status``.

Pure parsing (``parse_command_text``, ``parse_command``): which bodies are a command at
all, what each word becomes, and the usage a person is shown for anything else. What a
parsed ``until=`` means in time is in test_chat_pause_until.py (beside this file).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest

from loopbreaker.app.clicks import Command, parse_command, parse_command_text
from loopbreaker.approval.requests import Platform
from loopbreaker.errors import ApprovalInvalid

USAGE = "usage: /loopbreaker pause [until=2h] REASON | /loopbreaker resume | /loopbreaker status"
SLACK, CHAT = Platform.SLACK, Platform.GOOGLE_CHAT


def parsed(text: str, platform: Platform = SLACK) -> Command:
    return parse_command_text(platform, text, "U0APPROVER", "alice")


@pytest.mark.parametrize(
    ("text", "verb", "until", "reason"),
    [
        ("pause until=2h GPU fleet upgrade", "pause", "2h", "GPU fleet upgrade"),
        ("pause GPU fleet upgrade", "pause", None, "GPU fleet upgrade"),
        ("  PAUSE   Until=30m  drain  ", "pause", "30m", "drain"),
        (
            "pause UNTIL=2026-05-20T10:00:00Z maintenance",
            "pause",
            "2026-05-20T10:00:00Z",
            "maintenance",
        ),
        # Only the word right after the verb is an until=; later it is part of the reason.
        ("pause upgrade until=2h", "pause", None, "upgrade until=2h"),
        # Everything after the first '=' is the value, '=' included: it is reported whole.
        ("pause until=2h=x why", "pause", "2h=x", "why"),
        ("pause until= why", "pause", "", "why"),
        ("pause", "pause", None, ""),
        ("resume", "resume", None, ""),
        ("Status", "status", None, ""),
        ("resume now please", "resume", None, "now please"),
    ],
)
def test_each_word_lands_where_it_belongs(
    text: str, verb: str, until: str | None, reason: str
) -> None:
    assert parsed(text) == Command(SLACK, verb, "U0APPROVER", "alice", reason, until)


@pytest.mark.parametrize("text", ["", "   ", "stop everything", "until=2h pause", "pauses"])
def test_anything_else_gets_the_usage(text: str) -> None:
    with pytest.raises(ApprovalInvalid) as refused:
        parsed(text)
    assert str(refused.value) == USAGE


def slack_form(**fields: str) -> bytes:
    form = {"command": "/loopbreaker", "user_id": "U0APPROVER", "user_name": "alice", **fields}
    return urlencode({k: v for k, v in form.items() if v != "-"}).encode()


def test_a_slack_slash_command_is_parsed_with_who_sent_it() -> None:
    body = slack_form(text="pause until=2h upgrade")
    assert parse_command(SLACK, body) == Command(
        SLACK, "pause", "U0APPROVER", "alice", "upgrade", "2h"
    )


def test_a_slack_command_without_a_user_name_keeps_the_id_only() -> None:
    command = parse_command(SLACK, slack_form(text="status", user_name="-"))
    assert command == Command(SLACK, "status", "U0APPROVER", None, "", None)
    command = parse_command(SLACK, slack_form(text="status", user_name=""))
    assert command is not None and command.user_name is None


def test_a_slack_command_without_text_gets_the_usage() -> None:
    with pytest.raises(ApprovalInvalid, match="^usage: "):
        parse_command(SLACK, slack_form(text="-"))


@pytest.mark.parametrize("user_id", ["-", ""])
def test_a_slack_command_without_a_user_id_is_refused(user_id: str) -> None:
    with pytest.raises(ApprovalInvalid) as refused:
        parse_command(SLACK, slack_form(text="status", user_id=user_id))
    assert str(refused.value) == "Slack command names no user_id"


@pytest.mark.parametrize(
    "body",
    [
        urlencode({"payload": json.dumps({"type": "block_actions"})}).encode(),
        # A click's payload next to a command field is still a click.
        urlencode({"payload": "{}", "command": "/loopbreaker", "user_id": "U0APPROVER"}).encode(),
        urlencode({"text": "pause now", "user_id": "U0APPROVER"}).encode(),
        b"\xff\xfe not utf-8",
    ],
)
def test_a_slack_body_that_is_no_slash_command_is_none(body: bytes) -> None:
    assert parse_command(SLACK, body) is None


def chat_message(text: object = " pause until=2h upgrade", **user: object) -> dict[str, Any]:
    return {
        "type": "MESSAGE",
        "message": {
            "name": "spaces/AAAA/messages/abc.abc",
            "text": f"/loopbreaker {text}",
            "argumentText": text,
            "slashCommand": {"commandId": "1"},
        },
        "user": {"displayName": "Alice", "email": "alice@example.com", **user},
    }


def test_a_google_chat_slash_command_is_parsed_with_who_sent_it() -> None:
    body = json.dumps(chat_message()).encode()
    assert parse_command(CHAT, body) == Command(
        CHAT, "pause", "alice@example.com", "Alice", "upgrade", "2h"
    )


def test_a_google_chat_command_without_a_display_name_keeps_the_email_only() -> None:
    event = chat_message(" status", displayName=None)
    assert parse_command(CHAT, json.dumps(event).encode()) == Command(
        CHAT, "status", "alice@example.com", None, "", None
    )


@pytest.mark.parametrize("text", [None, 42])
def test_a_google_chat_command_without_argument_text_gets_the_usage(text: object) -> None:
    with pytest.raises(ApprovalInvalid) as refused:
        parse_command(CHAT, json.dumps(chat_message(text)).encode())
    assert str(refused.value) == USAGE


@pytest.mark.parametrize("user", [{"email": None}, {"email": ""}, {"email": 7}])
def test_a_google_chat_command_without_an_email_is_refused(user: dict[str, object]) -> None:
    with pytest.raises(ApprovalInvalid) as refused:
        parse_command(CHAT, json.dumps(chat_message(**user)).encode())
    assert str(refused.value) == "Google Chat event names no user email"


def test_a_google_chat_command_whose_user_is_not_an_object_is_refused() -> None:
    event = {**chat_message(), "user": "alice@example.com"}
    with pytest.raises(ApprovalInvalid, match="names no user email"):
        parse_command(CHAT, json.dumps(event).encode())


@pytest.mark.parametrize(
    "event",
    [
        {**chat_message(), "type": "CARD_CLICKED"},
        {**chat_message(), "message": {"text": "/loopbreaker status", "argumentText": "status"}},
        {**chat_message(), "message": {"slashCommand": "1", "argumentText": "status"}},
        {**chat_message(), "message": "status"},
        ["MESSAGE"],
    ],
)
def test_a_google_chat_event_that_is_no_slash_command_is_none(event: object) -> None:
    assert parse_command(CHAT, json.dumps(event).encode()) is None


def test_a_google_chat_body_that_is_not_json_is_none() -> None:
    assert parse_command(CHAT, b"{not json") is None
