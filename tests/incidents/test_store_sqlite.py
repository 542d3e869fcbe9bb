"""SQLite specifics: batches, and a scratch store's dedup keys held in memory."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from loopbreaker import incidents
from loopbreaker.incidents.store.sqlite import SqliteStore

T0 = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)


def ids(name: str, message_id: str | None = None) -> tuple[str, ...]:
    entry = {"insertId": name, "logName": "projects/p/logs/stdout", "timestamp": "t"}
    return incidents.dedup_ids(incidents.entry_id(entry), message_id)


def table_keys(store: SqliteStore) -> int:
    return int(store._conn.execute("SELECT COUNT(*) FROM dedup").fetchone()[0])


@pytest.mark.parametrize("scratch", [False, True])
def test_a_batch_rolled_back_forgets_what_it_remembered(tmp_path: Path, scratch: bool) -> None:
    store = SqliteStore(tmp_path / "s.sqlite", scratch=scratch)
    assert not store.remember(ids("before"), T0)
    with pytest.raises(RuntimeError), store.batch():
        assert not store.remember(ids("inside", "m1"), T0)
        assert store.remember(ids("inside"), T0)  # seen within the batch
        raise RuntimeError("the replay stops")
    assert store.remember(ids("before"), T0)
    assert not store.remember(ids("inside", "m1"), T0)  # forgotten with the batch
    with store.batch():
        assert not store.remember(ids("kept"), T0)
    assert store.remember(ids("kept"), T0)


def test_a_scratch_store_keeps_its_keys_in_memory_then_in_its_table(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite", scratch=True, memory_keys=4)
    for n in range(4):
        assert not store.remember(ids(f"e{n}"), T0)
    assert table_keys(store) == 0  # four keys, all in memory
    assert not store.remember(ids("e4", "m4"), T0 + timedelta(days=10))
    assert table_keys(store) == 2  # memory is full: the table takes the rest
    for n in range(4):
        assert store.remember(ids(f"e{n}"), T0)  # found in memory
    assert store.remember(ids("other", "m4"), T0)  # found in the table
    assert store.prune(T0 + timedelta(days=9)) == 4
    assert not store.remember(ids("e0"), T0 + timedelta(days=10))


def test_a_scratch_store_writes_its_journal_in_memory(tmp_path: Path) -> None:
    durable = SqliteStore(tmp_path / "d.sqlite")
    scratch = SqliteStore(tmp_path / "s.sqlite", scratch=True)
    mode = "PRAGMA journal_mode"
    assert durable._conn.execute(mode).fetchone()[0] == "wal"
    assert scratch._conn.execute(mode).fetchone()[0] == "memory"


@pytest.mark.parametrize("scratch", [False, True])
def test_an_ingest_that_fails_keeps_none_of_its_keys(
    tmp_path: Path, scratch: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.incidents.test_store_contract import arrival

    store = SqliteStore(tmp_path / "s.sqlite", scratch=scratch)
    first = arrival("a", message_id="m1")

    def broken_save(*_: object, **__: object) -> None:
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(store, "_save", broken_save)
        with pytest.raises(OSError):
            store.ingest(first)
    assert not store.remember(ids("other", "m1"), T0)  # the messageId was not kept
    assert store.ingest(arrival("a")).incident is not None  # nor the entry id


def test_a_batch_defers_incident_writes_yet_every_read_sees_them(tmp_path: Path) -> None:
    from tests.incidents.test_store_contract import arrival

    path = tmp_path / "s.sqlite"
    store, other = SqliteStore(path), None
    with store.batch():
        first = store.ingest(arrival("a", 0))
        assert first.incident is not None
        for n in range(1, 30):
            assert store.ingest(arrival(f"s{n}", n / 10)).incident.id == first.incident.id  # type: ignore[union-attr]
        row = store._conn.execute("SELECT COUNT(*) FROM incidents").fetchone()[0]
        assert row == 0  # deferred: nothing written yet
        seen = store.get(first.incident.id)  # a read writes them first
        assert seen is not None and seen.signal_count == 30
        assert store.ingest(arrival("late", 3.5)).incident.signal_count == 31  # type: ignore[union-attr]
        assert [i.signal_count for i in store.list_incidents()] == [31]
    other = SqliteStore(path)  # another connection sees the commit
    assert [i.signal_count for i in other.list_incidents()] == [31]


def test_a_batch_rolled_back_writes_none_of_its_deferred_incidents(tmp_path: Path) -> None:
    from tests.incidents.test_store_contract import arrival

    store = SqliteStore(tmp_path / "s.sqlite")
    kept = store.ingest(arrival("a", 0)).incident
    assert kept is not None
    with pytest.raises(RuntimeError), store.batch():
        store.ingest(arrival("b", 1))
        store.ingest(arrival("c", 2))
        raise RuntimeError("the replay stops")
    assert store.get(kept.id) == kept  # as before the batch
    again = store.ingest(arrival("b", 1))
    assert not again.duplicate and again.incident.signal_count == 2  # type: ignore[union-attr]


def test_an_ingest_that_fails_in_a_batch_leaves_the_deferred_incident_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.incidents.test_store_contract import arrival

    store = SqliteStore(tmp_path / "s.sqlite", scratch=True)
    with store.batch():
        first = store.ingest(arrival("a", 0)).incident
        assert first is not None

        def broken_keys(*_: object, **__: object) -> None:
            raise OSError("disk full")

        with monkeypatch.context() as patch:
            patch.setattr(store, "_dedup_add", broken_keys)
            with pytest.raises(OSError):
                store.ingest(arrival("b", 1))
        assert store.get(first.id) == first  # the failed call changed nothing
        assert store.ingest(arrival("b", 1)).incident.signal_count == 2  # type: ignore[union-attr]


def test_known_keys_sees_the_incidents_a_batch_deferred(tmp_path: Path) -> None:
    from tests.incidents.test_store_contract import KEY, arrival

    store = SqliteStore(tmp_path / "s.sqlite")
    with store.batch():
        assert store.ingest(arrival("a", 0)).incident is not None
        row = store._conn.execute("SELECT COUNT(*) FROM incidents").fetchone()[0]
        assert row == 0  # deferred: nothing written yet
        assert store.known_keys([KEY]) == {KEY}


def test_the_schedule_reads_answer_from_deferred_incidents_without_writing_them(
    tmp_path: Path,
) -> None:
    """A replay asks due() and next_settle() before every entry: inside a batch they see
    the incidents the batch holds back as a read after writing them would, and leave
    them unwritten (else each entry would write its incident again)."""
    from loopbreaker.incidents.records import IncidentKey, Scope
    from tests.incidents.test_store_contract import arrival

    def node(name: str) -> IncidentKey:
        return IncidentKey(None, None, Scope.NODE, name)

    # Three incidents written before the batch; two of them joined inside it, so their
    # rows hold stale settle times that come first, and the rows and the held mix.
    before = [("w0", -1.0, "n0"), ("w1", -0.9, "n1"), ("w2", -0.8, "n2")]
    inside = [("a", 0.0, "n3"), ("j0", 0.2, "n0"), ("j1", 0.3, "n1"), ("b", 1.0, "n3")]
    inside += [("c", 3.0, "n4")]

    def fill(store: SqliteStore, held: bool) -> list[object]:
        seen: list[object] = []
        for name, minutes, where in inside:
            store.ingest(
                arrival(name, minutes, key=node(where), now=T0 + timedelta(minutes=minutes))
            )
            for probe in range(-90, 360, 15):
                moment = T0 + timedelta(seconds=probe)
                seen += [store.next_settle(moment), store.due(moment, 1), store.due(moment, 9)]
            if held:  # nothing written yet: the rows are as the batch found them
                assert store._conn.execute("SELECT settle_at FROM incidents").fetchall() == rows
        return seen

    plain = SqliteStore(tmp_path / "plain.sqlite")
    batched = SqliteStore(tmp_path / "batched.sqlite")
    for store in (plain, batched):
        for name, minutes, where in before:
            store.ingest(
                arrival(name, minutes, key=node(where), now=T0 + timedelta(minutes=minutes))
            )
    rows = batched._conn.execute("SELECT settle_at FROM incidents").fetchall()
    expected = fill(plain, held=False)
    with batched.batch():
        assert fill(batched, held=True) == expected
    assert any(expected[0::3]) and any(expected[2::3])  # not vacuous
