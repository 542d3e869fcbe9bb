"""Each entry point survives anything: random and hostile deliveries, redelivered shuffled."""

from __future__ import annotations

import base64
import json
import random
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import chatkit as K
from hypothesis import given
from hypothesis import strategies as st

from hostile.payloads import (
    BEARER,
    ENVELOPE_PATHS,
    Delivery,
    action_fields,
    alertmanager,
    am_alert,
    cloud_event,
    cloud_monitoring,
    counted,
    deliver_all,
    envelope,
    log_deliveries,
    mixtures,
    pubsub_push,
    signed,
    slack_click,
    state_of,
    valid_log_delivery,
)
from hostile.servers import (
    HOSTILE,
    JSON_VALUES,
    PROFILE,
    PROJECT,
    Lab,
    assert_no_traceback,
    b64,
    render,
    set_path,
)
from loopbreaker.incidents import State

# --- properties, one per entry point -------------------------------------------------------


def survives(server: Any, mixture: tuple[str, list[Delivery]], seed: int, key: str) -> None:
    """Every delivery answered without a 5xx that stays one, each valid entry counted once
    in the incident of ``key`` (after a shuffled, concurrent redelivery), no traceback."""
    rng = random.Random(seed)  # drawn up front: shuffles never change what is drawn
    _, deliveries = mixture
    deliver_all(server, deliveries, rng)
    valid = {d.valid for d in deliveries if d.valid}
    assert counted(server, key) == len(valid)
    assert_no_traceback(server)


@PROFILE
@given(mixture=mixtures(log_deliveries, valid_log_delivery), seed=st.integers(0, 2**32))
def test_on_log_entry_survives_anything(
    lab: Lab, mixture: tuple[str, list[Delivery]], seed: int
) -> None:
    run, _ = mixture
    survives(lab.log_entry, mixture, seed, f"{PROJECT}/-/pool/gke-valid{run}-p")


AM_PATHS: tuple[tuple[str, ...], ...] = (
    ("version",),
    ("alerts",),
    ("commonLabels",),
    ("alerts", "0"),
    ("alerts", "0", "labels"),
    ("alerts", "0", "labels", "node"),
    ("alerts", "0", "labels", "workload"),
    ("alerts", "0", "labels", "loopbreaker_signal"),
    ("alerts", "0", "annotations"),
    ("alerts", "0", "status"),
    ("alerts", "0", "startsAt"),
    ("alerts", "0", "endsAt"),
    ("alerts", "0", "fingerprint"),
)
CM_PATHS: tuple[tuple[str, ...], ...] = (
    ("incident",),
    ("incident", "incident_id"),
    ("incident", "state"),
    ("incident", "started_at"),
    ("incident", "ended_at"),
    ("incident", "resource"),
    ("incident", "resource", "labels"),
    ("incident", "metric"),
    ("incident", "metric", "type"),
    ("incident", "policy_user_labels"),
    ("incident", "policy_name"),
    ("incident", "summary"),
)


def _set_alert_path(
    document: dict[str, Any], path: tuple[str, ...], value: object
) -> dict[str, Any]:
    if path[:2] == ("alerts", "0") and len(path) > 2:
        out = json.loads(json.dumps(document))
        out["alerts"][0] = set_path(out["alerts"][0], path[2:], value)
        return out
    if path == ("alerts", "0"):
        out = json.loads(json.dumps(document))
        out["alerts"][0] = value
        return out
    return set_path(document, path, value)


