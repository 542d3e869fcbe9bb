"""Firestore incident store (google-cloud-firestore), the cloud default.

Collections, each prefixed (``LOOPBREAKER_COLLECTION_PREFIX``):
  ``<p>_incidents/{id}``          the incident head (JSON in ``data``) + query fields;
  ``<p>_incidents/{id}/signals``  the kept signals, one document each;
  ``<p>_keys/{sha(key)}``         the key index: the candidate incidents of one key;
  ``<p>_dedup/{id}``              one document per entry id and per messageId, with
                                  ``expire_at`` for a Firestore TTL policy (``incident_id``
                                  null for an entry that concerns no incident);
  ``<p>_hosts/{id}``              per-host failure history;
  ``<p>_deletions/{sha(cluster)}`` the cluster's recent VM deletions (safety limit);
  ``<p>_pauses/switch``           the remediation pause switch: the current pause and the
                                  last :data:`PAUSE_HISTORY` ones (rare writes, one doc).

Every read-modify-write is one atomic commit conditioned on what it read (optimistic
concurrency): documents that existed are written with an ``update_time`` precondition,
new ones, dedup keys included, with ``create()`` (create-if-absent). If any precondition
fails (another delivery got there first) the commit changes nothing, and the decision is
re-read and re-made: it then sees the duplicate, or joins the incident the other opened.
The key document serialises all arrivals of one key, so nothing is lost and no key gets
two incidents for one window. Strings are written as valid UTF-8 (lone surrogates escaped,
as in the SQLite store); an id no document can have is an incident that does not exist.

Why not ``client.transaction()``: its pessimistic locks make a burst of deliveries on one
key deadlock on the read-lock to write-lock upgrade. Firestore aborts one side, and the
emulator only does so after a 2 s lock timeout per conflict (4 concurrent transactions on
one document took 8.5 s there; 32 conditioned commits took under 1 s).
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from loopbreaker import incidents
from loopbreaker.errors import StoreError, TransientError
from loopbreaker.incidents import Arrival, Incident, IndexEntry, PauseRecord, State, Tallied
from loopbreaker.incidents.records import (
    DEFAULT_DEDUP_RETENTION,
    DEFAULT_MAX_SIGNALS,
    IncidentKey,
)
from loopbreaker.incidents.store.base import HOUR, Change, IngestResult, UpdateResult
from loopbreaker.incidents.store.firestore.documents import (
    _TALLY_FIELDS,
    _digest,
    _incident,
    _incident_doc,
    _index,
    _opt,
    _recent,
    _signal_doc,
    _valid_id,
    _Writes,
)
from loopbreaker.model import HostFailureRecord, Signal
from loopbreaker.signals.decode import escape_surrogates
from loopbreaker.timeutil import parse_rfc3339

T = TypeVar("T")

#: Decisions re-made after losing a race; then the delivery fails and Pub/Sub retries it.
COMMIT_ATTEMPTS = 20
#: Jittered exponential backoff between attempts (seconds).
BASE_BACKOFF = 0.01
MAX_BACKOFF = 0.5
#: ``array_contains_any`` takes at most 30 values.
_IN_LIMIT = 30
_PRUNE_BATCH = 400
#: Ended pauses kept on the switch document (for ``incidents report``).
PAUSE_HISTORY = 200


def _transient_types() -> tuple[type[BaseException], ...]:
    from google.api_core import exceptions as gexc

    return (
        gexc.Aborted,
        gexc.DeadlineExceeded,
        gexc.ServiceUnavailable,
        gexc.InternalServerError,
        gexc.TooManyRequests,
        gexc.ResourceExhausted,
        gexc.GatewayTimeout,
        gexc.RetryError,
    )


class FirestoreStore:
    """IncidentStore on Firestore in native mode."""

    def __init__(
        self,
        client: Any,
        prefix: str = "loopbreaker",
        *,
        dedup_retention: timedelta = DEFAULT_DEDUP_RETENTION,
        max_signals: int = DEFAULT_MAX_SIGNALS,
    ) -> None:
        self._client = client
        self._max_signals = max_signals
        self._incidents = client.collection(f"{prefix}_incidents")
        self._keys = client.collection(f"{prefix}_keys")
        self._dedup = client.collection(f"{prefix}_dedup")
        self._hosts = client.collection(f"{prefix}_hosts")
        self._deletions = client.collection(f"{prefix}_deletions")
        self._claims = client.collection(f"{prefix}_claims")
        self._pause_ref = client.collection(f"{prefix}_pauses").document("switch")
        self._retention = dedup_retention
        #: Atomic commits attempted (re-made decisions after a lost race included).
        self.transactions = 0
        #: Committed writes per document path (the benchmark's hot-document check).
        self.doc_writes: Counter[str] = Counter()

    @classmethod
    def connect(
        cls,
        *,
        project: str | None,
        database: str,
        prefix: str,
        dedup_retention: timedelta = DEFAULT_DEDUP_RETENTION,
        max_signals: int = DEFAULT_MAX_SIGNALS,
    ) -> FirestoreStore:
        # Imported here: the client library is only loaded when Firestore is the store.
        from google.cloud import firestore

        client = firestore.Client(project=project, database=database)
        return cls(client, prefix, dedup_retention=dedup_retention, max_signals=max_signals)

    # --- conditioned commits --------------------------------------------------------

    def _optimistic(self, attempt: Callable[[_Writes], T]) -> T:
        """Run ``attempt`` (reads + decision) and commit its writes; re-run on a conflict."""
        from google.api_core import exceptions as gexc

        for number in range(COMMIT_ATTEMPTS):
            writes = _Writes(self._client)
            result = attempt(writes)
            if not writes.count:
                return result
            self.transactions += 1
            try:
                self._call(writes.batch.commit, conflicts=True)
                self.doc_writes.update(writes.paths)
                return result
            except (gexc.AlreadyExists, gexc.FailedPrecondition):
                # Jittered backoff: the deliveries that lost this round spread out.
                time.sleep(random.uniform(0, min(MAX_BACKOFF, BASE_BACKOFF * 2**number)))
        raise TransientError(f"Firestore: {COMMIT_ATTEMPTS} conflicting commits in a row")

    def _call(self, operation: Callable[[], T], *, conflicts: bool = False) -> T:
        """One call, with its failures mapped onto the loopbreaker error tree.

        Transient failures raise TransientError, every other API error StoreError. With
        ``conflicts`` (a conditioned commit), AlreadyExists and FailedPrecondition -- a
        lost race, which the caller decides again -- pass through unchanged.
        """
        from google.api_core import exceptions as gexc

        try:
            return operation()
        except _transient_types() as exc:
            raise TransientError(f"Firestore unavailable: {exc}") from exc
        except gexc.GoogleAPICallError as exc:
            if conflicts and isinstance(exc, (gexc.AlreadyExists, gexc.FailedPrecondition)):
                raise
            raise StoreError(f"Firestore refused the call: {exc}") from exc

    def _read(self, refs: Sequence[Any]) -> dict[str, Any]:
        snaps = self._call(lambda: list(self._client.get_all(refs)))
        return {snap.reference.path: snap for snap in snaps}

    # --- IncidentStore --------------------------------------------------------------

    def ingest(self, arrival: Arrival) -> IngestResult:
        dedup_refs = [self._dedup.document(i) for i in arrival.dedup_ids]
        key_ref = self._keys.document(arrival.key.digest)
        window = arrival.policy.grouping_window

        tries = [0]

        def attempt(writes: _Writes) -> IngestResult:
            tries[0] += 1
            # The first try reads no dedup key: its create()s fail as a whole if one
            # exists. Only after a failed commit are they read, to tell a redelivery from
            # a lost race.
            checked = dedup_refs if tries[0] > 1 else []
            snaps = self._read([*checked, key_ref])
            if any(snaps[r.path].exists for r in checked):
                return IngestResult(duplicate=True)
            key_snap = snaps[key_ref.path]
            entries = _index(key_snap)
            target = incidents.choose(entries, arrival.event_time, window)
            entry = next((e for e in entries if e.id == target), None)
            joins = entry is not None and entry.armed
            if (
                entry is not None
                and joins
                and not incidents.extends(entry, arrival.event_time, window)
            ):
                # The common case in a storm: only this arrival's own documents, and not
                # even a read of the head.
                ref = self._incidents.document(entry.id)
                self._put_own(writes, ref, arrival, entry.id)
                return IngestResult(False, None, False, incident_id=entry.id)
            head_snap = None
            if entry is not None:
                ref = self._incidents.document(entry.id)
                head_snap = self._read([ref])[ref.path]
            current = _incident(head_snap) if head_snap is not None and head_snap.exists else None
            if (current is None or current.final) and arrival.join_only:
                for dedup_ref in dedup_refs:
                    writes.put(dedup_ref, self._dedup_doc(None, arrival.now), None)
                return IngestResult(duplicate=False)
            if current is None or current.final:
                # Open an incident: the only arrival of a storm that writes shared documents.
                absorbed = incidents.absorb(None, arrival)
                incident = absorbed.incident
                ref = self._incidents.document(incident.id)
                writes.put(ref, _incident_doc(incident), None)
                self._put_index(writes, key_ref, key_snap, entries, incident)
                created = True
            else:
                assert entry is not None
                # Rare: the span leaves its buckets, or a settled incident is re-armed.
                incident = incidents.touch(current, arrival)
                writes.put(ref, _incident_doc(incident), head_snap)
                if IndexEntry.of(incident) != entry:
                    self._put_index(writes, key_ref, key_snap, entries, incident)
                created = False
            self._put_own(writes, ref, arrival, incident.id)
            return IngestResult(False, incident, created, incident_id=incident.id)

        return self._optimistic(attempt)

    def _put_own(self, writes: _Writes, ref: Any, arrival: Arrival, incident_id: str) -> None:
        """The arrival's own documents: its dedup keys and its signal (create-if-absent)."""
        for dedup_id in arrival.dedup_ids:
            writes.put(
                self._dedup.document(dedup_id), self._dedup_doc(incident_id, arrival.now), None
            )
        signal_ref = ref.collection("signals").document(arrival.entry_id)
        writes.put(signal_ref, _signal_doc(arrival), None)

    def _dedup_doc(self, incident_id: str | None, now: datetime) -> dict[str, Any]:
        return {"incident_id": incident_id, "at": now, "expire_at": now + self._retention}

    def _put_index(
        self,
        writes: _Writes,
        key_ref: Any,
        key_snap: Any,
        entries: list[IndexEntry],
        incident: Incident,
    ) -> None:
        key_doc = {
            "key": str(incident.key),
            "incidents": [e.to_dict() for e in incidents.reindex(entries, incident)],
        }
        writes.put(key_ref, key_doc, key_snap)

    def remember(self, dedup_ids: Sequence[str], now: datetime) -> bool:
        from google.api_core import exceptions as gexc

        if not dedup_ids:
            return False
        # One commit of create()s, no read: if any key exists the commit fails as a whole,
        # so a duplicate changes nothing, and nothing needs deciding again.
        batch = self._client.batch()
        for dedup_id in dedup_ids:
            batch.create(self._dedup.document(dedup_id), self._dedup_doc(None, now))
        self.transactions += 1
        try:
            self._call(batch.commit, conflicts=True)
        except (gexc.AlreadyExists, gexc.FailedPrecondition):
            return True
        return False

    def known_keys(self, keys: Sequence[IncidentKey]) -> set[IncidentKey]:
        # A key's document is created with its first incident and never deleted: once
        # its incidents are final their entries leave the index, the document stays.
        wanted: dict[str, list[IncidentKey]] = {}
        for key in keys:
            wanted.setdefault(key.digest, []).append(key)
        if not wanted:
            return set()
        refs = [self._keys.document(digest) for digest in wanted]
        snaps = self._read(refs)
        return {key for ref in refs if snaps[ref.path].exists for key in wanted[ref.id]}

    def update(self, incident_id: str, change: Change) -> UpdateResult:
        if not _valid_id(incident_id):
            return UpdateResult(None, False)
        ref = self._incidents.document(incident_id)

        def attempt(writes: _Writes) -> UpdateResult:
            snap = self._read([ref])[ref.path]
            if not snap.exists:
                return UpdateResult(None, False)
            current = _incident(snap)
            updated = change(current)
            if updated is None:
                return UpdateResult(current, False)
            writes.put(ref, _incident_doc(updated), snap)
            if IndexEntry.of(updated) != IndexEntry.of(current) or updated.final:
                # The key index only holds span and state: most updates leave it alone.
                key_ref = self._keys.document(current.key.digest)
                key_snap = self._read([key_ref])[key_ref.path]
                if key_snap.exists:
                    self._put_index(writes, key_ref, key_snap, _index(key_snap), updated)
            return UpdateResult(updated, True)

        return self._optimistic(attempt)

    def get(self, incident_id: str) -> Incident | None:
        if not _valid_id(incident_id):
            return None
        snap = self._call(lambda: self._incidents.document(incident_id).get())
        return _incident(snap) if snap.exists else None

    def list_incidents(
        self, *, states: Collection[State] | None = None, limit: int = 100
    ) -> list[Incident]:
        from google.cloud import firestore
        from google.cloud.firestore_v1.base_query import FieldFilter

        if states is not None:
            # An equality filter plus an order on another field needs a composite index;
            # sort here instead.
            query = self._incidents.where(
                filter=FieldFilter("state", "in", [s.value for s in states])
            )
            found = [_incident(s) for s in self._call(lambda: list(query.stream()))]
            found.sort(key=lambda i: (i.opened_at, i.id), reverse=True)
            return found[:limit]
        ordered = self._incidents.order_by("opened_at", direction=firestore.Query.DESCENDING)
        return [_incident(s) for s in self._call(lambda: list(ordered.limit(limit).stream()))]

    def due(self, now: datetime, limit: int) -> list[str]:
        return self._ids_before("settle_at", now, limit)

    def expiring(self, now: datetime, limit: int) -> list[str]:
        return self._ids_before("expires_at", now, limit)

    def next_settle(self, after: datetime) -> datetime | None:
        from google.cloud.firestore_v1.base_query import FieldFilter

        query = (
            self._incidents.where(filter=FieldFilter("settle_at", ">", after))
            .order_by("settle_at")
            .limit(1)
        )
        found = self._call(lambda: list(query.stream()))
        value = found[0].get("settle_at") if found else None
        return value.astimezone(UTC) if isinstance(value, datetime) else None

    def _ids_before(self, field: str, now: datetime, limit: int) -> list[str]:
        from google.cloud.firestore_v1.base_query import FieldFilter

        query = (
            self._incidents.where(filter=FieldFilter(field, "<=", now)).order_by(field).limit(limit)
        )
        return [s.id for s in self._call(lambda: list(query.stream()))]

    def signals(self, incident_id: str) -> list[Signal]:
        # The head's kept_signals is the cap the incident was counted with (recount).
        if not _valid_id(incident_id):
            return []
        head = self.get(incident_id)
        limit = head.kept_signals if head is not None and head.kept_signals else self._max_signals
        query = (
            self._incidents.document(incident_id)
            .collection("signals")
            .order_by("arrived_at")
            .limit(limit)
        )
        return [Signal.from_dict(s.to_dict()) for s in self._call(lambda: list(query.stream()))]

    def tally(self, incident_id: str) -> list[Tallied] | None:
        """Every stored signal of the incident (counts are derived from them at settle)."""
        if not _valid_id(incident_id):
            return []
        query = (
            self._incidents.document(incident_id)
            .collection("signals")
            .select([*_TALLY_FIELDS, "event_time", "arrived_at", "entry_id"])
        )
        out = []
        for snap in self._call(lambda: list(query.stream())):
            data = snap.to_dict()
            out.append(
                Tallied(
                    signal=Signal.from_dict({k: data.get(k) for k in _TALLY_FIELDS}),
                    event_time=parse_rfc3339(data["event_time"]),
                    arrived_at=data["arrived_at"],
                    entry_id=str(data.get("entry_id") or snap.id),
                )
            )
        return out

    def host_history(
        self, names: Collection[str], *, exclude_incident: str | None = None
    ) -> list[HostFailureRecord]:
        from google.cloud.firestore_v1.base_query import FieldFilter

        wanted = sorted({escape_surrogates(n) for n in names})
        found: dict[str, HostFailureRecord] = {}
        for start in range(0, len(wanted), _IN_LIMIT):
            chunk = wanted[start : start + _IN_LIMIT]
            query = self._hosts.where(filter=FieldFilter("names", "array_contains_any", chunk))
            for snap in self._call(lambda q=query: list(q.stream())):  # type: ignore[misc]
                data = snap.to_dict()
                if exclude_incident is not None and data.get("incident_id") == exclude_incident:
                    continue
                found[snap.id] = HostFailureRecord(
                    data["host"], data.get("node"), data["at"], data.get("incident_id")
                )
        return sorted(found.values(), key=lambda r: (r.at, r.host))

    def record_host_failures(self, records: Sequence[HostFailureRecord]) -> None:
        if not records:
            return
        batch = self._client.batch()
        for record in records:
            r = replace(
                record,
                host=escape_surrogates(record.host),
                node=_opt(record.node),
                incident_id=_opt(record.incident_id),
            )
            names = [n for n in {r.host, r.node} if n]
            batch.set(
                self._hosts.document(incidents.host_failure_id(r)),
                {
                    "host": r.host,
                    "node": r.node,
                    "at": r.at,
                    "incident_id": r.incident_id,
                    "names": sorted(names),
                },
            )
        self._call(batch.commit)

    def prune(self, before: datetime) -> int:
        # A TTL policy on expire_at does this in the cloud; this keeps emulators tidy too.
        from google.cloud.firestore_v1.base_query import FieldFilter

        query = self._dedup.where(filter=FieldFilter("at", "<", before)).limit(_PRUNE_BATCH)
        snaps = self._call(lambda: list(query.stream()))
        if not snaps:
            return 0
        batch = self._client.batch()
        for snap in snaps:
            batch.delete(snap.reference)
        self._call(batch.commit)
        return len(snaps)

    def deletions_since(self, cluster: str, since: datetime) -> int:
        snap = self._call(lambda: self._deletions.document(_digest(cluster)).get())
        return sum(1 for d in _recent(snap) if d["at"] >= since)

    def reserve_deletion(
        self, cluster: str, incident_id: str, at: datetime, limit: int, window: timedelta = HOUR
    ) -> bool:
        ref = self._deletions.document(_digest(cluster))

        def attempt(writes: _Writes) -> bool:
            snap = self._read([ref])[ref.path]
            recent = [d for d in _recent(snap) if d["at"] >= at - window]
            if any(d["incident_id"] == incident_id for d in _recent(snap)):
                return True
            if len(recent) >= limit:
                return False
            # Rare writes (a handful an hour): one document per cluster is no hot spot.
            writes.put(
                ref,
                {
                    "cluster": escape_surrogates(cluster),
                    "deletions": [
                        *recent,
                        {"incident_id": escape_surrogates(incident_id), "at": at},
                    ],
                },
                snap,
            )
            return True

        return self._optimistic(attempt)

    def claim_target(self, keys: Sequence[str], incident_id: str) -> str | None:
        refs = [self._claims.document(_digest(key)) for key in keys]

        def attempt(writes: _Writes) -> str | None:
            snaps = self._read(refs)
            holders = {
                snap.get("incident_id")
                for snap in snaps.values()
                if snap.exists and snap.get("incident_id") != incident_id
            }
            if holders:
                found = self._read([self._incidents.document(h) for h in sorted(holders)])
                for snap in found.values():
                    if snap.exists and not _incident(snap).final:
                        held: str = snap.reference.id
                        return held
            # Each claim is created, or replaced at the version read: a racing settle's
            # commit fails its precondition, and its retry sees this claim.
            for key, ref in zip(keys, refs, strict=True):
                doc = {"key": escape_surrogates(key), "incident_id": incident_id}
                writes.put(ref, doc, snaps.get(ref.path))
            return None

        return self._optimistic(attempt)

    # --- pause -----------------------------------------------------------------------

    def _pause_state(self, snap: Any) -> tuple[PauseRecord | None, list[PauseRecord]]:
        if not snap.exists:
            return None, []
        current = snap.get("current")
        history = [PauseRecord.from_dict(json.loads(h)) for h in snap.get("history") or ()]
        return (PauseRecord.from_dict(json.loads(current)) if current else None), history

    def _put_pause_state(
        self, writes: _Writes, snap: Any, current: PauseRecord | None, history: list[PauseRecord]
    ) -> None:
        doc = {
            "current": json.dumps(current.to_dict()) if current else None,
            "history": [json.dumps(h.to_dict()) for h in history[-PAUSE_HISTORY:]],
        }
        writes.put(self._pause_ref, doc, snap)

    def pause(self, record: PauseRecord) -> PauseRecord | None:
        ref = self._pause_ref
        clean = replace(
            record, by=escape_surrogates(record.by), reason=escape_surrogates(record.reason)
        )

        def attempt(writes: _Writes) -> PauseRecord | None:
            snap = self._read([ref])[ref.path]
            current, history = self._pause_state(snap)
            if current is not None and current.active(record.at):
                return current
            if current is not None:
                history.append(current)  # ran out by its own ``until``
            self._put_pause_state(writes, snap, clean, history)
            return None

        return self._optimistic(attempt)

    def resume(self, by: str, at: datetime) -> PauseRecord | None:
        ref = self._pause_ref

        def attempt(writes: _Writes) -> PauseRecord | None:
            snap = self._read([ref])[ref.path]
            current, history = self._pause_state(snap)
            if current is None or not current.active(at):
                return None
            ended = replace(current, resumed_at=at, resumed_by=escape_surrogates(by))
            self._put_pause_state(writes, snap, None, [*history, ended])
            return ended

        return self._optimistic(attempt)

    def current_pause(self, now: datetime) -> PauseRecord | None:
        snap = self._call(lambda: self._pause_ref.get())
        current, _ = self._pause_state(snap)
        return current if current is not None and current.active(now) else None

    def pauses(self, since: datetime) -> list[PauseRecord]:
        snap = self._call(lambda: self._pause_ref.get())
        current, history = self._pause_state(snap)
        found = [*history, *([current] if current else [])]
        found.sort(key=lambda p: (p.at, p.id))
        return [p for p in found if (p.ended_at() or since) >= since]

    def close(self) -> None:
        self._client.close()
