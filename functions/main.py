"""Cloud Functions (2nd gen) entry points; each decodes, calls one service, maps errors.

Targets:
  on_log_entry  Eventarc CloudEvent ``google.cloud.pubsub.topic.v1.messagePublished``: a
                log sink's LogEntry, base64 in ``message.data``.
  on_schedule   HTTP, called every minute by Cloud Scheduler: diagnose settled incidents,
                expire stale approval requests, publish approvals not published yet.
  on_chat_action
                HTTP, Slack interactivity / Google Chat app endpoint: a verified Approve
                or Reject click; publishes one remediation request per approval. It holds
                no permission to touch nodes or VMs.

Bad input (not base64, not JSON, not a LogEntry, another event type) is logged once at
ERROR with its messageId and acknowledged by returning normally; a TransientError is
raised so Pub/Sub redelivers. Settings are validated at import (a bad LOOPBREAKER_* value
stops the instance from starting); clients are built on the first call.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import functions_framework
from cloudevents.http import CloudEvent

from loopbreaker import logs
from loopbreaker.bootstrap import build_chat_actions, build_responder
from loopbreaker.chatops import ChatActions
from loopbreaker.envelope import UndecodableMessage, from_cloud_event
from loopbreaker.service import Responder
from loopbreaker.settings import Runtime, load_settings

SETTINGS = load_settings(os.environ, runtime=Runtime.CLOUD)
logs.configure(SETTINGS.log_level)

_responder: Responder | None = None
_chat_actions: ChatActions | None = None
_lock = threading.Lock()
_JSON = {"Content-Type": "application/json"}


def _get_responder() -> Responder:
    global _responder
    with _lock:
        if _responder is None:
            _responder = build_responder(SETTINGS)
        return _responder


def _get_chat_actions() -> ChatActions:
    global _chat_actions
    with _lock:
        if _chat_actions is None:
            _chat_actions = build_chat_actions(SETTINGS)
        return _chat_actions


@functions_framework.cloud_event
def on_log_entry(cloud_event: CloudEvent) -> None:
    responder = _get_responder()
    try:
        delivery = from_cloud_event(cloud_event.get_attributes(), cloud_event.get_data())
    except UndecodableMessage as exc:
        responder.reject(exc.message_id, exc.reason)
        return
    responder.handle_delivery(delivery)


@functions_framework.http
def on_schedule(request: Any) -> tuple[str, int, dict[str, str]]:
    report = _get_responder().settle()
    return json.dumps(report.to_dict()), 200, _JSON


@functions_framework.http
def on_chat_action(request: Any) -> tuple[str, int, dict[str, str]]:
    # The raw bytes: Slack's signature covers the body exactly as sent, before any parsing.
    reply = _get_chat_actions().handle(dict(request.headers), request.get_data(cache=True))
    return reply.json(), reply.status, _JSON
