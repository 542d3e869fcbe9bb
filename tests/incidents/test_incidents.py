"""Grouping keys, event-time windows and the incident state machine (pure, injected time)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopbreaker import incidents
from loopbreaker.incidents import (
    Arrival,
    DiagnosisRecord,
    IllegalTransition,
    Incident,
    IncidentKey,
    IndexEntry,
    Policy,
    Scope,
    State,
)
from loopbreaker.model import (
    Diagnosis,
    FailureEpisode,
    HostFailureRecord,
    NodeInfo,
    Remediation,
    RemediationPath,
    Risk,
    RootCause,
    Signal,
    SignalKind,
    SuspectHost,
    WorkloadKind,
)

T0 = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=30)
POLICY = Policy(grouping_window=WINDOW, settle_time=timedelta(seconds=60))
KEY = IncidentKey("proj", "c1", Scope.NODE_POOL, "pool-a")
PACKAGE = Path(__file__).resolve().parents[2] / "shared" / "loopbreaker"


def sig(kind: SignalKind = SignalKind.PREEMPTION, **fields: object) -> Signal:
    values: dict[str, object] = {"timestamp": T0, "project": "proj", "cluster": "c1"}
    values.update(fields)
    return Signal(kind=kind, **values)  # type: ignore[arg-type]


def mins(m: float) -> datetime:
    return T0 + timedelta(minutes=m)


# --- keys ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("signal", "expected"),
    [
        pytest.param(
            sig(SignalKind.NCCL_TIMEOUT, workload="train", namespace="ml", node_pool="p"),
            "proj/c1/workload/ml/train",
            id="workload-fault-by-workload",
        ),
        pytest.param(
            sig(SignalKind.PREEMPTION, node_pool="spot", node="gke-c1-spot-1a2b3c4d-0001"),
            "proj/-/pool/gke-c1-spot",
            id="pool-event-naming-a-gke-node-by-its-pool-prefix",
        ),
        pytest.param(
            sig(SignalKind.PREEMPTION, node_pool="spot"),
            "proj/-/pool/gke-c1-spot",
            id="pool-event-naming-no-node-by-cluster-and-pool",
        ),
        pytest.param(
            sig(SignalKind.PREEMPTION, node_pool="spot", node="worker-3"),
            "proj/-/pool/gke-c1-spot",
            id="pool-event-naming-a-non-gke-node-by-pool",
        ),
        pytest.param(
            sig(SignalKind.PREEMPTION, cluster=None, node_pool="spot"),
            "proj/-/node_pool/spot",
            id="pool-event-naming-neither-cluster-nor-node",
        ),
        pytest.param(
            sig(SignalKind.HOST_ERROR, physical_host="/blk/sub/host-7", node_pool="p"),
            "proj/-/host//blk/sub/host-7",
            id="host-fault-by-physical-host",
        ),
        pytest.param(
            sig(SignalKind.PREEMPTION, cluster=None, node="gke-c1-spot-1a2b3c4d-x7k2"),
            "proj/-/pool/gke-c1-spot",
            id="audit-entry-by-its-pool-prefix",
        ),
        pytest.param(
            sig(SignalKind.NODE_NOT_READY, node="gke-c1-spot-1a2b3c4d-x7k2"),
            "proj/-/pool/gke-c1-spot",
            id="k8s-node-event-by-its-pool-prefix",
        ),
        pytest.param(
            sig(SignalKind.HOST_ERROR, cluster=None, node="my-vm"),
            "proj/-/node/my-vm",
            id="non-gke-vm-by-node",
        ),
        pytest.param(
            sig(SignalKind.NODE_NOT_READY, node="my-vm"),
            "proj/-/node/my-vm",
            id="node-keyed-without-its-cluster",
        ),
        pytest.param(
            sig(SignalKind.JOB_RESTARTING, workload="train"),
            "proj/c1/workload/train",
            id="restart-event",
        ),
        pytest.param(
            sig(SignalKind.MAINTENANCE, workload="train"),
            "proj/c1/workload/train",
            id="interruption-with-only-a-workload",
        ),
    ],
)
def test_grouping_key(signal: Signal, expected: str) -> None:
    key = incidents.key_for(signal)
    assert str(key) == expected
    assert key is not None and IncidentKey.parse(str(key)) == key


def test_no_key_for_unrecognized_or_anonymous_signals() -> None:
    assert incidents.key_for(sig(SignalKind.UNRECOGNIZED, node_pool="p")) is None
    assert incidents.key_for(sig(SignalKind.NCCL_TIMEOUT)) is None


def test_default_project_fills_a_missing_one() -> None:
    key = incidents.key_for(sig(project=None, node_pool="p"), "fallback")
    assert key is not None and key.project == "fallback"


@pytest.mark.parametrize(
    ("name", "group"),
    [
        ("gke-tpu-prod-spot-pool-1a2b3c4d-x7k2", "gke-tpu-prod-spot-pool-1a2b3c4d"),
        ("gke-c-p-12345678-abcd", "gke-c-p-12345678"),
        ("gke-c-p-1234567-abcd", None),  # hash is 8 characters
        ("my-vm-1a2b3c4d-abcd", None),
        ("gke-x-abcd", None),
    ],
)
def test_instance_group_of_gke_node_names(name: str, group: str | None) -> None:
    assert incidents.instance_group(name) == group


def test_entry_id_uses_insert_id_log_name_and_timestamp() -> None:
    entry = {"insertId": "a", "logName": "l", "timestamp": "2026-05-20T08:00:00Z", "x": 1}
    assert incidents.entry_id(entry) == incidents.entry_id({**entry, "x": 2})
    assert incidents.entry_id(entry) != incidents.entry_id({**entry, "timestamp": "other"})
    assert incidents.entry_id(entry) != incidents.entry_id({**entry, "logName": "m"})
    bare = {"logName": "l", "textPayload": "t"}
    assert incidents.entry_id(bare) == incidents.entry_id(dict(reversed(bare.items())))
    assert incidents.entry_id(bare) != incidents.entry_id({**bare, "textPayload": "u"})


# --- windows -------------------------------------------------------------------------


def entry(id_: str, first: float, last: float, state: State = State.OPEN) -> IndexEntry:
    return IndexEntry(id_, mins(first), mins(last), state)


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        (0, "a"),
        (10, "a"),  # inside the span
        (-30, "a"),  # exactly one window before the first event
        (-30.01, None),
        (30, "a"),  # as near to a as to b: the older one
        (31, "b"),  # nearer to b's span than to a's
        (90, "b"),  # exactly one window after the last event
        (90.01, None),
    ],
)
def test_choose_by_event_time(at: float, expected: str | None) -> None:
    candidates = [entry("b", 50, 60), entry("a", 0, 10)]
    assert incidents.choose(candidates, mins(at), WINDOW) == expected


def test_choose_skips_final_incidents_and_prefers_a_containing_span() -> None:
    candidates = [
        entry("old", 0, 10, State.REJECTED),
        entry("wide", 0, 60),
        entry("near", 12, 14),
    ]
    assert incidents.choose(candidates, mins(5), WINDOW) == "wide"
    assert incidents.choose(candidates[:1], mins(5), WINDOW) is None


@given(st.permutations(list(range(12))))
def test_grouping_does_not_depend_on_arrival_order(order: list[int]) -> None:
    # Two bursts an hour apart; whatever the delivery order, two incidents of six.
    times = [mins(m) for m in (0, 1, 2, 3, 4, 5, 60, 61, 62, 63, 64, 65)]
    by_id: dict[str, Incident] = {}
    for n, i in enumerate(order):
        target = incidents.choose(
            [IndexEntry.of(x) for x in by_id.values()], times[i], timedelta(minutes=20)
        )
        arrival = Arrival(
            KEY, sig(timestamp=times[i]), times[i], mins(70 + n), f"e{i}", None, POLICY
        )
        absorbed = incidents.absorb(by_id.get(target) if target else None, arrival)
        by_id[absorbed.incident.id] = absorbed.incident
    spans = sorted((i.first_event, i.last_event, i.signal_count) for i in by_id.values())
    assert spans == [(mins(0), mins(5), 6), (mins(60), mins(65), 6)]


# --- absorbing signals ---------------------------------------------------------------


def arrive(incident: Incident | None, at: float, now: float, **fields: object) -> Incident:
    signal = sig(timestamp=mins(at), **fields)
    arrival = Arrival(KEY, signal, mins(at), mins(now), f"e-{at}-{now}", None, POLICY)
    return incidents.absorb(incident, arrival).incident


def test_absorb_opens_then_counts_and_debounces() -> None:
    first = arrive(None, 0, 0, node="n1", node_pool="pool-a")
    assert first.state is State.OPEN
    assert first.id == incidents.new_incident_id(KEY, "e-0-0")
    assert first.settle_at == mins(1)
    second = incidents.absorb(
        first,
        Arrival(
            KEY,
            sig(SignalKind.MAINTENANCE, timestamp=mins(-2), node="n2"),
            mins(-2),
            mins(0.5),
            "e2",
            None,
            POLICY,
        ),
    ).incident
    assert second.signal_count == 2
    assert second.counts == {"preemption": 1, "maintenance": 1}
    assert second.first_event == mins(-2) and second.last_event == mins(0)
    assert second.settle_at == mins(1.5)  # 60 s after the LAST arrival
    assert second.nodes == ("n1", "n2")
    assert second.node_pools == ("pool-a",)
    assert second.signal_revision == 2
    assert len(second.audit) == 1  # signals are not transitions


def test_evolve_is_replace() -> None:
    # Grouping evolves an incident on every signal by copying its fields; the copy must
    # be what dataclasses.replace builds, equal, hashable alike, and refuse the same.
    base = arrive(None, 0, 0, node="n1", node_pool="pool-a")
    changes = {"signal_count": 7, "nodes": ("n1", "n9"), "settle_at": None, "revision": 3}
    evolved = incidents.evolve(base, **changes)
    assert evolved == replace(base, **changes) and evolved is not base
    assert base.signal_count == 1  # the original is untouched
    assert incidents.evolve(base) == base
    with pytest.raises(TypeError, match="no_such_field"):
        incidents.evolve(base, no_such_field=1)
    with pytest.raises(AttributeError):
        evolved.revision = 4  # type: ignore[misc]  # still frozen


def test_absorb_keeps_at_most_max_signals_verbatim() -> None:
    policy = Policy(max_signals=2)
    incident = None
    kept = []
    for n in range(4):
        arrival = Arrival(KEY, sig(timestamp=mins(n)), mins(n), mins(n), f"e{n}", None, policy)
        absorbed = incidents.absorb(incident, arrival)
        incident = absorbed.incident
        kept.append(absorbed.kept_signal is not None)
    assert kept == [True, True, False, False]
    assert incident is not None and incident.signal_count == 4 and incident.kept_signals == 2


def test_names_are_capped() -> None:
    incident = None
    for n in range(incidents.MAX_NAMES + 5):
        incident = arrive(incident, 0, 0, node=f"n{n:03d}")
    assert incident is not None and len(incident.nodes) == incidents.MAX_NAMES


def test_absorb_refuses_a_final_incident() -> None:
    final = replace(arrive(None, 0, 0), state=State.EXPIRED)
    with pytest.raises(IllegalTransition):
        arrive(final, 1, 1)


# --- state machine -------------------------------------------------------------------

ALLOWED = [
    (State.OPEN, State.DIAGNOSED),
    (State.DIAGNOSED, State.DIAGNOSED),
    (State.DIAGNOSED, State.AWAITING_APPROVAL),
    (State.AWAITING_APPROVAL, State.APPROVED),
    (State.AWAITING_APPROVAL, State.REJECTED),
    (State.AWAITING_APPROVAL, State.EXPIRED),
    (State.AWAITING_APPROVAL, State.DIAGNOSED),
    (State.APPROVED, State.REMEDIATING),
    (State.REMEDIATING, State.REMEDIATED),
    (State.REMEDIATING, State.FAILED),
]


def in_state(state: State) -> Incident:
    return replace(arrive(None, 0, 0), state=state)


@pytest.mark.parametrize(("source", "target"), ALLOWED)
def test_allowed_transitions_append_to_the_audit_trail(source: State, target: State) -> None:
    before = in_state(source)
    after = incidents.transition(before, target, actor="alice", at=mins(5), note="why")
    assert after.state is target
    assert after.audit[:-1] == before.audit
    last = after.audit[-1]
    assert (last.at, last.actor, last.from_state, last.to_state, last.note) == (
        mins(5),
        "alice",
        source,
        target,
        "why",
    )
    if target in incidents.FINAL_STATES:
        assert after.final and after.settle_at is None


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (State.OPEN, State.APPROVED),
        (State.OPEN, State.REMEDIATING),
        (State.DIAGNOSED, State.APPROVED),
        (State.APPROVED, State.REJECTED),
        (State.REJECTED, State.APPROVED),
        (State.EXPIRED, State.APPROVED),
        (State.REMEDIATED, State.REMEDIATING),
        (State.FAILED, State.OPEN),
    ],
)
def test_illegal_transitions_are_refused(source: State, target: State) -> None:
    with pytest.raises(IllegalTransition, match=f"{source} -> {target}"):
        incidents.transition(in_state(source), target, actor="x", at=mins(1))


def record(
    *, approval: bool = False, revision: int = 1, cause: str = "spot_preemption"
) -> DiagnosisRecord:
    return DiagnosisRecord(
        at=mins(2),
        root_cause=cause,
        remediation_path="isolate_host" if approval else "avoid_preemption",
        requires_approval=approval,
        summary="s",
        suspect_hosts=(),
        signal_revision=revision,
        queries=3,
    )


def test_diagnosis_moves_open_to_diagnosed_and_clears_the_settle_time() -> None:
    incident = incidents.claim(arrive(None, 0, 0), mins(2))
    assert incident is not None
    done = incidents.apply_diagnosis(incident, record(), now=mins(2), policy=POLICY)
    assert done is not None
    assert done.state is State.DIAGNOSED and done.settle_at is None
    assert done.diagnoses == 1 and done.queries_spent == 3
    assert [(a.from_state, a.to_state) for a in done.audit] == [
        (None, State.OPEN),
        (State.OPEN, State.DIAGNOSED),
    ]


def test_a_diagnosis_that_needs_approval_opens_an_expiring_request() -> None:
    policy = replace(POLICY, stale_after=timedelta(hours=6))
    done = incidents.apply_diagnosis(
        arrive(None, 0, 0), record(approval=True), now=mins(2), policy=policy
    )
    assert done is not None and done.state is State.AWAITING_APPROVAL
    assert done.expires_at == mins(2) + timedelta(hours=6)
    assert incidents.expire(done, mins(2) + timedelta(hours=6) - timedelta(seconds=1)) is None
    expired = incidents.expire(done, mins(2) + timedelta(hours=6))
    assert expired is not None and expired.state is State.EXPIRED
    assert expired.audit[-1].actor == "system:expiry" and expired.expires_at is None


def test_signals_during_a_diagnosis_keep_the_incident_due() -> None:
    opened = arrive(None, 0, 0)
    claimed = incidents.claim(opened, mins(2))
    assert claimed is not None
    later = arrive(claimed, 1, 2.5)  # arrives while the diagnosis runs
    done = incidents.apply_diagnosis(
        later, record(revision=claimed.signal_revision), now=mins(3), policy=POLICY
    )
    assert done is not None and done.state is State.DIAGNOSED
    assert done.settle_at == mins(3.5)  # re-diagnosed once these have settled
    redone = incidents.apply_diagnosis(
        done, record(revision=done.signal_revision), now=mins(4), policy=POLICY
    )
    assert redone is not None and redone.settle_at is None and redone.diagnoses == 2
    assert redone.audit[-1].from_state is State.DIAGNOSED
    assert redone.audit[-1].note.startswith("re-diagnosed")


def test_rediagnosis_without_approval_withdraws_the_request() -> None:
    asked = incidents.apply_diagnosis(
        arrive(None, 0, 0), record(approval=True), now=mins(2), policy=POLICY
    )
    assert asked is not None
    withdrawn = incidents.apply_diagnosis(asked, record(), now=mins(3), policy=POLICY)
    assert withdrawn is not None
    assert withdrawn.state is State.DIAGNOSED and withdrawn.expires_at is None


def test_claim_only_when_due_and_diagnosis_ignored_once_final() -> None:
    opened = arrive(None, 0, 0)
    assert incidents.claim(opened, mins(0.5)) is None
    claimed = incidents.claim(opened, mins(1))
    assert claimed is not None and claimed.settle_at == mins(1) + incidents.DIAGNOSIS_LEASE
    assert incidents.claim(claimed, mins(2)) is None  # held by the first run
    final = replace(claimed, state=State.REJECTED)
    assert incidents.apply_diagnosis(final, record(), now=mins(2), policy=POLICY) is None


def test_mark_notified_counts_only_changes() -> None:
    opened = arrive(None, 0, 0)
    once = incidents.mark_notified(opened, "f1")
    assert once is not None and once.notifications == 1
    assert incidents.mark_notified(once, "f1") is None


def test_round_trip_through_dict() -> None:
    done = incidents.apply_diagnosis(
        arrive(None, 0, 0, node="n1"), record(approval=True), now=mins(2), policy=POLICY
    )
    assert done is not None
    assert Incident.from_dict(done.to_dict()) == done


# --- diagnosis inputs ----------------------------------------------------------------


def test_context_covers_the_whole_incident() -> None:
    workload_key = IncidentKey("proj", "c1", Scope.WORKLOAD, "ml/train")
    incident = replace(
        arrive(None, 0, 0), key=workload_key, first_event=mins(0), last_event=mins(40)
    )
    context = incidents.context_for(incident, timedelta(minutes=30))
    assert (context.cluster, context.namespace, context.workload) == ("c1", "ml", "train")
    assert context.start_time == mins(-30) and context.end_time == mins(70)
    pool = replace(arrive(None, 0, 0), workloads=("train",))
    assert incidents.context_for(pool).workload == "train"


def test_context_takes_the_workload_kind_its_signals_named_else_the_setting() -> None:
    workload_key = IncidentKey("proj", "c1", Scope.WORKLOAD, "ml/resnet")
    plain = replace(arrive(None, 0, 0), key=workload_key)
    assert incidents.context_for(plain).workload_kind is WorkloadKind.JOBSET
    assert (
        incidents.context_for(plain, default_kind=WorkloadKind.TFJOB).workload_kind
        is WorkloadKind.TFJOB
    )
    named = replace(plain, workload_kinds=("pytorchjob", "jobset"))
    assert (
        incidents.context_for(named, default_kind=WorkloadKind.TFJOB).workload_kind
        is WorkloadKind.PYTORCHJOB
    )
    assert Incident.from_dict(named.to_dict()).workload_kinds == ("pytorchjob", "jobset")


def test_host_failures_merge_one_episode_per_host() -> None:
    episode = FailureEpisode("n1", "host-7", mins(0), ("host_error",))
    suspect = SuspectHost("host-7", ("n1",), 1, episodes=(episode,))
    diagnosis = Diagnosis(
        context=incidents.context_for(arrive(None, 0, 0)),
        restart_loop=None,
        restart_increase=None,
        restart_total=None,
        root_cause=RootCause.HOST_ERROR,
        remediation=Remediation(RemediationPath.WATCH_HOST, Risk.LOW, False, ()),
        suspect_hosts=(suspect,),
        steps=(),
        evidence=(),
        ticket_draft=None,
        missing_evidence=(),
        summary="",
    )
    signals = [
        sig(SignalKind.HOST_ERROR, node="n1", timestamp=mins(1)),  # same episode
        sig(SignalKind.AUTOMATIC_RESTART, node="n1", timestamp=mins(2)),  # same episode
        sig(SignalKind.HOST_ERROR, node="n2", timestamp=mins(30)),  # another host
        sig(SignalKind.PREEMPTION, node="n3", timestamp=mins(5)),  # not a host fault
    ]
    nodes = [NodeInfo("n2", physical_host="host-9")]
    found = incidents.host_failures("inc-1", diagnosis, signals, nodes)
    assert found == [
        HostFailureRecord("host-7", "n1", mins(0), "inc-1"),
        HostFailureRecord("host-9", "n2", mins(30), "inc-1"),
    ]


# --- audit cap, notification retries of final incidents, giving up --------------------


def test_the_audit_trail_keeps_its_head_and_tail_and_counts_the_rest() -> None:
    head, tail = incidents.AUDIT_HEAD, incidents.AUDIT_TAIL
    incident = incidents.transition(arrive(None, 0, 0), State.DIAGNOSED, actor="s", at=mins(1))
    total = head + tail + 25
    while len(incident.audit) + incident.audit_dropped < total:
        n = len(incident.audit) + incident.audit_dropped
        incident = incidents.transition(
            incident, State.DIAGNOSED, actor="s", at=mins(2), note=f"#{n}"
        )
    assert len(incident.audit) == head + tail and incident.audit_dropped == total - head - tail
    assert incident.audit[0].to_state is State.OPEN  # the opening is kept
    assert incident.audit[head - 1].note == f"#{head - 1}"
    assert incident.audit[head].note == f"#{total - tail}"  # then the newest
    assert incident.audit[-1].note == f"#{total - 1}"
    assert Incident.from_dict(incident.to_dict()) == incident


def test_a_record_without_audit_dropped_still_loads() -> None:
    data = arrive(None, 0, 0).to_dict()
    del data["audit_dropped"]
    assert Incident.from_dict(data).audit_dropped == 0


def test_a_final_incident_is_re_armed_only_for_its_notification() -> None:
    expired = incidents.transition(
        in_state(State.AWAITING_APPROVAL), State.EXPIRED, actor="s", at=mins(1)
    )
    assert expired.settle_at is None and incidents.claim(expired, mins(9)) is None
    rearmed = incidents.rearm(expired, mins(2))
    assert rearmed is not None and rearmed.settle_at == mins(2)
    assert not incidents.is_due(rearmed, mins(2)) and incidents.notification_due(rearmed, mins(2))
    assert incidents.claim(rearmed, mins(1.5)) is None
    claimed = incidents.claim(rearmed, mins(2))
    assert claimed is not None and claimed.settle_at == mins(2) + incidents.DIAGNOSIS_LEASE
    done = incidents.settled(claimed)
    assert done is not None and done.settle_at is None and incidents.settled(done) is None
    assert incidents.settled(arrive(None, 0, 0)) is None  # a live incident keeps its time


def test_giving_up_clears_the_settle_time_and_notes_why() -> None:
    opened = arrive(None, 0, 0)
    stopped = incidents.give_up(opened, mins(3), "InvalidTelemetry: line 3")
    assert stopped is not None and stopped.settle_at is None and stopped.state is State.OPEN
    last = stopped.audit[-1]
    assert (last.from_state, last.to_state, last.actor) == (State.OPEN, State.OPEN, "system:settle")
    assert "InvalidTelemetry: line 3" in last.note
    again = arrive(stopped, 1, 4)  # a new signal makes it due again
    assert again.settle_at == mins(5)


def test_giving_up_keeps_a_re_trigger_that_arrived_during_the_failing_run() -> None:
    opened = arrive(None, 0, 0)
    during = arrive(opened, 1, 4)  # arrived at +4 min, after the run began at +3
    stopped = incidents.give_up(during, mins(3), "InvalidTelemetry: line 3")
    assert stopped is not None and stopped.settle_at == during.settle_at
    assert "InvalidTelemetry" in stopped.audit[-1].note
