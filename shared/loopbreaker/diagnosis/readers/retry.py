"""Bounded retries with exponential backoff, shared by the readers.

Only throttling (429) and server errors (5xx) are retried. Authentication failures, network
errors and timeouts are not: the workflow says to record them once and degrade, and a timed
out read retried three times would only triple the wait.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

#: Attempts per request, the first one included.
DEFAULT_ATTEMPTS = 3
#: Delay before the first retry; doubles each time.
DEFAULT_BASE_DELAY = 0.5
#: Upper bound of one delay, also applied to a server's Retry-After.
DEFAULT_MAX_DELAY = 8.0
#: Per-request timeout of every reader, in seconds.
DEFAULT_TIMEOUT = 30.0

Sleep = Callable[[float], None]


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = DEFAULT_ATTEMPTS
    base_delay: float = DEFAULT_BASE_DELAY
    max_delay: float = DEFAULT_MAX_DELAY
    sleep: Sleep = time.sleep

    def delay(self, retry_number: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry ``retry_number`` (1-based)."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_delay)
        return float(min(self.base_delay * 2 ** (retry_number - 1), self.max_delay))


def is_retryable_status(status: int) -> bool:
    return status == 429 or 500 <= status <= 599


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header; HTTP dates are ignored (backoff applies)."""
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return None


_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")


def network_reason(exc: BaseException) -> str:
    """The root cause of a connection failure, without urllib3's wrapper noise.

    ``HTTPConnectionPool(host=..., port=9): Max retries exceeded with url: ... (Caused by
    NewConnectionError(... [Errno 111] Connection refused))`` becomes ``Connection refused``.
    """
    text = str(exc)
    match = _ERRNO.search(text)
    if match:
        return match.group(1).strip()
    for marker in (
        "Remote end closed connection without response",
        "Connection aborted",
        "Name or service not known",
        "timed out",
        "certificate verify failed",
    ):
        if marker.lower() in text.lower():
            return marker
    return text.splitlines()[0][:200] if text else type(exc).__name__
