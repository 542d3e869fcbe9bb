"""SQLite incident store: the embedded default for the CLI and local runs.

WAL journal, ``BEGIN IMMEDIATE`` transactions (the write lock is taken up front, so two
processes cannot both decide to open an incident for one key), dedup keys as primary keys
(``incident_id`` NULL for entries that concern no incident). A busy or locked database
raises TransientError. Text is stored as valid UTF-8: bound strings have any lone
surrogate escaped (:func:`_t`), and the JSON columns are ASCII. :meth:`SqliteStore.batch`
groups many calls into one commit for a replay of a large file.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from loopbreaker import incidents
from loopbreaker.errors import ConfigError
from loopbreaker.incidents import Arrival, Incident, IndexEntry, PauseRecord, State, Tallied
from loopbreaker.incidents.records import IncidentKey
from loopbreaker.incidents.store.base import HOUR, Change, IngestResult, UpdateResult
from loopbreaker.incidents.store.sqlite.rows import latest_pause, put_pause, write_incident
from loopbreaker.incidents.store.sqlite.schema import _SCHEMA, SCHEMA_VERSION, _opt, _reraise, _t
from loopbreaker.model import HostFailureRecord, Signal
from loopbreaker.timeutil import epoch_us, format_rfc3339, from_epoch_us, parse_rfc3339

#: How long a connection waits for another writer before the operation counts as transient.
BUSY_TIMEOUT_SECONDS = 30.0
#: Dedup keys a scratch store keeps in memory (about 150 bytes each) before it writes
#: the rest to its table: memory stays bounded whatever the size of the replay.
SCRATCH_MEMORY_KEYS = 500_000


class SqliteStore:
    """IncidentStore on one SQLite file (``:memory:`` works for tests).

    ``scratch`` is for a file thrown away when the process ends (a replay without
    ``--store``): nobody else opens it and no crash needs surviving, so writes skip the
    fsync and the write-ahead log, and the first ``memory_keys`` dedup keys are kept in
    memory (a dict lookup, where the table costs a B-tree insert: a replay remembers
    every entry of its files). Memory keys follow the transactions: a call that fails
    adds none, and a batch rolled back takes its keys back out.
    """

    def __init__(
        self, path: Path | str, *, scratch: bool = False, memory_keys: int = SCRATCH_MEMORY_KEYS
    ) -> None:
        self.path = str(path)
        #: A scratch store's dedup keys in memory (key -> microseconds), else None.
        self._memory: dict[str, int] | None = {} if scratch else None
        self._memory_keys = memory_keys
        #: Whether the dedup table may hold keys (a scratch store's once memory is full).
        self._table_used = not scratch
        #: Memory keys of the call in progress, added when it succeeds.
        self._staged: list[tuple[str, int]] = []
        #: Memory keys added during the open batch, taken back out if it rolls back.
        self._batch_keys: list[str] = []
        #: Incidents ingest() saved during the open batch, written when it commits (or
        #: before anything else reads the table): in a storm one incident takes hundreds
        #: of signals a batch, and its row is tens of kB of JSON.
        self._deferred: dict[str, Incident] = {}
        #: Incidents saved by the ingest in progress, deferred when it succeeds.
        self._staged_incidents: dict[str, Incident] = {}
        if self.path != ":memory:":
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create the SQLite store {self.path}: {exc}") from exc
        #: Transactions begun, for the benchmark and tests.
        self.transactions = 0
        self._lock = threading.RLock()
        self._in_batch = False
        try:
            self._conn = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_SECONDS,
                isolation_level=None,  # we issue BEGIN/COMMIT ourselves
                check_same_thread=False,  # guarded by self._lock
            )
            if scratch:
                # The rollback journal stays (in memory): savepoints still undo a call.
                self._conn.execute("PRAGMA journal_mode=MEMORY")
                self._conn.execute("PRAGMA synchronous=OFF")
            else:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.OperationalError as exc:
            _reraise(exc)
        except sqlite3.DatabaseError as exc:  # e.g. "file is not a database"
            raise ConfigError(f"SQLite store {self.path}: {exc}") from exc

    # --- transactions ---------------------------------------------------------------

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Run the calls made inside as one transaction, each call a SAVEPOINT in it (a call
        that fails still undoes only its own writes). For a replay of many entries: one
        commit per batch instead of one per entry. Other connections see the writes once
        the batch commits, and wait for its write lock meanwhile."""
        with self._lock:
            if self._in_batch:
                yield
                return
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                _reraise(exc)
            self._in_batch = True
            try:
                yield
                self._write_deferred()
            except BaseException:
                self._in_batch = False
                self._roll_back_batch()
                raise
            self._in_batch = False
            try:
                self._conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                self._roll_back_batch()
                _reraise(exc)
            self._batch_keys.clear()

    def _roll_back_batch(self) -> None:
        """Undo the batch: its writes, and what it kept outside the database."""
        self._conn.execute("ROLLBACK")
        if self._memory is not None:
            for key in self._batch_keys:
                self._memory.pop(key, None)
        self._batch_keys.clear()
        self._deferred.clear()

    def _write_deferred(self) -> None:
        """Write the incidents the open batch deferred (before a commit, or a read)."""
        deferred, self._deferred = self._deferred, {}
        for incident in deferred.values():
            write_incident(self._conn, incident)

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The lock, with the table up to date for a read inside a batch."""
        with self._lock:
            if self._deferred:
                self._write_deferred()
            yield self._conn

    @contextmanager
    def _transaction(self, *, deferring: bool = False) -> Iterator[sqlite3.Connection]:
        """One call's transaction (a savepoint in a batch). Only ``deferring`` calls
        (ingest) may leave deferred incidents unwritten: any other writes them first,
        outside its savepoint, so a rollback of the call cannot lose them."""
        with self._lock:
            self.transactions += 1
            if self._deferred and not deferring:
                self._write_deferred()
            try:
                yield from self._begin_and_end()
            finally:
                # Kept when the call succeeded, dropped when it failed: never left over.
                self._drop_staged()

    def _drop_staged(self) -> None:
        self._staged = []
        self._staged_incidents = {}

    def _begin_and_end(self) -> Iterator[sqlite3.Connection]:
        """The body of _transaction: a savepoint in a batch, else BEGIN ... COMMIT."""
        if self._in_batch:
            self._conn.execute("SAVEPOINT call")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK TO call")
                self._conn.execute("RELEASE call")
                raise
            self._conn.execute("RELEASE call")
            self._keep_staged()
            return
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            _reraise(exc)
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        try:
            self._conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            self._conn.execute("ROLLBACK")
            _reraise(exc)
        self._keep_staged()

    def _keep_staged(self) -> None:
        """The call succeeded: its memory keys and deferred incidents count from now on."""
        if self._memory is not None and self._staged:
            self._memory.update(self._staged)
            if self._in_batch:
                self._batch_keys.extend(key for key, _ in self._staged)
        self._deferred.update(self._staged_incidents)

    def _dedup_known(self, db: sqlite3.Connection, ids: Sequence[str]) -> bool:
        if self._memory is not None:
            if any(i in self._memory for i in ids):
                return True
            if not self._table_used:
                return False
        marks = ",".join("?" * len(ids))
        return db.execute(f"SELECT 1 FROM dedup WHERE id IN ({marks})", ids).fetchone() is not None

    def _dedup_add(
        self, db: sqlite3.Connection, ids: Sequence[str], incident_id: str | None, at: int
    ) -> None:
        memory = self._memory
        if memory is not None and len(memory) + len(self._staged) + len(ids) <= self._memory_keys:
            self._staged.extend((i, at) for i in ids)
            return
        self._table_used = True
        db.executemany(
            "INSERT INTO dedup (id, incident_id, at) VALUES (?, ?, ?)",
            [(i, incident_id, at) for i in ids],
        )

    # --- IncidentStore --------------------------------------------------------------

    def ingest(self, arrival: Arrival) -> IngestResult:
        ids = arrival.dedup_ids
        key = _t(str(arrival.key))
        try:
            with self._transaction(deferring=True) as db:
                if self._dedup_known(db, ids):
                    return IngestResult(duplicate=True)
                rows = db.execute(
                    "SELECT id, first_event, last_event, state FROM incidents "
                    "WHERE key = ? AND final = 0",
                    (key,),
                ).fetchall()
                index = {
                    r[0]: IndexEntry(r[0], from_epoch_us(r[1]), from_epoch_us(r[2]), State(r[3]))
                    for r in rows
                }
                for deferred in self._deferred.values():
                    # The table row of a deferred incident is older than the incident.
                    if _t(str(deferred.key)) != key:
                        continue
                    index.pop(deferred.id, None)
                    if not deferred.final:
                        index[deferred.id] = IndexEntry(
                            deferred.id, deferred.first_event, deferred.last_event, deferred.state
                        )
                candidates = list(index.values())
                target = incidents.choose(
                    candidates, arrival.event_time, arrival.policy.grouping_window
                )
                if target is None and arrival.join_only:
                    self._dedup_add(db, ids, None, epoch_us(arrival.now))
                    return IngestResult(duplicate=False)
                current = self._load(db, target) if target else None
                absorbed = incidents.absorb(current, arrival)
                self._save(db, absorbed.incident, deferrable=True)
                self._dedup_add(db, ids, absorbed.incident.id, epoch_us(arrival.now))
                if absorbed.kept_signal is not None:
                    db.execute(
                        "INSERT INTO signals (incident_id, seq, data) VALUES (?, ?, ?)",
                        (
                            absorbed.incident.id,
                            absorbed.kept_signal["seq"],
                            json.dumps(absorbed.kept_signal, separators=(",", ":")),
                        ),
                    )
        except sqlite3.IntegrityError:
            # Only reachable if another writer slipped in a dedup key: same outcome.
            return IngestResult(duplicate=True)
        return IngestResult(False, absorbed.incident, absorbed.created)

    def remember(self, dedup_ids: Sequence[str], now: datetime) -> bool:
        ids = list(dedup_ids)
        if not ids:
            return False
        memory = self._memory
        if memory is not None:
            with self._lock:
                if not self._table_used and len(memory) + len(ids) <= self._memory_keys:
                    # Every key of the store is in memory: nothing to ask the table.
                    for key in ids:
                        if key in memory:
                            return True
                    at = epoch_us(now)
                    for key in ids:
                        memory[key] = at
                    if self._in_batch:
                        self._batch_keys.extend(ids)
                    return False
        elif len(ids) == 1:
            # One statement is atomic on its own: no transaction or savepoint to pay for.
            with self._lock:
                self.transactions += 1
                try:
                    inserted = self._conn.execute(
                        "INSERT OR IGNORE INTO dedup (id, incident_id, at) VALUES (?, NULL, ?)",
                        (ids[0], epoch_us(now)),
                    ).rowcount
                except sqlite3.OperationalError as exc:
                    _reraise(exc)
            return inserted == 0
        try:
            with self._transaction() as db:
                if self._dedup_known(db, ids):
                    return True
                self._dedup_add(db, ids, None, epoch_us(now))
        except sqlite3.IntegrityError:
            # Only reachable if another writer slipped in a dedup key: same outcome.
            return True
        return False

    def known_keys(self, keys: Sequence[IncidentKey]) -> set[IncidentKey]:
        # Keys as ingest stores and compares them; equal text is one key to the store.
        wanted: dict[str, list[IncidentKey]] = {}
        for key in keys:
            wanted.setdefault(_t(str(key)), []).append(key)
        if not wanted:
            return set()
        marks = ",".join("?" * len(wanted))
        with self._reading() as db:
            rows = db.execute(
                f"SELECT DISTINCT key FROM incidents WHERE key IN ({marks})", list(wanted)
            ).fetchall()
        return {key for (text,) in rows for key in wanted[text]}

    def update(self, incident_id: str, change: Change) -> UpdateResult:
        with self._transaction() as db:
            current = self._load(db, incident_id)
            if current is None:
                return UpdateResult(None, False)
            updated = change(current)
            if updated is None:
                return UpdateResult(current, False)
            self._save(db, updated)
            return UpdateResult(updated, True)

    def get(self, incident_id: str) -> Incident | None:
        with self._reading() as db:
            return self._load(db, incident_id)

    def list_incidents(
        self, *, states: Collection[State] | None = None, limit: int = 100
    ) -> list[Incident]:
        query = "SELECT data FROM incidents"
        params: list[object] = []
        if states is not None:
            query += f" WHERE state IN ({','.join('?' * len(states))})"
            params.extend(s.value for s in states)
        query += " ORDER BY opened_at DESC, id LIMIT ?"
        params.append(limit)
        with self._reading() as db:
            rows = db.execute(query, params).fetchall()
        return [Incident.from_dict(json.loads(r[0])) for r in rows]

    # The two reads the schedule makes before every entry of a replay: they answer from
    # the open batch's deferred incidents and the rows of the others, so they never force
    # those incidents to be written (one write per incident and batch, not per entry).

    def due(self, now: datetime, limit: int) -> list[str]:
        cutoff = epoch_us(now)
        with self._lock:
            held = self._deferred
            rows = self._conn.execute(
                "SELECT settle_at, id FROM incidents "
                "WHERE settle_at IS NOT NULL AND settle_at <= ? ORDER BY settle_at, id LIMIT ?",
                (cutoff, limit + len(held)),
            ).fetchall()
            if not held:
                return [r[1] for r in rows]
            stale = {_t(i) for i in held}
            found = [r for r in rows if r[1] not in stale] + [
                (epoch_us(i.settle_at), _t(i.id))
                for i in held.values()
                if i.settle_at is not None and epoch_us(i.settle_at) <= cutoff
            ]
        return [r[1] for r in sorted(found)[:limit]]

    def next_settle(self, after: datetime) -> datetime | None:
        floor = epoch_us(after)
        with self._lock:
            held = self._deferred
            stale = tuple(_t(i) for i in held)
            row = self._conn.execute(
                "SELECT MIN(settle_at) FROM incidents WHERE settle_at > ? "
                f"AND id NOT IN ({','.join('?' * len(stale))})",
                (floor, *stale),
            ).fetchone()
            times = [
                t for i in held.values() if i.settle_at and (t := epoch_us(i.settle_at)) > floor
            ]
        if row and row[0] is not None:
            times.append(row[0])
        return from_epoch_us(min(times)) if times else None

    def expiring(self, now: datetime, limit: int) -> list[str]:
        with self._reading() as db:
            rows = db.execute(
                "SELECT id FROM incidents WHERE expires_at IS NOT NULL AND expires_at <= ? "
                "ORDER BY expires_at, id LIMIT ?",
                (epoch_us(now), limit),
            ).fetchall()
        return [r[0] for r in rows]

    def signals(self, incident_id: str) -> list[Signal]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT data FROM signals WHERE incident_id = ? ORDER BY seq", (_t(incident_id),)
            ).fetchall()
        return [Signal.from_dict(json.loads(r[0])) for r in rows]

    def tally(self, incident_id: str) -> list[Tallied] | None:
        return None  # every arrival updates the head in its own transaction

    def host_history(
        self, names: Collection[str], *, exclude_incident: str | None = None
    ) -> list[HostFailureRecord]:
        wanted = sorted({_t(n) for n in names})
        if not wanted:
            return []
        marks = ",".join("?" * len(wanted))
        with self._lock:
            rows = self._conn.execute(
                f"SELECT host, node, at, incident_id FROM host_failures "
                f"WHERE host IN ({marks}) OR node IN ({marks}) ORDER BY at, host",
                (*wanted, *wanted),
            ).fetchall()
        return [
            HostFailureRecord(r[0], r[1], parse_rfc3339(r[2]), r[3])
            for r in rows
            if exclude_incident is None or r[3] != exclude_incident
        ]

    def record_host_failures(self, records: Sequence[HostFailureRecord]) -> None:
        if not records:
            return
        clean = [
            replace(r, host=_t(r.host), node=_opt(r.node), incident_id=_opt(r.incident_id))
            for r in records
        ]
        with self._transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO host_failures (id, host, node, at, incident_id) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (
                        incidents.host_failure_id(r),
                        r.host,
                        r.node,
                        format_rfc3339(r.at),
                        r.incident_id,
                    )
                    for r in clean
                ],
            )

    def prune(self, before: datetime) -> int:
        cutoff = epoch_us(before)
        with self._transaction() as db:
            pruned = db.execute("DELETE FROM dedup WHERE at < ?", (cutoff,)).rowcount
        if self._memory is not None:
            with self._lock:
                old = [key for key, at in self._memory.items() if at < cutoff]
                for key in old:
                    del self._memory[key]
            pruned += len(old)
        return pruned

    def deletions_since(self, cluster: str, since: datetime) -> int:
        with self._lock:
            row = self._conn.execute(
                "SELECT COUNT(*) FROM deletions WHERE cluster = ? AND at >= ?",
                (_t(cluster), epoch_us(since)),
            ).fetchone()
        return int(row[0])

    def reserve_deletion(
        self, cluster: str, incident_id: str, at: datetime, limit: int, window: timedelta = HOUR
    ) -> bool:
        with self._transaction() as db:
            mine = db.execute(
                "SELECT 1 FROM deletions WHERE cluster = ? AND incident_id = ?",
                (_t(cluster), _t(incident_id)),
            ).fetchone()
            if mine:
                return True
            (count,) = db.execute(
                "SELECT COUNT(*) FROM deletions WHERE cluster = ? AND at >= ?",
                (_t(cluster), epoch_us(at - window)),
            ).fetchone()
            if count >= limit:
                return False
            db.execute(
                "INSERT INTO deletions (cluster, incident_id, at) VALUES (?, ?, ?)",
                (_t(cluster), _t(incident_id), epoch_us(at)),
            )
            return True

    def claim_target(self, keys: Sequence[str], incident_id: str) -> str | None:
        with self._transaction() as db:
            for key in keys:
                row = db.execute(
                    "SELECT c.incident_id FROM claims c JOIN incidents i ON i.id = c.incident_id "
                    "WHERE c.key = ? AND c.incident_id != ? AND i.final = 0",
                    (_t(key), _t(incident_id)),
                ).fetchone()
                if row:
                    holder: str = row[0]
                    return holder
            db.executemany(
                "INSERT OR REPLACE INTO claims (key, incident_id) VALUES (?, ?)",
                [(_t(key), _t(incident_id)) for key in keys],
            )
            return None

    # --- pause -----------------------------------------------------------------------

    def pause(self, record: PauseRecord) -> PauseRecord | None:
        with self._transaction() as db:
            latest = latest_pause(db)
            if latest is not None and latest.active(record.at):
                return latest
            clean = replace(record, by=_t(record.by), reason=_t(record.reason))
            put_pause(db, clean)
            return None

    def resume(self, by: str, at: datetime) -> PauseRecord | None:
        with self._transaction() as db:
            latest = latest_pause(db)
            if latest is None or not latest.active(at):
                return None
            ended = replace(latest, resumed_at=at, resumed_by=_t(by))
            put_pause(db, ended)
            return ended

    def current_pause(self, now: datetime) -> PauseRecord | None:
        with self._lock:
            latest = latest_pause(self._conn)
        return latest if latest is not None and latest.active(now) else None

    def pauses(self, since: datetime) -> list[PauseRecord]:
        with self._lock:
            rows = self._conn.execute("SELECT data FROM pauses ORDER BY at, id").fetchall()
        found = [PauseRecord.from_dict(json.loads(r[0])) for r in rows]
        return [p for p in found if (p.ended_at() or since) >= since]

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # --- rows -----------------------------------------------------------------------

    def _load(self, db: sqlite3.Connection, incident_id: str) -> Incident | None:
        found = self._staged_incidents.get(incident_id) or self._deferred.get(incident_id)
        if found is not None:
            return found
        row = db.execute("SELECT data FROM incidents WHERE id = ?", (_t(incident_id),)).fetchone()
        return Incident.from_dict(json.loads(row[0])) if row else None

    def _save(
        self, db: sqlite3.Connection, incident: Incident, *, deferrable: bool = False
    ) -> None:
        if deferrable and self._in_batch:
            self._staged_incidents[incident.id] = incident
        else:
            write_incident(db, incident)
