"""What on_chat_action writes to the log, field by field.

Each line is one structured record (loopbreaker.logs): ``event`` names it (the log-based
metric ``remediation_approved`` in infra/terraform/monitoring.tf counts one of them) and
the other fields say who, what and why, so an operator can filter for a user, an
approval or a refusal reason. The message text and the severity are for people and are
not pinned here.

The incident awaiting approval is chatkit's faulty-host one, held in the recording
store; the service is chatdesk's, with the real verifiers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import chatdesk as D
import chatkit as K
import pytest
from fakes import FakeNotifier, FakeQueue, FakeStore
from fakeservers.certs import CertsServer

from loopbreaker.app.chat_actions import ChatActions
from loopbreaker.approval.requests import REJECT_ACTION
from loopbreaker.errors import ConfigError, TransientError
from loopbreaker.incidents import Incident


@pytest.fixture(scope="module")
def awaiting(tmp_path_factory: pytest.TempPathFactory) -> Incident:
    return K.make_faulty_store(tmp_path_factory.mktemp("faulty") / "template.sqlite")


@pytest.fixture(scope="module")
def certs() -> Iterator[CertsServer]:
    with CertsServer() as server:
        yield server


def desk_for(
    incident: Incident, certs: CertsServer | None = None, **fail: list[Exception]
) -> D.Desk:
    store = FakeStore(fail=fail or None)
    store.incidents[incident.id] = incident
    return D.make_desk(store=store, now=K.click_time(incident), certs=certs)


def only(desk: D.Desk, event: str) -> dict[str, Any]:
    found = [e for e in desk.records.events() if e.get("event") == event]
    assert len(found) == 1, desk.records.events()
    return found[0]


def target_fields(incident: Incident) -> dict[str, Any]:
    request = incident.approval_request
    assert request is not None
    t = request.target
    return {
        "approval_id": request.id,
        "node": t.node,
        "instance": t.instance,
        "instance_id": t.instance_id,
    }


def test_an_approval_names_who_what_and_the_incident(awaiting: Incident) -> None:
    desk = desk_for(awaiting)
    assert desk.slack_click(K.token_of(awaiting)).status == 200
    line = only(desk, "remediation_approved")
    decided = desk.store.get(awaiting.id)
    assert decided is not None
    assert line == {
        "event": "remediation_approved",
        "platform": "slack",
        "user": K.APPROVER,
        **target_fields(awaiting),
        "labels": decided.labels(),
        "severity": line["severity"],
    }
    assert line["labels"]["incident_id"] == awaiting.id


def test_a_rejection_from_google_chat_is_its_own_event(
    awaiting: Incident, certs: CertsServer
) -> None:
    desk = desk_for(awaiting, certs)
    assert desk.chat_click(K.token_of(awaiting), action=REJECT_ACTION).status == 200
    line = only(desk, "remediation_rejected")
    assert (line["platform"], line["user"]) == ("google-chat", K.CHAT_APPROVER)
    assert line["approval_id"] == target_fields(awaiting)["approval_id"]
    assert [e for e in desk.records.events() if e.get("event") == "remediation_approved"] == []


def test_a_refusal_names_status_platform_reason_and_error(awaiting: Incident) -> None:
    desk = desk_for(awaiting)
    desk.slack_click(K.token_of(awaiting), user=K.OUTSIDER)
    line = only(desk, "chat_action_refused")
    assert {k: v for k, v in line.items() if k not in ("labels", "severity")} == {
        "event": "chat_action_refused",
        "status": 403,
        "platform": "slack",
        "reason": "you are not an approver: alice (U0OUTSIDER) is not in "
        "LOOPBREAKER_APPROVERS for slack",
        "error": "NotAnApprover",
    }


def test_an_unsigned_request_is_logged_without_a_platform(awaiting: Incident) -> None:
    desk = desk_for(awaiting)
    assert desk.service.handle({}, b"payload=%7B%7D").status == 401
    line = only(desk, "chat_action_refused")
    assert (line["status"], line["platform"], line["error"]) == (401, None, "Unauthenticated")
    assert line["reason"] == (
        "neither X-Slack-Signature nor an Authorization bearer token: not a chat platform"
    )


def test_a_store_that_fails_transiently_is_logged_for_the_retry(awaiting: Incident) -> None:
    desk = desk_for(awaiting, update=[TransientError("firestore: deadline exceeded")])
    reply = desk.slack_click(K.token_of(awaiting))
    assert reply.status == 503
    assert reply.body == {
        "text": "Temporarily unavailable, nothing was changed: firestore: deadline exceeded"
    }
    line = only(desk, "chat_action_retry")
    assert (line["platform"], line["reason"]) == ("slack", "firestore: deadline exceeded")


def test_a_message_update_that_fails_is_logged_and_the_decision_stands(
    awaiting: Incident,
) -> None:
    for failure in (TransientError("slack: 503"), ConfigError("slack: not_in_channel")):
        desk = desk_for(awaiting)
        desk.notifier.fail = [failure]
        reply = desk.slack_click(K.token_of(awaiting))
        assert reply.status == 200 and reply.body["published"] == "fake-1"
        line = only(desk, "chat_update_failed")
        decided = desk.store.get(awaiting.id)
        assert decided is not None and decided.approval is not None
        assert (line["reason"], line["labels"]) == (str(failure), decided.labels())
        # Not marked as notified: the next settle posts the changed message again.
        assert decided.notified_fingerprint == awaiting.notified_fingerprint


class FailsAfterTheDecision(FakeStore):
    """The decision's transaction commits; every later update fails transiently."""

    def update(self, incident_id: str, change: Any) -> Any:
        if self.transactions >= 1:
            raise TransientError("firestore: unavailable")
        return super().update(incident_id, change)


