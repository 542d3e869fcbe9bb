"""The seven payloads of issue 22 and other named cases: a 4xx or an ack, never a 5xx."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hostile.payloads import (
    BEARER,
    PREEMPTION_IN_BAD_CLUSTER,
    action_fields,
    alertmanager,
    am_alert,
    as_post,
    cloud_event,
    cloud_monitoring,
    envelope,
    host_error_entry,
    pubsub_push,
    refusals,
    signed,
    slack_click,
    state_of,
    valid_log_delivery,
)
from hostile.servers import (
    PUBSUB,
    SOURCE,
    Lab,
    assert_no_traceback,
    b64,
    log_lines,
    raw,
    render,
)
from loopbreaker.incidents import State
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.settings.load import load_settings


def test_1_deep_nesting_is_acknowledged_or_refused_everywhere(lab: Lab) -> None:
    deep_data = b64(b"[" * 1000 + b"]" * 1000)
    for server, event in (
        (lab.log_entry, "entry_rejected"),
        (lab.remediation, "remediation_request_rejected"),
    ):
        server.new_log()
        for binary in (False, True):
            status, _ = server.post(
                **as_post(cloud_event(envelope(deep_data, "11"), "11", binary=binary))
            )
            assert status == 200  # acknowledged: Pub/Sub must not redeliver it
        lines = refusals(server, event)
        assert len(lines) == 2 and all("nests too deeply" in line["reason"] for line in lines)
    # A Cloud Monitoring notification through a Pub/Sub push channel.
    status, reply = lab.webhook.post(render(pubsub_push(b"[" * 1000 + b"]" * 1000)), BEARER)
    assert status == 400 and "nests too deeply" in json.loads(reply)["error"]
    # The structured event itself too deep for functions-framework's own decoding.
    body = (
        b'{"specversion":"1.0","type":"'
        + PUBSUB.encode()
        + b'","source":"s","id":"12","data":'
        + b"[" * 5000
        + b"]" * 5000
        + b"}"
    )
    status, reply = lab.log_entry.post(body, {"Content-Type": "application/cloudevents+json"})
    assert status == 400 and b"nests too deeply" in reply
    assert_no_traceback(lab.log_entry, lab.remediation, lab.webhook)


def test_2_a_4301_digit_number_is_a_400(lab: Lab) -> None:
    status, reply = lab.webhook.post(b"1" * 4301, BEARER)
    assert status == 400 and "number too long" in json.loads(reply)["error"]
    lab.log_entry.new_log()
    status, _ = lab.log_entry.post(
        **as_post(cloud_event(envelope(b64(b"1" * 4301), "21"), "21", binary=True))
    )
    assert status == 200
    [line] = refusals(lab.log_entry, "entry_rejected")
    assert "number too long" in line["reason"] and line["message_id"] == "21"
    assert_no_traceback(lab.log_entry, lab.webhook)


def test_3_lone_surrogates_in_identifiers_are_refused_not_hashed(lab: Lab) -> None:
    good = host_error_entry("ok", "gke-c-p-1a2b3c4d-0001")
    bad_insert = b64(render({**good, "insertId": "i\ud800"}))
    lab.log_entry.new_log()
    assert (
        lab.log_entry.post(**as_post(cloud_event(envelope(bad_insert, "31"), "31", binary=True)))[0]
        == 200
    )
    # The messageId of a structured event, which functions-framework decodes itself.
    bad_id = cloud_event(envelope(b64(render(good)), "m\ud800"), "32", binary=False)
    assert lab.log_entry.post(**as_post(bad_id))[0] == 200
    lines = refusals(lab.log_entry, "entry_rejected")
    assert len(lines) == 2
    assert "lone surrogate \\ud800 at $.insertId" in lines[0]["reason"]
    assert "lone surrogate \\ud800 at $.message.messageId" in lines[1]["reason"]
    # A Cloud Monitoring push with the same messageId.
    status, reply = lab.webhook.post(
        render(pubsub_push(render(cloud_monitoring("i-1")), "m\ud800")), BEARER
    )
    assert status == 400
    assert "lone surrogate \\ud800 at $.message.messageId" in json.loads(reply)["error"]
    assert_no_traceback(lab.log_entry, lab.webhook)


def test_4_lone_surrogates_in_stored_fields_never_reach_the_store(lab: Lab) -> None:
    lab.log_entry.new_log()
    data = b64(render(PREEMPTION_IN_BAD_CLUSTER))
    assert (
        lab.log_entry.post(**as_post(cloud_event(envelope(data, "41"), "41", binary=True)))[0]
        == 200
    )
    [line] = refusals(lab.log_entry, "entry_rejected")
    assert "lone surrogate \\ud800 at $.resource.labels.cluster_name" in line["reason"]
    labels = {"alertname": "KubeNodeNotReady", "node": "n\ud800", "cluster": "c1"}
    status, reply = lab.webhook.post(render(alertmanager(am_alert(labels, "fp41"))), BEARER)
    assert status == 400 and "lone surrogate" in json.loads(reply)["error"]
    assert all("\\ud800" not in str(i.key) for i in lab.log_entry.incidents())
    assert_no_traceback(lab.log_entry, lab.webhook)


def test_5_lone_surrogates_in_alert_identities_are_a_400(lab: Lab) -> None:
    labels = {"alertname": "JobSetRestarting", "workload": "train", "namespace": "ml"}
    for body in (
        render(alertmanager(am_alert(labels, "f\ud800"))),
        render(cloud_monitoring("i\udfff")),
    ):
        status, reply = lab.webhook.post(body, BEARER)
        assert status == 400 and "lone surrogate" in json.loads(reply)["error"]
    assert_no_traceback(lab.webhook)


@pytest.mark.parametrize("expires_at", ["soon", "2026-02-30T00:00:00Z", raw("1e-22")])
def test_6_a_signed_request_with_a_bad_expiry_is_a_400(lab: Lab, expires_at: str) -> None:
    click = slack_click(signed(action_fields(lab.awaiting, expires_at=expires_at)))
    status, reply = lab.chat.click(click.body, click.headers)
    assert status == 400 and "expires_at" in json.loads(reply)["text"]
    assert state_of(lab.chat, lab.awaiting) is State.AWAITING_APPROVAL
    assert_no_traceback(lab.chat)


def test_7_a_signed_request_whose_incident_id_holds_a_lone_surrogate_is_a_400(lab: Lab) -> None:
    click = slack_click(signed(action_fields(lab.awaiting, incident_id="inc-\ud800")))
    status, reply = lab.chat.click(click.body, click.headers)
    assert status == 400 and "incident_id is not valid Unicode" in json.loads(reply)["text"]
    assert state_of(lab.chat, lab.awaiting) is State.AWAITING_APPROVAL
    assert_no_traceback(lab.chat)


def test_credentials_that_are_not_text_are_a_401(lab: Lab) -> None:
    body = render(alertmanager())
    status, _ = lab.webhook.post(
        body, {"Content-Type": "application/json"}, "/?auth_token=%ff%ed%a0%80"
    )
    assert status == 401
    # Header bytes beyond ASCII (latin-1 on the wire) in Slack's signature.
    click = slack_click("lb1.x.y")
    status, reply = lab.chat.post(click.body, {**click.headers, "X-Slack-Signature": "v0=\xff\xe9"})
    assert status == 401 and "do not verify" in json.loads(reply)["text"]
    assert_no_traceback(lab.webhook, lab.chat)


def test_a_transient_failure_is_a_5xx_for_the_retry_and_no_traceback(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    import functions_framework
    from fakes import FakeStore

    from loopbreaker.app.bootstrap import build_responder
    from loopbreaker.errors import TransientError

    monkeypatch.setenv("LOOPBREAKER_STORE", f"sqlite:{tmp_path / 'incidents.sqlite'}")
    monkeypatch.setenv("LOOPBREAKER_LIVE_SOURCES", "false")
    client = functions_framework.create_app("on_log_entry", str(SOURCE), "cloudevent").test_client()
    main = sys.modules["main"]
    try:
        store = FakeStore(fail={"ingest": [TransientError("Firestore unavailable")]})
        main._built[build_responder] = build_responder(load_settings({}), store=store)
        delivery = valid_log_delivery("transient", 1, binary=True)
        first = client.post("/", data=delivery.body, headers=delivery.headers)
        assert first.status_code == 500 and b"Firestore unavailable" in first.data
        assert client.post("/", data=delivery.body, headers=delivery.headers).status_code == 200
        err = capsys.readouterr().err
        assert "Traceback" not in err
        # Flask logs an escaped exception with its traceback: there is none.
        assert [r.getMessage() for r in caplog.records if r.exc_info] == []
        [retry] = [line for line in log_lines(err) if line.get("event") == "entry_retry"]
        assert retry["severity"] == "ERROR" and "Firestore unavailable" in retry["reason"]
        assert len(store.incidents) == 1
    finally:
        main._built.clear()


def test_a_bug_in_loopbreaker_is_not_passed_off_as_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The catch-all for what functions-framework cannot read stops at our own code."""
    import functions_framework

    from loopbreaker.app.bootstrap import build_responder

    monkeypatch.setenv("LOOPBREAKER_STORE", f"sqlite:{tmp_path / 'incidents.sqlite'}")
    monkeypatch.setenv("LOOPBREAKER_LIVE_SOURCES", "false")
    client = functions_framework.create_app("on_log_entry", str(SOURCE), "cloudevent").test_client()
    main = sys.modules["main"]
    try:
        responder = build_responder(load_settings({}))

        def broken(delivery: object) -> None:
            raise KeyError("a bug")

        monkeypatch.setattr(responder, "handle_delivery", broken)
        main._built[build_responder] = responder
        delivery = valid_log_delivery("bug", 1, binary=True)
        assert client.post("/", data=delivery.body, headers=delivery.headers).status_code == 500
        # Flask's own "Exception on /" record, with the traceback.
        [record] = [r for r in caplog.records if r.exc_info and r.exc_info[0] is KeyError]
        assert "Exception on /" in record.getMessage()
    finally:
        main._built.clear()


