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
  on_alertmanager_webhook
                HTTP, Alertmanager webhook (version 4) or Cloud Monitoring notification
                (webhook or Pub/Sub push channel): firing and resolved alerts become
                signals of the same responder and store as on_log_entry. Bearer or basic
                auth; 4xx for bad payloads (not retried), 503 for transient failures.
  on_remediation_request
                Eventarc CloudEvent from LOOPBREAKER_REMEDIATION_TOPIC: re-check, cordon,
                drain, delete the VM (or report its host), file the support case. Dry run
                unless LOOPBREAKER_DRY_RUN=false. Its own service account.

Bad input (not base64, not JSON, not a LogEntry, another event type) is logged once at
ERROR with its messageId and acknowledged by returning normally; a TransientError is
raised so Pub/Sub redelivers. Settings are validated at import (a bad LOOPBREAKER_* value
stops the instance from starting); clients are built on the first call.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import functions_framework
from cloudevents.http import CloudEvent

from loopbreaker import logs
from loopbreaker.app.bootstrap import (
    build_alert_webhook,
    build_chat_actions,
    build_remediator,
    build_responder,
)
from loopbreaker.app.settings import Runtime, Settings, load_settings
from loopbreaker.errors import InvalidInput
from loopbreaker.signals.envelope import UndecodableMessage, from_cloud_event

SETTINGS = load_settings(os.environ, runtime=Runtime.CLOUD)
logs.configure(SETTINGS.log_level)

_built: dict[Callable[[Settings], Any], Any] = {}
# Re-entrant: the alert webhook's builder asks for the shared responder inside _once.
_lock = threading.RLock()
_JSON = {"Content-Type": "application/json"}
T = TypeVar("T")


def _once(build: Callable[[Settings], T]) -> T:
    """The service ``build`` wires, built on the first call and kept for the instance."""
    with _lock:
        if build not in _built:
            _built[build] = build(SETTINGS)
        service: T = _built[build]
        return service


@functions_framework.cloud_event
def on_log_entry(cloud_event: CloudEvent) -> None:
    responder = _once(build_responder)
    try:
        delivery = from_cloud_event(cloud_event.get_attributes(), cloud_event.get_data())
    except UndecodableMessage as exc:
        responder.reject(exc.message_id, exc.reason)
        return
    responder.handle_delivery(delivery)


@functions_framework.http
def on_schedule(request: Any) -> tuple[str, int, dict[str, str]]:
    report = _once(build_responder).settle()
    return json.dumps(report.to_dict()), 200, _JSON


@functions_framework.http
def on_chat_action(request: Any) -> tuple[str, int, dict[str, str]]:
    # The raw bytes: Slack's signature covers the body exactly as sent, before any parsing.
    reply = _once(build_chat_actions).handle(dict(request.headers), request.get_data(cache=True))
    return reply.json(), reply.status, _JSON


def _alert_webhook(settings: Settings) -> Any:
    # The responder on_log_entry uses: one store, so a failure that a log sink and an
    # alert both report is one incident.
    return build_alert_webhook(settings, responder=_once(build_responder))


@functions_framework.http
def on_alertmanager_webhook(request: Any) -> tuple[str, int, dict[str, str]]:
    reply = _once(_alert_webhook).handle(
        dict(request.headers), request.get_data(cache=True), dict(request.args)
    )
    return reply.json(), reply.status, {**_JSON, **reply.headers}


@functions_framework.cloud_event
def on_remediation_request(cloud_event: CloudEvent) -> None:
    remediator = _once(build_remediator)
    try:
        delivery = from_cloud_event(cloud_event.get_attributes(), cloud_event.get_data())
        report = remediator.handle(delivery.entry)
    except (UndecodableMessage, InvalidInput) as exc:
        # Acknowledged: a malformed request is never retried, and never acted on.
        logs.event(
            logs.get_logger("remediation"),
            logging.ERROR,
            f"rejected remediation request: {exc}",
            event="remediation_request_rejected",
            message_id=getattr(exc, "message_id", None) or cloud_event.get("id"),
            reason=str(exc),
        )
        return
    logs.event(
        logs.get_logger("remediation"),
        logging.INFO,
        f"remediation request {report.result.value}: {report.reason}",
        labels={"incident_id": report.incident_id},
        event="remediation_request_done",
        result=report.result.value,
    )
