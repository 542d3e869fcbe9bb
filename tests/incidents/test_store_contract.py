"""One contract, three IncidentStores: SQLite, the real Firestore emulator, and the fake."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest
from fakes import StoreFactory

from loopbreaker import incidents
from loopbreaker.errors import TransientError
from loopbreaker.incidents import Arrival, IncidentKey, Policy, Scope, State
from loopbreaker.incidents.store.base import IncidentStore, IngestResult, refresh
from loopbreaker.model import HostFailureRecord, Signal, SignalKind

T0 = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)
POLICY = Policy(grouping_window=timedelta(minutes=30), settle_time=timedelta(seconds=60))
KEY = IncidentKey("proj", "tpu-cluster-prod", Scope.NODE_POOL, "spot-pool")

T = TypeVar("T")


def arrival(
    insert_id: str,
    minutes: float = 0,
    *,
    key: IncidentKey = KEY,
    message_id: str | None = None,
    now: datetime | None = None,
    kind: SignalKind = SignalKind.PREEMPTION,
    node: str | None = None,
    policy: Policy = POLICY,
) -> Arrival:
    at = T0 + timedelta(minutes=minutes)
    signal = Signal(
        kind=kind,
        timestamp=at,
        project=key.project,
        cluster=key.cluster,
        node_pool=key.name,
        node=node or f"gke-node-{insert_id}",
        insert_id=insert_id,
        log_name="projects/proj/logs/events",
    )
    entry = {"insertId": insert_id, "logName": signal.log_name, "timestamp": at.isoformat()}
    return Arrival(
        key=key,
        signal=signal,
        event_time=at,
        now=now or at,
        entry_id=incidents.entry_id(entry),
        message_id=message_id,
        policy=policy,
    )


@pytest.fixture
def store(store_factory: StoreFactory) -> IncidentStore:
    return store_factory()


def test_first_arrival_opens_an_incident(store: IncidentStore) -> None:
    result = store.ingest(arrival("a"))
    assert not result.duplicate and result.created and result.incident is not None
    incident = store.get(result.incident.id)
    assert incident is not None
    assert incident.state is State.OPEN
    assert incident.signal_count == 1
    assert incident.key == KEY
    assert incident.settle_at == T0 + timedelta(seconds=60)
    assert [a.to_state for a in incident.audit] == [State.OPEN]


def test_arrivals_in_the_window_join_with_exact_counts(store: IncidentStore) -> None:
    first = store.ingest(arrival("a", 0))
    store.ingest(arrival("b", 5, kind=SignalKind.MAINTENANCE))
    third = store.ingest(arrival("c", -10))  # earlier than the first, still in the window
    assert first.incident and third.incident
    assert third.incident.id == first.incident.id and not third.created
    # Exact once settled: Firestore counts at settle time, SQLite and the fake on ingest.
    incident = refresh(store, first.incident.id, POLICY.max_signals)
    assert incident is not None
    assert incident.signal_count == 3
    assert incident.counts == {"preemption": 2, "maintenance": 1}
    assert incident.first_event == T0 - timedelta(minutes=10)
    assert incident.last_event == T0 + timedelta(minutes=5)
    assert len(store.list_incidents()) == 1


def test_late_and_out_of_order_entries_join_the_incident_of_their_event_time(
    store: IncidentStore,
) -> None:
    morning = store.ingest(arrival("a", 0))
    noon = store.ingest(arrival("b", 240))
    late_morning = store.ingest(arrival("c", 20, now=T0 + timedelta(hours=5)))
    late_noon = store.ingest(arrival("d", 225, now=T0 + timedelta(hours=5)))
    between = store.ingest(arrival("e", 120))
    assert morning.incident and noon.incident and late_morning.incident and late_noon.incident
    assert morning.incident.id != noon.incident.id
    assert late_morning.incident.id == morning.incident.id
    assert late_noon.incident.id == noon.incident.id
    assert between.created
    assert len(store.list_incidents()) == 3


@pytest.mark.parametrize("same", ["message_id", "entry"])
def test_a_redelivery_changes_nothing(store: IncidentStore, same: str) -> None:
    first = store.ingest(arrival("a", message_id="m1"))
    again = (
        arrival("a-other-entry", message_id="m1")
        if same == "message_id"
        else arrival("a", message_id="m2")
    )
    assert first.incident
    before = store.get(first.incident.id)
    assert store.ingest(again) == IngestResult(duplicate=True)
    assert store.get(first.incident.id) == before


def test_other_keys_open_other_incidents(store: IncidentStore) -> None:
    other = IncidentKey("proj", "tpu-cluster-prod", Scope.NODE_POOL, "other-pool")
    a = store.ingest(arrival("a"))
    b = store.ingest(arrival("b", key=other))
    assert a.incident and b.incident and a.incident.id != b.incident.id
    assert {str(i.key) for i in store.list_incidents()} == {str(KEY), str(other)}


def test_a_final_incident_is_never_joined(store: IncidentStore) -> None:
    first = store.ingest(arrival("a"))
    assert first.incident
    now = T0 + timedelta(minutes=2)

    def reject(i: incidents.Incident) -> incidents.Incident:
        i = incidents.transition(i, State.DIAGNOSED, actor="system", at=now)
        i = incidents.transition(i, State.AWAITING_APPROVAL, actor="system", at=now)
        return incidents.transition(i, State.REJECTED, actor="alice@example.com", at=now)

    assert store.update(first.incident.id, reject).changed
    second = store.ingest(arrival("b", 1))
    assert second.created and second.incident and second.incident.id != first.incident.id
    rejected = store.get(first.incident.id)
    assert rejected and rejected.state is State.REJECTED and rejected.signal_count == 1
    assert [a.actor for a in rejected.audit][-1] == "alice@example.com"


def test_signals_are_capped_but_counted(store: IncidentStore) -> None:
    policy = Policy(max_signals=3)
    ids = [store.ingest(arrival(f"s{i}", i, policy=policy)) for i in range(5)]
    incident_id = ids[0].incident.id if ids[0].incident else ""
    incident = refresh(store, incident_id, policy.max_signals)
    assert incident and incident.signal_count == 5 and incident.kept_signals == 3
    kept = store.signals(incident_id)
    assert [s.insert_id for s in kept] == ["s0", "s1", "s2"]
    assert kept[0].kind is SignalKind.PREEMPTION and kept[0].timestamp == T0


def test_update_reports_missing_and_unchanged(store: IncidentStore) -> None:
    assert store.update("inc-missing", lambda i: i).incident is None
    created = store.ingest(arrival("a"))
    assert created.incident
    unchanged = store.update(created.incident.id, lambda i: None)
    assert not unchanged.changed and unchanged.incident == created.incident


def test_due_and_expiring_follow_their_times(store: IncidentStore) -> None:
    a = store.ingest(arrival("a", 0)).incident
    b = store.ingest(arrival("b", 0, key=IncidentKey(None, None, Scope.NODE, "n1"))).incident
    assert a and b
    assert store.due(T0, 10) == []
    assert sorted(store.due(T0 + timedelta(seconds=60), 10)) == sorted([a.id, b.id])
    assert len(store.due(T0 + timedelta(seconds=60), 1)) == 1
    at = T0 + timedelta(minutes=2)
    stale = timedelta(hours=1)

    def ask(i: incidents.Incident) -> incidents.Incident:
        i = incidents.transition(i, State.DIAGNOSED, actor="system", at=at)
        i = incidents.transition(i, State.AWAITING_APPROVAL, actor="system", at=at)
        return dataclasses.replace(i, expires_at=at + stale)

    store.update(a.id, ask)
    assert store.expiring(at + stale - timedelta(seconds=1), 10) == []
    assert store.expiring(at + stale, 10) == [a.id]


def test_next_settle_is_the_earliest_settle_time_after_a_moment(store: IncidentStore) -> None:
    # on_schedule waits within its minute for this moment (Responder.settle_minute).
    assert store.next_settle(T0) is None
    a = store.ingest(arrival("a", 0)).incident
    later = T0 + timedelta(seconds=30)
    b = store.ingest(
        arrival("b", 0, key=IncidentKey(None, None, Scope.NODE, "n1"), now=later)
    ).incident
    assert a and b and a.settle_at and b.settle_at and a.settle_at < b.settle_at
    assert store.next_settle(T0) == a.settle_at
    assert store.next_settle(a.settle_at) == b.settle_at  # strictly after
    assert store.next_settle(b.settle_at) is None


def test_list_filters_states_newest_first(store: IncidentStore) -> None:
    first = store.ingest(arrival("a", 0)).incident
    second = store.ingest(
        arrival(
            "b", 0, key=IncidentKey(None, None, Scope.NODE, "n1"), now=T0 + timedelta(seconds=5)
        )
    ).incident
    assert first and second
    assert [i.id for i in store.list_incidents()] == [second.id, first.id]
    store.update(
        first.id,
        lambda i: incidents.transition(i, State.DIAGNOSED, actor="system", at=T0),
    )
    assert [i.id for i in store.list_incidents(states=[State.DIAGNOSED])] == [first.id]
    assert store.list_incidents(limit=1)[0].id == second.id


def test_host_history_is_remembered_once_and_excludes_its_own_incident(
    store: IncidentStore,
) -> None:
    yesterday = HostFailureRecord("host-7", "gke-node-1", T0 - timedelta(days=1), "inc-1")
    today = HostFailureRecord("host-7", "gke-node-2", T0, "inc-2")
    other = HostFailureRecord("host-9", "gke-node-9", T0, "inc-2")
    store.record_host_failures([yesterday, today, other])
    store.record_host_failures([yesterday])  # idempotent
    found = store.host_history({"host-7"})
    assert [(r.host, r.node, r.incident_id) for r in found] == [
        ("host-7", "gke-node-1", "inc-1"),
        ("host-7", "gke-node-2", "inc-2"),
    ]
    assert found[0].at == yesterday.at
    assert [r.incident_id for r in store.host_history({"host-7"}, exclude_incident="inc-2")] == [
        "inc-1"
    ]
    by_node = store.host_history({"gke-node-9"})
    assert [r.host for r in by_node] == ["host-9"]
    assert store.host_history(set()) == []


def test_prune_forgets_old_dedup_keys(store: IncidentStore) -> None:
    store.ingest(arrival("a", 0, message_id="m1"))
    assert store.prune(T0 - timedelta(days=1)) == 0
    assert store.prune(T0 + timedelta(days=9)) == 2  # the entry id and the messageId
    again = store.ingest(arrival("a", 1, message_id="m1"))
    assert not again.duplicate


def ignored(insert_id: str, message_id: str | None = None) -> tuple[str, ...]:
    """The dedup ids of an entry that concerns no incident (as the service computes them)."""
    entry = {"insertId": insert_id, "logName": "projects/proj/logs/events", "timestamp": "t"}
    return incidents.dedup_ids(incidents.entry_id(entry), message_id)


def test_remember_keeps_ids_once(store: IncidentStore) -> None:
    assert store.remember(ignored("x", "m1"), T0) is False
    assert store.remember(ignored("x", "m1"), T0) is True
    assert store.remember(ignored("x"), T0) is True  # the same entry, no messageId
    assert store.remember(ignored("y"), T0) is False
    assert store.list_incidents() == []


@pytest.mark.parametrize("same", ["message_id", "entry"])
def test_remember_sees_a_redelivery_by_either_id_and_changes_nothing(
    store: IncidentStore, same: str
) -> None:
    assert not store.remember(ignored("x", "m1"), T0)
    again = ignored("x-other-entry", "m1") if same == "message_id" else ignored("x", "m2")
    assert store.remember(again, T0)
    # Nothing was kept from the duplicate: its other id is still unknown.
    fresh = ignored("x-other-entry") if same == "message_id" else ignored("z", "m2")
    assert not store.remember(fresh, T0)


def test_remember_and_ingest_share_their_keys(store: IncidentStore) -> None:
    first = store.ingest(arrival("a", message_id="m1"))
    assert first.incident
    before = store.get(first.incident.id)
    assert store.remember(arrival("a").dedup_ids, T0)  # the same entry
    assert store.remember(ignored("other", "m1"), T0)  # the same messageId
    assert store.get(first.incident.id) == before
    assert not store.remember(ignored("b", "m2"), T0)
    assert store.ingest(arrival("c", message_id="m2")) == IngestResult(duplicate=True)
    assert len(store.list_incidents()) == 1


def test_prune_forgets_remembered_keys_too(store: IncidentStore) -> None:
    assert not store.remember(ignored("x", "m1"), T0)
    assert store.prune(T0) == 0
    assert store.prune(T0 + timedelta(days=9)) == 2
    assert not store.remember(ignored("x", "m1"), T0 + timedelta(days=9))


def _retrying(call: Callable[[], T]) -> T:
    """What Pub/Sub does with a TransientError: deliver again."""
    for _ in range(50):
        try:
            return call()
        except TransientError:
            continue
    raise AssertionError("still contended after 50 redeliveries")


def test_concurrent_arrivals_open_one_incident_and_lose_no_update(
    store_factory: StoreFactory,
) -> None:
    handles = [store_factory() for _ in range(4)]
    arrivals = [arrival(f"c{i}", i * 0.1) for i in range(24)]
    start = threading.Barrier(8)

    def deliver(n: int) -> IngestResult:
        if n < 8:
            start.wait()
        return _retrying(lambda: handles[n % len(handles)].ingest(arrivals[n]))

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(deliver, range(len(arrivals))))
    assert not any(r.duplicate for r in results)
    assert sum(r.created for r in results) == 1
    listed = handles[0].list_incidents()
    assert len(listed) == 1
    listed[0] = refresh(handles[0], listed[0].id, POLICY.max_signals)  # type: ignore[call-overload]
    assert listed[0].signal_count == 24
    assert listed[0].counts == {"preemption": 24}
    assert len(handles[0].signals(listed[0].id)) == 24


def test_concurrent_redeliveries_count_once(store_factory: StoreFactory) -> None:
    handles = [store_factory() for _ in range(4)]
    same = arrival("dup", message_id="m-dup")
    start = threading.Barrier(8)

    def deliver(n: int) -> IngestResult:
        start.wait()
        return _retrying(lambda: handles[n % len(handles)].ingest(same))

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(deliver, range(8)))
    assert sum(not r.duplicate for r in results) == 1
    listed = handles[0].list_incidents()
    assert len(listed) == 1 and listed[0].signal_count == 1


def test_concurrent_redeliveries_of_an_ignored_entry_count_once(
    store_factory: StoreFactory,
) -> None:
    handles = [store_factory() for _ in range(4)]
    ids = ignored("dup", "m-dup")
    start = threading.Barrier(8)

    def deliver(n: int) -> bool:
        start.wait()
        return _retrying(lambda: handles[n % len(handles)].remember(ids, T0))

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(deliver, range(8)))
    assert results.count(False) == 1


def test_a_final_incident_is_due_only_while_its_notification_is_pending(
    store: IncidentStore,
) -> None:
    a = store.ingest(arrival("a", 0)).incident
    assert a
    at = T0 + timedelta(minutes=2)

    def reject(i: incidents.Incident) -> incidents.Incident:
        i = incidents.transition(i, State.DIAGNOSED, actor="system", at=at)
        i = incidents.transition(i, State.AWAITING_APPROVAL, actor="system", at=at)
        return incidents.transition(i, State.REJECTED, actor="alice", at=at)

    store.update(a.id, reject)
    assert store.due(at + timedelta(hours=1), 10) == []
    store.update(a.id, lambda i: incidents.rearm(i, at + timedelta(minutes=1)))
    assert store.due(at + timedelta(minutes=1), 10) == [a.id]
    store.update(a.id, incidents.settled)
    assert store.due(at + timedelta(hours=1), 10) == []


def test_known_keys_are_the_keys_some_incident_has_had_open_or_final(
    store: IncidentStore,
) -> None:
    assert store.known_keys([]) == set()
    final_key = dataclasses.replace(KEY, name="final-pool")
    unknown = dataclasses.replace(KEY, name="unknown-pool")
    assert store.known_keys([KEY, final_key, unknown]) == set()
    opened = store.ingest(arrival("a")).joined
    closed = store.ingest(arrival("b", key=final_key)).joined
    assert opened and closed
    at = T0 + timedelta(minutes=2)

    def reject(i: incidents.Incident) -> incidents.Incident:
        i = incidents.transition(i, State.DIAGNOSED, actor="system", at=at)
        i = incidents.transition(i, State.AWAITING_APPROVAL, actor="system", at=at)
        return incidents.transition(i, State.REJECTED, actor="alice", at=at)

    assert store.update(closed, reject).changed
    final = store.get(closed)
    assert final is not None and final.final
    # A join-only arrival with no incident of its key to join leaves the key unknown.
    stray = dataclasses.replace(KEY, name="stray-pool")
    lone = dataclasses.replace(
        arrival("r", key=stray, kind=SignalKind.ALERT_RESOLVED), join_only=True
    )
    assert store.ingest(lone).joined is None
    assert store.known_keys([KEY, final_key, unknown, stray]) == {KEY, final_key}
    assert store.known_keys([unknown]) == set()
    assert store.known_keys([final_key, final_key]) == {final_key}


def test_known_keys_answers_for_32_keys_at_once(store: IncidentStore) -> None:
    known = [dataclasses.replace(KEY, name=f"pool-{n}") for n in (3, 17)]
    for n, key in enumerate(known):
        store.ingest(arrival(f"k{n}", key=key))
    asked = [dataclasses.replace(KEY, name=f"pool-{n}") for n in range(32)]
    assert store.known_keys(asked) == set(known)


def test_concurrent_decisions_on_one_approval_request_record_exactly_one(
    store_factory: StoreFactory,
) -> None:
    from loopbreaker.approval.requests import ActionRequest, Decision, Platform, Target
    from loopbreaker.errors import AlreadyDecided
    from loopbreaker.incidents import DiagnosisRecord

    handles = [store_factory() for _ in range(4)]
    opened = handles[0].ingest(arrival("h1"))
    assert opened.incident is not None
    target = Target("gke-n-1", "gke-n-1", "4242", "us-east5-a", "proj", "host-1")
    record = DiagnosisRecord(
        at=T0,
        root_cause="faulty_host",
        remediation_path="isolate_host",
        requires_approval=True,
        summary="",
        suspect_hosts=("host-1",),
        signal_revision=opened.incident.signal_revision,
        queries=0,
        target=target,
    )
    policy = dataclasses.replace(POLICY, approval_ttl=timedelta(minutes=30))
    asked = (
        handles[0]
        .update(
            opened.incident.id,
            lambda i: incidents.apply_diagnosis(i, record, now=T0, policy=policy),
        )
        .incident
    )
    assert asked is not None and asked.approval_request is not None
    request = ActionRequest.of(asked.id, asked.approval_request)
    start = threading.Barrier(8)

    def click(n: int) -> str:
        start.wait()
        decision = Decision.APPROVED if n % 2 == 0 else Decision.REJECTED

        def change(i: incidents.Incident) -> incidents.Incident:
            return incidents.decide(
                i, request, decision=decision, actor=f"U0USER{n}", platform=Platform.SLACK, now=T0
            )

        try:
            _retrying(lambda: handles[n % len(handles)].update(asked.id, change))
        except AlreadyDecided:
            return "conflict"
        return "decided"

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(click, range(8)))
    assert sorted(outcomes) == ["conflict"] * 7 + ["decided"]
    final = handles[0].get(asked.id)
    assert final is not None and final.approval is not None
    assert final.state in (State.APPROVED, State.REJECTED)
    decided = [e for e in final.audit if e.to_state in (State.APPROVED, State.REJECTED)]
    assert len(decided) == 1 and decided[0].actor == f"slack:{final.approval.actor}"


def test_the_deletion_budget_is_per_cluster_per_hour_and_idempotent_per_incident(
    store: IncidentStore,
) -> None:
    assert store.reserve_deletion("c1", "inc-1", T0, 2)
    assert store.reserve_deletion("c1", "inc-1", T0 + timedelta(minutes=1), 2)  # redelivery
    assert store.reserve_deletion("c1", "inc-2", T0 + timedelta(minutes=2), 2)
    assert not store.reserve_deletion("c1", "inc-3", T0 + timedelta(minutes=3), 2)
    assert store.reserve_deletion("c2", "inc-4", T0 + timedelta(minutes=3), 2)  # other cluster
    assert store.deletions_since("c1", T0) == 2 and store.deletions_since("c2", T0) == 1
    # The window slides: an hour after the first deletion there is room again.
    assert store.reserve_deletion("c1", "inc-3", T0 + timedelta(minutes=61), 2)


def test_concurrent_reservations_never_exceed_the_limit(store_factory: StoreFactory) -> None:
    handles = [store_factory() for _ in range(4)]
    start = threading.Barrier(8)

    def reserve(n: int) -> bool:
        start.wait()
        return _retrying(lambda: handles[n % 4].reserve_deletion("c1", f"inc-{n}", T0, 2))

    with ThreadPoolExecutor(max_workers=8) as pool:
        granted = list(pool.map(reserve, range(8)))
    assert sum(granted) == 2 and handles[0].deletions_since("c1", T0) == 2


def test_a_join_only_arrival_never_opens_an_incident(store: IncidentStore) -> None:
    alone = dataclasses.replace(
        arrival("resolved-1", kind=SignalKind.ALERT_RESOLVED), join_only=True
    )
    result = store.ingest(alone)
    assert not result.duplicate and result.joined is None
    assert store.list_incidents() == []
    # Remembered: the same notification again is a duplicate, and still opens nothing.
    assert store.ingest(alone).duplicate and store.list_incidents() == []
    # With an open incident of its key, it joins it (and is counted there).
    opened = store.ingest(arrival("a", 1))
    assert opened.joined is not None
    later = dataclasses.replace(
        arrival("resolved-2", 3, kind=SignalKind.ALERT_RESOLVED), join_only=True
    )
    joined = store.ingest(later)
    assert joined.joined == opened.joined and not joined.created
    current = refresh(store, opened.joined, 500)
    assert current is not None and current.counts.get("alert_resolved") == 1


def test_one_target_is_claimed_by_one_live_incident(store: IncidentStore) -> None:
    first = store.ingest(arrival("a", 1)).joined
    other = store.ingest(arrival("b", 1, key=dataclasses.replace(KEY, name="pool-b"))).joined
    assert first and other and first != other
    keys = ("vm:p/z/42", "host:h1")
    assert store.claim_target(keys, first) is None
    assert store.claim_target(keys, first) is None  # its own claim: a re-diagnosis
    assert store.claim_target(("host:h1",), other) == first  # shares the host
    assert store.claim_target(("vm:p/z/42",), other) == first  # shares the VM
    assert store.claim_target(("vm:p/z/43", "host:h2"), other) is None  # another failure
    # Once the holder is final, the target may be asked for again.
    store.update(first, lambda i: dataclasses.replace(i, state=State.REJECTED))
    assert store.claim_target(keys, other) is None
    assert store.claim_target(keys, first) == other


def test_concurrent_claims_of_one_target_have_one_winner(store_factory: StoreFactory) -> None:
    handles = [store_factory() for _ in range(4)]
    ids = [
        handles[0].ingest(arrival(f"e{n}", 1, key=dataclasses.replace(KEY, name=f"p{n}"))).joined
        for n in range(8)
    ]
    assert all(ids) and len(set(ids)) == 8
    start = threading.Barrier(8)

    def claim(n: int) -> str | None:
        start.wait()
        incident = ids[n]
        assert incident is not None
        return _retrying(lambda: handles[n % 4].claim_target(("vm:p/z/42",), incident))

    with ThreadPoolExecutor(max_workers=8) as pool:
        holders = list(pool.map(claim, range(8)))
    winners = [ids[n] for n, holder in enumerate(holders) if holder is None]
    assert len(winners) == 1
    assert all(holder in (None, winners[0]) for holder in holders)


def test_the_recount_keeps_the_workload_kinds(store: IncidentStore) -> None:
    """Settling recounts from the stored signals; the kind of workload they name survives
    it (a Firestore tally that dropped it settled every TFJob as a JobSet)."""
    from dataclasses import replace

    from loopbreaker.incidents.store.base import refresh

    first = arrival("a", 0)
    first = replace(first, signal=replace(first.signal, workload_kind="tfjob"))
    result = store.ingest(first)
    assert result.incident is not None
    store.ingest(arrival("b", 1))
    incident = refresh(store, result.incident.id, max_signals=50)
    assert incident is not None
    assert incident.workload_kinds == ("tfjob",)
