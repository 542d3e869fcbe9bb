"""Cloud Functions (2nd gen) entry points; each decodes, calls one service, maps errors.

Targets:
  on_log_entry  Eventarc CloudEvent ``google.cloud.pubsub.topic.v1.messagePublished``: a
                log sink's LogEntry, base64 in ``message.data``.
  on_schedule   HTTP, called every minute by Cloud Scheduler: diagnose settled incidents,
                expire stale approval requests.

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
from loopbreaker.bootstrap import build_responder
from loopbreaker.envelope import UndecodableMessage, from_cloud_event
from loopbreaker.service import Responder
from loopbreaker.settings import Runtime, load_settings

SETTINGS = load_settings(os.environ, runtime=Runtime.CLOUD)
logs.configure(SETTINGS.log_level)

_responder: Responder | None = None
_lock = threading.Lock()


def _get_responder() -> Responder:
    global _responder
    with _lock:
        if _responder is None:
            _responder = build_responder(SETTINGS)
        return _responder


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
    return json.dumps(report.to_dict()), 200, {"Content-Type": "application/json"}