@st.composite
def webhook_deliveries(draw: st.DrawFn, run: str) -> Delivery:
    kind = draw(st.sampled_from(["bytes", "json", "alertmanager", "cloud-monitoring", "push"]))
    if kind == "bytes":
        return Delivery(draw(st.binary(max_size=64)), BEARER)
    if kind == "json":
        return Delivery(render(draw(st.one_of(JSON_VALUES, HOSTILE))), BEARER)
    labels = {"alertname": "JobSetRestarting", "workload": f"hostile-{run}", "namespace": "ml"}
    am = alertmanager(am_alert(labels, f"h{draw(st.integers(0, 10**9))}"))
    cm = cloud_monitoring(f"hostile-{run}-{draw(st.integers(0, 10**9))}")
    if kind == "alertmanager":
        body = render(_set_alert_path(am, draw(st.sampled_from(AM_PATHS)), draw(HOSTILE)))
    elif kind == "cloud-monitoring":
        body = render(set_path(cm, draw(st.sampled_from(CM_PATHS)), draw(HOSTILE)))
    else:
        inner = draw(st.sampled_from([am, cm]))
        push = pubsub_push(render(inner), str(draw(st.integers(0, 10**9))))
        push = set_path(push, draw(st.sampled_from(ENVELOPE_PATHS)), draw(HOSTILE))
        body = render(push)
    return Delivery(body, BEARER)


def valid_alert(run: str, number: int, via_push: bool) -> Delivery:
    labels = {
        "alertname": "LoopbreakerJobSetRestartLoop",
        "loopbreaker_signal": "restart_loop",
        "workload": f"valid-{run}",
        "namespace": "ml",
        "cluster": "c1",
    }
    fingerprint = f"{run}{number:08x}"
    body = render(alertmanager(am_alert(labels, fingerprint, f"2026-05-20T07:5{number}:00Z")))
    if via_push:
        body = render(pubsub_push(body, str(int(fingerprint, 16))))
    return Delivery(body, BEARER, fingerprint)


@PROFILE
@given(mixture=mixtures(webhook_deliveries, valid_alert), seed=st.integers(0, 2**32))
def test_on_alertmanager_webhook_survives_anything(
    lab: Lab, mixture: tuple[str, list[Delivery]], seed: int
) -> None:
    run, _ = mixture
    survives(lab.webhook, mixture, seed, f"{PROJECT}/c1/workload/ml/valid-{run}")


SLACK_PATHS: tuple[tuple[str, ...], ...] = (
    ("type",),
    ("response_url",),
    ("user",),
    ("user", "id"),
    ("user", "username"),
    ("actions",),
    ("container",),
    ("container", "message_ts"),
)
CHAT_PATHS: tuple[tuple[str, ...], ...] = (
    ("type",),
    ("user",),
    ("user", "email"),
    ("user", "displayName"),
    ("common",),
    ("common", "invokedFunction"),
    ("common", "parameters"),
    ("common", "parameters", "action_request"),
    ("action",),
    ("action", "parameters"),
    ("message",),
    ("message", "name"),
)
TOKEN_FIELDS = (
    "v",
    "incident_id",
    "approval_id",
    "action",
    "node",
    "instance",
    "instance_id",
    "zone",
    "project",
    "expires_at",
)


@st.composite
def chat_deliveries(draw: st.DrawFn, lab: Lab) -> Delivery:
    token = draw(
        st.one_of(
            st.text(max_size=40),
            HOSTILE,
            st.builds(
                lambda name, value: signed(action_fields(lab.awaiting, **{name: value})),
                st.sampled_from(TOKEN_FIELDS),
                HOSTILE,
            ),
        )
    )
    kind = draw(st.sampled_from(["slack", "slack-body", "slack-header", "chat", "chat-token"]))
    if kind == "slack":
        payload = K.slack_payload(token)
        if draw(st.booleans()):
            payload = set_path(payload, draw(st.sampled_from(SLACK_PATHS)), draw(HOSTILE))
        return slack_click(token, payload=payload)
    if kind == "slack-body":
        headers, body = K.slack_request(draw(st.binary(max_size=64)), datetime.now(UTC))
        return Delivery(body, headers)
    if kind == "slack-header":
        click = slack_click(token)
        name = draw(st.sampled_from(["X-Slack-Signature", "X-Slack-Request-Timestamp"]))
        # Header bytes beyond ASCII arrive as latin-1 text.
        value = draw(
            st.text(
                alphabet=st.characters(max_codepoint=255, exclude_characters="\r\n"), max_size=30
            )
        )
        return Delivery(click.body, {**click.headers, name: value})
    event = json.loads(K.chat_event(token if isinstance(token, str) else "x"))
    event["common"]["parameters"]["action_request"] = token
    if draw(st.booleans()):
        event = set_path(event, draw(st.sampled_from(CHAT_PATHS)), draw(HOSTILE))
    body = render(event)
    if kind == "chat":
        bearer = lab.certs.token(K.AUDIENCE)
    else:
        header = base64.urlsafe_b64encode(render(draw(st.one_of(JSON_VALUES, HOSTILE)))).decode()
        bearer = draw(st.sampled_from([f"{header}.e30.c2ln", "not.a.jwt", header]))[:16384]
    return Delivery(body, {"Content-Type": "application/json", "Authorization": f"Bearer {bearer}"})


