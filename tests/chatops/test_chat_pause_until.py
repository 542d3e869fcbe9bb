"""What ``/loopbreaker pause until=...`` means in time, and what each command answers.

``until=`` is a duration from the command's own moment (the injected clock) or an RFC
3339 time; anything else, a time without a zone or one already past, is refused with
the reason and pauses nothing. The replies are what the person who typed the command
reads, so they are pinned whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import chatdesk as D
import pytest
from fakeservers.certs import CertsServer

from loopbreaker.app.chat_actions import REFUSAL_HEADER
from loopbreaker.timeutil import parse_rfc3339

NOW = D.NOW
BY = "alice (U0APPROVER) via slack"
PAUSED = (
    "Remediation paused by {by} at 2026-05-20T08:40:00Z{until}: {reason}. Approvals are "
    "refused and nothing is cordoned, drained or deleted until `/loopbreaker resume`."
)


@pytest.fixture(scope="module")
def certs() -> Iterator[CertsServer]:
    with CertsServer() as server:
        yield server


@pytest.mark.parametrize(
    ("until", "ends"),
    [
        ("2h", NOW + timedelta(hours=2)),
        ("90s", NOW + timedelta(seconds=90)),
        ("1.5d", NOW + timedelta(days=1.5)),
        ("2026-05-20T10:00:00Z", parse_rfc3339("2026-05-20T10:00:00Z")),
        ("2026-05-20T12:00:00+02:00", parse_rfc3339("2026-05-20T10:00:00Z")),
    ],
)
def test_until_is_a_duration_from_now_or_a_time(until: str, ends: datetime) -> None:
    desk = D.make_desk()
    reply = desk.slack_command(f"pause until={until} GPU fleet upgrade")
    pause = desk.store.current_pause(NOW)
    assert pause is not None and pause.until == ends
    assert pause.reason == "GPU fleet upgrade" and pause.by == BY
    assert reply.status == 200
    shown = f" until {ends:%Y-%m-%dT%H:%M:%SZ}"
    assert reply.body == {
        "response_type": "in_channel",
        "text": PAUSED.format(by=BY, until=shown, reason="GPU fleet upgrade"),
    }


def test_without_until_the_pause_lasts_until_resumed() -> None:
    desk = D.make_desk()
    reply = desk.slack_command("pause upgrade")
    pause = desk.store.current_pause(NOW + timedelta(days=30))
    assert pause is not None and pause.until is None
    assert reply.body["text"] == PAUSED.format(by=BY, until=" until resumed", reason="upgrade")


@pytest.mark.parametrize(
    "until", ["", "soon", "2", "2026-05-20T10:00:00", "2026-05-20", "-2h", "2h=x", "10:00Z"]
)
def test_an_until_that_is_neither_is_refused_and_pauses_nothing(until: str) -> None:
    desk = D.make_desk()
    reply = desk.slack_command(f"pause until={until} upgrade")
    assert desk.store.current_pause(NOW) is None
    assert reply.status == 200 and reply.headers[REFUSAL_HEADER] == "400"
    assert reply.body["text"] == (
        f"Nothing was changed: until={until!r}: expected a duration (2h) or an RFC 3339 time"
    )


@pytest.mark.parametrize("until", ["2026-05-20T08:40:00Z", "2026-05-20T08:00:00Z"])
def test_an_until_not_after_now_is_refused(until: str) -> None:
    desk = D.make_desk()
    reply = desk.slack_command(f"pause until={until} upgrade")
    assert desk.store.current_pause(NOW) is None
    assert reply.headers[REFUSAL_HEADER] == "400"
    assert reply.body["text"].startswith(
        f"Nothing was changed: the pause's end {until} is not after now"
    )


def test_a_pause_without_a_reason_is_refused() -> None:
    desk = D.make_desk()
    reply = desk.slack_command("pause until=2h")
    assert desk.store.current_pause(NOW) is None
    assert reply.headers[REFUSAL_HEADER] == "400"
    assert reply.body["text"] == (
        "Nothing was changed: a pause needs a reason (who is asked to wait, and why)"
    )


def test_a_second_pause_keeps_the_first() -> None:
    desk = D.make_desk()
    desk.slack_command("pause until=2h first")
    reply = desk.slack_command("pause second")
    first = "paused by alice (U0APPROVER) via slack at 2026-05-20T08:40:00Z until "
    assert reply.body["text"] == f"Already {first}2026-05-20T10:40:00Z: first; nothing changed."


def test_status_and_resume_say_what_they_found() -> None:
    desk = D.make_desk()
    assert desk.slack_command("status").body == {
        "response_type": "in_channel",
        "text": "Remediation is not paused.",
    }
    assert desk.slack_command("resume").body["text"] == (
        "Remediation was not paused; nothing changed."
    )
    desk.slack_command("pause until=2h upgrade")
    paused = f"paused by {BY} at 2026-05-20T08:40:00Z until 2026-05-20T10:40:00Z: upgrade"
    assert desk.slack_command("status").body["text"] == f"Remediation is {paused}."
    reply = desk.slack_command("resume", user="U0APPROVER", name="bob")
    assert reply.body["text"] == (
        f"Resumed by bob (U0APPROVER) via slack; it was {paused}. Approved incidents "
        "remediate again (refused requests go out with the next on_schedule)."
    )
    assert desk.store.current_pause(NOW) is None


def test_who_paused_is_named_by_id_when_slack_sends_no_name() -> None:
    desk = D.make_desk()
    desk.slack_command("pause upgrade", name="")
    pause = desk.store.current_pause(NOW)
    assert pause is not None and pause.by == "U0APPROVER (U0APPROVER) via slack"


@pytest.mark.parametrize("verb", ["pause upgrade", "resume", "status"])
def test_only_approvers_may_use_the_command(verb: str) -> None:
    desk = D.make_desk()
    reply = desk.slack_command(verb, user="U0OUTSIDER", name="mallory")
    assert desk.store.current_pause(NOW) is None
    assert reply.headers[REFUSAL_HEADER] == "403"
    assert reply.body["text"] == (
        "Nothing was changed: you are not an approver: mallory (U0OUTSIDER) is not in "
        "LOOPBREAKER_APPROVERS for slack"
    )


def test_google_chat_gets_a_plain_message_back(certs: CertsServer) -> None:
    desk = D.make_desk(certs=certs)
    reply = desk.chat_command("pause until=30m upgrade")
    who = "Alice (alice@example.com) via google-chat"
    assert reply.status == 200
    assert reply.body == {
        "text": PAUSED.format(by=who, until=" until 2026-05-20T09:10:00Z", reason="upgrade")
    }
    assert desk.chat_command("status").body == {
        "text": f"Remediation is paused by {who} at 2026-05-20T08:40:00Z until "
        "2026-05-20T09:10:00Z: upgrade."
    }
