"""The security table of on_chat_action for Slack: every refusal publishes nothing and changes
nothing; the one verified approval is recorded and published once.

Each case starts from the bundled faulty-host incident awaiting approval (see chatkit),
clicks through the real service with real verifiers (slack_sdk's SignatureVerifier,
google-auth against locally served certificates) and asserts the status, that the
remediation queue saw nothing, and that the stored incident is byte-for-byte unchanged.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import chatkit as K
import pytest
from clickdesk import Desk, make_desk
from fakeservers.certs import CertsServer
from fakeservers.slack import SlackServer

from loopbreaker import incidents
from loopbreaker.app.chat_actions import REFUSAL_HEADER
from loopbreaker.approval.requests import REJECT_ACTION, Decision, Platform
from loopbreaker.errors import TransientError
from loopbreaker.incidents import Incident, State

# --- the approval that works ------------------------------------------------------------


def test_a_verified_approval_is_recorded_once_published_once_and_the_message_updated(
    desk: Desk,
) -> None:
    before = desk.incident
    assert before.approval_request is not None
    target = before.approval_request.target
    reply = desk.approve()
    assert reply.status == 200, reply.body
    after = desk.current()
    assert after.state is State.APPROVED and after.approval is not None
    a = after.approval
    assert (a.decision, a.actor, a.actor_name, a.platform) == (
        Decision.APPROVED,
        K.APPROVER,
        "alice",
        Platform.SLACK,
    )
    assert a.at == desk.clock() and a.target == target and a.published_id == "fake-1"
    [request] = desk.queue.published
    assert request["incident_id"] == before.id and request["approval_id"] == a.request_id
    assert request["dedup_id"] == f"{before.id}:{a.request_id}"
    assert request["target"] == target.to_dict() and request["approved_by"] == K.APPROVER
    # Who, when and through which platform is in the audit trail.
    notes = [e.note for e in after.audit]
    assert any("approved by alice (U0APPROVER) via slack" in n for n in notes)
    assert any("remediation request published" in n for n in notes)
    # The chat message now says who approved, and has no buttons any more.
    [message] = desk.notifier.posted
    assert message.approval is None and message.approval_note is not None
    assert "Approved by alice via slack" in message.approval_note
    assert after.notified_fingerprint == message.fingerprint


def test_a_rejection_is_recorded_and_publishes_nothing(desk: Desk) -> None:
    reply = desk.slack(K.slack_payload(desk.token, action=REJECT_ACTION))
    assert reply.status == 200
    after = desk.current()
    assert after.state is State.REJECTED and after.approval is not None
    assert after.approval.decision is Decision.REJECTED and desk.queue.published == []


# --- Slack refusals ---------------------------------------------------------------------


def test_no_signature_is_401(desk: Desk) -> None:
    _, body = K.slack_request(K.slack_payload(desk.token), desk.clock())
    reply = desk.service.handle({"X-Slack-Request-Timestamp": "1"}, body)
    desk.assert_refused(reply, 401, "missing X-Slack")
    desk.assert_refused(desk.service.handle({}, body), 401, "not a chat platform")


def test_a_bad_signature_is_401(desk: Desk) -> None:
    reply = desk.slack(K.slack_payload(desk.token), secret="not-the-signing-secret")
    desk.assert_refused(reply, 401, "does not match")


def test_a_stale_timestamp_is_401(desk: Desk) -> None:
    stale = desk.clock() - timedelta(minutes=5, seconds=1)
    reply = desk.slack(K.slack_payload(desk.token), timestamp=stale)
    desk.assert_refused(reply, 401, "stale request")


def test_a_body_tampered_after_signing_is_401(desk: Desk) -> None:
    headers, body = K.slack_request(K.slack_payload(desk.token, user=K.OUTSIDER), desk.clock())
    forged = body.replace(K.OUTSIDER.encode(), K.APPROVER.encode())
    desk.assert_refused(desk.service.handle(headers, forged), 401, "does not match")


def test_a_replayed_request_is_409_and_publishes_nothing_more(desk: Desk) -> None:
    headers, body = K.slack_request(K.slack_payload(desk.token), desk.clock())
    assert desk.service.handle(headers, body).status == 200
    approved = desk.current()
    desk.clock.advance(seconds=30)
    replayed = desk.service.handle(headers, body)
    assert replayed.status == 200 and replayed.headers[REFUSAL_HEADER] == "409"
    assert "already approved" in replayed.body["text"]
    assert len(desk.queue.published) == 1 and desk.current().to_dict() == approved.to_dict()


def _forged_token(desk: Desk, **changes: object) -> str:

    return K.tamper(desk.token, **changes)


def test_a_tampered_action_value_is_400(desk: Desk) -> None:
    forged = _forged_token(desk, instance_id="1234567890123456789")
    desk.assert_refused(desk.slack(K.slack_payload(forged)), 400, "signature does not verify")


def test_an_action_request_signed_with_another_key_is_400(desk: Desk) -> None:
    other = K.token_of(desk.incident, key="someone-elses-signing-key-0123")
    desk.assert_refused(desk.slack(K.slack_payload(other)), 400, "signature does not verify")


def test_an_action_request_of_another_incident_is_400(desk: Desk) -> None:
    # A validly signed request of a second incident, clicked in the first one's message.
    twin = replace(desk.incident, id="inc-twin0000000000")
    desk.store.update(
        desk.incident.id,
        lambda i: replace(
            i, chat={"platform": "slack", "channel": K.CHANNEL, "ts": "1779265266.000100"}
        ),
    )
    desk.incident = desk.current()
    reply = desk.slack(K.slack_payload(K.token_of(twin), message_ts="1779265266.000100"))
    desk.assert_refused(reply, 400, "no incident inc-twin0000000000")
    # And the incident's own request clicked in another message:
    reply = desk.slack(K.slack_payload(desk.token, message_ts="1779269999.000200"))
    desk.assert_refused(reply, 400, "came from message 1779269999.000200")


def test_an_unauthorised_user_is_403(desk: Desk) -> None:
    reply = desk.slack(K.slack_payload(desk.token, user=K.OUTSIDER))
    desk.assert_refused(reply, 403, "not in LOOPBREAKER_APPROVERS")


def test_an_expired_approval_is_400(desk: Desk) -> None:
    assert desk.incident.approval_request is not None
    desk.clock.set(desk.incident.approval_request.expires_at + timedelta(seconds=1))
    desk.assert_refused(desk.approve(), 400, "expired")


def test_an_already_rejected_incident_is_409(desk: Desk) -> None:
    assert desk.slack(K.slack_payload(desk.token, action=REJECT_ACTION)).status == 200
    desk.incident = desk.current()
    desk.assert_refused(desk.approve(), 409, "already rejected by alice")


def test_an_expired_incident_is_409(desk: Desk) -> None:
    assert desk.incident.expires_at is not None
    desk.store.update(desk.incident.id, lambda i: incidents.expire(i, i.expires_at))  # type: ignore[arg-type]
    desk.incident = desk.current()
    assert desk.incident.state is State.EXPIRED
    desk.assert_refused(desk.approve(), 409, "expired, not awaiting approval")


def test_a_double_click_approves_once(desk: Desk) -> None:
    first, second = desk.approve(), desk.approve()
    assert (first.status, second.status) == (200, 200)
    assert REFUSAL_HEADER not in first.headers and second.headers[REFUSAL_HEADER] == "409"
    assert "already approved by alice" in desk.hooks.responses[-1][1]["text"]
    assert len(desk.queue.published) == 1


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"payload=%7Bnot-json", "not JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"text=hello", "no single 'payload'"),
        ({"type": "view_submission"}, "is not block_actions"),
        ("unknown_action", "unknown action 'delete_everything'"),
        ("no_actions", "exactly one action"),
        ("no_user", "names no user"),
        ("no_value", "carries no action request"),
    ],
)
def test_malformed_slack_payloads_are_400(desk: Desk, payload: Any, reason: str) -> None:
    good = K.slack_payload(desk.token)
    if payload == "unknown_action":
        good["actions"][0]["action_id"] = "delete_everything"
        payload = good
    elif payload == "no_actions":
        payload = {**good, "actions": []}
    elif payload == "no_user":
        payload = {**good, "user": {}}
    elif payload == "no_value":
        good["actions"][0].pop("value")
        payload = good
    # A body that is not UTF-8 cannot be verified: plain 400, and nothing is posted.
    desk.assert_refused(desk.slack(payload), 400, reason, verified=payload != b"\xff\xfe")


def test_slack_clicks_without_a_signing_secret_are_401(
    template: tuple[Path, Incident], tmp_path: Path, certs: CertsServer, hooks: SlackServer
) -> None:
    env = {k: v for k, v in K.CHAT_ENV.items() if k != "LOOPBREAKER_SLACK_SIGNING_SECRET"}
    from loopbreaker.settings.load import load_settings

    desk = make_desk(template, tmp_path, certs, load_settings(env), hooks)
    desk.assert_refused(desk.approve(), 401, "Slack clicks are off")


def test_a_transient_store_failure_is_503_and_decides_nothing(desk: Desk) -> None:
    class Contended:
        def current_pause(self, *_: object) -> None:
            return None  # not paused: the decision itself meets the contention

        def update(self, *_: object) -> object:
            raise TransientError("store contention")

    desk.service.store = Contended()  # type: ignore[assignment]
    reply = desk.approve()
    assert reply.status == 503 and desk.queue.published == []
    assert desk.current().to_dict() == desk.incident.to_dict()


def test_a_failed_publish_keeps_the_approval_and_settle_publishes_it_once(desk: Desk) -> None:
    from fakes import FakeEvidence

    from loopbreaker.app.bootstrap import build_responder

    desk.queue.fail.append(TransientError("pubsub unavailable"))
    reply = desk.approve()
    assert reply.status == 200 and reply.body["published"] is None
    approved = desk.current()
    assert approved.state is State.APPROVED and incidents.unpublished(approved)
    responder = build_responder(
        K.chat_settings(),
        store=desk.store,
        notifier=desk.notifier,
        evidence=FakeEvidence(),
        clock=desk.clock,
        queue=desk.queue,
    )
    assert responder.settle().published == []  # the chat action gets its chance first
    desk.clock.advance(seconds=31)
    assert responder.settle().published == [approved.id]
    assert responder.settle().published == []
    assert len(desk.queue.published) == 1 and not incidents.unpublished(desk.current())


# --- concurrency ------------------------------------------------------------------------


def test_eight_concurrent_clicks_give_exactly_one_approval(desk: Desk) -> None:
    requests = [
        K.slack_request(K.slack_payload(desk.token, user=K.APPROVER), desk.clock())
        for _ in range(8)
    ]
    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(lambda r: desk.service.handle(*r), requests))
    assert [r.status for r in replies] == [200] * 8
    assert sorted(r.headers.get(REFUSAL_HEADER, "") for r in replies) == [""] + ["409"] * 7
    assert len(desk.queue.published) == 1
    assert desk.current().state is State.APPROVED


# --- found by probing from outside -----------------------------------------------------


def test_an_absurd_slack_timestamp_is_401_not_a_crash(desk: Desk) -> None:
    headers, body = K.slack_request(K.slack_payload(desk.token), desk.clock())
    headers["X-Slack-Request-Timestamp"] = "9" * 400
    desk.posts_before = len(desk.hooks.responses)
    desk.assert_refused(desk.service.handle(headers, body), 401, "is not a number")


def test_a_non_string_action_id_is_400(desk: Desk) -> None:
    payload = K.slack_payload(desk.token)
    payload["actions"][0]["action_id"] = ["approve_remediation"]
    desk.assert_refused(desk.slack(payload), 400, "unknown action")


def test_a_click_that_names_no_message_is_refused_once_the_message_is_known(
    desk: Desk,
) -> None:
    ts = "1779265266.000100"
    desk.store.update(
        desk.incident.id,
        lambda i: replace(i, chat={"platform": "slack", "channel": K.CHANNEL, "ts": ts}),
    )
    desk.incident = desk.current()
    payload = K.slack_payload(desk.token)
    payload.pop("container")
    desk.assert_refused(desk.slack(payload), 400, "came from message None")


def test_a_failure_after_the_decision_is_committed_still_answers_200(desk: Desk) -> None:
    real = desk.store.update
    calls = {"n": 0}

    def flaky(incident_id: str, change: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:  # recording the publish
            raise TransientError("store blip")
        return real(incident_id, change)

    desk.store.update = flaky  # type: ignore[method-assign]
    reply = desk.approve()
    assert reply.status == 200 and "approved" in reply.body["text"]
    assert desk.current().state is State.APPROVED and len(desk.queue.published) == 1
