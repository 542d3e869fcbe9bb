"""The Responder with recording fakes and an injected clock: storms, dedup, settle, expiry."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fakes import FakeClock, FakeEvidence, FakeNotifier, FakeStore

from loopbreaker import logs
from loopbreaker.diagnosis import engine
from loopbreaker.diagnosis.evidence import QueryBudget
from loopbreaker.errors import InvalidTelemetry, TransientError
from loopbreaker.incidents import State
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.model import (
    Context,
    Diagnosis,
    Evidence,
    Remediation,
    RemediationPath,
    Risk,
    RootCause,
)
from loopbreaker.responder.service import Responder, SettleReport, Status
from loopbreaker.settings.load import Settings
from loopbreaker.signals.envelope import Delivery

T0 = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)
PROJECT, CLUSTER, POOL = "proj", "tpu-cluster-prod", "spot-pool"
SETTINGS = Settings(settle_time=timedelta(seconds=60), stale_after=timedelta(hours=6))


def ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def preemption(i: int, at: datetime) -> dict[str, Any]:
    return {
        "insertId": f"pre-{i}",
        "logName": f"projects/{PROJECT}/logs/container.googleapis.com%2Fnodepool-events",
        "resource": {
            "type": "gke_nodepool",
            "labels": {"project_id": PROJECT, "cluster_name": CLUSTER, "node_pool_name": POOL},
        },
        "timestamp": ts(at),
        "jsonPayload": {"message": f"PreemptionEvent: Node 'gke-n-{i}' was preempted."},
    }


def host_error(insert_id: str, node: str, at: datetime) -> dict[str, Any]:
    """The Compute Engine system-event audit entry (reference fixture, renamed)."""
    return {
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "status": {"message": "Instance terminated by Compute Engine."},
            "methodName": "compute.instances.hostError",
            "resourceName": f"projects/{PROJECT}/zones/us-east1-d/instances/{node}",
        },
        "insertId": insert_id,
        "resource": {
            "type": "gce_instance",
            "labels": {"zone": "us-east1-d", "project_id": PROJECT, "instance_id": "207"},
        },
        "timestamp": ts(at),
        "logName": f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Fsystem_event",
    }


@pytest.fixture(autouse=True)
def json_logs() -> Iterator[None]:
    logs.configure("INFO")
    yield


def responder(
    store: IncidentStore,
    clock: FakeClock,
    *,
    notifier: FakeNotifier | None = None,
    evidence: FakeEvidence | None = None,
    settings: Settings = SETTINGS,
    diagnose: Any = engine.diagnose,
) -> Responder:
    return Responder(
        settings=settings,
        store=store,
        notifier=notifier or FakeNotifier(),
        evidence=evidence or FakeEvidence(),
        clock=clock,
        diagnose=diagnose,
    )


def error_lines(text: str) -> list[dict[str, Any]]:
    return [d for d in (json.loads(line) for line in text.splitlines()) if d["severity"] == "ERROR"]


def test_a_storm_is_one_incident_one_diagnosis_one_notification(store: IncidentStore) -> None:
    clock = FakeClock(T0)
    notifier = FakeNotifier()
    service = responder(store, clock, notifier=notifier)
    for i in range(256):
        clock.set(T0 + timedelta(milliseconds=900 * i))
        outcome = service.handle_entry(f"m{i}", preemption(i, clock.now))
        assert outcome.status is Status.ACCEPTED
    assert service.settle(clock.now + timedelta(seconds=59)).diagnosed == []  # debounce
    report = service.settle(clock.now + timedelta(seconds=60))
    again = service.settle(clock.now + timedelta(minutes=5))
    [incident] = store.list_incidents()
    assert report.diagnosed == [incident.id] and again.diagnosed == []
    assert incident.signal_count == 256 and incident.counts == {"preemption": 256}
    assert incident.state is State.DIAGNOSED and incident.diagnoses == 1
    assert incident.diagnosis is not None
    assert incident.diagnosis.root_cause == RootCause.SPOT_PREEMPTION.value
    assert len(notifier.posted) == 1 and incident.notifications == 1
    assert notifier.posted[0].incident_id == incident.id
    assert service.stats["accepted"] == 256 and service.stats["diagnosed"] == 1


def test_redeliveries_are_counted_and_change_nothing(store: IncidentStore) -> None:
    clock = FakeClock(T0)
    service = responder(store, clock)
    entry = preemption(1, T0)
    first = service.handle_entry("m1", entry)
    before = store.get(first.incident_id or "")
    same_message = service.handle_entry("m1", preemption(2, T0))  # same messageId
    same_entry = service.handle_entry("m2", dict(entry))  # republished entry
    assert (same_message.status, same_entry.status) == (Status.DUPLICATE, Status.DUPLICATE)
    assert store.get(first.incident_id or "") == before
    assert service.stats["duplicate"] == 2


def test_bad_input_is_one_error_line_naming_the_message(
    store: IncidentStore, capsys: pytest.CaptureFixture[str]
) -> None:
    service = responder(store, FakeClock(T0))
    outcome = service.handle_entry("1234", {"textPayload": "hello"})
    assert outcome.status is Status.REJECTED
    [line] = error_lines(capsys.readouterr().err)
    assert line["message_id"] == "1234"
    assert "not a LogEntry" in line["reason"] and "1234" in line["message"]
    assert line["logging.googleapis.com/labels"] == {"message_id": "1234"}
    assert store.list_incidents() == [] and service.stats["rejected"] == 1


def test_unrecognized_entries_are_ignored(store: IncidentStore) -> None:
    service = responder(store, FakeClock(T0))
    entry = preemption(1, T0)
    entry["jsonPayload"] = {"message": "node pool resized"}
    assert service.handle_entry("m1", entry).status is Status.IGNORED
    assert store.list_incidents() == []


def unkeyed(kind: str) -> dict[str, Any]:
    """An entry that concerns no incident: no failure signature, or naming nothing."""
    entry = preemption(1, T0)
    if kind == "unrecognized":
        entry["jsonPayload"] = {"message": "node pool resized"}
    else:
        entry["resource"] = {"type": "k8s_cluster", "labels": {"cluster_name": CLUSTER}}
        entry["jsonPayload"] = {"message": "PreemptionEvent: Node was preempted."}
    return entry


@pytest.mark.parametrize("kind", ["unrecognized", "names-nothing"])
def test_an_ignored_entry_delivered_again_is_a_duplicate(
    store: IncidentStore, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    service = responder(store, FakeClock(T0))
    entry = unkeyed(kind)
    ignored = service.handle_entry("m1", entry)
    assert ignored.status is Status.IGNORED
    assert ignored.reason == (
        "no known failure signature"
        if kind == "unrecognized"
        else "names no workload, node pool, host or node"
    )
    again = service.handle_entry("m1", entry)  # Pub/Sub redelivers the message
    republished = service.handle_entry("m2", dict(entry))  # same entry, new messageId
    same_message = service.handle_entry("m1", {**entry, "insertId": "other"})
    assert [o.status for o in (again, republished, same_message)] == [Status.DUPLICATE] * 3
    assert (service.stats["ignored"], service.stats["duplicate"]) == (1, 3)
    assert store.list_incidents() == []
    events = [json.loads(line).get("event") for line in capsys.readouterr().err.splitlines()]
    assert events == ["entry_ignored"] + ["entry_duplicate"] * 3


def test_a_transient_store_error_on_an_ignored_entry_propagates() -> None:
    store = FakeStore(fail={"remember": [TransientError("contention")]})
    service = responder(store, FakeClock(T0))
    entry = unkeyed("unrecognized")
    with pytest.raises(TransientError):
        service.handle_entry("m1", entry)
    assert service.stats["ignored"] == 0
    assert service.handle_entry("m1", entry).status is Status.IGNORED
    assert service.handle_entry("m1", entry).status is Status.DUPLICATE


def test_a_transient_store_error_propagates_so_the_delivery_is_retried() -> None:
    store = FakeStore(fail={"ingest": [TransientError("contention")]})
    service = responder(store, FakeClock(T0))
    with pytest.raises(TransientError):
        service.handle_entry("m1", preemption(1, T0))
    assert service.handle_entry("m1", preemption(1, T0)).status is Status.ACCEPTED


def test_a_retried_delivery_logs_one_structured_line_naming_the_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = FakeStore(fail={"ingest": [TransientError("Firestore unavailable")]})
    service = responder(store, FakeClock(T0))
    delivery = Delivery(message_id="m-77", entry=preemption(1, T0))
    with pytest.raises(TransientError):
        service.handle_delivery(delivery)
    [line] = error_lines(capsys.readouterr().err)
    assert line["event"] == "entry_retry"
    assert line["message_id"] == "m-77"
    assert "Firestore unavailable" in line["reason"]


def test_new_signals_re_trigger_the_diagnosis_and_update_the_message(
    store: IncidentStore,
) -> None:
    clock = FakeClock(T0)
    notifier = FakeNotifier()
    service = responder(store, clock, notifier=notifier)
    service.handle_entry("m1", preemption(1, T0))
    service.settle(clock.advance(seconds=61))
    clock.advance(minutes=5)
    late = service.handle_entry("m2", preemption(2, T0 + timedelta(minutes=4)))
    assert service.settle(clock.advance(seconds=30)).diagnosed == []
    assert service.settle(clock.advance(seconds=31)).diagnosed == [late.incident_id]
    [incident] = store.list_incidents()
    assert incident.diagnoses == 2 and incident.signal_count == 2
    assert [n.incident_id for n in notifier.posted] == [incident.id] * 2
    assert notifier.posted[0].fingerprint != notifier.posted[1].fingerprint
    assert len(notifier.messages) == 1  # one message, updated in place


def test_queries_are_bounded_and_counted(store: IncidentStore) -> None:
    evidence = FakeEvidence(queries=25)
    clock = FakeClock(T0)
    service = responder(
        store, clock, evidence=evidence, settings=replace(SETTINGS, query_budget=10)
    )
    service.handle_entry("m1", preemption(1, T0))
    service.settle(clock.advance(seconds=61))
    [incident] = store.list_incidents()
    assert incident.queries_spent == 10
    assert evidence.budgets[0].spent == 10 and evidence.budgets[0].refused == 1


def needs_approval(context: Context, evidence: Evidence) -> Diagnosis:
    base = engine.diagnose(context, evidence)
    return replace(
        base,
        root_cause=RootCause.FAULTY_HOST,
        remediation=Remediation(RemediationPath.ISOLATE_HOST, Risk.HIGH, True, ("cordon",)),
    )


def test_a_stale_approval_request_expires_and_the_message_says_so(
    store: IncidentStore,
) -> None:
    clock = FakeClock(T0)
    notifier = FakeNotifier()
    service = responder(store, clock, notifier=notifier, diagnose=needs_approval)
    service.handle_entry("m1", host_error("h1", "gke-c-p-1a2b3c4d-0001", T0))
    service.settle(clock.advance(seconds=61))
    [asked] = store.list_incidents()
    assert asked.state is State.AWAITING_APPROVAL
    assert service.settle(clock.advance(hours=5)).expired == []
    report = service.settle(clock.advance(hours=1))
    [expired] = store.list_incidents()
    assert report.expired == [expired.id] and expired.state is State.EXPIRED
    assert [a.to_state for a in expired.audit] == [
        State.OPEN,
        State.DIAGNOSED,
        State.AWAITING_APPROVAL,
        State.EXPIRED,
    ]
    assert [n.state for n in notifier.posted] == ["awaiting_approval", "expired"]


def test_a_host_that_failed_in_an_earlier_incident_is_repeatedly_failing(
    store: IncidentStore,
) -> None:
    clock = FakeClock(T0)
    service = responder(store, clock)
    node = "gke-c-p-1a2b3c4d-0001"
    service.handle_entry("m1", host_error("h1", node, T0))
    service.settle(clock.advance(seconds=61))
    [yesterday] = store.list_incidents()
    assert yesterday.diagnosis and yesterday.diagnosis.root_cause == RootCause.HOST_ERROR.value
    today = T0 + timedelta(days=1)
    clock.set(today)
    service.handle_entry("m2", host_error("h2", node, today))
    service.settle(clock.advance(seconds=61))
    latest = max(store.list_incidents(), key=lambda i: i.opened_at)
    assert latest.id != yesterday.id
    assert latest.diagnosis and latest.diagnosis.root_cause == RootCause.FAULTY_HOST.value
    assert latest.diagnosis.suspect_hosts == (node,)


def test_one_failing_diagnosis_does_not_stop_the_others(
    store: IncidentStore, capsys: pytest.CaptureFixture[str]
) -> None:
    class Flaky(FakeEvidence):
        def collect(self, context: Context, budget: QueryBudget) -> Evidence:
            if not self.contexts:
                self.contexts.append(context)
                raise TransientError("Prometheus 503: bad gateway")
            return super().collect(context, budget)

    clock = FakeClock(T0)
    service = responder(store, clock, evidence=Flaky())
    service.handle_entry("m1", preemption(1, T0))
    other = preemption(2, T0)
    other["resource"]["labels"]["node_pool_name"] = "other-pool"
    service.handle_entry("m2", other)
    report = service.settle(clock.advance(seconds=61))
    assert len(report.failed) == 1 and len(report.diagnosed) == 1
    assert "bad gateway" in error_lines(capsys.readouterr().err)[0]["message"]
    assert service.settle(clock.advance(minutes=3)).diagnosed == []  # still leased
    retried = service.settle(clock.advance(minutes=6))  # after the diagnosis lease
    assert retried.diagnosed == [report.failed[0]["incident_id"]]


def test_the_sink_timestamp_stands_in_for_a_missing_entry_timestamp(
    store: IncidentStore,
) -> None:
    clock = FakeClock(T0 + timedelta(hours=3))
    service = responder(store, clock)
    entry = preemption(1, T0)
    del entry["timestamp"]
    delivery = Delivery(
        "m1", entry, "2026-05-20T11:00:00Z", {"logging.googleapis.com/timestamp": ts(T0)}
    )
    service.handle_delivery(delivery)
    [incident] = store.list_incidents()
    assert incident.first_event == T0


def test_log_lines_are_cloud_logging_json(capsys: pytest.CaptureFixture[str]) -> None:
    log = logs.get_logger("test")
    logs.event(
        log,
        logging.WARNING,
        "hello",
        labels={"incident_id": "inc-1", "node": None},
        cluster_size=3,
    )
    [line] = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert record["severity"] == "WARNING" and record["message"] == "hello"
    assert record["logging.googleapis.com/labels"] == {"incident_id": "inc-1"}
    assert record["cluster_size"] == 3 and "time" in record


def test_a_failed_notification_is_retried_by_a_later_settle(store: IncidentStore) -> None:
    clock = FakeClock(T0)
    notifier = FakeNotifier(fail=[TransientError("chat API 503")])
    service = responder(store, clock, notifier=notifier)
    service.handle_entry("m1", preemption(1, T0))
    first = service.settle(clock.advance(seconds=61))
    [incident] = store.list_incidents()
    assert first.failed and "chat API 503" in first.failed[0]["reason"]
    assert incident.state is State.DIAGNOSED and incident.notifications == 0
    assert service.settle(clock.advance(seconds=30)).notified == []
    assert service.settle(clock.advance(seconds=31)).notified == [incident.id]
    assert len(notifier.posted) == 1


def test_bad_input_stops_the_retries_until_a_new_signal_arrives(
    store: IncidentStore, capsys: pytest.CaptureFixture[str]
) -> None:
    class Broken(FakeEvidence):
        def collect(self, context: Context, budget: QueryBudget) -> Evidence:
            self.contexts.append(context)
            if len(self.contexts) == 1:
                raise InvalidTelemetry("metrics.om line 3: bad sample")
            return self.evidence

    clock = FakeClock(T0)
    evidence = Broken()
    service = responder(store, clock, evidence=evidence)
    service.handle_entry("m1", preemption(1, T0))
    capsys.readouterr()
    report = service.settle(clock.advance(seconds=61))
    [incident] = store.list_incidents()
    assert report.failed == [
        {"incident_id": incident.id, "reason": "metrics.om line 3: bad sample"}
    ]
    [line] = error_lines(capsys.readouterr().err)
    assert line["event"] == "settle_failed" and line["error"] == "InvalidTelemetry"
    assert line["retry"] is False and "bad sample" in line["message"]
    assert incident.state is State.OPEN and incident.settle_at is None
    assert "InvalidTelemetry: metrics.om line 3: bad sample" in incident.audit[-1].note
    # Not retried lease after lease.
    assert service.settle(clock.advance(minutes=6)).failed == []
    assert service.settle(clock.advance(hours=1)).failed == []
    assert len(evidence.contexts) == 1
    # A new signal makes it due again, and it is diagnosed.
    service.handle_entry("m2", preemption(2, T0 + timedelta(minutes=1)))  # same storm
    again = service.settle(clock.advance(seconds=61))
    assert again.diagnosed == [incident.id] and again.failed == []


def test_a_failed_expiry_notification_is_retried_without_re_diagnosing(
    store: IncidentStore,
) -> None:
    clock = FakeClock(T0)
    notifier = FakeNotifier()
    evidence = FakeEvidence()
    service = responder(store, clock, notifier=notifier, evidence=evidence, diagnose=needs_approval)
    service.handle_entry("m1", host_error("h1", "gke-c-p-1a2b3c4d-0001", T0))
    service.settle(clock.advance(seconds=61))
    notifier.fail.append(TransientError("chat API 503"))
    report = service.settle(clock.advance(hours=6))
    [expired] = store.list_incidents()
    assert report.expired == [expired.id] and report.notified == []
    assert report.failed and "chat API 503" in report.failed[0]["reason"]
    assert expired.state is State.EXPIRED and expired.settle_at is not None
    retried = service.settle(clock.advance(seconds=61))
    [done] = store.list_incidents()
    assert retried.notified == [done.id] and retried.diagnosed == [] and retried.failed == []
    assert [n.state for n in notifier.posted] == ["awaiting_approval", "expired"]
    assert done.state is State.EXPIRED and done.settle_at is None
    assert done.diagnoses == 1 and len(evidence.contexts) == 1  # not diagnosed again
    assert service.settle(clock.advance(minutes=10)).notified == []


def test_a_failure_recording_host_failures_retries_the_whole_diagnosis() -> None:
    store = FakeStore(fail={"record_host_failures": [TransientError("hosts: contention")]})
    clock = FakeClock(T0)
    notifier = FakeNotifier()
    service = responder(store, clock, notifier=notifier)
    node = "gke-c-p-1a2b3c4d-0001"
    service.handle_entry("m1", host_error("h1", node, T0))
    first = service.settle(clock.advance(seconds=61))
    [incident] = store.list_incidents()
    assert first.failed and "contention" in first.failed[0]["reason"]
    assert incident.diagnosis is None and incident.settle_at is not None  # still leased
    assert store.hosts == {} and notifier.posted == []
    retried = service.settle(clock.advance(minutes=6))
    [done] = store.list_incidents()
    assert retried.diagnosed == [done.id] and retried.notified == [done.id]
    assert [r.node for r in store.hosts.values()] == [node]
    assert done.diagnoses == 1 and len(notifier.posted) == 1


def test_a_misconfigured_notifier_is_logged_once_and_never_loses_the_diagnosis(
    store: IncidentStore, capsys: pytest.CaptureFixture[str]
) -> None:
    from loopbreaker.chat.clients import NotifierMisconfigured

    clock = FakeClock(T0)
    bad = NotifierMisconfigured("Slack chat.postMessage refused: invalid_auth")
    notifier = FakeNotifier(fail=[bad, bad])
    service = responder(store, clock, notifier=notifier)
    service.handle_entry("m1", host_error("h1", "gke-c-p-1a2b3c4d-0001", T0))
    service.handle_entry("m2", host_error("h2", "gke-c-q-1a2b3c4d-0002", T0))
    report = service.settle(clock.advance(seconds=61))
    assert len(report.diagnosed) == 2 and report.notified == []
    assert [f["reason"] for f in report.failed] == [str(bad)] * 2
    assert all(i.diagnosis is not None for i in store.list_incidents())
    misconfigured = [
        d
        for d in error_lines(capsys.readouterr().err)
        if d.get("event") == "notifier_misconfigured"
    ]
    assert len(misconfigured) == 1 and "invalid_auth" in misconfigured[0]["message"]


def test_settle_reports_add_up_field_by_field() -> None:
    # A replay settles in passes; every field of each pass must reach its summary
    # (verifications included), whatever fields the report grows.
    names = [f.name for f in dataclasses.fields(SettleReport)]

    def report(tag: str, count: int) -> SettleReport:
        values: dict[str, object] = {}
        for f in dataclasses.fields(SettleReport):
            values[f.name] = count if f.type in ("int", int) else [f"{tag}-{f.name}"]
        return SettleReport(**values)  # type: ignore[arg-type]

    total = report("a", 2)
    total.add(report("b", 3))
    merged = total.to_dict()
    assert sorted(merged) == sorted(names)
    for name in names:
        if name == "pruned":
            assert merged[name] == 5
        else:
            assert merged[name] == [f"a-{name}", f"b-{name}"], name
