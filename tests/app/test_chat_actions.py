"""The security table of on_chat_action: every refusal publishes nothing and changes nothing.

Each case starts from the bundled faulty-host incident awaiting approval (see chatkit),
clicks through the real service with real verifiers (slack_sdk's SignatureVerifier,
google-auth against locally served certificates) and asserts the status, that the
remediation queue saw nothing, and that the stored incident is byte-for-byte unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import chatkit as K
import pytest
from fakes import FakeClock, FakeNotifier, FakeQueue
from fakeservers.google_certs import CertsServer, SigningKey
from fakeservers.slack import SlackServer
from google.auth.transport.requests import Request as GoogleRequest

from loopbreaker import incidents
from loopbreaker.app.bootstrap import build_chat_actions
from loopbreaker.app.chat_actions import REFUSAL_HEADER, ChatActions
from loopbreaker.app.replies import Reply
from loopbreaker.approval.requests import APPROVE_ACTION, REJECT_ACTION, Decision, Platform
from loopbreaker.errors import TransientError
from loopbreaker.incidents import Incident, State
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.settings.load import Settings


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Incident]:
    path = tmp_path_factory.mktemp("faulty") / "template.sqlite"
    return path, K.make_faulty_store(path)


@pytest.fixture(scope="module")
def certs() -> Iterator[CertsServer]:
    with CertsServer() as server:
        yield server


@pytest.fixture(scope="module")
def hooks() -> Iterator[SlackServer]:
    """Where the clicks' response_url points: refusals are told there, ephemerally."""
    with SlackServer() as server:
        yield server


@dataclass
class Desk:
    """One on_chat_action service over a copy of the faulty-host store."""

    service: ChatActions
    store: SqliteStore
    queue: FakeQueue
    notifier: FakeNotifier
    clock: FakeClock
    incident: Incident
    certs: CertsServer
    #: The Approve button's value, as posted while the incident awaited approval.
    token: str
    hooks: SlackServer
    last_platform: str = ""
    #: The response_url the last Slack click carried, and the hooks' posts before it.
    response_url: str | None = None
    posts_before: int = 0

    def slack(self, payload: dict[str, Any] | bytes, **kw: Any) -> Reply:
        self.response_url = None
        if isinstance(payload, dict) and "response_url" in payload:
            self.response_url = f"{self.hooks.url}/actions/T0123/123/xyz"
            payload = {**payload, "response_url": self.response_url}
        headers, body = K.slack_request(payload, self.clock(), **kw)
        self.last_platform = "slack"
        self.posts_before = len(self.hooks.responses)
        return self.service.handle(headers, body)

    def approve(self, **kw: Any) -> Reply:
        return self.slack(K.slack_payload(self.token, **kw))

    def chat(self, body: bytes, bearer: str | None) -> Reply:
        headers = {"Content-Type": "application/json"}
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        self.last_platform = "google-chat"
        self.posts_before = len(self.hooks.responses)
        return self.service.handle(headers, body)

    def current(self) -> Incident:
        found = self.store.get(self.incident.id)
        assert found is not None
        return found

    def assert_refused(
        self, reply: Reply, status: int, reason: str, *, verified: bool = True
    ) -> None:
        """Refused, nothing changed or published, and the clicker told where they read it:
        an unverified request gets its 401; a verified clicker a 200 whose security status
        is in the header, with the reason in Slack's response_url or Chat's own reply."""
        assert reason in reply.body["text"], reply.body["text"]
        assert self.queue.published == []
        assert self.current().to_dict() == self.incident.to_dict()
        if status == 401 or not verified:
            assert reply.status == status, reply.body
            assert len(self.hooks.responses) == self.posts_before  # nothing posted for it
            return
        assert reply.status == 200, reply.body
        assert reply.headers[REFUSAL_HEADER] == str(status)
        if self.last_platform == "google-chat":
            assert set(reply.body) == {"text"}  # a Chat message, nothing else
        elif self.response_url is None:
            assert len(self.hooks.responses) == self.posts_before  # no response_url to use
        else:
            assert len(self.hooks.responses) == self.posts_before + 1
            path, told = self.hooks.responses[-1]
            assert path == "/actions/T0123/123/xyz"
            assert told["response_type"] == "ephemeral" and told["replace_original"] is False
            assert reason in told["text"]


