"""Chat notifiers: Slack (slack_sdk ``WebClient``) and Google Chat (webhook or Chat API).

Both implement :class:`loopbreaker.chat.notify.Notifier`: the first post creates the
incident's message and returns where it lives; later posts replace it there (Slack
``chat.update`` with the stored channel and ``ts``; the Chat API ``PATCH`` of the stored
message name). An incoming Google Chat webhook cannot edit messages, so each change is
posted as a reply in the incident's own thread (``threadKey`` = incident id).

Failures: throttling (429), 5xx, timeouts and network errors are TransientError (the
responder re-arms the incident and the next settle posts again). A bad token, a missing
scope or an unknown channel is :class:`NotifierMisconfigured`: retrying cannot fix it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from loopbreaker.chat.notify import Notification
from loopbreaker.chat.render import google_chat_message, slack_message, slack_thread
from loopbreaker.errors import ConfigError, InvalidInput, TransientError

#: Slack error codes that only a configuration change can fix.
SLACK_CONFIG_ERRORS = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "no_permission",
        "missing_scope",
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "restricted_action",
        "ekm_access_denied",
        "team_access_not_granted",
    }
)
#: chat.update cannot find the message (deleted by someone): post a new one instead.
SLACK_GONE = frozenset({"message_not_found", "cant_update_message", "edit_window_closed"})
DEFAULT_TIMEOUT = 10.0
CHAT_SCOPE = "https://www.googleapis.com/auth/chat.bot"


class NotifierMisconfigured(ConfigError):
    """The chat platform refused our credentials or destination; fix the settings."""


class SlackNotifier:
    """Posts and updates one Slack message per incident."""

    def __init__(
        self,
        token: str,
        channel: str,
        *,
        base_url: str = "https://slack.com/api/",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        from slack_sdk import WebClient

        # No retry handlers: a rate-limited post is retried at the next settle rather than
        # holding a function instance asleep.
        self._client = WebClient(
            token=token, base_url=base_url, timeout=int(max(1, timeout)), retry_handlers=[]
        )
        self.channel = channel

    def post(
        self, notification: Notification, where: Mapping[str, str] | None = None
    ) -> Mapping[str, str] | None:
        message = slack_message(notification, self._permalink(notification))
        thread = slack_thread(where)
        # A new message goes to the incident's route's channel, else the configured one.
        channel = notification.destination or self.channel
        if thread is not None:
            try:
                response = self._call("chat.update", channel=thread[0], ts=thread[1], **message)
            except _Gone:
                response = self._call("chat.postMessage", channel=channel, **message)
        else:
            response = self._call("chat.postMessage", channel=channel, **message)
        return {
            "platform": "slack",
            "channel": str(response.get("channel") or (thread[0] if thread else channel)),
            "ts": str(response.get("ts") or (thread[1] if thread else "")),
        }

    def _permalink(self, notification: Notification) -> str | None:
        """The link to the message of the incident this one was merged into (Slack's
        chat.getPermalink); None when there is none, or Slack would not say."""
        held = slack_thread(notification.merged_into)
        if held is None:
            return None
        try:
            found = self._call("chat.getPermalink", channel=held[0], message_ts=held[1])
        except (TransientError, InvalidInput, NotifierMisconfigured, _Gone):
            return None  # the message names the incident either way
        link = found.get("permalink")
        return link if isinstance(link, str) and link.startswith("https://") else None

    def _call(self, method: str, **params: Any) -> Mapping[str, Any]:
        from slack_sdk.errors import SlackApiError, SlackClientError

        try:
            response = self._client.api_call(method, json=params)
        except SlackApiError as exc:
            raise _slack_error(method, exc) from exc
        except (SlackClientError, OSError) as exc:
            raise TransientError(f"Slack {method}: {exc}") from exc
        data = response.data
        return data if isinstance(data, Mapping) else {}


class _Gone(Exception):  # noqa: N818 - control flow inside this module only
    pass


def _slack_error(method: str, exc: Any) -> Exception:
    response = exc.response
    status = getattr(response, "status_code", 200)
    code = str(response.get("error", "")) if hasattr(response, "get") else ""
    if status == 429 or code == "ratelimited":
        retry = response.headers.get("Retry-After", "?") if hasattr(response, "headers") else "?"
        return TransientError(f"Slack {method} rate limited (retry after {retry}s)")
    if status >= 500 or code in {"internal_error", "fatal_error", "service_unavailable"}:
        return TransientError(f"Slack {method}: HTTP {status} {code}")
    if code in SLACK_GONE:
        return _Gone(code)
    if code in SLACK_CONFIG_ERRORS:
        return NotifierMisconfigured(
            f"Slack {method} refused: {code} (check LOOPBREAKER_SLACK_BOT_TOKEN, its scopes "
            "and LOOPBREAKER_SLACK_CHANNEL)"
        )
    return InvalidInput(f"Slack {method} refused the message: {code or status}")


class GoogleChatNotifier:
    """Posts incident cards to Google Chat: an incoming webhook, or the Chat API."""

    def __init__(
        self,
        *,
        webhook_url: str | None = None,
        space: str | None = None,
        api_url: str = "https://chat.googleapis.com",
        session: Any = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if (webhook_url is None) == (space is None):
            raise ConfigError("Google Chat needs exactly one of a webhook URL and a space")
        self.webhook_url = webhook_url
        self.space = space
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout
        self._session = session

    def _http(self) -> Any:
        if self._session is None:
            if self.webhook_url is not None:
                import requests

                self._session = requests.Session()
            else:
                import google.auth
                from google.auth.transport.requests import AuthorizedSession

                credentials, _ = google.auth.default(scopes=[CHAT_SCOPE])
                self._session = AuthorizedSession(credentials)  # type: ignore[no-untyped-call]
        return self._session

    def post(
        self, notification: Notification, where: Mapping[str, str] | None = None
    ) -> Mapping[str, str] | None:
        body = google_chat_message(notification)
        if self.webhook_url is not None:
            separator = "&" if "?" in self.webhook_url else "?"
            url = (
                f"{self.webhook_url}{separator}threadKey={notification.incident_id}"
                "&messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"
            )
            created = self._send("POST", url, body)
            return _where(created, where)
        name = where.get("message") if where and where.get("platform") == "google-chat" else None
        if name:
            url = f"{self.api_url}/v1/{name}?updateMask=text,cardsV2"
            try:
                return _where(self._send("PATCH", url, body), where)
            except _Gone:
                pass  # deleted in the space: post it again
        # A new message goes to the incident's route's space, else the configured one.
        space = notification.destination or self.space
        assert space is not None
        message_id = client_message_id(notification.incident_id)
        url = f"{self.api_url}/v1/{space}/messages?messageId={message_id}"
        try:
            return _where(self._send("POST", url, body), where)
        except _Exists:
            # Posted before, but its name was not stored: update it under its client id.
            url = f"{self.api_url}/v1/{space}/messages/{message_id}?updateMask=text,cardsV2"
            return _where(self._send("PATCH", url, body), where)

    def _send(self, method: str, url: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        import requests

        try:
            response = self._http().request(method, url, json=body, timeout=self.timeout)
        except requests.RequestException as exc:
            raise TransientError(f"Google Chat {method}: {type(exc).__name__}") from exc
        status = response.status_code
        if status == 429 or status >= 500:
            raise TransientError(f"Google Chat {method}: HTTP {status}")
        if status == 404 and method == "PATCH":
            raise _Gone()
        if status == 409:
            raise _Exists()
        if status in (401, 403, 404):
            raise NotifierMisconfigured(
                f"Google Chat {method} refused: HTTP {status} (check the webhook URL, or the "
                "space and the Chat app's service account)"
            )
        if status >= 400:
            detail = response.text[:200]
            raise InvalidInput(f"Google Chat refused the message: HTTP {status} {detail}")
        try:
            data = response.json()
        except ValueError:
            return {}
        return data if isinstance(data, Mapping) else {}


class _Exists(Exception):  # noqa: N818 - control flow inside this module only
    pass


def _where(created: Mapping[str, Any], previous: Mapping[str, str] | None) -> Mapping[str, str]:
    thread = created.get("thread")
    out = {"platform": "google-chat"}
    name = created.get("name") or (previous or {}).get("message")
    if name:
        out["message"] = str(name)
    thread_name = thread.get("name") if isinstance(thread, Mapping) else None
    thread_name = thread_name or (previous or {}).get("thread")
    if thread_name:
        out["thread"] = str(thread_name)
    return out


def client_message_id(incident_id: str) -> str:
    """Chat API client-assigned ids: ``client-`` + lowercase letters, digits, hyphens (<= 63)."""
    return ("client-" + re.sub(r"[^a-z0-9-]", "-", incident_id.lower()))[:63]


class SlackResponseUrl:
    """Answers a click in Slack through the interaction's ``response_url`` (slack_sdk's
    ``WebhookClient``): Slack drops the HTTP body of a ``block_actions`` reply, so this is
    the only way the clicker reads why nothing happened. Only URLs under ``prefix``."""

    def __init__(self, prefix: str, timeout: int = 5) -> None:
        self.prefix = prefix
        self.timeout = timeout

    def ephemeral(self, url: str, text: str) -> None:
        if not url.startswith(self.prefix):
            raise ConfigError(f"response_url {url[:80]!r} is not under {self.prefix}")
        from slack_sdk.webhook import WebhookClient

        try:
            response = WebhookClient(url, timeout=self.timeout).send(
                text=text[:3000], response_type="ephemeral", replace_original=False
            )
        except Exception as exc:  # the library raises URLError, OSError, SlackRequestError
            raise TransientError(f"cannot post to response_url: {exc}") from exc
        if response.status_code != 200:
            raise TransientError(f"response_url answered HTTP {response.status_code}")
