"""The IncidentStore port: what the responder needs from durable state.

Implementations: :mod:`.sqlite` (embedded, local default), :mod:`.firestore` (cloud) and
``tests/fakes.py`` (in memory). The grouping decision itself is pure
(:func:`loopbreaker.incidents.choose` / :func:`~loopbreaker.incidents.absorb`); a store only
runs it inside one transaction per arrival, so concurrent deliveries cannot lose an
update or open two incidents for one key and window. An entry that concerns no incident
is only remembered (:meth:`IncidentStore.remember`), also in one transaction, so its
redelivery is a duplicate too. Transient failures (contention, unavailability) raise
:class:`~loopbreaker.errors.TransientError`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from loopbreaker.incidents import Arrival, Incident, IncidentKey, PauseRecord, State, Tallied
from loopbreaker.model import HostFailureRecord, Signal

HOUR = timedelta(hours=1)

#: A pure change of one incident; returning None means "leave it as it is".
Change = Callable[[Incident], Incident | None]


@dataclass(frozen=True)
class IngestResult:
    duplicate: bool
    #: The incident as the store last wrote it; None when the arrival wrote only its own
    #: documents (Firestore counts at settle time) -- then ``incident_id`` names it.
    incident: Incident | None = None
    created: bool = False
    incident_id: str | None = None

    @property
    def joined(self) -> str | None:
        """The id of the incident the arrival went to, None for a duplicate."""
        return self.incident.id if self.incident is not None else self.incident_id


@dataclass(frozen=True)
class UpdateResult:
    incident: Incident | None  # None: no such incident
    changed: bool


class IncidentStore(Protocol):
    """Durable incidents, dedup keys and per-host failure history."""

    def ingest(self, arrival: Arrival) -> IngestResult:
        """In ONE transaction: dedup check, choose or open the incident, write it, keep keys.

        A dedup id (entry or messageId) seen before makes it a duplicate: nothing changes.
        """
        ...

    def remember(self, dedup_ids: Sequence[str], now: datetime) -> bool:
        """In ONE transaction: dedup check, then keep the keys, pointing at no incident.

        For deliveries that concern no incident (ignored entries). Returns True when any id
        (entry or messageId) was seen before: a duplicate, and nothing changes. The keys
        live, and are pruned, beside those :meth:`ingest` keeps.
        """
        ...

    def known_keys(self, keys: Sequence[IncidentKey]) -> set[IncidentKey]:
        """Those of ``keys`` that some incident of this store has had (open or final):
        what the store already knows of a workload. One read, however many keys."""
        ...

    def update(self, incident_id: str, change: Change) -> UpdateResult:
        """Read-modify-write one incident in a transaction (``change`` may run again)."""
        ...

    def get(self, incident_id: str) -> Incident | None: ...

    def list_incidents(
        self, *, states: Collection[State] | None = None, limit: int = 100
    ) -> list[Incident]:
        """Incidents, most recently opened first."""
        ...

    def due(self, now: datetime, limit: int) -> list[str]:
        """Ids of incidents whose settle time has passed, oldest first."""
        ...

    def next_settle(self, after: datetime) -> datetime | None:
        """The earliest settle time later than ``after``; None when no incident has one."""
        ...

    def expiring(self, now: datetime, limit: int) -> list[str]:
        """Ids of incidents whose approval request is past its expiry."""
        ...

    def signals(self, incident_id: str) -> list[Signal]:
        """The signals kept for an incident, in arrival order."""
        ...

    def tally(self, incident_id: str) -> list[Tallied] | None:
        """All the incident's stored signals, for a store whose ingest does not count.

        None: the head's counts, span and names are exact already (SQLite, the fake).
        Otherwise the caller derives them with :func:`loopbreaker.incidents.recount`.
        """
        ...

    def host_history(
        self, names: Collection[str], *, exclude_incident: str | None = None
    ) -> list[HostFailureRecord]:
        """Remembered failures whose host or node is one of ``names``."""
        ...

    def record_host_failures(self, records: Sequence[HostFailureRecord]) -> None:
        """Remember failures (idempotent: a record written twice is stored once)."""
        ...

    def prune(self, before: datetime) -> int:
        """Forget dedup keys older than ``before``; returns how many went."""
        ...

    def deletions_since(self, cluster: str, since: datetime) -> int:
        """VM deletions reserved in ``cluster`` at or after ``since``."""
        ...

    def reserve_deletion(
        self, cluster: str, incident_id: str, at: datetime, limit: int, window: timedelta = HOUR
    ) -> bool:
        """In ONE transaction: count the cluster's deletions in ``window`` before ``at``
        and, under ``limit``, reserve one for ``incident_id``. True when reserved (also
        when this incident holds one already: a redelivery does not spend another)."""
        ...

    def claim_target(self, keys: Sequence[str], incident_id: str) -> str | None:
        """In ONE transaction: the incident that already holds any of ``keys`` (a VM, a
        physical host) and is not final, or None after recording ``incident_id`` as the
        holder of all of them. This is what keeps one failure to one approval request,
        also when two settles race."""
        ...

    def pause(self, record: PauseRecord) -> PauseRecord | None:
        """In ONE transaction: record ``record`` as the current pause, unless one is active
        at ``record.at``: then nothing changes and that one is returned."""
        ...

    def resume(self, by: str, at: datetime) -> PauseRecord | None:
        """In ONE transaction: end the active pause (as resumed by ``by`` at ``at``) and
        return it ended; None when nothing was paused."""
        ...

    def current_pause(self, now: datetime) -> PauseRecord | None:
        """The pause in force at ``now`` (not resumed, ``until`` not yet passed)."""
        ...

    def pauses(self, since: datetime) -> list[PauseRecord]:
        """Pauses in force at any time since ``since``, oldest first (for the report)."""
        ...

    def close(self) -> None: ...


def refresh(store: IncidentStore, incident_id: str, max_signals: int) -> Incident | None:
    """The incident with exact counts, span and names, whatever the store.

    A store that counts on ingest (``tally`` is None) has them already; otherwise they
    are derived from the stored signals and written to the head once.
    """
    from loopbreaker.incidents import recount

    tallied = store.tally(incident_id)
    if tallied is None:
        return store.get(incident_id)
    return store.update(incident_id, lambda i: recount(i, tallied, max_signals)).incident
