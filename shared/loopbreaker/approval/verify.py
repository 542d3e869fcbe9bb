"""Who is calling ``on_chat_action``: Slack request signatures and Google Chat bearer tokens.

Both run on the raw request before anything of it is parsed, and raise
:class:`~loopbreaker.errors.Unauthenticated` (HTTP 401) when the request is not provably
from the platform. Slack: ``slack_sdk.signature.SignatureVerifier`` over
``v0:{timestamp}:{raw body}`` with the signing secret, timestamps within 5 minutes.
Google Chat: ``google.oauth2.id_token.verify_token`` against the configured audience
and certificate URL, issued by (or, for endpoint-URL audiences, for the verified email
of) ``chat@system.gserviceaccount.com``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from loopbreaker.errors import ApprovalInvalid, TransientError, Unauthenticated

#: Slack's replay window for request timestamps.
SLACK_MAX_AGE_SECONDS = 300
CHAT_ISSUER = "chat@system.gserviceaccount.com"
#: Issuers of Google-signed OIDC tokens (endpoint-URL audiences).
GOOGLE_ISSUERS = frozenset({"https://accounts.google.com", "accounts.google.com"})


class SlackVerifier:
    """Checks ``X-Slack-Signature`` and ``X-Slack-Request-Timestamp``."""

    def __init__(self, signing_secret: str, clock: Callable[[], datetime]) -> None:
        from slack_sdk.signature import SignatureVerifier

        self._clock = clock
        self._verifier = SignatureVerifier(
            signing_secret,
            clock=_SlackClock(clock),  # type: ignore[arg-type]  # duck-typed: now() only
        )

    def verify(self, headers: Mapping[str, str], body: bytes) -> None:
        timestamp = headers.get("x-slack-request-timestamp")
        signature = headers.get("x-slack-signature")
        if not timestamp or not signature:
            raise Unauthenticated("missing X-Slack-Request-Timestamp or X-Slack-Signature")
        try:
            if len(timestamp) > 12:
                raise ValueError("too long")  # a unix time in seconds has 10 digits
            sent = int(timestamp)
        except ValueError as exc:
            raise Unauthenticated(
                f"X-Slack-Request-Timestamp {timestamp[:20]!r} is not a number"
            ) from exc
        age = self._clock().timestamp() - sent
        if abs(age) > SLACK_MAX_AGE_SECONDS:
            raise Unauthenticated(
                f"stale request: X-Slack-Request-Timestamp is {int(age)} s old (at most "
                f"{SLACK_MAX_AGE_SECONDS} s)"
            )
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            # SignatureVerifier decodes the body as text; Slack only ever sends UTF-8.
            raise ApprovalInvalid("request body is not UTF-8 text") from exc
        if not self._verifier.is_valid(body=body, timestamp=timestamp, signature=signature):
            raise Unauthenticated("X-Slack-Signature does not match the request body")


class _SlackClock:
    """slack_sdk's Clock interface over our injected clock."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock

    def now(self) -> float:
        return self._clock().timestamp()


class GoogleChatVerifier:
    """Checks the ``Authorization: Bearer`` token Google Chat sends with every event."""

    def __init__(self, audience: str, certs_url: str, *, request: Any = None) -> None:
        self.audience = audience
        self.certs_url = certs_url
        self._request = request

    def verify(self, headers: Mapping[str, str]) -> Mapping[str, Any]:
        from google.auth import exceptions as gexc
        from google.oauth2 import id_token

        authorization = headers.get("authorization", "")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("missing Authorization: Bearer token")
        try:
            claims = id_token.verify_token(
                token.strip(),
                self._transport(),
                audience=self.audience,
                certs_url=self.certs_url,
            )
        except gexc.TransportError as exc:
            raise TransientError(f"cannot fetch Google Chat's certificates: {exc}") from exc
        except (ValueError, gexc.GoogleAuthError) as exc:
            raise Unauthenticated(f"Google Chat token does not verify: {exc}") from exc
        issuer = claims.get("iss")
        if issuer == CHAT_ISSUER:
            return dict(claims)
        if (
            issuer in GOOGLE_ISSUERS
            and claims.get("email") == CHAT_ISSUER
            and claims.get("email_verified") is True
        ):
            return dict(claims)
        raise Unauthenticated(
            f"Google Chat token was not issued by or for {CHAT_ISSUER} (iss {issuer!r})"
        )

    def _transport(self) -> Any:
        if self._request is None:
            import requests
            from google.auth.transport.requests import Request

            self._request = Request(session=requests.Session())
        return self._request
