"""``on_chat_action``: a verified Approve / Reject click becomes one recorded decision.

Order of checks, each refusing with its status and changing nothing:

1. the platform: Slack's request signature and timestamp, or Google Chat's bearer
   token, on the raw body before anything is parsed (401);
2. the payload: form/JSON shape, a known action, an action request present (400);
3. the action request's own HMAC signature and expiry (400);
4. the clicking user is in ``LOOPBREAKER_APPROVERS`` (403);
5. in ONE store transaction: the incident awaits exactly this approval request, unexpired,
   and the click came from the incident's own message (409 when already decided, expired
   or superseded; 400 otherwise). Of concurrent clicks exactly one wins.

Only then, for an approval, is one remediation request published (with the incident id
as ordering key and a dedup id), and the message updated to show who decided. If the
publish fails the approval stays recorded and ``on_schedule`` publishes it later: a
decision is never lost, and never published twice under two ids.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

from loopbreaker import incidents
from loopbreaker.app.replies import Reply
from loopbreaker.approval.requests import (
    APPROVE_ACTION,
    CHAT_ACTIONS,
    Decision,
    Platform,
    is_approver,
    verify_token,
)
from loopbreaker.approval.verify import GoogleChatVerifier, SlackVerifier
from loopbreaker.chat import notify
from loopbreaker.chat.notify import Notifier
from loopbreaker.chat.render import google_chat_message
from loopbreaker.errors import (
    ApprovalInvalid,
    ConfigError,
    NotAnApprover,
    TransientError,
    Unauthenticated,
)
from loopbreaker.incidents import Incident
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.logs import event, get_logger
from loopbreaker.remediation.queue import RemediationQueue, publish_approved

#: The Google Chat event parameter that carries the signed action request.
ACTION_PARAMETER = "action_request"
#: Bodies larger than this are not a chat click (Slack's payloads are a few KiB).
MAX_BODY_BYTES = 256 * 1024


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


class ChatActions:
    """The service behind ``on_chat_action``; every port comes in through the constructor."""

    def __init__(
        self,
        *,
        store: IncidentStore,
        queue: RemediationQueue,
        notifier: Notifier,
        clock: Callable[[], datetime],
        signing_key: bytes | None,
        approvers: frozenset[str],
        slack: SlackVerifier | None = None,
        google_chat: GoogleChatVerifier | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.store = store
        self.queue = queue
        self.notifier = notifier
        self.clock = clock
        self.signing_key = signing_key
        self.approvers = approvers
        self.slack = slack
        self.google_chat = google_chat
        self._log = logger or get_logger("chatops")

    def handle(self, headers: Mapping[str, str], body: bytes) -> Reply:
        lowered = {k.lower(): v for k, v in headers.items()}
        platform: Platform | None = None
        try:
            platform = self._platform(lowered)
            click = self._authenticate(platform, lowered, body)
            return self._decide(click)
        except ApprovalInvalid as exc:
            return self._refuse(exc, platform)
        except TransientError as exc:
            event(
                self._log,
                logging.ERROR,
                f"chat action failed, nothing decided: {exc}",
                event="chat_action_retry",
                platform=platform.value if platform else None,
                reason=str(exc),
            )
            return Reply(503, {"text": f"Temporarily unavailable, nothing was changed: {exc}"})

    # --- 1 + 2: who is calling, and what they clicked ----------------------------------

    def _platform(self, headers: Mapping[str, str]) -> Platform:
        if "x-slack-signature" in headers or "x-slack-request-timestamp" in headers:
            return Platform.SLACK
        if "authorization" in headers:
            return Platform.GOOGLE_CHAT
        raise Unauthenticated(
            "neither X-Slack-Signature nor an Authorization bearer token: not a chat platform"
        )

    def _authenticate(self, platform: Platform, headers: Mapping[str, str], body: bytes) -> Click:
        if len(body) > MAX_BODY_BYTES:
            raise ApprovalInvalid(f"request body of {len(body)} bytes is too large")
        if platform is Platform.SLACK:
            if self.slack is None:
                raise Unauthenticated("Slack clicks are off: no LOOPBREAKER_SLACK_SIGNING_SECRET")
            self.slack.verify(headers, body)
            return parse_slack(body)
        if self.google_chat is None:
            raise Unauthenticated("Google Chat clicks are off: no LOOPBREAKER_GOOGLE_CHAT_AUDIENCE")
        self.google_chat.verify(headers)
        return parse_google_chat(body)

    # --- 3 .. 5: the decision -----------------------------------------------------------

    def _decide(self, click: Click) -> Reply:
        now = self.clock()
        if self.signing_key is None:
            raise ApprovalInvalid("approvals are off: LOOPBREAKER_ACTION_SIGNING_KEY is not set")
        request = verify_token(click.token, self.signing_key, now)
        if not is_approver(self.approvers, click.platform, click.user):
            raise NotAnApprover(
                f"{click.user_name or click.user} ({click.user}) is not in LOOPBREAKER_APPROVERS"
            )
        decision = Decision.APPROVED if click.action == APPROVE_ACTION else Decision.REJECTED

        def change(current: Incident) -> Incident:
            _same_message(current, click)
            return incidents.decide(
                current,
                request,
                decision=decision,
                actor=click.user,
                actor_name=click.user_name,
                platform=click.platform,
                now=now,
            )

        result = self.store.update(request.incident_id, change)
        if result.incident is None:
            raise ApprovalInvalid(f"no incident {request.incident_id} in this store")
        incident = result.incident
        labels = incident.labels()
        event(
            self._log,
            logging.WARNING,
            f"incident {incident.id} {decision.value} by {click.user} via {click.platform.value}",
            labels=labels,
            event=f"remediation_{decision.value}",
            platform=click.platform.value,
            user=click.user,
            approval_id=request.approval_id,
            node=request.node,
            instance=request.instance,
            instance_id=request.instance_id,
        )
        try:
            return self._after_decision(click, incident, decision, now)
        except TransientError as exc:
            # The decision is committed; whatever failed after it is retried by settle.
            event(
                self._log,
                logging.ERROR,
                f"incident {incident.id} {decision.value}; a follow-up write failed: {exc}",
                labels=labels,
                event="chat_action_follow_up_failed",
                reason=str(exc),
            )
            text = f"Incident {incident.id} {decision.value}; the message updates shortly."
            return Reply(200, {"text": text, "incident_id": incident.id})

    def _after_decision(
        self, click: Click, incident: Incident, decision: Decision, now: datetime
    ) -> Reply:
        published = None
        if decision is Decision.APPROVED:
            published, incident = publish_approved(self.store, self.queue, incident, now, self._log)
        message = notify.render(incident)
        reply: dict[str, Any] = {
            "text": message.approval_note or f"incident {incident.id} {decision.value}",
            "incident_id": incident.id,
            "state": incident.state.value,
            "published": published,
        }
        if click.platform is Platform.GOOGLE_CHAT:
            # Google Chat replaces the clicked card with the one in the reply.
            reply = {**reply, "actionResponse": {"type": "UPDATE_MESSAGE"}}
            reply.update(google_chat_message(message))
            self.store.update(
                incident.id, lambda i: incidents.mark_notified(i, message.fingerprint)
            )
        else:
            self._update_message(incident, message)
        return Reply(200, reply)

    def _update_message(self, incident: Incident, message: notify.Notification) -> None:
        try:
            where = self.notifier.post(message, incident.chat)
        except (TransientError, ConfigError) as exc:
            # The decision stands; the next settle posts the changed message again.
            event(
                self._log,
                logging.WARNING,
                f"could not update the message of {incident.id}: {exc}",
                labels=incident.labels(),
                event="chat_update_failed",
                reason=str(exc),
            )
            return
        self.store.update(
            incident.id, lambda i: incidents.mark_notified(i, message.fingerprint, where)
        )

    def _refuse(self, exc: ApprovalInvalid, platform: Platform | None) -> Reply:
        status = exc.http_status
        event(
            self._log,
            logging.WARNING if status in (401, 403) else logging.INFO,
            f"chat action refused ({status}): {exc}",
            event="chat_action_refused",
            status=status,
            platform=platform.value if platform else None,
            reason=str(exc),
            error=type(exc).__name__,
        )
        return Reply(status, {"text": f"Refused, nothing was changed: {exc}", "status": status})


def _same_message(incident: Incident, click: Click) -> None:
    """A click must come from the incident's own message, whenever that one is known."""
    where = incident.chat or {}
    known = where.get("ts") if click.platform is Platform.SLACK else where.get("message")
    same_platform = where.get("platform") == click.platform.value
    if known and same_platform and click.message != known:
        raise ApprovalInvalid(
            f"the click came from message {click.message}, not incident {incident.id}'s"
        )


# --- payloads --------------------------------------------------------------------------


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
    return Click(
        platform=Platform.SLACK,
        action=str(action_id),
        token=action.get("value"),
        user=user_id,
        user_name=str(name) if name else None,
        message=str(message_ts) if message_ts else None,
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
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ApprovalInvalid(f"{what} is not JSON: {exc}") from exc
    if not isinstance(value, Mapping):
        raise ApprovalInvalid(f"{what} is not a JSON object")
    return value
