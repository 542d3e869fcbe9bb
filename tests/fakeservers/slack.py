"""A fake of the Slack Web API subset the notifier calls: chat.postMessage, chat.update and
chat.getPermalink.

Like Slack, a refused call is HTTP 200 with ``{"ok": false, "error": CODE}``; only
throttling (429, with ``Retry-After``) and outages use other statuses. Point
``slack_sdk.WebClient(base_url=server.url + "/api/")`` at it.
"""

from __future__ import annotations

import json
from typing import Any

from .base import FakeServer, Request, Response

#: Slack's error codes for the statuses that faults inject.
_FAULT_CODES = {
    401: "invalid_auth",
    403: "access_denied",
    404: "unknown_method",
    429: "ratelimited",
    500: "internal_error",
    503: "service_unavailable",
}


class SlackServer(FakeServer):
    """``POST /api/chat.postMessage`` and ``POST /api/chat.update``."""

    def __init__(self, *, token: str = "xoxb-test-token", channels: set[str] | None = None) -> None:
        super().__init__()
        self.token = token
        self.channels: set[str] = set(channels if channels is not None else {"C0LOOPBRK"})
        #: (channel, ts) -> the stored message: channel, ts, text, blocks.
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        #: Every authenticated call that reached a method: (method, body).
        self.calls: list[tuple[str, dict[str, Any]]] = []
        #: Every post to an interaction's response_url: (path, JSON body).
        self.responses: list[tuple[str, dict[str, Any]]] = []
        self._seconds = 1719936116
        self._seq = 0

    def _response_url(self, request: Request) -> Response:
        """An interaction's ``response_url`` (``/actions/T…/…/…``): JSON in, ``ok`` out."""
        try:
            body = json.loads(request.body)
        except ValueError:
            return Response(400, b"invalid_payload", "text/plain")
        if not isinstance(body, dict) or not (body.get("text") or body.get("blocks")):
            return Response(400, b"no_text", "text/plain")
        with self._lock:
            self.responses.append((request.path, body))
        return Response(200, b"ok", "text/html")

    @property
    def api_url(self) -> str:
        """The ``base_url`` for slack_sdk (it joins method names onto it)."""
        return self.url + "/api/"

    def error(self, status: int, message: str) -> Response:
        response = Response.json(
            {"ok": False, "error": _FAULT_CODES.get(status, "unknown_error"), "detail": message},
            status,
        )
        if status == 429:
            response.headers["Retry-After"] = "1"
        return response

    def _refuse(self, code: str) -> Response:
        return Response.json({"ok": False, "error": code})

    def route(self, request: Request) -> Response:
        if request.method == "POST" and request.path.startswith("/actions/"):
            return self._response_url(request)
        if request.method != "POST" or not request.path.startswith("/api/"):
            return self.error(404, f"no route {request.method} {request.path}")
        method = request.path[len("/api/") :]
        if request.headers.get("authorization") != f"Bearer {self.token}":
            missing = "authorization" not in request.headers
            return self._refuse("not_authed" if missing else "invalid_auth")
        body = _body(request)
        with self._lock:
            self.calls.append((method, body))
        if method == "chat.postMessage":
            return self._post(body)
        if method == "chat.update":
            return self._update(body)
        if method == "chat.getPermalink":
            return self._permalink(body)
        return Response.json({"ok": False, "error": "unknown_method"}, 404)

    def _post(self, body: dict[str, Any]) -> Response:
        channel = str(body.get("channel") or "")
        if channel not in self.channels:
            return self._refuse("channel_not_found")
        if not body.get("text") and not body.get("blocks"):
            return self._refuse("no_text")
        with self._lock:
            self._seq += 1
            ts = f"{self._seconds}.{self._seq * 100:06d}"
            message = {
                "channel": channel,
                "ts": ts,
                "text": body.get("text", ""),
                "blocks": body.get("blocks", []),
            }
            self.messages[(channel, ts)] = message
        return Response.json(
            {"ok": True, "channel": channel, "ts": ts, "message": _public(message)}
        )

    def _update(self, body: dict[str, Any]) -> Response:
        channel = str(body.get("channel") or "")
        ts = str(body.get("ts") or "")
        if channel not in self.channels:
            return self._refuse("channel_not_found")
        with self._lock:
            message = self.messages.get((channel, ts))
            if message is None:
                return self._refuse("message_not_found")
            if "text" in body:
                message["text"] = body["text"]
            if "blocks" in body:
                message["blocks"] = body["blocks"]
        return Response.json(
            {
                "ok": True,
                "channel": channel,
                "ts": ts,
                "text": message["text"],
                "message": _public(message),
            }
        )

    def _permalink(self, body: dict[str, Any]) -> Response:
        """Slack's reference for chat.getPermalink: ``channel`` and ``message_ts`` in,
        ``{"ok", "channel", "permalink"}`` out; ``message_not_found`` for an unknown ts."""
        channel, ts = str(body.get("channel") or ""), str(body.get("message_ts") or "")
        if channel not in self.channels:
            return self._refuse("channel_not_found")
        if (channel, ts) not in self.messages:
            return self._refuse("message_not_found")
        link = f"https://example-team.slack.com/archives/{channel}/p{ts.replace('.', '')}"
        return Response.json({"ok": True, "channel": channel, "permalink": link})

    # --- helpers for tests -----------------------------------------------------------

    def latest(self, channel: str | None = None) -> dict[str, Any]:
        """The newest stored message (of ``channel``)."""
        found = [m for (c, _), m in self.messages.items() if channel is None or c == channel]
        if not found:
            raise AssertionError("no message was posted")
        return max(found, key=lambda m: float(m["ts"]))

    def button(self, action_id: str) -> dict[str, Any]:
        """The button with ``action_id`` in the newest message's actions blocks."""
        for block in self.latest().get("blocks") or []:
            if block.get("type") != "actions":
                continue
            for element in block.get("elements") or []:
                if element.get("type") == "button" and element.get("action_id") == action_id:
                    return dict(element)
        raise AssertionError(f"no button {action_id!r} in the latest message")

    def methods(self) -> list[str]:
        return [method for method, _ in self.calls]


def _body(request: Request) -> dict[str, Any]:
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("application/json"):
        value = request.json()
        return dict(value) if isinstance(value, dict) else {}
    # Form-encoded: the base handler merged the fields into the query; blocks are JSON text.
    body: dict[str, Any] = {k: v[0] for k, v in request.query.items() if v}
    if isinstance(body.get("blocks"), str):
        body["blocks"] = json.loads(body["blocks"])
    return body


def _public(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "message",
        "ts": message["ts"],
        "text": message["text"],
        "blocks": message["blocks"],
    }