def make_desk(
    template: tuple[Path, Incident],
    tmp_path: Path,
    certs: CertsServer,
    settings: Settings,
    hooks: SlackServer,
) -> Desk:
    path, incident = template
    store = SqliteStore(K.copy_store(path, tmp_path / "incidents.sqlite"))
    clock = FakeClock(K.click_time(incident))
    queue, notifier = FakeQueue(), FakeNotifier()
    service = build_chat_actions(
        settings,
        store=store,
        queue=queue,
        notifier=notifier,
        clock=clock,
        google_chat_request=GoogleRequest(),
    )
    return Desk(
        service, store, queue, notifier, clock, incident, certs, K.token_of(incident), hooks
    )


@pytest.fixture
def desk(
    template: tuple[Path, Incident], tmp_path: Path, certs: CertsServer, hooks: SlackServer
) -> Iterator[Desk]:
    made = make_desk(
        template,
        tmp_path,
        certs,
        K.chat_settings(
            LOOPBREAKER_GOOGLE_CHAT_CERTS_URL=certs.certs_url,
            LOOPBREAKER_SLACK_RESPONSE_URL_PREFIX=hooks.url + "/actions/",
        ),
        hooks,
    )
    made.posts_before = len(hooks.responses)  # the module's earlier tests, in any order
    yield made
    made.store.close()


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


# --- Google Chat ------------------------------------------------------------------------


def test_a_google_chat_approval_verifies_the_token_and_replaces_the_card(desk: Desk) -> None:
    bearer = desk.certs.token(K.AUDIENCE)
    reply = desk.chat(K.chat_event(desk.token), bearer)
    assert reply.status == 200, reply.body
    assert reply.body["actionResponse"] == {"type": "UPDATE_MESSAGE"}
    card = json.dumps(reply.body["cardsV2"])
    assert "Approved by Alice via google-chat" in card and APPROVE_ACTION not in card
    after = desk.current()
    assert after.approval is not None and after.approval.actor == K.CHAT_APPROVER
    assert after.approval.platform is Platform.GOOGLE_CHAT and len(desk.queue.published) == 1


def test_an_oidc_token_for_the_chat_service_account_is_accepted(desk: Desk) -> None:
    bearer = desk.certs.token(
        K.AUDIENCE,
        issuer="https://accounts.google.com",
        email="chat@system.gserviceaccount.com",
        email_verified=True,
    )
    assert desk.chat(K.chat_event(desk.token), bearer).status == 200


TokenMaker = Callable[[CertsServer], str | None]


@pytest.mark.parametrize(
    ("make_token", "reason"),
    [
        (lambda c: None, "not a chat platform"),
        (lambda c: "not-a-jwt", "does not verify"),
        (lambda c: c.token("987654321098"), "does not verify"),  # wrong audience
        (lambda c: c.token(K.AUDIENCE, issuer="attacker@evil.example"), "not issued by"),
        (
            lambda c: c.token(
                K.AUDIENCE, issuer="https://accounts.google.com", email="x@evil.example"
            ),
            "not issued by",
        ),
        # Exactly one check fails in each of these: another service account's valid,
        # verified token for our audience; the Chat account's but unverified email.
        (
            lambda c: c.token(
                K.AUDIENCE,
                issuer="https://accounts.google.com",
                email="other@project.iam.gserviceaccount.com",
                email_verified=True,
            ),
            "not issued by",
        ),
        (
            lambda c: c.token(
                K.AUDIENCE,
                issuer="https://accounts.google.com",
                email="chat@system.gserviceaccount.com",
                email_verified=False,
            ),
            "not issued by",
        ),
        # Signed with another key under the served key id: the signature fails.
        (
            lambda c: c.token(K.AUDIENCE, signer=SigningKey("chat-key-1").signer),
            "does not verify",
        ),
        (lambda c: c.token(K.AUDIENCE, expires_in=-120), "does not verify"),  # expired
    ],
    ids=[
        "missing",
        "garbage",
        "audience",
        "issuer",
        "email",
        "email-only",
        "email-unverified-only",
        "signature",
        "expired",
    ],
)
def test_bad_google_chat_tokens_are_401(desk: Desk, make_token: TokenMaker, reason: str) -> None:
    reply = desk.chat(K.chat_event(desk.token), make_token(desk.certs))
    desk.assert_refused(reply, 401, reason)


def test_a_google_chat_user_not_in_the_approvers_is_403(desk: Desk) -> None:
    reply = desk.chat(
        K.chat_event(desk.token, email="mallory@example.com"), desk.certs.token(K.AUDIENCE)
    )
    desk.assert_refused(reply, 403, "mallory@example.com")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"[]", "not a JSON object"),
        (b'{"type": "MESSAGE"}', "is not CARD_CLICKED"),
        ("unknown", "unknown action"),
    ],
)
def test_malformed_google_chat_events_are_400(desk: Desk, body: Any, reason: str) -> None:
    if body == "unknown":
        body = K.chat_event(desk.token, action="launch_missiles")
    desk.assert_refused(desk.chat(body, desk.certs.token(K.AUDIENCE)), 400, reason)


