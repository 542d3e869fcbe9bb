"""What a chat platform posts: an Approve / Reject click and the pause command, parsed.

Only bodies whose platform credentials already verified get here (``chat_actions`` checks
Slack's signature or Google Chat's token first). A payload that is not a click or command
of the expected shape is an :class:`ApprovalInvalid` naming what is wrong (400).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from loopbreaker.approval.requests import CHAT_ACTIONS, Platform
from loopbreaker.errors import ApprovalInvalid
from loopbreaker.signals import decode

#: The Google Chat event parameter that carries the signed action request.
ACTION_PARAMETER = "action_request"


@dataclass(frozen=True)
class Click:
    """A verified, parsed button click."""

    platform: Platform
    action: str
    token: object
    user: str
    user_name: str | None = None
    #: Identifies the message clicked (Slack ts, Chat message name), when known.
    message: str | None = None
    #: Slack's ``response_url`` of the interaction.
    response_url: str | None = None


#: The verbs of the pause command.
COMMAND_VERBS = ("pause", "resume", "status")


@dataclass(frozen=True)
class Command:
    """A verified platform's pause / resume / status command."""

    platform: Platform
    verb: str
    user: str
    user_name: str | None = None
    reason: str = ""
    until: str | None = None


def parse_command_text(platform: Platform, text: str, user: str, name: str | None) -> Command:
    """``pause [until=2h] REASON`` | ``resume`` | ``status``."""
    words = text.split()
    if not words or words[0].lower() not in COMMAND_VERBS:
        raise ApprovalInvalid(
            "usage: /loopbreaker pause [until=2h] REASON | /loopbreaker resume | "
            "/loopbreaker status"
        )
    verb, rest = words[0].lower(), words[1:]
    until = None
    if rest and rest[0].lower().startswith("until="):
        until, rest = rest[0].split("=", 1)[1], rest[1:]
    return Command(platform, verb, user, name, " ".join(rest), until)


def parse_command(platform: Platform, body: bytes) -> Command | None:
    """The pause command, if the verified body is one (a slash command); None otherwise."""
    if platform is Platform.SLACK:
        try:
            form = parse_qs(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return None
        if "command" not in form or "payload" in form:
            return None
        user_id = (form.get("user_id") or [""])[0]
        if not user_id:
            raise ApprovalInvalid("Slack command names no user_id")
        user_name = (form.get("user_name") or [""])[0] or None
        return parse_command_text(platform, (form.get("text") or [""])[0], user_id, user_name)
    try:
        event_ = decode.loads(body, what="Google Chat event")
    except decode.InvalidJson:
        return None
    if not isinstance(event_, Mapping) or event_.get("type") != "MESSAGE":
        return None
    message = event_.get("message")
    if not isinstance(message, Mapping) or not isinstance(message.get("slashCommand"), Mapping):
        return None
    sender = event_.get("user")
    email = sender.get("email") if isinstance(sender, Mapping) else None
    if not isinstance(email, str) or not email:
        raise ApprovalInvalid("Google Chat event names no user email")
    display = sender.get("displayName") if isinstance(sender, Mapping) else None
    text = message.get("argumentText")
    return parse_command_text(
        platform, text if isinstance(text, str) else "", email, str(display) if display else None
    )


def slack_response_url(body: bytes) -> str | None:
    """The response_url of a verified Slack body that did not parse as a click."""
    try:
        form = parse_qs(body.decode("utf-8"))
        payload = decode.loads(form["payload"][0], what="Slack payload")
    except (UnicodeDecodeError, ValueError, KeyError, IndexError, decode.InvalidJson):
        return None
    url = payload.get("response_url") if isinstance(payload, Mapping) else None
    return url if isinstance(url, str) else None


# --- click payloads --------------------------------------------------------------------------


def parse_slack(body: bytes) -> Click:
    """A Slack ``block_actions`` interaction (form-encoded ``payload=<JSON>``)."""
    try:
        form = parse_qs(body.decode("utf-8"), strict_parsing=True)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApprovalInvalid(f"Slack body is not a form: {exc}") from exc
    raw = form.get("payload")
    if not raw or len(raw) != 1:
        raise ApprovalInvalid("Slack body has no single 'payload' field")
    payload = _json_object(raw[0], "Slack payload")
    if payload.get("type") != "block_actions":
        kind = payload.get("type")
        raise ApprovalInvalid(f"Slack interaction type {kind!r} is not block_actions")
    actions = payload.get("actions")
    if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], Mapping):
        raise ApprovalInvalid("Slack payload must carry exactly one action")
    action = actions[0]
    action_id = action.get("action_id")
    if not isinstance(action_id, str) or action_id not in CHAT_ACTIONS:
        raise ApprovalInvalid(f"unknown action {action_id!r}")
    user = payload.get("user")
    user_id = user.get("id") if isinstance(user, Mapping) else None
    if not isinstance(user_id, str) or not user_id:
        raise ApprovalInvalid("Slack payload names no user")
    name = user.get("username") or user.get("name") if isinstance(user, Mapping) else None
    container = payload.get("container")
    message_ts = container.get("message_ts") if isinstance(container, Mapping) else None
    response_url = payload.get("response_url")
    return Click(
        platform=Platform.SLACK,
        action=str(action_id),
        token=action.get("value"),
        user=user_id,
        user_name=str(name) if name else None,
        message=str(message_ts) if message_ts else None,
        response_url=response_url if isinstance(response_url, str) else None,
    )


def parse_google_chat(body: bytes) -> Click:
    """A Google Chat ``CARD_CLICKED`` event (``common`` or ``action`` parameters)."""
    event_ = _json_object(body, "Google Chat event")
    if event_.get("type") != "CARD_CLICKED":
        raise ApprovalInvalid(f"Google Chat event type {event_.get('type')!r} is not CARD_CLICKED")
    common = event_.get("common") if isinstance(event_.get("common"), Mapping) else {}
    action = event_.get("action") if isinstance(event_.get("action"), Mapping) else {}
    assert isinstance(common, Mapping) and isinstance(action, Mapping)
    function = common.get("invokedFunction") or action.get("actionMethodName")
    if not isinstance(function, str) or function not in CHAT_ACTIONS:
        raise ApprovalInvalid(f"unknown action {function!r}")
    parameters = {**_parameters(action.get("parameters")), **_parameters(common.get("parameters"))}
    user = event_.get("user")
    email = user.get("email") if isinstance(user, Mapping) else None
    if not isinstance(email, str) or not email:
        raise ApprovalInvalid("Google Chat event names no user email")
    name = user.get("displayName") if isinstance(user, Mapping) else None
    message = event_.get("message")
    message_name = message.get("name") if isinstance(message, Mapping) else None
    return Click(
        platform=Platform.GOOGLE_CHAT,
        action=str(function),
        token=parameters.get(ACTION_PARAMETER),
        user=email,
        user_name=str(name) if name else None,
        message=str(message_name) if message_name else None,
    )


def _parameters(value: object) -> dict[str, object]:
    # Documented as a map; some payloads carry a [{key, value}] list: accept both.
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    if isinstance(value, list):
        return {
            str(p["key"]): p.get("value")
            for p in value
            if isinstance(p, Mapping) and isinstance(p.get("key"), str)
        }
    return {}


def _json_object(raw: str | bytes, what: str) -> Mapping[str, Any]:
    try:
        value = decode.loads(raw, what=what)
    except decode.InvalidJson as exc:
        raise ApprovalInvalid(exc.reason) from None
    if not isinstance(value, Mapping):
        raise ApprovalInvalid(f"{what} is not a JSON object")
    return value
