"""A fake of Google Chat: incoming webhooks and the ``spaces.messages`` create/patch API.

Webhook: ``POST /v1/spaces/{space}/messages?key=K&token=T[&threadKey=..&messageReplyOption=..]``.
As in Chat, a ``threadKey`` names a thread only together with a ``messageReplyOption`` that
replies (``REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD`` or ``REPLY_MESSAGE_OR_FAIL``); without one
every message starts a new thread. chat.v1.json (google-api-python-client 2.202.0),
``messageReplyOption`` enumDescriptions: with either, "If a new ``thread_key`` is used, a new
thread is created"; only ``REPLY_MESSAGE_OR_FAIL`` to a thread *name* that does not exist
answers NOT_FOUND.

API: ``POST /v1/spaces/{space}/messages?messageId=client-..`` (409 ALREADY_EXISTS when that
client-assigned id is taken) and ``PATCH /v1/spaces/{space}/messages/{id}?updateMask=..``
where ``id`` is the server-assigned id or the client-assigned one (404 when unknown).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from typing import Any

from contracts.discovery import chat_v1

from .base import Request, Response
from .google import GoogleApiServer

_MESSAGES = re.compile(r"^/v1/spaces/([^/]+)/messages$")
_MESSAGE = re.compile(r"^/v1/spaces/([^/]+)/messages/([^/]+)$")
_CLIENT_ID = re.compile(r"^client-[a-z0-9-]{1,56}$")
_REPLY_OPTIONS = frozenset({"REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD", "REPLY_MESSAGE_OR_FAIL"})
#: chat.v1.json spaces.messages.patch ``updateMask``: "Currently supported field paths: text,
#: attachment, cards, cards_v2, accessory_widgets, quoted_message_metadata" (or ``*``); a field
#: mask in a URL may also name them in lowerCamelCase (the proto3 JSON form of a FieldMask).
_CAMEL = {
    "cards_v2": "cardsV2",
    "accessory_widgets": "accessoryWidgets",
    "quoted_message_metadata": "quotedMessageMetadata",
}
_UPDATABLE = frozenset(
    {"text", "attachment", "cards", "cardsV2", "accessoryWidgets", "quotedMessageMetadata"}
)


class ChatServer(GoogleApiServer):
    """Messages of Chat spaces; ``webhook_url(space)`` is a valid incoming webhook."""

    contract = chat_v1()

    def __init__(
        self,
        *,
        spaces: set[str] | None = None,
        webhook_key: str = "AIzaSy-test-key",
        webhook_token: str = "test-webhook-token",
        bearer: str | None = None,
    ) -> None:
        super().__init__()
        self.spaces: set[str] = set(spaces if spaces is not None else {"AAAAloopbrk"})
        self.webhook_key = webhook_key
        self.webhook_token = webhook_token
        #: When set, API (non-webhook) calls need ``Authorization: Bearer <bearer>``.
        self.bearer = bearer
        #: Message name (``spaces/S/messages/M``) -> the stored Message.
        self.messages: dict[str, dict[str, Any]] = {}
        #: (space, threadKey) -> thread name.
        self.threads: dict[tuple[str, str], str] = {}
        #: (space, client-assigned id) -> message name.
        self.client_ids: dict[tuple[str, str], str] = {}
        self._ids = itertools.count(1)

    def webhook_url(self, space: str | None = None) -> str:
        space = space or next(iter(sorted(self.spaces)))
        return (
            f"{self.url}/v1/spaces/{space}/messages"
            f"?key={self.webhook_key}&token={self.webhook_token}"
        )

    def route(self, request: Request) -> Response:
        match = _MESSAGES.match(request.path)
        if match and request.method == "POST":
            return self._create(request, match.group(1))
        match = _MESSAGE.match(request.path)
        if match and request.method == "PATCH":
            return self._patch(request, match.group(1), match.group(2))
        return self.error(404, f"no route {request.method} {request.path}")

    # --- create ------------------------------------------------------------------------

    def _create(self, request: Request, space: str) -> Response:
        webhook = request.param("key") is not None or request.param("token") is not None
        if webhook:
            if request.param("key") != self.webhook_key:
                return self.error(400, "API key not valid. Please pass a valid API key.")
            if request.param("token") != self.webhook_token:
                return self.error(401, "Request had invalid authentication credentials.")
        elif self.bearer is not None and (
            request.headers.get("authorization") != f"Bearer {self.bearer}"
        ):
            return self.error(401, "Request had invalid authentication credentials.")
        if space not in self.spaces:
            return self.error(404, f"Requested entity was not found: spaces/{space}")
        body = request.json()
        if not isinstance(body, dict) or not (body.get("text") or body.get("cardsV2")):
            return self.error(400, "Message cannot be empty.")
        client_id = request.param("messageId")
        if client_id is not None and not _CLIENT_ID.match(client_id):
            return self.error(400, f"Invalid message ID: {client_id}")
        with self._lock:
            if client_id is not None and (space, client_id) in self.client_ids:
                return self._already_exists(space, client_id)
            thread = self._thread_for(space, request, body)
            if thread is None:
                return self.error(404, "Requested entity was not found (REPLY_MESSAGE_OR_FAIL).")
            server_id = f"m{next(self._ids):04d}.m{next(self._ids):04d}"
            name = f"spaces/{space}/messages/{server_id}"
            message = {
                "name": name,
                "text": body.get("text", ""),
                "cardsV2": body.get("cardsV2", []),
                "thread": {"name": thread},
                "space": {"name": f"spaces/{space}"},
                "createTime": "2026-05-20T08:15:00Z",
            }
            if client_id is not None:
                message["clientAssignedMessageId"] = client_id
                self.client_ids[(space, client_id)] = name
            self.messages[name] = message
        return Response.json(message)

    def _already_exists(self, space: str, client_id: str) -> Response:
        return Response.json(
            {
                "error": {
                    "code": 409,
                    "message": f"Message spaces/{space}/messages/{client_id} already exists.",
                    "status": "ALREADY_EXISTS",
                }
            },
            409,
        )

    def _thread_for(self, space: str, request: Request, body: dict[str, Any]) -> str | None:
        option = request.param("messageReplyOption")
        key = request.param("threadKey")
        given = body.get("thread") if isinstance(body.get("thread"), dict) else {}
        key = key or given.get("threadKey")
        if option in _REPLY_OPTIONS and given.get("name"):
            name = str(given["name"])
            known = name in self.threads.values() or any(
                m["thread"]["name"] == name for m in self.messages.values()
            )
            if known or option != "REPLY_MESSAGE_OR_FAIL":
                return name if known else f"spaces/{space}/threads/t{next(self._ids):04d}"
            return None
        if option in _REPLY_OPTIONS and key:
            existing = self.threads.get((space, key))
            if existing is None:
                digest = hashlib.sha256(f"{space}/{key}".encode()).hexdigest()[:11]
                existing = self.threads[(space, key)] = f"spaces/{space}/threads/{digest}"
            return existing
        # MESSAGE_REPLY_OPTION_UNSPECIFIED: a new thread, whatever the threadKey.
        return f"spaces/{space}/threads/t{next(self._ids):04d}"

    # --- patch -------------------------------------------------------------------------

    def _patch(self, request: Request, space: str, message_id: str) -> Response:
        if self.bearer is not None and (
            request.headers.get("authorization") != f"Bearer {self.bearer}"
        ):
            return self.error(401, "Request had invalid authentication credentials.")
        mask = [f.strip() for f in (request.param("updateMask") or "").split(",") if f.strip()]
        if not mask:
            return self.error(400, "updateMask is required")
        if mask == ["*"]:
            mask = ["text", "cardsV2", "attachment", "accessoryWidgets"]
        mask = [_CAMEL.get(f, f) for f in mask]
        unknown = [f for f in mask if f not in _UPDATABLE]
        if unknown:
            return self.error(400, f"Invalid field in updateMask: {unknown[0]}")
        body = request.json()
        if not isinstance(body, dict):
            return self.error(400, "Invalid JSON payload")
        with self._lock:
            name = self._resolve(space, message_id)
            if name is None:
                return self.error(404, f"Message spaces/{space}/messages/{message_id} not found.")
            message = self.messages[name]
            for field in mask:
                if field in body:
                    message[field] = body[field]
                else:
                    message.pop(field, None)
            message["lastUpdateTime"] = "2026-05-20T08:16:00Z"
        return Response.json(message)

    def _resolve(self, space: str, message_id: str) -> str | None:
        name = f"spaces/{space}/messages/{message_id}"
        if name in self.messages:
            return name
        return self.client_ids.get((space, message_id))

    # --- helpers for tests -------------------------------------------------------------

    def delete(self, name: str) -> None:
        """Remove a message, as a member deleting it in the space would."""
        with self._lock:
            self.messages.pop(name)
            for key, value in list(self.client_ids.items()):
                if value == name:
                    del self.client_ids[key]

    def in_thread(self, thread: str) -> list[dict[str, Any]]:
        return [m for m in self.messages.values() if m["thread"]["name"] == thread]