@PROFILE
@given(data=st.data(), seed=st.integers(0, 2**32))
def test_on_chat_action_survives_anything(lab: Lab, data: st.DataObject, seed: int) -> None:
    rng = random.Random(seed)  # drawn up front: shuffles never change what is drawn
    deliveries = data.draw(st.lists(chat_deliveries(lab), min_size=1, max_size=5))
    for delivery in deliveries:
        status, reply = lab.chat.click(delivery.body, delivery.headers)
        # 4xx, each naming the problem (gunicorn itself answers 431 to a header over 8 KiB).
        assert 400 <= status < 500, (status, reply[:300])
    rng.shuffle(deliveries)
    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(lambda d: lab.chat.click(d.body, d.headers)[0], deliveries))
    assert all(400 <= s < 500 for s in statuses), statuses
    # No hostile click decides anything.
    assert state_of(lab.chat, lab.awaiting) is State.AWAITING_APPROVAL
    assert_no_traceback(lab.chat)


REQUEST_PATHS: tuple[tuple[str, ...], ...] = (
    ("incident_id",),
    ("approval_id",),
    ("dedup_id",),
    ("action",),
    ("target",),
    ("target", "node"),
    ("target", "instance"),
    ("target", "instance_id"),
    ("target", "zone"),
    ("target", "project"),
    ("target", "host_known"),
)


@st.composite
def remediation_deliveries(draw: st.DrawFn, lab: Lab) -> Delivery:
    request = lab.awaiting.approval_request
    assert request is not None
    plausible = {
        "incident_id": lab.awaiting.id,
        "approval_id": request.id,
        "dedup_id": f"{lab.awaiting.id}:{request.id}",
        "action": request.action,
        "target": request.target.to_dict(),
    }
    kind = draw(st.sampled_from(["bytes", "json", "request"]))
    if kind == "bytes":
        data = draw(st.binary(max_size=64))
    elif kind == "json":
        data = render(draw(st.one_of(JSON_VALUES, HOSTILE)))
    else:
        data = render(set_path(plausible, draw(st.sampled_from(REQUEST_PATHS)), draw(HOSTILE)))
    message_id = str(draw(st.integers(0, 10**9)))
    return cloud_event(envelope(b64(data), message_id), message_id, binary=draw(st.booleans()))


@PROFILE
@given(data=st.data(), seed=st.integers(0, 2**32))
def test_on_remediation_request_survives_anything(lab: Lab, data: st.DataObject, seed: int) -> None:
    rng = random.Random(seed)  # drawn up front: shuffles never change what is drawn
    deliveries = data.draw(st.lists(remediation_deliveries(lab), min_size=1, max_size=5))
    for delivery in deliveries:
        status, reply = lab.remediation.post(delivery.body, delivery.headers)
        assert status == 200, (status, reply[:300])  # acknowledged, never retried
    rng.shuffle(deliveries)
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert set(pool.map(lambda d: lab.remediation.post(d.body, d.headers)[0], deliveries)) == {
            200
        }
    # Nothing was acted on: the incident still awaits its approval, with no plan.
    [incident] = [i for i in lab.remediation.incidents() if i.id == lab.awaiting.id]
    assert incident.state is State.AWAITING_APPROVAL and incident.remediation is None
    assert_no_traceback(lab.remediation)