def test_without_a_signing_key_every_click_is_refused(
    template: tuple[Path, Incident], tmp_path: Path, certs: CertsServer, hooks: SlackServer
) -> None:
    from loopbreaker.settings.load import load_settings

    env = {k: v for k, v in K.CHAT_ENV.items() if k != "LOOPBREAKER_ACTION_SIGNING_KEY"}
    env["LOOPBREAKER_SLACK_RESPONSE_URL_PREFIX"] = hooks.url + "/actions/"
    desk = make_desk(template, tmp_path, certs, load_settings(env), hooks)
    desk.assert_refused(desk.approve(), 400, "approvals are off")


def _clock_at(moment: datetime) -> FakeClock:
    return FakeClock(moment)


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


# --- approvers per platform, and replies a chat platform accepts --------------------------


def test_a_slack_click_never_matches_a_google_chat_approver(desk: Desk) -> None:
    # Signed Slack payloads carry U… ids; one naming an approver's email is not that person.
    desk.assert_refused(desk.approve(user=K.CHAT_APPROVER), 403, "you are not an approver")


def test_approver_entries_may_name_their_platform() -> None:
    from loopbreaker.approval.requests import is_approver, parse_approvers

    approvers = parse_approvers("slack:U0APPROVER, google-chat:Alice@Example.com")
    assert approvers == {"U0APPROVER", "alice@example.com"}
    assert is_approver(approvers, Platform.SLACK, "U0APPROVER")
    assert is_approver(approvers, Platform.GOOGLE_CHAT, "alice@example.com")
    assert not is_approver(approvers, Platform.SLACK, "alice@example.com")
    assert not is_approver(approvers, Platform.GOOGLE_CHAT, "U0APPROVER")
    for wrong in ("slack:alice@example.com", "google-chat:U0APPROVER"):
        with pytest.raises(ValueError, match="neither a Slack user id"):
            parse_approvers(wrong)


#: The fields of a Google Chat ``Message`` (Chat API v1 reference) and of its
#: ``actionResponse.type``; a reply to a CARD_CLICKED event carries nothing else.
CHAT_MESSAGE_FIELDS = frozenset(
    {
        "name", "sender", "createTime", "lastUpdateTime", "deleteTime", "text",
        "formattedText", "cards", "cardsV2", "annotations", "thread", "space",
        "fallbackText", "actionResponse", "argumentText", "slashCommand", "attachment",
        "matchedUrl", "threadReply", "clientAssignedMessageId", "emojiReactionSummaries",
        "privateMessageViewer", "deletionMetadata", "quotedMessageMetadata",
        "attachedGifs", "accessoryWidgets",
    }
)  # fmt: skip
ACTION_RESPONSE_TYPES = frozenset(
    {"TYPE_UNSPECIFIED", "NEW_MESSAGE", "UPDATE_MESSAGE", "UPDATE_USER_MESSAGE_CARDS",
     "REQUEST_CONFIG", "DIALOG", "UPDATE_WIDGET"}
)  # fmt: skip


def assert_chat_message(body: Any) -> None:
    assert isinstance(body, dict) and set(body) <= CHAT_MESSAGE_FIELDS, set(body)
    if "actionResponse" in body:
        assert set(body["actionResponse"]) <= {"type", "url", "dialogAction", "updatedWidget"}
        assert body["actionResponse"]["type"] in ACTION_RESPONSE_TYPES
    for card in body.get("cardsV2", []):
        assert set(card) == {"cardId", "card"} and "sections" in card["card"]


def test_google_chat_replies_are_chat_messages_and_nothing_else(desk: Desk) -> None:
    bearer = desk.certs.token(K.AUDIENCE)
    refused = desk.chat(K.chat_event(desk.token, email="mallory@example.com"), bearer)
    assert_chat_message(refused.body)
    approved = desk.chat(K.chat_event(desk.token), bearer)
    assert approved.status == 200 and approved.body["actionResponse"]["type"] == "UPDATE_MESSAGE"
    assert_chat_message(approved.body)
    again = desk.chat(K.chat_event(desk.token), bearer)
    assert again.headers[REFUSAL_HEADER] == "409" and "already approved" in again.body["text"]
    assert_chat_message(again.body)
