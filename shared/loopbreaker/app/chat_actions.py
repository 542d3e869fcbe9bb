"""``on_chat_action``: a verified Approve / Reject click becomes one recorded decision.

Order of checks, each refusing with its status and changing nothing:

1. the platform: Slack's request signature and timestamp, or Google Chat's bearer
   token, on the raw body before anything is parsed (401);
2. the payload: form/JSON shape, a known action, an action request present (400);
3. the action request's own HMAC signature and expiry (400);
4. the clicking user is in ``LOOPBREAKER_APPROVERS`` (403); with ``LOOPBREAKER_ROUTES``,
   among the approvers of the incident's own route instead, checked inside step 5's
   transaction against the route stored on the incident (403, "not an approver of route");
5. in ONE store transaction: the incident awaits exactly this approval request, unexpired,
   and the click came from the incident's own message (409 when already decided, expired
   or superseded; 400 otherwise). Of concurrent clicks exactly one wins.

A refusal of a click whose platform credentials verified is answered so the clicker can
read it: Slack drops the body of a ``block_actions`` reply, so the reply is 200 and the
reason goes to the interaction's ``response_url`` as an ephemeral message; Google Chat
shows the reply, so it is 200 with a Chat message of the reason and nothing else. The
security status (400, 403, 409) stays in the log line and the ``X-Loopbreaker-Refusal``
header. An unverified request gets its 401, and nothing is posted anywhere for it.

While remediation is paused (``loopbreaker pause``, or the chat command below) an
approval is refused (409, with a reply naming who paused, why and until when); a
rejection is still taken. The pause command itself -- a Slack slash command
(``/loopbreaker pause [until=2h] REASON``, ``/loopbreaker resume``, ``/loopbreaker
status``) or a Google Chat slash command message with the same text -- is verified like
a click (steps 1 and 4: the platform's signature or token, then the approver list).

Only then, for an approval, is one remediation request published (with the incident id
as ordering key and a dedup id), and the message updated to show who decided. If the
publish fails the approval stays recorded and ``on_schedule`` publishes it later: a
decision is never lost, and never published twice under two ids.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

from loopbreaker import incidents
from loopbreaker.app.clicks import (
    Click,
    Command,
    parse_command,
    parse_google_chat,
    parse_slack,
    slack_response_url,
)
from loopbreaker.app.replies import Reply
from loopbreaker.approval.requests import (
    APPROVE_ACTION,
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
    InvalidInput,
    LoopbreakerError,
    NotAnApprover,
    TransientError,
    Unauthenticated,
)
from loopbreaker.incidents import Incident
from loopbreaker.incidents.routes import Routes, route_of
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.logs import event, get_logger
from loopbreaker.remediation.queue import RemediationQueue, publish_approved

#: Bodies larger than this are not a chat click (Slack's payloads are a few KiB).
MAX_BODY_BYTES = 256 * 1024


#: Header naming the security status of a refusal answered 200 (see the module doc).
REFUSAL_HEADER = "X-Loopbreaker-Refusal"


class ClickReplies(Protocol):
    """Answers a Slack click where the clicker reads it (``response_url``)."""

    def ephemeral(self, url: str, text: str) -> None: ...


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
        routes: Routes | None = None,
        slack: SlackVerifier | None = None,
        google_chat: GoogleChatVerifier | None = None,
        slack_replies: ClickReplies | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.store = store
        self.queue = queue
        self.notifier = notifier
        self.clock = clock
        self.signing_key = signing_key
        self.approvers = approvers
        #: With routes, a click is checked against the approvers of the incident's route.
        self.routes = routes
        self.slack = slack
        self.google_chat = google_chat
        self.slack_replies = slack_replies
        self._log = logger or get_logger("chatops")

    def handle(self, headers: Mapping[str, str], body: bytes) -> Reply:
        lowered = {k.lower(): v for k, v in headers.items()}
        platform: Platform | None = None
        verified = False
        click: Click | None = None
        try:
            platform = self._platform(lowered)
            self._verify(platform, lowered, body)
            verified = True
            command = parse_command(platform, body)
            if command is not None:
                return self._command(command)
            click = parse_slack(body) if platform is Platform.SLACK else parse_google_chat(body)
            return self._decide(click)
        except ApprovalInvalid as exc:
            reply = self._refuse(exc, platform)
            if not verified or platform is None or exc.http_status == 401:
                return reply
            return self._answer(reply, exc, platform, click, body)
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

    def _verify(self, platform: Platform, headers: Mapping[str, str], body: bytes) -> None:
        if len(body) > MAX_BODY_BYTES:
            raise ApprovalInvalid(f"request body of {len(body)} bytes is too large")
        try:
            if platform is Platform.SLACK:
                if self.slack is None:
                    raise Unauthenticated(
                        "Slack clicks are off: no LOOPBREAKER_SLACK_SIGNING_SECRET"
                    )
                self.slack.verify(headers, body)
            else:
                if self.google_chat is None:
                    raise Unauthenticated(
                        "Google Chat clicks are off: no LOOPBREAKER_GOOGLE_CHAT_AUDIENCE"
                    )
                self.google_chat.verify(headers)
        except (ValueError, TypeError, RecursionError) as exc:
            # The verifiers' libraries read forged credentials too: a signature that is
            # not ASCII (hmac.compare_digest's TypeError), a token whose JSON nests
            # without end. Whatever they trip over does not verify.
            raise Unauthenticated(
                f"{platform.value} credentials do not verify: {type(exc).__name__}"
            ) from exc

    # --- 3 .. 5: the decision -----------------------------------------------------------

    def _decide(self, click: Click) -> Reply:
        now = self.clock()
        if self.signing_key is None:
            raise ApprovalInvalid("approvals are off: LOOPBREAKER_ACTION_SIGNING_KEY is not set")
        request = verify_token(click.token, self.signing_key, now)
        routes = self.routes
        if routes is None and not is_approver(self.approvers, click.platform, click.user):
            raise NotAnApprover(
                f"you are not an approver: {click.user_name or click.user} ({click.user}) is "
                f"not in LOOPBREAKER_APPROVERS for {click.platform.value}"
            )
        decision = Decision.APPROVED if click.action == APPROVE_ACTION else Decision.REJECTED
        if decision is Decision.APPROVED:
            pause = self.store.current_pause(now)
            if pause is not None:
                raise RemediationPaused(
                    f"remediation is {pause.describe()}. Approvals are refused until "
                    "`loopbreaker resume` (or `/loopbreaker resume`); a rejection is still "
                    "taken"
                )

        def change(current: Incident) -> Incident:
            _same_message(current, click)
            if routes is not None:
                _route_approver(routes, current, click)
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
            if click.platform is Platform.GOOGLE_CHAT:
                return Reply(200, {"text": text})
            return Reply(200, {"text": text, "incident_id": incident.id})

    def _after_decision(
        self, click: Click, incident: Incident, decision: Decision, now: datetime
    ) -> Reply:
        published = None
        if decision is Decision.APPROVED:
            published, incident = publish_approved(self.store, self.queue, incident, now, self._log)
        route = route_of(self.routes, incident)
        message = notify.render(incident, route=route)
        reply: dict[str, Any] = {
            "text": message.approval_note or f"incident {incident.id} {decision.value}",
            "incident_id": incident.id,
            "state": incident.state.value,
            "published": published,
        }
        if click.platform is Platform.GOOGLE_CHAT:
            # Google Chat replaces the clicked card with the message in the reply, which
            # must be a Chat message and nothing else.
            reply = {"actionResponse": {"type": "UPDATE_MESSAGE"}, **google_chat_message(message)}
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

    # --- the pause command --------------------------------------------------------------

    def _command(self, command: Command) -> Reply:
        now = self.clock()
        if not is_approver(self.approvers, command.platform, command.user):
            raise NotAnApprover(
                f"you are not an approver: {command.user_name or command.user} "
                f"({command.user}) is not in LOOPBREAKER_APPROVERS for {command.platform.value}"
            )
        who = f"{command.user_name or command.user} ({command.user}) via {command.platform.value}"
        if command.verb == "pause":
            # An empty ``until=`` is a mistyped end, refused: never a pause with no end.
            until = _until(command.until, now) if command.until is not None else None
            try:
                record = incidents.new_pause(who, command.reason, now, until)
            except InvalidInput as exc:
                raise ApprovalInvalid(str(exc)) from exc
            held = self.store.pause(record)
            text = (
                f"Already {held.describe()}; nothing changed."
                if held is not None
                else f"Remediation {record.describe()}. Approvals are refused and nothing is "
                "cordoned, drained or deleted until `/loopbreaker resume`."
            )
        elif command.verb == "resume":
            ended = self.store.resume(who, now)
            text = (
                f"Resumed by {who}; it was {ended.describe()}. Approved incidents remediate "
                "again (refused requests go out with the next on_schedule)."
                if ended is not None
                else "Remediation was not paused; nothing changed."
            )
        else:
            pause = self.store.current_pause(now)
            text = f"Remediation is {pause.describe()}." if pause else "Remediation is not paused."
        event(
            self._log,
            logging.WARNING if command.verb != "status" else logging.INFO,
            f"chat command {command.verb} by {who}: {text}",
            event=f"remediation_{command.verb}" if command.verb != "status" else "pause_status",
            platform=command.platform.value,
            user=command.user,
        )
        if command.platform is Platform.GOOGLE_CHAT:
            return Reply(200, {"text": text})
        return Reply(200, {"response_type": "in_channel", "text": text})

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

    def _answer(
        self,
        refused: Reply,
        exc: ApprovalInvalid,
        platform: Platform,
        click: Click | None,
        body: bytes,
    ) -> Reply:
        """A verified clicker's refusal, where they can read it (see the module doc)."""
        text = f"Nothing was changed: {exc}"
        headers = {REFUSAL_HEADER: str(refused.status)}
        if platform is Platform.GOOGLE_CHAT:
            return Reply(200, {"text": text}, headers)
        url = click.response_url if click else slack_response_url(body)
        if url and self.slack_replies is not None:
            try:
                self.slack_replies.ephemeral(url, text)
            except (TransientError, ConfigError) as post:
                event(
                    self._log,
                    logging.WARNING,
                    f"could not tell the clicker why the click was refused: {post}",
                    event="chat_refusal_not_delivered",
                    reason=str(post),
                )
        return Reply(200, {"text": text, "status": refused.status}, headers)


