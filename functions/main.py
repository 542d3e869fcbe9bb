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

Bad input (not base64, not JSON, nested too deep, a number too long, text that is not
valid Unicode, not a LogEntry, another event type) is logged once at ERROR with its
messageId and acknowledged by returning normally; the HTTP functions answer 4xx naming
the problem. Only a TransientError answers 5xx (without a traceback: it is logged once
as a retry), so Pub/Sub redelivers. A body functions-framework itself cannot read as a
CloudEvent gets 400 and one ERROR line. Settings are validated at import (a bad
LOOPBREAKER_* value stops the instance from starting); everything else is imported and
built on the first call of the entry point that needs it, so a cold start stays short.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import functions_framework
from cloudevents.http import CloudEvent
from werkzeug.exceptions import HTTPException

import loopbreaker
from loopbreaker import logs
from loopbreaker.errors import ConfigError, InvalidInput, TransientError
from loopbreaker.settings.load import Runtime, Settings, load_settings
from loopbreaker.signals.decode import escape_surrogates
from loopbreaker.signals.envelope import UndecodableMessage, from_cloud_event

if TYPE_CHECKING:
    from loopbreaker.app.alert_webhook import AlertWebhook
    from loopbreaker.responder.service import Responder

try:
    SETTINGS = load_settings(os.environ, runtime=Runtime.CLOUD)
except ConfigError as _exc:
    # A setting that cannot be used (a route file that does not parse, a bad duration):
    # one structured line naming it, and the instance does not start. Never a traceback.
    _line = {"severity": "CRITICAL", "message": f"loopbreaker cannot start: {_exc}"}
    sys.stderr.write(json.dumps(_line) + "\n")
    raise SystemExit(2) from None
logs.configure(SETTINGS.log_level)

_built: dict[Callable[[Settings], Any], Any] = {}
# Re-entrant: the alert webhook's builder asks for the shared responder inside _once.
_lock = threading.RLock()
_JSON = {"Content-Type": "application/json"}
T = TypeVar("T")
#: Where loopbreaker's own code lives: an exception raised there is ours, not the framework's.
_OURS = (os.path.dirname(loopbreaker.__file__), os.path.abspath(__file__))


def _responder() -> Responder:
    """The builders are imported on the first call an instance serves, not at import: a
    cold start pays only for what its own entry point wires (the responder's pipeline and
    the signature catalog, the chat desk, the remediator), never for all of them."""
    from loopbreaker.app.bootstrap import build_responder

    return _once(build_responder)


def _once(build: Callable[[Settings], T]) -> T:
    """The service ``build`` wires, built on the first call and kept for the instance."""
    with _lock:
        if build not in _built:
            _built[build] = build(SETTINGS)
        service: T = _built[build]
        return service


@functions_framework.cloud_event
def on_log_entry(cloud_event: CloudEvent) -> None:
    responder = _responder()
    try:
        delivery = from_cloud_event(cloud_event.get_attributes(), cloud_event.get_data())
    except UndecodableMessage as exc:
        responder.reject(exc.message_id, exc.reason)
        return
    responder.handle_delivery(delivery)


@functions_framework.http
def on_schedule(request: Any) -> tuple[str, int, dict[str, str]]:
    # The minute until the next run: each incident at its own settle time (see the
    # Terraform module's on_schedule timeout, which leaves room for it).
    report = _responder().settle_minute(time.sleep)
    return json.dumps(report.to_dict()), 200, _JSON


@functions_framework.http
def on_chat_action(request: Any) -> tuple[str, int, dict[str, str]]:
    from loopbreaker.app.bootstrap import build_chat_actions

    # The raw bytes: Slack's signature covers the body exactly as sent, before any parsing.
    reply = _once(build_chat_actions).handle(dict(request.headers), request.get_data(cache=True))
    return reply.json(), reply.status, {**_JSON, **reply.headers}


def _alert_webhook(settings: Settings) -> AlertWebhook:
    from loopbreaker.app.bootstrap import build_alert_webhook

    # The responder on_log_entry uses: one store, so a failure that a log sink and an
    # alert both report is one incident.
    return build_alert_webhook(settings, responder=_responder())


@functions_framework.http
def on_alertmanager_webhook(request: Any) -> tuple[str, int, dict[str, str]]:
    reply = _once(_alert_webhook).handle(
        dict(request.headers), request.get_data(cache=True), dict(request.args)
    )
    return reply.json(), reply.status, {**_JSON, **reply.headers}


@functions_framework.cloud_event
def on_remediation_request(cloud_event: CloudEvent) -> None:
    from loopbreaker.app.bootstrap import build_remediator

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
            message_id=getattr(exc, "message_id", None) or _event_id(cloud_event),
            reason=str(exc),
        )
        return
    except TransientError as exc:
        logs.event(
            logs.get_logger("remediation"),
            logging.ERROR,
            f"remediation request will be retried: {exc}",
            event="remediation_request_retry",
            message_id=_event_id(cloud_event),
            reason=str(exc),
        )
        raise
    logs.event(
        logs.get_logger("remediation"),
        logging.INFO,
        f"remediation request {report.result.value}: {report.reason}",
        labels={"incident_id": report.incident_id},
        event="remediation_request_done",
        result=report.result.value,
    )


def _event_id(cloud_event: CloudEvent) -> str | None:
    event_id = cloud_event.get("id")
    return escape_surrogates(str(event_id)) if event_id is not None else None


@functions_framework.errorhandler(Exception)
def _unhandled(exc: Exception) -> Any:
    """What escapes a function: HTTP errors as they are, a TransientError as a 5xx for the
    retry (its one log line is written already), and a request that functions-framework
    or the CloudEvents SDK could not read (a structured event nested too deep, a number
    too long, not UTF-8) as a 400 with one log line. Anything raised in loopbreaker's own
    code is a bug: re-raised, so Flask logs it with its traceback and answers 500."""
    if isinstance(exc, HTTPException):
        return exc
    if isinstance(exc, TransientError):
        return json.dumps({"error": "temporarily unavailable", "reason": str(exc)}), 500, _JSON
    if _raised_in_our_code(exc):
        raise exc
    reason = escape_surrogates(f"{type(exc).__name__}: {exc}")[:300]
    if isinstance(exc, RecursionError):
        reason = "the request nests too deeply to read"
    logs.event(
        logs.get_logger("functions"),
        logging.ERROR,
        f"rejected a request functions-framework could not read: {reason}",
        event="request_rejected",
        reason=reason,
    )
    return json.dumps({"error": f"not a readable request: {reason}"}), 400, _JSON


def _raised_in_our_code(exc: BaseException) -> bool:
    frame = exc.__traceback__
    while frame is not None:
        if os.path.abspath(frame.tb_frame.f_code.co_filename).startswith(_OURS):
            return True
        frame = frame.tb_next
    return False
