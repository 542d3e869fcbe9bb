"""``on_alertmanager_webhook``: authenticate, parse, hand each alert to the responder.

Replies follow what the senders do with them. Alertmanager retries 5xx and drops 4xx; a
Pub/Sub push subscription retries anything but 2xx (102, 200, 201, 202, 204). So:

  401  no or wrong credentials (bearer token, basic auth, or ``?auth_token=`` as Cloud
       Monitoring webhook channels send it), compared in constant time;
  413  a body over :data:`loopbreaker.signals.alerts.MAX_BODY`;
  400  not a payload we understand (the error names what is wrong): never retried;
  503  the store failed transiently: retried, and idempotent per alert;
  200  every alert accepted, ignored or a duplicate, one outcome per alert.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
from collections.abc import Mapping

from loopbreaker.app.replies import Reply
from loopbreaker.errors import InvalidInput, TransientError
from loopbreaker.logs import event, get_logger
from loopbreaker.responder.service import Responder
from loopbreaker.signals import alerts

_AUTH_REALM = {"WWW-Authenticate": 'Basic realm="loopbreaker", Bearer'}


class AlertWebhook:
    """The service behind ``on_alertmanager_webhook``; it shares the log sink's responder."""

    def __init__(
        self,
        responder: Responder,
        *,
        token: str | None,
        basic_auth: str | None,
        default_cluster: str | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self._responder = responder
        self._token = token.encode() if token else None
        self._basic = basic_auth.encode() if basic_auth else None
        self._cluster = default_cluster
        self._log = logger or get_logger("alerts")

    def handle(
        self, headers: Mapping[str, str], body: bytes, query: Mapping[str, str] | None = None
    ) -> Reply:
        if not self._authorized(headers, query or {}):
            self._refuse(401, "missing or wrong credentials")
            return Reply(401, {"error": "unauthorized"}, _AUTH_REALM)
        if len(body) > alerts.MAX_BODY:
            return self._bad(413, f"body of {len(body)} bytes is over {alerts.MAX_BODY}")
        try:
            notification = alerts.parse(body, default_cluster=self._cluster)
        except InvalidInput as exc:
            return self._bad(400, str(exc))
        payload, message_id = notification.payload, notification.message_id
        outcomes = []
        try:
            for alert in notification.alerts:
                outcome = self._responder.handle_alert(alert, message_id)
                outcomes.append(
                    {
                        "alertname": alert.name,
                        "status": alert.status.value,
                        "outcome": outcome.status.value,
                        "incident_id": outcome.incident_id,
                        "reason": outcome.reason,
                    }
                )
        except TransientError as exc:
            # Alerts handled before the failure are duplicates on the retry: nothing twice.
            event(
                self._log,
                logging.ERROR,
                f"alert notification will be retried: {exc}",
                event="alert_retry",
                reason=str(exc),
                message_id=message_id,
            )
            return Reply(503, {"error": "temporarily unavailable", "reason": str(exc)})
        event(
            self._log,
            logging.INFO,
            f"{payload} notification: {len(outcomes)} alert(s)",
            event="alerts_received",
            payload=payload,
            accepted=sum(o["outcome"] == "accepted" for o in outcomes),
            message_id=message_id,
        )
        return Reply(200, {"payload": payload, "alerts": outcomes})

    def _authorized(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        if self._token is None and self._basic is None:
            return False  # not configured: refuse rather than accept anyone
        header = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        scheme, _, credentials = header.partition(" ")
        scheme = scheme.lower()
        ok = False
        # Every configured comparison runs (constant time each), whatever matched first.
        if self._token is not None:
            bearer = credentials.strip().encode() if scheme == "bearer" else b""
            param = (query.get("auth_token") or "").encode()
            ok |= hmac.compare_digest(bearer, self._token)
            ok |= bool(param) and hmac.compare_digest(param, self._token)
        if self._basic is not None:
            given = b""
            if scheme == "basic":
                try:
                    given = base64.b64decode(credentials.strip(), validate=True)
                except (binascii.Error, ValueError):
                    given = b""
            ok |= hmac.compare_digest(given, self._basic)
        return ok

    def _bad(self, status: int, reason: str) -> Reply:
        self._refuse(status, reason)
        return Reply(status, {"error": reason})

    def _refuse(self, status: int, reason: str) -> None:
        event(
            self._log,
            logging.WARNING if status == 401 else logging.ERROR,
            f"alert notification refused ({status}): {reason}",
            event="alert_rejected",
            status=status,
            reason=reason,
        )
