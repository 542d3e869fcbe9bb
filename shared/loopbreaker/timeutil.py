"""RFC 3339 parsing and formatting; relative times are refused on purpose."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from loopbreaker.errors import InvalidContext

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
#: A timestamp complete but for its offset: the one mistake worth its own message.
_NO_ZONE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?$")
#: Accepted years. Windows, history look-backs and retention add days to an entry's time;
#: bounds well inside datetime's range keep that arithmetic from overflowing.
MIN_YEAR = 1970
MAX_YEAR = 9000

_RELATIVE = re.compile(r"\b(ago|now|today|yesterday|last|minutes?|hours?|days?)\b", re.I)


def parse_rfc3339(value: str, *, what: str = "time") -> datetime:
    """Parse an RFC 3339 timestamp with an explicit offset into an aware UTC datetime."""
    fast = fast_utc(value)
    if fast is not None:
        return fast
    text = value.strip()
    match = _RFC3339.match(text)
    if not match:
        if _RELATIVE.search(text):
            raise InvalidContext(
                f"{what} {value!r} is a relative time; give an exact RFC 3339 timestamp "
                "such as 2026-05-20T08:15:00Z"
            )
        if _NO_ZONE.match(text):
            raise InvalidContext(
                f"{what} {value!r} has no time zone: add Z for UTC or an offset such as "
                f"+00:00 (e.g. {text[:10]}T{text[11:]}Z)"
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
        parsed = datetime.fromisoformat(base + frac + offset).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise InvalidContext(f"{what} {value!r} is not a valid date or time: {exc}") from exc
    return in_range(parsed, what=what, value=value)


def fast_utc(value: str) -> datetime | None:
    """The form log sinks write (``2026-05-20T08:11:54.727716594Z``) without the full
    parser, ten times faster and with its answer; None for anything else (parse it with
    :func:`parse_rfc3339`, which names what is wrong)."""
    # The separators sit every third character from the fifth ("-", "-", "T", ":", ":",
    # then "." or the "Z" of a whole second): one slice tests all six.
    if len(value) == 20:
        if value[4:20:3] != "--T::Z":
            return None
    # fromisoformat reads ASCII digits only: isdigit() just rules out "54.Z", which it
    # would take for 54 s.
    elif value[4:20:3] != "--T::." or value[-1] != "Z" or not value[20:-1].isdigit():
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    # Out-of-range years take the validating path, which names the problem.
    return moment if MIN_YEAR <= moment.year <= MAX_YEAR else None


def in_range(moment: datetime, *, what: str = "time", value: str | None = None) -> datetime:
    """Refuse times whose window arithmetic would leave ``datetime``'s range."""
    if not MIN_YEAR <= moment.year <= MAX_YEAR:
        shown = value if value is not None else moment.isoformat()
        raise InvalidContext(
            f"{what} {shown!r} is outside the years {MIN_YEAR}-{MAX_YEAR} loopbreaker accepts"
        )
    return moment


def format_rfc3339(moment: datetime) -> str:
    """Format as RFC 3339 in UTC with a ``Z`` suffix, dropping zero microseconds."""
    # isoformat() writes what strftime("%Y-%m-%dT%H:%M:%S[.%f]") does for the years
    # accepted (four digits), several times faster: stores format every time they save.
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def epoch_us(moment: datetime) -> int:
    """An aware datetime as exact integer microseconds since the epoch (a float would
    round differently from one store to another)."""
    return (moment - _EPOCH) // _MICROSECOND


def from_epoch_us(value: int) -> datetime:
    """:func:`epoch_us` back to an aware UTC datetime."""
    return _EPOCH + value * _MICROSECOND


def from_epoch(seconds: float) -> datetime:
    """A unix time as an aware UTC datetime; ValueError when it is out of range."""
    try:
        moment = datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise ValueError(f"unix time {seconds!r} is out of range") from exc
    try:
        return in_range(moment)
    except InvalidContext as exc:
        raise ValueError(str(exc)) from exc