class RemediationPaused(ApprovalInvalid):
    """An approval while remediation is paused."""

    http_status = 409


def _until(raw: str, now: datetime) -> datetime:
    from loopbreaker.settings.load import parse_duration
    from loopbreaker.timeutil import parse_rfc3339

    try:
        return now + parse_duration(raw)
    except ValueError:
        pass
    try:
        return parse_rfc3339(raw, what="until")
    except LoopbreakerError as exc:
        raise ApprovalInvalid(
            f"until={raw!r}: expected a duration (2h) or an RFC 3339 time"
        ) from exc


def _same_message(incident: Incident, click: Click) -> None:
    """A click must come from the incident's own message, whenever that one is known."""
    where = incident.chat or {}
    known = where.get("ts") if click.platform is Platform.SLACK else where.get("message")
    same_platform = where.get("platform") == click.platform.value
    if known and same_platform and click.message != known:
        raise ApprovalInvalid(
            f"the click came from message {click.message}, not incident {incident.id}'s"
        )


def _route_approver(routes: Routes, incident: Incident, click: Click) -> None:
    """With LOOPBREAKER_ROUTES, only the approvers of the incident's own route decide it."""
    route = routes.route_of(incident)
    if route is None:
        raise NotAnApprover(
            f"incident {incident.id} was routed to {incident.route}, which LOOPBREAKER_ROUTES "
            "no longer names: nobody may approve it"
        )
    if not is_approver(route.approvers, click.platform, click.user):
        who = click.user_name or click.user
        raise NotAnApprover(
            f"you are not an approver of route {route.name}: {who} ({click.user}) may not "
            f"decide incident {incident.id} on {click.platform.value}"
        )
