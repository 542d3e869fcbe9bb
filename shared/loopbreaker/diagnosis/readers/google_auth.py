"""Application Default Credentials, resolved at most once per run and shared by readers.

A failed lookup is remembered: the workflow forbids an authentication retry loop, so every
later reader gets the same SourceUnavailable at once instead of asking again.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from loopbreaker.diagnosis.readers import SourceUnreachable
from loopbreaker.errors import SourceUnavailable

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
MONITORING_READ_SCOPE = "https://www.googleapis.com/auth/monitoring.read"
#: Scopes asked for by the shared credentials: enough for every reader.
DEFAULT_SCOPES = (CLOUD_PLATFORM_SCOPE,)


class GoogleCredentials:
    """Lazily resolved ADC (or given credentials) with a cached token refresh."""

    def __init__(self, credentials: Any = None, scopes: Sequence[str] = DEFAULT_SCOPES) -> None:
        self._credentials = credentials
        self._scopes = tuple(scopes)
        self._failure: SourceUnavailable | None = None
        self._lock = threading.Lock()

    def get(self, source: str = "google-auth") -> Any:
        """Return google.auth credentials or raise SourceUnavailable (cached)."""
        with self._lock:
            if self._credentials is not None:
                return self._credentials
            if self._failure is not None:
                raise SourceUnreachable(source, self._failure.reason)
            import google.auth
            import google.auth.exceptions

            try:
                credentials, _project = google.auth.default(scopes=list(self._scopes))
            except google.auth.exceptions.GoogleAuthError as exc:
                self._failure = SourceUnavailable(
                    "google-auth", f"no Application Default Credentials: {_first_line(exc)}"
                )
                raise SourceUnreachable(source, self._failure.reason) from exc
            self._credentials = credentials
            return credentials

    def token(self, source: str = "google-auth") -> str:
        """A valid OAuth2 access token, refreshed when expired."""
        credentials = self.get(source)
        import google.auth.exceptions
        import google.auth.transport.requests

        with self._lock:
            if self._failure is not None:
                raise SourceUnreachable(source, self._failure.reason)
            if not credentials.valid:
                try:
                    credentials.refresh(google.auth.transport.requests.Request())
                except google.auth.exceptions.GoogleAuthError as exc:
                    self._failure = SourceUnavailable(
                        "google-auth", f"cannot refresh credentials: {_first_line(exc)}"
                    )
                    raise SourceUnreachable(source, self._failure.reason) from exc
            token = credentials.token
        if not isinstance(token, str) or not token:
            raise SourceUnreachable(source, "credentials produced no access token")
        return token


def anonymous() -> GoogleCredentials:
    """Credentials that send no token: for local fakes and open endpoints."""
    from google.auth.credentials import AnonymousCredentials

    return GoogleCredentials(AnonymousCredentials())  # type: ignore[no-untyped-call]


def _first_line(exc: BaseException) -> str:
    """The first sentence: google-auth appends long set-up instructions with URLs."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    first = text.splitlines()[0]
    return first.split(". ", 1)[0].rstrip(".")
