"""RFC 3339: the fast path for sink timestamps answers as the validating parser does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopbreaker.errors import InvalidContext
from loopbreaker.timeutil import (
    MAX_YEAR,
    MIN_YEAR,
    epoch_us,
    fast_utc,
    format_rfc3339,
    from_epoch_us,
    parse_rfc3339,
)


def slow(value: str) -> datetime | str:
    """parse_rfc3339 without its fast path."""
    import loopbreaker.timeutil as T

    original = T.fast_utc
    T.fast_utc = lambda _: None  # type: ignore[assignment]
    try:
        return parse_rfc3339(value)
    except InvalidContext as exc:
        return f"refused: {exc}"
    finally:
        T.fast_utc = original


STAMPS = st.one_of(
    st.datetimes(
        min_value=datetime(1960, 1, 1), max_value=datetime(9100, 1, 1), timezones=st.just(UTC)
    ).map(lambda d: d.isoformat().replace("+00:00", "Z")),
    st.from_regex(
        r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}([.,][0-9]{0,12})?Z\Z"
    ),
    st.sampled_from(
        [
            "2026-05-20T08:11:54.727716594Z",
            "2026-05-20T08:11:54Z",
            "2026-W21-3T08:11:54Z",
            "2026-05-20T24:00:00Z",
            "2026-02-30T08:11:54Z",
            "2026-05-20T08:11:54,5Z",
            " 2026-05-20T08:11:54Z",
            "2026-05-20T08:11:54.Z",
            "1969-12-31T23:59:59Z",
        ]
    ),
)


@settings(max_examples=400, derandomize=True)
@given(STAMPS)
def test_the_fast_path_answers_as_the_full_parser(value: str) -> None:
    expected = slow(value)
    fast = fast_utc(value)
    if fast is not None:
        assert fast == expected and fast.tzinfo is not None
    try:
        assert parse_rfc3339(value) == expected
    except InvalidContext as exc:
        assert expected == f"refused: {exc}"


def test_sink_timestamps_take_the_fast_path() -> None:
    assert fast_utc("2026-05-20T08:11:54.727716594Z") == datetime(
        2026, 5, 20, 8, 11, 54, 727716, tzinfo=UTC
    )
    assert fast_utc("2026-05-20T08:11:54+02:00") is None  # the full parser's
    assert parse_rfc3339("2026-05-20T08:11:54+02:00") == datetime(
        2026, 5, 20, 6, 11, 54, tzinfo=UTC
    )


@settings(max_examples=300, derandomize=True)
@given(
    st.datetimes(min_value=datetime(MIN_YEAR, 1, 2), max_value=datetime(MAX_YEAR - 1, 12, 30)),
    st.integers(min_value=-14 * 60, max_value=14 * 60),
)
def test_formatting_writes_what_strftime_wrote(moment: datetime, offset: int) -> None:
    aware = moment.replace(tzinfo=timezone(timedelta(minutes=offset)))
    utc = aware.astimezone(UTC)
    pattern = "%Y-%m-%dT%H:%M:%S.%fZ" if utc.microsecond else "%Y-%m-%dT%H:%M:%SZ"
    assert format_rfc3339(aware) == utc.strftime(pattern)
    assert parse_rfc3339(format_rfc3339(aware)) == utc


@pytest.mark.parametrize("value", ["yesterday", "2026-05-20", "9999-01-01T00:00:00Z"])
def test_what_is_not_a_timestamp_is_refused_with_its_reason(value: str) -> None:
    with pytest.raises(InvalidContext):
        parse_rfc3339(value)


@given(st.datetimes(timezones=st.just(UTC)))
def test_epoch_microseconds_round_trip_exactly(moment: datetime) -> None:
    us = epoch_us(moment)
    assert isinstance(us, int) and from_epoch_us(us) == moment
    assert from_epoch_us(us).tzinfo is UTC