def follow_up_desk(incident: Incident, certs: CertsServer | None = None) -> D.Desk:
    store = FailsAfterTheDecision()
    store.incidents[incident.id] = incident
    return D.make_desk(store=store, now=K.click_time(incident), certs=certs)


def test_a_follow_up_that_fails_after_the_decision_is_logged(awaiting: Incident) -> None:
    desk = follow_up_desk(awaiting)
    reply = desk.slack_click(K.token_of(awaiting))
    assert reply.status == 200
    assert reply.body == {
        "text": f"Incident {awaiting.id} approved; the message updates shortly.",
        "incident_id": awaiting.id,
    }
    line = only(desk, "chat_action_follow_up_failed")
    decided = desk.store.get(awaiting.id)
    assert decided is not None and decided.approval is not None
    assert (line["reason"], line["labels"]) == ("firestore: unavailable", decided.labels())


def test_a_follow_up_failure_answers_google_chat_with_text_only(
    awaiting: Incident, certs: CertsServer
) -> None:
    desk = follow_up_desk(awaiting, certs)
    reply = desk.chat_click(K.token_of(awaiting))
    assert reply.status == 200
    assert reply.body == {"text": f"Incident {awaiting.id} approved; the message updates shortly."}


class FailingReplies:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def ephemeral(self, url: str, text: str) -> None:
        raise self.error


@pytest.mark.parametrize("error", [TransientError("hooks: 503"), ConfigError("hooks: 404")])
def test_a_refusal_that_cannot_be_told_is_logged(awaiting: Incident, error: Exception) -> None:
    desk = desk_for(awaiting)
    desk.service.slack_replies = FailingReplies(error)
    reply = desk.slack_click(K.token_of(awaiting), user=K.OUTSIDER)
    assert reply.status == 200 and reply.headers["X-Loopbreaker-Refusal"] == "403"
    line = only(desk, "chat_refusal_not_delivered")
    assert line["reason"] == str(error)


@pytest.mark.parametrize(
    ("text", "event"),
    [
        ("pause upgrade", "remediation_pause"),
        ("resume", "remediation_resume"),
        ("status", "pause_status"),
    ],
)
def test_each_command_is_its_own_event(text: str, event: str) -> None:
    desk = D.make_desk()
    desk.slack_command(text)
    line = only(desk, event)
    assert (line["platform"], line["user"]) == ("slack", K.APPROVER)


def test_a_google_chat_command_names_the_email(certs: CertsServer) -> None:
    desk = D.make_desk(certs=certs)
    desk.chat_command("status")
    line = only(desk, "pause_status")
    assert (line["platform"], line["user"]) == ("google-chat", K.CHAT_APPROVER)


def test_without_an_injected_logger_the_lines_go_to_loopbreaker_chatops() -> None:
    records = D.Records()
    logger = logging.getLogger("loopbreaker.chatops")
    level = logger.level
    logger.addHandler(records)
    logger.setLevel(logging.DEBUG)  # whatever configured the process's logging before
    try:
        ChatActions(
            store=FakeStore(),
            queue=FakeQueue(),
            notifier=FakeNotifier(),
            clock=lambda: D.NOW,
            signing_key=None,
            approvers=frozenset(),
        ).handle({}, b"")
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)
    [line] = records.records
    assert line.name == "loopbreaker.chatops" and line.fields["event"] == "chat_action_refused"  # type: ignore[attr-defined]
