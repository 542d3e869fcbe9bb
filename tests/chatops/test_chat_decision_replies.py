"""After a verified decision: the reply each platform gets, the message updated where it
already is, and a click accepted only from the incident's own message.

Slack's reply carries the decision and the publication; the message itself is updated
through the notifier, in place (the incident's ``chat`` location), and the incident
remembers what it now shows. Google Chat replaces the clicked card with the reply, so
the reply *is* the updated message. Refusals of a verified clicker are answered 200 with
the security status beside the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import chatdesk as D
import chatkit as K
import pytest
from fakes import FakeStore
from fakeservers.certs import CertsServer

from loopbreaker.app.chat_actions import REFUSAL_HEADER
from loopbreaker.approval.requests import REJECT_ACTION
from loopbreaker.chat import notify
from loopbreaker.chat.render import google_chat_message
from loopbreaker.incidents import Incident, State

SLACK_WHERE = {"platform": "slack", "channel": K.CHANNEL, "ts": "1779265266.000100"}
CHAT_WHERE = {"platform": "google-chat", "message": "spaces/AAAAX5_xtFM/messages/RI2JF8DQs_s"}


@pytest.fixture(scope="module")
def awaiting(tmp_path_factory: pytest.TempPathFactory) -> Incident:
    return K.make_faulty_store(tmp_path_factory.mktemp("faulty") / "template.sqlite")


@pytest.fixture(scope="module")
def certs() -> Iterator[CertsServer]:
    with CertsServer() as server:
        yield server


def desk_for(incident: Incident, certs: CertsServer | None = None) -> D.Desk:
    store = FakeStore()
    store.incidents[incident.id] = incident
    return D.make_desk(store=store, now=K.click_time(incident), certs=certs)


def current(desk: D.Desk, incident: Incident) -> Incident:
    found = desk.store.get(incident.id)
    assert found is not None
    return found


def test_slack_gets_the_decision_and_the_message_is_updated_in_place(awaiting: Incident) -> None:
    posted = replace(awaiting, chat=SLACK_WHERE)
    desk = desk_for(posted)
    reply = desk.slack_click(K.token_of(posted))
    after = current(desk, posted)
    [message] = desk.notifier.posted
    assert message == notify.render(after)  # the message as the decision left it
    assert reply.status == 200
    assert reply.body == {
        "text": message.approval_note,
        "incident_id": posted.id,
        "state": "approved",
        "published": "fake-1",
    }
    assert message.approval_note is not None and message.approval_note.startswith("Approved by")
    assert desk.notifier.wheres == [SLACK_WHERE]  # the posted message, not a new one
    assert after.notified_fingerprint == message.fingerprint and after.chat == SLACK_WHERE


def test_a_message_posted_nowhere_yet_is_posted_and_its_place_kept(awaiting: Incident) -> None:
    desk = desk_for(awaiting)
    desk.slack_click(K.token_of(awaiting))
    after = current(desk, awaiting)
    assert desk.notifier.wheres == [None]
    assert after.chat == {"platform": "fake", "message": "m-1"}  # where the notifier put it
    assert after.notified_fingerprint == desk.notifier.posted[0].fingerprint


def test_a_slack_rejection_publishes_nothing_and_says_so(awaiting: Incident) -> None:
    desk = desk_for(awaiting)
    reply = desk.slack_click(K.token_of(awaiting), action=REJECT_ACTION)
    assert reply.body["state"] == "rejected" and reply.body["published"] is None
    assert reply.body["text"].startswith("Rejected by alice via slack")
    assert desk.queue.published == []
    assert current(desk, awaiting).state is State.REJECTED


def test_google_chat_gets_the_updated_message_as_its_reply(
    awaiting: Incident, certs: CertsServer
) -> None:
    desk = desk_for(awaiting, certs)
    reply = desk.chat_click(K.token_of(awaiting))
    after = current(desk, awaiting)
    message = notify.render(after)
    assert reply.status == 200
    assert reply.body == {
        "actionResponse": {"type": "UPDATE_MESSAGE"},
        **google_chat_message(message),
    }
    assert desk.notifier.posted == []  # the reply replaces the card; nothing else is posted
    assert after.notified_fingerprint == message.fingerprint
    assert after.chat == awaiting.chat


# --- from the incident's own message only --------------------------------------------


def test_a_slack_click_from_another_message_is_refused(awaiting: Incident) -> None:
    posted = replace(awaiting, chat=SLACK_WHERE)
    desk = desk_for(posted)
    reply = desk.slack_click(K.token_of(posted), message_ts="1779265999.000200")
    assert reply.status == 200 and reply.headers[REFUSAL_HEADER] == "400"
    assert reply.body == {
        "text": f"Nothing was changed: the click came from message 1779265999.000200, not "
        f"incident {posted.id}'s",
        "status": 400,
    }
    assert current(desk, posted) == posted and desk.queue.published == []


def test_a_chat_click_from_another_message_is_refused(
    awaiting: Incident, certs: CertsServer
) -> None:
    # chatkit's click comes from spaces/AAAAX5_xtFM/messages/RI2JF8DQs_s.RI2JF8DQs_s.
    posted = replace(awaiting, chat=CHAT_WHERE)
    desk = desk_for(posted, certs)
    reply = desk.chat_click(K.token_of(posted))
    assert reply.headers[REFUSAL_HEADER] == "400"
    assert reply.body == {
        "text": "Nothing was changed: the click came from message "
        f"spaces/AAAAX5_xtFM/messages/RI2JF8DQs_s.RI2JF8DQs_s, not incident {posted.id}'s"
    }
    assert current(desk, posted) == posted


def test_a_chat_click_from_the_incidents_own_message_is_taken(
    awaiting: Incident, certs: CertsServer
) -> None:
    own = {**CHAT_WHERE, "message": "spaces/AAAAX5_xtFM/messages/RI2JF8DQs_s.RI2JF8DQs_s"}
    posted = replace(awaiting, chat=own)
    desk = desk_for(posted, certs)
    assert REFUSAL_HEADER not in desk.chat_click(K.token_of(posted)).headers
    assert current(desk, posted).state is State.APPROVED


def test_a_click_on_the_other_platform_is_not_held_to_the_message(awaiting: Incident) -> None:
    # The message was posted to Google Chat; the Slack button of the same request is the
    # same decision, from a message this incident does not know the place of.
    posted = replace(awaiting, chat=CHAT_WHERE)
    desk = desk_for(posted)
    assert desk.slack_click(K.token_of(posted)).status == 200
    assert current(desk, posted).state is State.APPROVED


# --- the refusals' replies -----------------------------------------------------------


def test_an_unverified_request_gets_its_401_and_the_reason(awaiting: Incident) -> None:
    desk = desk_for(awaiting)
    headers, body = K.slack_request(K.slack_payload(K.token_of(awaiting)), desk.clock())
    reply = desk.service.handle({**headers, "X-Slack-Signature": "v0=00"}, body)
    assert reply.status == 401 and REFUSAL_HEADER not in reply.headers
    assert reply.body == {
        "text": "Refused, nothing was changed: X-Slack-Signature does not match the request body",
        "status": 401,
    }
    assert desk.replies == []  # nothing is posted for an unverified request


def test_a_verified_slack_clicker_is_told_ephemerally(awaiting: Incident) -> None:
    desk = desk_for(awaiting)
    reply = desk.slack_click(K.token_of(awaiting), user=K.OUTSIDER)
    said = (
        "Nothing was changed: you are not an approver: alice (U0OUTSIDER) is not in "
        "LOOPBREAKER_APPROVERS for slack"
    )
    assert (reply.status, reply.headers) == (200, {REFUSAL_HEADER: "403"})
    assert reply.body == {"text": said, "status": 403}
    assert desk.replies == [("http://127.0.0.1:9/actions/T0123/123/xyz", said)]


def test_a_verified_body_that_is_no_click_is_told_at_its_response_url(awaiting: Incident) -> None:
    desk = desk_for(awaiting)
    payload = {**K.slack_payload(K.token_of(awaiting)), "type": "view_submission"}
    reply = desk.service.handle(*K.slack_request(payload, desk.clock()))
    said = "Nothing was changed: Slack interaction type 'view_submission' is not block_actions"
    assert reply.body == {"text": said, "status": 400}
    assert desk.replies == [("http://127.0.0.1:9/actions/T0123/123/xyz", said)]


@pytest.mark.parametrize("url", [None, 42, ""])
def test_without_a_response_url_there_is_no_one_to_tell(awaiting: Incident, url: object) -> None:
    desk = desk_for(awaiting)
    payload = {**K.slack_payload(K.token_of(awaiting)), "type": "view_submission"}
    payload["response_url"] = url
    reply = desk.service.handle(*K.slack_request(payload, desk.clock()))
    assert reply.headers == {REFUSAL_HEADER: "400"} and desk.replies == []


def test_a_verified_body_that_is_no_payload_is_answered_without_a_url(awaiting: Incident) -> None:
    desk = desk_for(awaiting)
    for body in (b"payload=%5B1%5D", b"token=x", b"payload=%7Bx"):
        headers, _ = K.slack_request(body, desk.clock())
        reply = desk.service.handle(headers, body)
        assert reply.status == 200 and reply.headers == {REFUSAL_HEADER: "400"}
    assert desk.replies == []


def test_the_refusal_header_is_named_for_proxies_and_logs() -> None:
    assert REFUSAL_HEADER == "X-Loopbreaker-Refusal"


@pytest.mark.parametrize(("size", "taken"), [(256 * 1024, True), (256 * 1024 + 1, False)])
def test_a_body_over_256_kib_is_refused_before_it_is_verified(
    awaiting: Incident, size: int, taken: bool
) -> None:
    desk = desk_for(awaiting)
    body = b"payload=" + b"x" * (size - len("payload="))
    headers, _ = K.slack_request(body, desk.clock())
    reply = desk.service.handle(headers, body)
    if taken:  # verified, then not a click: a 400 told the clicker
        assert reply.headers == {REFUSAL_HEADER: "400"}
    else:
        assert (reply.status, reply.headers) == (400, {})
        assert reply.body == {
            "text": f"Refused, nothing was changed: request body of {size} bytes is too large",
            "status": 400,
        }


def test_with_approvals_off_a_click_is_told_why(awaiting: Incident) -> None:
    store = FakeStore()
    store.incidents[awaiting.id] = awaiting
    desk = D.make_desk(store=store, now=K.click_time(awaiting), signing_key=None)
    reply = desk.slack_click(K.token_of(awaiting))
    said = "Nothing was changed: approvals are off: LOOPBREAKER_ACTION_SIGNING_KEY is not set"
    assert reply.body == {"text": said, "status": 400}
    assert current(desk, awaiting) == awaiting


def test_an_approval_while_paused_is_refused_and_says_how_to_resume(awaiting: Incident) -> None:
    desk = desk_for(awaiting)
    desk.slack_command("pause until=2h GPU fleet upgrade")
    reply = desk.slack_click(K.token_of(awaiting))
    when = f"{desk.clock():%Y-%m-%dT%H:%M:%S}"
    assert reply.headers == {REFUSAL_HEADER: "409"}
    assert reply.body["text"].startswith(
        f"Nothing was changed: remediation is paused by alice (U0APPROVER) via slack at {when}"
    )
    assert reply.body["text"].endswith(
        ": GPU fleet upgrade. Approvals are refused until `loopbreaker resume` (or "
        "`/loopbreaker resume`); a rejection is still taken"
    )
    assert current(desk, awaiting).state is State.AWAITING_APPROVAL
    rejected = desk.slack_click(K.token_of(awaiting), action=REJECT_ACTION)
    assert REFUSAL_HEADER not in rejected.headers
    assert current(desk, awaiting).state is State.REJECTED
