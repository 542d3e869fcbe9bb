"""Who may decide: ``LOOPBREAKER_APPROVERS`` parsed entry by entry, and each platform's
click matched only against its own kind of identity.

A Slack user id (``U…``/``W…``, upper-case letters and digits, three characters at
least) is a Slack approver; an email a Google Chat approver, compared case-insensitively.
An entry may name its platform (``slack:``, ``google-chat:``) and must then have that
platform's shape. A malformed entry is refused with its own text.
"""

from __future__ import annotations

import pytest

from loopbreaker.approval.requests import Platform, is_approver, parse_approvers

SLACK, CHAT = Platform.SLACK, Platform.GOOGLE_CHAT


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("", set()),
        (" , ,", set()),
        ("U01", {"U01"}),
        ("W0SLACK9", {"W0SLACK9"}),
        ("a@b.c", {"a@b.c"}),
        ("Alice@Example.COM", {"alice@example.com"}),
        ("slack:U0123ABC", {"U0123ABC"}),
        ("slack: U0123ABC ", {"U0123ABC"}),
        ("google-chat:Bob@Example.com", {"bob@example.com"}),
        ("google-chat: bob@example.com", {"bob@example.com"}),
        # Only the first colon ends the prefix.
        ("google-chat:team:ops@example.com", {"team:ops@example.com"}),
        (
            " U0123ABC ,slack:W0ABC,, alice@example.com, google-chat:BOB@example.com",
            {"U0123ABC", "W0ABC", "alice@example.com", "bob@example.com"},
        ),
    ],
)
def test_each_entry_is_taken_in_its_platforms_shape(raw: str, parsed: set[str]) -> None:
    assert parse_approvers(raw) == frozenset(parsed)


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ("alice", "'alice' is neither a Slack user id (U0123ABCD) nor an email address"),
        ("U0", "'U0' is neither a Slack user id (U0123ABCD) nor an email address"),
        ("u0123abc", "'u0123abc' is neither a Slack user id (U0123ABCD) nor an email address"),
        ("X0123ABC", "'X0123ABC' is neither a Slack user id (U0123ABCD) nor an email address"),
        ("U0123-AB", "'U0123-AB' is neither a Slack user id (U0123ABCD) nor an email address"),
        ("a@b", "'a@b' is neither a Slack user id (U0123ABCD) nor an email address"),
        ("a b@c.d", "'a b@c.d' is neither a Slack user id (U0123ABCD) nor an email address"),
        ("a@@b.c", "'a@@b.c' is neither a Slack user id (U0123ABCD) nor an email address"),
        (
            "slack:alice@example.com",
            "'slack:alice@example.com' is neither a Slack user id (U0123ABCD) nor an email "
            "address for slack",
        ),
        (
            "google-chat:U0123ABC",
            "'google-chat:U0123ABC' is neither a Slack user id (U0123ABCD) nor an email "
            "address for google-chat",
        ),
        (
            "slack:",
            "'slack:' is neither a Slack user id (U0123ABCD) nor an email address for slack",
        ),
    ],
)
def test_a_malformed_entry_is_refused_with_its_text(raw: str, said: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_approvers(f"U0GOOD, {raw}, alice@example.com")
    assert str(refused.value) == said


APPROVERS = parse_approvers("U0APPROVER, alice@example.com")


@pytest.mark.parametrize(
    ("platform", "user", "may"),
    [
        (SLACK, "U0APPROVER", True),
        (SLACK, "u0approver", False),  # Slack ids are exact
        (SLACK, "U0OUTSIDER", False),
        (SLACK, "alice@example.com", False),  # an email is never a Slack identity
        (SLACK, "", False),
        (CHAT, "alice@example.com", True),
        (CHAT, "ALICE@Example.com", True),  # Google Chat emails are case-insensitive
        (CHAT, "bob@example.com", False),
        (CHAT, "U0APPROVER", False),  # a Slack id is never a Google Chat identity
        (CHAT, "", False),
    ],
)
def test_a_click_matches_only_its_platforms_identities(
    platform: Platform, user: str, may: bool
) -> None:
    assert is_approver(APPROVERS, platform, user) is may


def test_listed_entries_that_do_not_have_the_platforms_shape_never_match() -> None:
    # Only parse_approvers builds the list in production; a hand-made one is still safe.
    hand_made = ["not-an-id", "alice", "u0approver"]
    assert not is_approver(hand_made, SLACK, "not-an-id")
    assert not is_approver(hand_made, CHAT, "alice")
    assert not is_approver(hand_made, SLACK, "u0approver")


def test_any_iterable_of_approvers_will_do() -> None:
    assert is_approver(iter(["U0APPROVER"]), SLACK, "U0APPROVER")
    assert is_approver(("alice@example.com",), CHAT, "Alice@example.com")
    assert not is_approver([], SLACK, "U0APPROVER")
