"""A bearer-token auth proxy in front of a real Prometheus.

What a team puts in front of a self-run Prometheus when its clients hold a token rather
than a password (kube-rbac-proxy, oauth2-proxy): requests without
``Authorization: Bearer <token>`` get 401, the others are forwarded unchanged (method GET,
path, every query parameter including repeated ``match[]``) and answered with upstream's
status and body.
"""

from __future__ import annotations

import requests

from .base import FakeServer, Request, Response


class BearerAuthProxy(FakeServer):
    def __init__(self, upstream: str, token: str) -> None:
        super().__init__()
        self.upstream = upstream.rstrip("/")
        self.token = token

    def error(self, status: int, message: str) -> Response:
        # Plain text, as kube-rbac-proxy answers ("Unauthorized"); nothing of the request.
        return Response(status, message.encode(), "text/plain; charset=utf-8")

    def route(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return self.error(401, "Unauthorized")
        params = [(name, value) for name, values in request.query.items() for value in values]
        upstream = requests.get(self.upstream + request.path, params=params, timeout=10)
        return Response(
            upstream.status_code,
            upstream.content,
            upstream.headers.get("Content-Type", "application/json"),
        )
