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

    def broken_save(*_: object) -> None:
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(store, "_save", broken_save)
        with pytest.raises(OSError):
            store.ingest(first)
    assert not store.remember(ids("other", "m1"), T0)  # the messageId was not kept
    assert store.ingest(arrival("a")).incident is not None  # nor the entry id