# The real stores (the recording fake in tests/fakes.py keeps Python strings as they are).
@pytest.mark.parametrize("store_factory", ["sqlite", "firestore"], indirect=True)
def test_stores_keep_every_text_valid_utf8_whatever_a_caller_hands_them(
    store_factory: Callable[[], Any], tmp_path: Path
) -> None:
    """Defence in depth below the decoders: a lone surrogate that reaches a store through
    its Python API is escaped the one consistent way, never written raw, never a crash."""
    from loopbreaker import incidents
    from loopbreaker.incidents import Arrival, Policy
    from loopbreaker.model import HostFailureRecord, Signal, SignalKind

    store = store_factory()
    at = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)
    signal = Signal(
        kind=SignalKind.JOB_RESTARTING,
        timestamp=at,
        project="p/\ud800",
        cluster="c\ud800",
        namespace="ml",
        workload="w\udfff",
        node="n\ud800",
        insert_id="i\ud800",
        log_name="projects/p/logs/events",
    )
    key = incidents.key_for(signal)
    assert key is not None and str(key) == "p%2F\\ud800/c\\ud800/workload/ml/w\\udfff"
    entry = {"insertId": "i\ud800", "logName": signal.log_name, "timestamp": "x"}
    arrival = Arrival(
        key=key,
        signal=signal,
        event_time=at,
        now=at,
        entry_id=incidents.entry_id(entry),
        message_id="m\ud800",
        policy=Policy(),
    )
    first = store.ingest(arrival)
    assert first.created and first.incident is not None
    assert store.ingest(arrival).duplicate  # the same escaped ids: recognised again
    stored = store.get(first.incident.id)
    assert stored is not None and stored.key == key
    record = HostFailureRecord("h\ud800", "n\ud800", at, first.incident.id)
    store.record_host_failures([record])
    [found] = store.host_history(["h\ud800"])
    assert found.host == "h\\ud800"
    # Ids no store can hold are incidents that do not exist.
    for forged in ("inc-\ud800", "a/b", "__x__", ""):
        assert store.get(forged) is None
        assert store.update(forged, lambda i: i).incident is None
    if isinstance(store, SqliteStore):
        import sqlite3

        raw = sqlite3.connect(store.path)
        raw.text_factory = bytes
        for table in ("incidents", "signals", "dedup", "host_failures"):
            for row in raw.execute(f"SELECT * FROM {table}"):
                for column in row:
                    if isinstance(column, bytes):
                        column.decode("utf-8")  # never a raw surrogate
        raw.close()
