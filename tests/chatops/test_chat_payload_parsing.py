"""A verified body becomes one click: Slack's ``block_actions`` form and Google Chat's
``CARD_CLICKED`` event, field by field, and the reason a person reads for each body that
is not a click.

Pure parsing (``parse_slack``, ``parse_google_chat``); the bodies are shaped like the
platforms' own (chatkit builds them as Slack and Google Chat send them).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import chatkit as K
import pytest

from loopbreaker.app.clicks import ACTION_PARAMETER, Click, parse_google_chat, parse_slack
from loopbreaker.approval.requests import APPROVE_ACTION, REJECT_ACTION, Platform
from loopbreaker.errors import ApprovalInvalid

TOKEN = "lb1.payload.signature"


def slack_body(payload: Any) -> bytes:
    return urlencode({"payload": json.dumps(payload)}).encode()


def slack(**changes: Any) -> dict[str, Any]:
    payload = K.slack_payload(TOKEN)
    for key, value in changes.items():
        if value is None:
            payload.pop(key, None)
        else:
            payload[key] = value
    return payload


def refusal_of(parse: Any, body: bytes) -> str:
    with pytest.raises(ApprovalInvalid) as refused:
        parse(body)
    assert type(refused.value) is ApprovalInvalid  # a 400
    return str(refused.value)


def test_a_slack_click_carries_action_token_user_message_and_response_url() -> None:
    assert parse_slack(slack_body(slack())) == Click(
        platform=Platform.SLACK,
        action=APPROVE_ACTION,
        token=TOKEN,
        user=K.APPROVER,
        user_name="alice",
        message="1779265266.000100",
        response_url="http://127.0.0.1:9/actions/T0123/123/xyz",
    )


@pytest.mark.parametrize(
    ("user", "name"),
    [
        ({"id": K.APPROVER, "username": "al", "name": "alice"}, "al"),
        ({"id": K.APPROVER, "name": "alice"}, "alice"),
        ({"id": K.APPROVER, "username": "", "name": ""}, None),
        ({"id": K.APPROVER}, None),
    ],
)
def test_the_slack_user_name_is_the_username_else_the_name(
    user: dict[str, str], name: str | None
) -> None:
    click = parse_slack(slack_body(slack(user=user)))
    assert (click.user, click.user_name) == (K.APPROVER, name)


def test_a_slack_click_without_container_or_response_url_has_none_of_them() -> None:
    click = parse_slack(slack_body(slack(container=None, response_url=None)))
    assert (click.message, click.response_url) == (None, None)
    click = parse_slack(slack_body(slack(container={"type": "message"}, response_url=42)))
    assert (click.message, click.response_url) == (None, None)
    click = parse_slack(slack_body(slack(container="1779265266.000100")))
    assert click.message is None


@pytest.mark.parametrize("action_id", ["approve_remediation", "reject_remediation"])
def test_the_buttons_action_ids_are_the_ones_posted_messages_carry(action_id: str) -> None:
    # Buttons already in a channel keep these ids across deploys: they are the wire format.
    payload = slack()
    payload["actions"][0]["action_id"] = action_id
    assert parse_slack(slack_body(payload)).action == action_id
    event = chat(action=None, common={"invokedFunction": action_id, "parameters": {}})
    assert parse_google_chat(chat_body(event)).action == action_id
    assert {APPROVE_ACTION, REJECT_ACTION} == {"approve_remediation", "reject_remediation"}
    assert ACTION_PARAMETER == "action_request"


def test_a_slack_reject_and_any_token_value_are_carried_as_they_are() -> None:
    payload = slack()
    payload["actions"][0].update(action_id=REJECT_ACTION, value=12)
    click = parse_slack(slack_body(payload))
    assert (click.action, click.token) == (REJECT_ACTION, 12)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"", "Slack body has no single 'payload' field"),
        (b"token=x", "Slack body has no single 'payload' field"),
        (b"payload=1&payload=2", "Slack body has no single 'payload' field"),
        (b"a", "Slack body is not a form: bad query field: 'a'"),
        (
            b"\xff",
            "Slack body is not a form: 'utf-8' codec can't decode byte 0xff in position 0: "
            "invalid start byte",
        ),
        (
            b"payload=%7Bx",
            "Slack payload is not JSON: Expecting property name enclosed in double quotes "
            "(line 1 column 2)",
        ),
        (slack_body([1]), "Slack payload is not a JSON object"),
        (
            slack_body(slack(type="view_submission")),
            "Slack interaction type 'view_submission' is not block_actions",
        ),
        (slack_body(slack(type=None)), "Slack interaction type None is not block_actions"),
        (slack_body(slack(actions=None)), "Slack payload must carry exactly one action"),
        (slack_body(slack(actions=[])), "Slack payload must carry exactly one action"),
        (slack_body(slack(actions=["approve"])), "Slack payload must carry exactly one action"),
        (
            slack_body(slack(actions={"action_id": APPROVE_ACTION})),
            "Slack payload must carry exactly one action",
        ),
        (slack_body(slack(user=None)), "Slack payload names no user"),
        (slack_body(slack(user="U0APPROVER")), "Slack payload names no user"),
        (slack_body(slack(user={"id": ""})), "Slack payload names no user"),
        (slack_body(slack(user={"id": 7})), "Slack payload names no user"),
    ],
)
def test_a_slack_body_that_is_not_one_click_says_why(body: bytes, said: str) -> None:
    assert refusal_of(parse_slack, body) == said


def test_two_slack_actions_are_not_one_click() -> None:
    payload = slack()
    payload["actions"] = payload["actions"] * 2
    assert refusal_of(parse_slack, slack_body(payload)) == (
        "Slack payload must carry exactly one action"
    )


@pytest.mark.parametrize(
    ("action_id", "shown"), [("delete_everything", "'delete_everything'"), (None, "None"), (3, "3")]
)
def test_an_unknown_slack_action_is_named(action_id: object, shown: str) -> None:
    payload = slack()
    payload["actions"][0]["action_id"] = action_id
    assert refusal_of(parse_slack, slack_body(payload)) == f"unknown action {shown}"


# --- Google Chat ---------------------------------------------------------------------


def chat(**changes: Any) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(K.chat_event(TOKEN))
    for key, value in changes.items():
        if value is None:
            event.pop(key, None)
        else:
            event[key] = value
    return event


def chat_body(event: Any) -> bytes:
    return json.dumps(event).encode()


def test_a_chat_click_carries_action_token_user_and_message() -> None:
    assert parse_google_chat(chat_body(chat())) == Click(
        platform=Platform.GOOGLE_CHAT,
        action=APPROVE_ACTION,
        token=TOKEN,
        user=K.CHAT_APPROVER,
        user_name="Alice",
        message="spaces/AAAAX5_xtFM/messages/RI2JF8DQs_s.RI2JF8DQs_s",
    )


def test_the_common_form_alone_is_a_click() -> None:
    event = chat(action=None)
    click = parse_google_chat(chat_body(event))
    assert (click.action, click.token) == (APPROVE_ACTION, TOKEN)


def test_the_legacy_action_form_alone_is_a_click() -> None:
    event = chat(common=None)
    click = parse_google_chat(chat_body(event))
    assert (click.action, click.token) == (APPROVE_ACTION, TOKEN)


def test_the_legacy_action_parameters_may_be_a_map() -> None:
    event = chat(
        common=None,
        action={"actionMethodName": REJECT_ACTION, "parameters": {ACTION_PARAMETER: TOKEN}},
    )
    click = parse_google_chat(chat_body(event))
    assert (click.action, click.token) == (REJECT_ACTION, TOKEN)


def test_common_wins_over_action_for_the_function_and_the_token() -> None:
    event = chat(
        common={"invokedFunction": REJECT_ACTION, "parameters": {ACTION_PARAMETER: "common"}},
        action={
            "actionMethodName": APPROVE_ACTION,
            "parameters": [{"key": ACTION_PARAMETER, "value": "action"}],
        },
    )
    click = parse_google_chat(chat_body(event))
    assert (click.action, click.token) == (REJECT_ACTION, "common")


def test_common_without_a_function_falls_back_to_the_action_form() -> None:
    event = chat(common={"parameters": {}})
    click = parse_google_chat(chat_body(event))
    assert (click.action, click.token) == (APPROVE_ACTION, TOKEN)


@pytest.mark.parametrize("shape", ["not-a-map", ["a", "list"], 7])
def test_common_or_action_that_is_not_a_map_counts_as_absent(shape: object) -> None:
    click = parse_google_chat(chat_body(chat(common=shape)))
    assert (click.action, click.token) == (APPROVE_ACTION, TOKEN)
    click = parse_google_chat(chat_body(chat(action=shape)))
    assert (click.action, click.token) == (APPROVE_ACTION, TOKEN)


def test_legacy_parameters_skip_entries_that_are_not_key_value_pairs() -> None:
    parameters = [
        "junk",
        {"value": "no key"},
        {"key": 7, "value": "a number key"},
        {"key": "other", "value": "x"},
        {"key": ACTION_PARAMETER, "value": TOKEN},
        {"key": "no_value"},
    ]
    event = chat(common=None, action={"actionMethodName": APPROVE_ACTION, "parameters": parameters})
    assert parse_google_chat(chat_body(event)).token == TOKEN
    keyless = chat(
        common=None, action={"actionMethodName": APPROVE_ACTION, "parameters": parameters[:4]}
    )
    assert parse_google_chat(chat_body(keyless)).token is None


def test_a_parameter_map_with_other_keys_carries_no_token() -> None:
    event = chat(action=None, common={"invokedFunction": APPROVE_ACTION, "parameters": {"x": "y"}})
    assert parse_google_chat(chat_body(event)).token is None
    event = chat(action=None, common={"invokedFunction": APPROVE_ACTION, "parameters": "x"})
    assert parse_google_chat(chat_body(event)).token is None


def test_a_chat_click_without_display_name_or_message_has_none_of_them() -> None:
    event = chat(user={"email": K.CHAT_APPROVER}, message=None)
    click = parse_google_chat(chat_body(event))
    assert (click.user, click.user_name, click.message) == (K.CHAT_APPROVER, None, None)
    event = chat(message={"text": "no name"})
    assert parse_google_chat(chat_body(event)).message is None
    event = chat(message="spaces/A/messages/B")
    assert parse_google_chat(chat_body(event)).message is None


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            b"{x",
            "Google Chat event is not JSON: Expecting property name enclosed in double quotes "
            "(line 1 column 2)",
        ),
        (b"\xff", "Google Chat event is not UTF-8 text: invalid start byte at byte 0"),
        (chat_body([1]), "Google Chat event is not a JSON object"),
        (chat_body(chat(type="MESSAGE")), "Google Chat event type 'MESSAGE' is not CARD_CLICKED"),
        (chat_body(chat(type=None)), "Google Chat event type None is not CARD_CLICKED"),
        (chat_body(chat(common=None, action=None)), "unknown action None"),
        (
            chat_body(chat(common={"invokedFunction": "delete_vm"})),
            "unknown action 'delete_vm'",
        ),
        (chat_body(chat(user=None)), "Google Chat event names no user email"),
        (chat_body(chat(user={"displayName": "Alice"})), "Google Chat event names no user email"),
        (chat_body(chat(user={"email": ""})), "Google Chat event names no user email"),
        (chat_body(chat(user="alice@example.com")), "Google Chat event names no user email"),
    ],
)
def test_a_chat_body_that_is_not_one_click_says_why(body: bytes, said: str) -> None:
    assert refusal_of(parse_google_chat, body) == said
