"""Test kit for chat-ops: a faulty-host incident awaiting approval, and signed clicks.

The incident is made the way production makes it: the bundled faulty-host log entries
replayed through the responder, diagnosed by the real engine on the scenario's telemetry.
Clicks are built and signed exactly as Slack and Google Chat send them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import shutil
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from loopbreaker.approval.requests import APPROVE_ACTION
from loopbreaker.chat import notify
from loopbreaker.incidents import Incident, State
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.replay import run as replay
from loopbreaker.settings.load import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
FAULTY = ROOT / "examples" / "telemetry" / "faulty-host"
SIGNING_KEY = "chatops-test-signing-key-0123456789"
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
APPROVER = "U0APPROVER"
OUTSIDER = "U0OUTSIDER"
CHAT_APPROVER = "alice@example.com"
AUDIENCE = "123456789012"
CHANNEL = "C0LOOPBRK"

CHAT_ENV = {
    "LOOPBREAKER_ACTION_SIGNING_KEY": SIGNING_KEY,
    "LOOPBREAKER_APPROVERS": f"{APPROVER},{CHAT_APPROVER}",
    "LOOPBREAKER_SLACK_SIGNING_SECRET": SLACK_SECRET,
    "LOOPBREAKER_GOOGLE_CHAT_AUDIENCE": AUDIENCE,
}


def chat_settings(**extra: str) -> Settings:
    return load_settings({**CHAT_ENV, **extra})


def make_faulty_store(path: Path, scenario: Path = FAULTY, **env: str) -> Incident:
    """Replay a faulty-host scenario (the bundled ``faulty-host`` by default) into a SQLite
    store at ``path`` under the chat settings plus ``env``; its incident."""
    replay.run(
        [scenario / "logs.json"], settings=chat_settings(**env), telemetry=scenario, store_path=path
    )
    store = SqliteStore(path)
    try:
        [incident] = store.list_incidents(states={State.AWAITING_APPROVAL})
    finally:
        store.close()
    assert incident.approval_request is not None, "the faulty host has no approval request"
    return incident


def copy_store(template: Path, into: Path) -> Path:
    into.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, into)
    return into


def token_of(incident: Incident, key: str = SIGNING_KEY) -> str:
    """The value of the incident's Approve button, as the message carries it."""
    prompt = notify.render(incident, signing_key=key.encode()).approval
    assert prompt is not None
    return prompt.token


def click_time(incident: Incident) -> datetime:
    assert incident.approval_request is not None
    return incident.approval_request.issued_at + timedelta(minutes=2)


def slack_payload(
    token: object,
    *,
    action: str = APPROVE_ACTION,
    user: str = APPROVER,
    message_ts: str | None = None,
    response_url: str = "http://127.0.0.1:9/actions/T0123/123/xyz",
) -> dict[str, Any]:
    # Slack's response_url is https://hooks.slack.com/actions/…; tests keep it on loopback.
    return {
        "type": "block_actions",
        "user": {"id": user, "username": "alice", "name": "alice", "team_id": "T0123"},
        "api_app_id": "A0123",
        "token": "legacy-verification-token",
        "container": {
            "type": "message",
            "message_ts": message_ts or "1779265266.000100",
            "channel_id": CHANNEL,
            "is_ephemeral": False,
        },
        "trigger_id": "7377717242017.2625160776.f3e5",
        "team": {"id": "T0123", "domain": "acme"},
        "channel": {"id": CHANNEL, "name": "ops"},
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": action,
                "block_id": "remediation_actions",
                "text": {"type": "plain_text", "text": "Approve"},
                "value": token,
                "action_ts": "1719936120.000100",
            }
        ],
    }


def slack_request(
    payload: Mapping[str, Any] | bytes,
    at: datetime,
    *,
    secret: str = SLACK_SECRET,
    timestamp: datetime | None = None,
) -> tuple[dict[str, str], bytes]:
    """Headers and body as Slack posts an interaction, signed with ``secret``."""
    body = (
        payload
        if isinstance(payload, bytes)
        else urlencode({"payload": json.dumps(payload)}).encode()
    )
    ts = str(int((timestamp or at).timestamp()))
    digest = hmac.new(secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest}",
    }
    return headers, body


def chat_event(token: object, *, action: str = APPROVE_ACTION, email: str = CHAT_APPROVER) -> bytes:
    event = {
        "type": "CARD_CLICKED",
        "eventTime": "2026-05-20T08:40:00.000000Z",
        "space": {"name": "spaces/AAAAX5_xtFM", "type": "ROOM", "displayName": "ops"},
        "message": {"name": "spaces/AAAAX5_xtFM/messages/RI2JF8DQs_s.RI2JF8DQs_s"},
        "user": {
            "name": "users/118103361990877272029",
            "displayName": "Alice",
            "email": email,
            "type": "HUMAN",
        },
        "action": {
            "actionMethodName": action,
            "parameters": [{"key": "action_request", "value": token}],
        },
        "common": {
            "invokedFunction": action,
            "parameters": {"action_request": token},
            "hostApp": "CHAT",
        },
        "isDialogEvent": False,
    }
    return json.dumps(event).encode()


def tamper(token: str, **changes: object) -> str:
    """The token with its payload changed and its signature kept (a forgery)."""
    version, payload, signature = token.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    data.update(changes)
    raw = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return f"{version}.{base64.urlsafe_b64encode(raw).rstrip(b'=').decode()}.{signature}"
