"""Slack Block Kit messages and Google Chat cards stay within the documented limits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from loopbreaker import incidents
from loopbreaker.approval.requests import APPROVE_ACTION, REJECT_ACTION, Target, verify_token
from loopbreaker.chat import notify
from loopbreaker.chat import render as R
from loopbreaker.chat.notify import ApprovalPrompt, Notification
from loopbreaker.incidents import DiagnosisRecord, Incident, IncidentKey, Policy, Scope, State

T0 = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)
KEY = b"render-test-signing-key-0123456789"
NODE = "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-x7k2"
HOST = "b7a3c1e2f4d5a6b7c8d9e0f1a2b3c4d5"
TARGET = Target(NODE, NODE, "5464165239889847435", "us-east5-a", "proj", HOST)
HUGE = "x" * 50_000


def prompt(token: str = "lb1.payload.signature") -> ApprovalPrompt:
    return ApprovalPrompt(
        token=token,
        request_id="apr-1",
        node=NODE,
        instance=NODE,
        instance_id=TARGET.instance_id,
        zone=TARGET.zone,
        project="proj",
        physical_host=HOST,
        expires_at="2026-05-20T08:30:00Z",
    )


def huge_notification(**overrides: Any) -> Notification:
    values: dict[str, Any] = {
        "incident_id": "inc-1",
        "title": HUGE,
        "text": HUGE,
        "severity": "WARNING",
        "state": "awaiting_approval",
        "verdict": HUGE,
        "summary": HUGE,
        "facts": tuple((f"label {i} {HUGE}", HUGE) for i in range(14)),
        "hosts": tuple({"host": HUGE, "nodes": HUGE, "failures": "2"} for _ in range(9)),
        "excerpts": (HUGE,) * 9,
        "queries": (HUGE,) * 9,
        "ticket": {"title": HUGE, "summary": HUGE},
        "recommendations": (HUGE,) * 9,
        "approval": prompt(),
        "approval_note": HUGE,
    }
    values.update(overrides)
    return Notification(**values)


def texts(block: Any) -> Iterator[tuple[str, str]]:
    """Every (owner key, text) in a block tree."""
    if isinstance(block, dict):
        for key, value in block.items():
            if isinstance(value, dict) and isinstance(value.get("text"), str):
                yield key, value["text"]
            yield from texts(value)
    elif isinstance(block, list):
        for item in block:
            yield from texts(item)


def test_slack_blocks_respect_the_block_kit_limits() -> None:
    message = R.slack_message(huge_notification())
    blocks = message["blocks"]
    assert len(message["text"]) <= R.SLACK_TEXT and len(blocks) <= R.SLACK_BLOCKS
    for block in blocks:
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= R.SLACK_HEADER
        if block["type"] == "section":
            if "text" in block:
                assert len(block["text"]["text"]) <= R.SLACK_SECTION
            fields = block.get("fields", [])
            assert len(fields) <= R.SLACK_FIELDS
            assert all(len(f["text"]) <= R.SLACK_FIELD for f in fields)
        if block["type"] == "context":
            assert all(len(e["text"]) <= R.SLACK_CONTEXT for e in block["elements"])
    [actions] = [b for b in blocks if b["type"] == "actions"]
    for button in actions["elements"]:
        assert len(button["text"]["text"]) <= R.SLACK_BUTTON_TEXT
        assert len(button["value"]) <= R.SLACK_BUTTON_VALUE
    confirm = actions["elements"][0]["confirm"]
    assert len(confirm["title"]["text"]) <= R.SLACK_CONFIRM_TITLE
    assert len(confirm["text"]["text"]) <= R.SLACK_CONFIRM_TEXT
    assert max(len(confirm[k]["text"]) for k in ("confirm", "deny")) <= R.SLACK_CONFIRM_BUTTON


def test_a_token_too_long_for_a_button_is_refused_not_cut() -> None:
    with pytest.raises(ValueError, match="too long"):
        R.slack_message(huge_notification(approval=prompt("t" * (R.SLACK_BUTTON_VALUE + 1))))


def test_google_chat_cards_stay_under_the_message_size() -> None:
    message = R.google_chat_message(huge_notification())
    assert len(json.dumps(message).encode()) <= R.CHAT_MESSAGE_BYTES
    card = message["cardsV2"][0]["card"]
    assert len(card["header"]["title"]) <= R.CHAT_TITLE
    for _, text in texts(card):
        assert len(text) <= R.CHAT_PARAGRAPH


def test_slack_and_chat_escape_markup_in_untrusted_text() -> None:
    hostile = replace(
        huge_notification(approval=None, approval_note=None),
        verdict="<!channel> & <https://evil|click>",
        summary="",
    )
    slack = json.dumps(R.slack_message(hostile))
    assert "<!channel>" not in slack and "&lt;!channel&gt; &amp;" in slack
    chat = json.dumps(R.google_chat_message(hostile))
    assert "<https://evil" not in chat and "&lt;https://evil" in chat


# --- a real incident through notify.render -------------------------------------------


def awaiting_incident() -> Incident:
    base = Incident(
        id="inc-render",
        key=IncidentKey(
            "proj", None, Scope.INSTANCE_GROUP, "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c"
        ),
        state=State.OPEN,
        opened_at=T0,
        updated_at=T0,
        first_event=T0,
        last_event=T0,
        last_signal_at=T0,
        settle_at=T0,
        signal_count=4,
        counts={"host_error": 2, "termination": 2},
        clusters=("tpu-cluster-prod",),
        signal_revision=4,
    )
    record = DiagnosisRecord(
        at=T0,
        root_cause="faulty_host",
        remediation_path="isolate_host",
        requires_approval=True,
        summary="Host failed twice.",
        suspect_hosts=(HOST,),
        signal_revision=4,
        queries=0,
        document={
            "restart_increase": 2.0,
            "restart_total": 8.0,
            "suspect_hosts": [{"host": HOST, "nodes": [NODE], "failures": 2, "zone": "us-east5-a"}],
            "steps": [{"queries": [{"language": "promql", "text": "kube_jobset_restarts"}]}],
            "remediation": {"actions": ["cordon", "drain"]},
            "ticket_draft": {"title": "Ticket", "summary": "s", "excerpts": ["kernel: BUG"]},
        },
        ticket_draft={"title": "Ticket", "summary": "s", "physical_host": HOST},
        target=TARGET,
    )
    policy = Policy(stale_after=timedelta(hours=6), approval_ttl=timedelta(minutes=30))
    done = incidents.apply_diagnosis(base, record, now=T0, policy=policy)
    assert done is not None
    return done


def test_an_isolate_host_incident_gets_signed_buttons_with_a_confirm_naming_the_target() -> None:
    incident = awaiting_incident()
    message = R.slack_message(notify.render(incident, signing_key=KEY))
    [actions] = [b for b in message["blocks"] if b["type"] == "actions"]
    approve, reject = actions["elements"]
    assert (approve["action_id"], reject["action_id"]) == (APPROVE_ACTION, REJECT_ACTION)
    assert approve["style"] == "danger" and approve["value"] == reject["value"]
    request = verify_token(approve["value"], KEY, T0)
    assert (request.incident_id, request.instance_id, request.node) == (
        incident.id,
        TARGET.instance_id,
        NODE,
    )
    confirm = approve["confirm"]["text"]["text"]
    assert NODE in confirm and HOST in confirm and TARGET.instance_id in confirm
    body = json.dumps(message)
    for expected in (
        "faulty_host -&gt; isolate_host",  # mrkdwn-escaped
        "+2 (lifetime 8)",
        "2 host_error",
        HOST,
        "kube_jobset_restarts",
        "kernel: BUG",
        "Ticket",
    ):
        assert expected in body, expected
    card = R.google_chat_message(notify.render(incident, signing_key=KEY))
    functions = [
        w["buttonList"]["buttons"][i]["onClick"]["action"]["function"]
        for s in card["cardsV2"][0]["card"]["sections"]
        for w in s["widgets"]
        if "buttonList" in w
        for i in (0, 1)
    ]
    assert functions == [APPROVE_ACTION, REJECT_ACTION]


def test_a_card_recommends_only_what_the_approval_covers() -> None:
    incident = awaiting_incident()
    assert incident.diagnosis is not None
    other_node = "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-9dzm"
    document = {
        **incident.diagnosis.document,
        "suspect_hosts": [
            {"host": HOST, "nodes": [NODE], "failures": 2},
            {"host": "another-host", "nodes": [other_node], "failures": 2},
        ],
        # The diagnosis advises on every suspect; the approval covers one VM.
        "remediation": {
            "path": "isolate_host",
            "actions": [f"Delete the GCE VM(s) {other_node}, {NODE} so the group recreates them."],
        },
    }
    incident = replace(incident, diagnosis=replace(incident.diagnosis, document=document))
    n = notify.render(incident, signing_key=KEY)
    deletes = [r for r in n.recommendations if "VM" in r and "Other suspect" not in r]
    assert deletes and all(NODE in r and other_node not in r for r in deletes)
    assert TARGET.instance_id in " ".join(deletes)
    [others] = [r for r in n.recommendations if r.startswith("Other suspect")]
    assert other_node in others and "not part of this approval" in others
    for message in (R.slack_message(n), R.google_chat_message(n)):
        body = json.dumps(message)
        assert f"Delete the GCE VM(s) {other_node}" not in body
    assert n.approval is not None and n.approval.instance == NODE


def test_without_a_signing_key_there_are_no_buttons_and_the_message_says_approvals_are_off() -> (
    None
):
    n = notify.render(
        awaiting_incident(), approvals_off="LOOPBREAKER_ACTION_SIGNING_KEY is not set"
    )
    assert n.approval is None and n.approval_note is not None
    assert "Approvals are off" in n.approval_note and "SIGNING_KEY" in n.approval_note
    message = R.slack_message(n)
    assert not [b for b in message["blocks"] if b["type"] == "actions"]
    assert "Approvals are off" in json.dumps(message)


def test_low_risk_verdicts_get_recommendations_and_no_buttons() -> None:
    incident = awaiting_incident()
    assert incident.diagnosis is not None
    low = replace(
        incident,
        state=State.DIAGNOSED,
        approval_request=None,
        diagnosis=replace(
            incident.diagnosis, remediation_path="avoid_preemption", requires_approval=False
        ),
    )
    message = R.slack_message(notify.render(low, signing_key=KEY))
    assert not [b for b in message["blocks"] if b["type"] == "actions"]
    assert "*Recommended*" in json.dumps(message)
