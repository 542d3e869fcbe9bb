"""The pause switch, one contract on SQLite, the real Firestore emulator and the fake."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from fakes import StoreFactory

from loopbreaker.errors import InvalidInput
from loopbreaker.incidents import new_pause

T0 = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)


def test_pause_is_recorded_with_who_why_and_until(store_factory: StoreFactory) -> None:
    store = store_factory()
    assert store.current_pause(T0) is None
    record = new_pause("alice", "  GPU capacity  review ", T0, T0 + timedelta(hours=2))
    assert store.pause(record) is None
    # Another handle on the same store sees it: the switch is durable, not in memory.
    other = store_factory()
    found = other.current_pause(T0 + timedelta(minutes=5))
    assert found is not None
    assert (found.by, found.reason, found.at, found.until) == (
        "alice",
        "GPU capacity review",
        T0,
        T0 + timedelta(hours=2),
    )
    # An "until" that has passed ends the pause without anyone resuming it.
    assert other.current_pause(T0 + timedelta(hours=2)) is None


def test_a_second_pause_leaves_the_first_in_force(store_factory: StoreFactory) -> None:
    store = store_factory()
    first = new_pause("alice", "maintenance", T0, None)
    assert store.pause(first) is None
    held = store.pause(new_pause("bob", "other", T0 + timedelta(minutes=1), None))
    assert held is not None and held.by == "alice"
    current = store.current_pause(T0 + timedelta(days=3))
    assert current is not None and current.id == first.id


def test_resume_ends_the_pause_and_the_report_lists_the_period(
    store_factory: StoreFactory,
) -> None:
    store = store_factory()
    store.pause(new_pause("alice", "maintenance", T0, None))
    ended = store.resume("bob", T0 + timedelta(minutes=30))
    assert ended is not None
    assert (ended.by, ended.resumed_by, ended.resumed_at) == (
        "alice",
        "bob",
        T0 + timedelta(minutes=30),
    )
    assert store.current_pause(T0 + timedelta(minutes=31)) is None
    assert store.resume("bob", T0 + timedelta(minutes=40)) is None  # nothing paused
    # Pausing again after a resume works, and both periods are listed, oldest first.
    store.pause(new_pause("carol", "again", T0 + timedelta(hours=1), None))
    periods = store.pauses(T0 - timedelta(days=1))
    assert [(p.by, p.resumed_by) for p in periods] == [("alice", "bob"), ("carol", None)]
    # A period that ended before ``since`` is not listed.
    assert [p.by for p in store.pauses(T0 + timedelta(minutes=45))] == ["carol"]


def test_concurrent_pauses_record_exactly_one(store_factory: StoreFactory) -> None:
    handles = [store_factory() for _ in range(4)]
    records = [new_pause(f"user{n}", f"reason {n}", T0, None) for n in range(4)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda hr: hr[0].pause(hr[1]), zip(handles, records, strict=True)))
    assert results.count(None) == 1
    winner = records[results.index(None)]
    assert {r.id for r in results if r is not None} == {winner.id}
    current = handles[0].current_pause(T0)
    assert current is not None and current.id == winner.id


@pytest.mark.parametrize(
    ("by", "reason", "until", "message"),
    [
        ("alice", "   ", None, "needs a reason"),
        ("alice", "x" * 501, None, "longer than 500"),
        (" ", "why", None, "who paused"),
        ("alice", "why", T0, "is not after now"),
    ],
)
def test_a_bad_pause_is_refused_with_a_clear_error(
    by: str, reason: str, until: datetime | None, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        new_pause(by, reason, T0, until)
