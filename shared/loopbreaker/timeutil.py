"""RFC 3339 parsing and formatting; relative times are refused on purpose."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from loopbreaker.errors import InvalidContext

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
_RELATIVE = re.compile(r"\b(ago|now|today|yesterday|last|minutes?|hours?|days?)\b", re.I)


def parse_rfc3339(value: str, *, what: str = "time") -> datetime:
    """Parse an RFC 3339 timestamp with an explicit offset into an aware UTC datetime."""
    text = value.strip()
    match = _RFC3339.match(text)
    if not match:
        if _RELATIVE.search(text):
            raise InvalidContext(
                f"{what} {value!r} is a relative time; give an exact RFC 3339 timestamp "
                "such as 2026-05-20T08:15:00Z"
            )
        raise InvalidContext(
            f"{what} {value!r} is not an RFC 3339 timestamp (e.g. 2026-05-20T08:15:00Z)"
        )
    frac = match.group(7) or ""
    # Cloud Logging emits nanoseconds; datetime keeps microseconds.
    if len(frac) > 7:
        frac = frac[:7]
    offset = match.group(8)
    if offset in ("Z", "z"):
        offset = "+00:00"
    base = "{}-{}-{}T{}:{}:{}".format(*match.groups()[:6])
    try:
        parsed = datetime.fromisoformat(base + frac + offset)
    except ValueError as exc:
        raise InvalidContext(f"{what} {value!r} is not a valid date or time: {exc}") from exc
    return parsed.astimezone(UTC)


def format_rfc3339(moment: datetime) -> str:
    """Format as RFC 3339 in UTC with a ``Z`` suffix, dropping zero microseconds."""
    moment = moment.astimezone(UTC)
    if moment.microsecond:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def from_epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)
