"""Slack's request signature: the replay window, the timestamp's shape, and what each
refusal says, at the edges.

Requests are signed exactly as Slack documents it ("Verifying requests from Slack"):
``v0=`` + hex HMAC-SHA256(signing secret, ``v0:{timestamp}:{raw body}``), the timestamp
being the ``X-Slack-Request-Timestamp`` header *as sent*. The verifier's clock is
injected, so each boundary is exact to the second. The refusal texts are pinned whole:
they are what the 401 reply and the refusal log line say.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime, timedelta

import pytest

from loopbreaker.approval.verify import SLACK_MAX_AGE_SECONDS, SlackVerifier
from loopbreaker.errors import ApprovalInvalid, Unauthenticated

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NOW = datetime(2026, 5, 20, 8, 40, 0, tzinfo=UTC)
BODY = b"payload=%7B%22type%22%3A%22block_actions%22%7D"


def signed(body: bytes, timestamp: str, secret: str = SECRET) -> dict[str, str]:
    """The headers Slack sends with ``body`` at ``timestamp`` (the header's exact text)."""
    base = f"v0:{timestamp}:".encode() + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"x-slack-request-timestamp": timestamp, "x-slack-signature": f"v0={digest}"}


def verifier(now: datetime = NOW) -> SlackVerifier:
    return SlackVerifier(SECRET, clock=lambda: now)


def at(seconds_ago: int) -> str:
    return str(int(NOW.timestamp()) - seconds_ago)


def refusal(headers: dict[str, str], body: bytes = BODY) -> str:
    with pytest.raises(Unauthenticated) as refused:
        verifier().verify(headers, body)
    return str(refused.value)


def test_the_window_is_five_minutes() -> None:
    # Slack: "verify that the request timestamp is within five minutes of local time".
    assert SLACK_MAX_AGE_SECONDS == 300


@pytest.mark.parametrize("seconds_ago", [0, 1, 299, 300, -1, -299, -300])
def test_a_signed_request_up_to_five_minutes_old_or_early_is_taken(seconds_ago: int) -> None:
    verifier().verify(signed(BODY, at(seconds_ago)), BODY)


@pytest.mark.parametrize(
    ("seconds_ago", "said"),
    [
        (301, "stale request: X-Slack-Request-Timestamp is 301 s old (at most 300 s)"),
        (3600, "stale request: X-Slack-Request-Timestamp is 3600 s old (at most 300 s)"),
        # A clock ahead of ours is refused the same way: the window is two-sided.
        (-301, "stale request: X-Slack-Request-Timestamp is -301 s old (at most 300 s)"),
    ],
)
def test_a_signed_request_one_second_past_the_window_is_refused(
    seconds_ago: int, said: str
) -> None:
    # Correctly signed: only the timestamp's age refuses it (a replayed request).
    assert refusal(signed(BODY, at(seconds_ago))) == said


def test_the_window_is_measured_on_the_injected_clock_to_the_second() -> None:
    headers = signed(BODY, at(0))
    verifier(NOW + timedelta(seconds=300)).verify(headers, BODY)
    with pytest.raises(Unauthenticated, match="is 301 s old"):
        verifier(NOW + timedelta(seconds=301)).verify(headers, BODY)


def test_a_timestamp_of_twelve_characters_is_read_as_a_number() -> None:
    # Leading zeros keep the value; the signature covers the header's text as sent.
    padded = "00" + at(0)
    assert len(padded) == 12
    verifier().verify(signed(BODY, padded), BODY)


def test_a_timestamp_of_thirteen_characters_is_not_a_number() -> None:
    padded = "000" + at(0)
    assert len(padded) == 13
    assert refusal(signed(BODY, padded)) == (
        "X-Slack-Request-Timestamp '0001779266400' is not a number"
    )


def test_a_long_timestamp_is_quoted_to_twenty_characters() -> None:
    long = "9" * 40
    assert refusal(signed(BODY, long)) == (
        f"X-Slack-Request-Timestamp {'9' * 20!r} is not a number"
    )


def test_a_timestamp_that_is_not_digits_is_not_a_number() -> None:
    assert refusal(signed(BODY, "yesterday")) == (
        "X-Slack-Request-Timestamp 'yesterday' is not a number"
    )


@pytest.mark.parametrize("missing", ["x-slack-request-timestamp", "x-slack-signature", "both"])
def test_either_header_missing_is_refused_before_anything_else(missing: str) -> None:
    headers = signed(BODY, at(0))
    for name in list(headers):
        if missing in (name, "both"):
            del headers[name]
    assert refusal(headers) == "missing X-Slack-Request-Timestamp or X-Slack-Signature"


@pytest.mark.parametrize("empty", ["x-slack-request-timestamp", "x-slack-signature"])
def test_an_empty_header_counts_as_missing(empty: str) -> None:
    headers = {**signed(BODY, at(0)), empty: ""}
    assert refusal(headers) == "missing X-Slack-Request-Timestamp or X-Slack-Signature"


def test_another_secret_does_not_match() -> None:
    headers = signed(BODY, at(0), secret="not-the-signing-secret")
    assert refusal(headers) == "X-Slack-Signature does not match the request body"


def test_a_body_changed_after_signing_does_not_match() -> None:
    headers = signed(BODY, at(0))
    assert refusal(headers, BODY + b"&x=1") == ("X-Slack-Signature does not match the request body")


def test_a_signed_body_that_is_not_utf8_is_invalid_not_a_crash() -> None:
    body = b"payload=\xff\xfe"
    with pytest.raises(ApprovalInvalid) as refused:
        verifier().verify(signed(body, at(0)), body)
    assert type(refused.value) is ApprovalInvalid  # a 400, not a 401: the signature held
    assert str(refused.value) == "request body is not UTF-8 text"
