"""Event-time windows: a signal joins the incident whose span contains it, or opens one (pure)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from loopbreaker.incidents.keys import dedup_ids, new_incident_id, workload_name
from loopbreaker.incidents.records import (
    DEFAULT_MAX_SIGNALS,
    FINAL_STATES,
    INDEX_RETENTION,
    MAX_NAMES,
    SYSTEM_ACTOR,
    AuditEvent,
    IllegalTransition,
    Incident,
    IncidentKey,
    Policy,
    State,
    evolve,
)
from loopbreaker.model import (
    HOST_FAULT_KINDS,
    Signal,
)
from loopbreaker.timeutil import format_rfc3339, parse_rfc3339


@dataclass(frozen=True)
class IndexEntry:
    """What grouping needs to know about a candidate incident of a key."""

    id: str
    first_event: datetime
    last_event: datetime
    state: State
    #: Something is due (``settle_at`` set): a joining signal need not re-arm the head.
    armed: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "first_event": format_rfc3339(self.first_event),
            "last_event": format_rfc3339(self.last_event),
            "state": self.state.value,
            "armed": self.armed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IndexEntry:
        return cls(
            data["id"],
            parse_rfc3339(data["first_event"]),
            parse_rfc3339(data["last_event"]),
            State(data["state"]),
            bool(data.get("armed", True)),
        )

    @classmethod
    def of(cls, incident: Incident) -> IndexEntry:
        return cls(
            incident.id,
            incident.first_event,
            incident.last_event,
            incident.state,
            incident.settle_at is not None,
        )


@dataclass(frozen=True)
class Arrival:
    """One new, classified, keyed signal on its way into the store."""

    key: IncidentKey
    signal: Signal
    event_time: datetime
    now: datetime
    entry_id: str
    message_id: str | None
    policy: Policy
    #: Join an open incident but never open one (a resolved alert with nothing to resolve
    #: is only remembered, so its redelivery is a duplicate).
    join_only: bool = False

    @property
    def dedup_ids(self) -> tuple[str, ...]:
        return dedup_ids(self.entry_id, self.message_id)


@dataclass(frozen=True)
class Absorbed:
    """The outcome of grouping one arrival."""

    incident: Incident
    created: bool
    #: The signal document to keep beside the incident, or None once the cap is reached.
    kept_signal: Mapping[str, Any] | None


#: An incident's span is kept in buckets of ``grouping window / SPAN_BUCKETS``: a store
#: need only rewrite an incident's head and key index when a signal leaves the bucketed
#: span, not at every signal (see :func:`extends`).
SPAN_BUCKETS = 10


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _floor(moment: datetime, bucket: timedelta) -> datetime:
    return _EPOCH + ((moment - _EPOCH) // bucket) * bucket


def _ceil(moment: datetime, bucket: timedelta) -> datetime:
    low = _floor(moment, bucket)
    return low if low == moment else low + bucket


def bucketed_span(first: datetime, last: datetime, window: timedelta) -> tuple[datetime, datetime]:
    """The span ``[first, last]`` widened to whole buckets of ``window / SPAN_BUCKETS``."""
    bucket = window / SPAN_BUCKETS
    return _floor(first, bucket), _ceil(last, bucket)


def extends(entry: IndexEntry, event_time: datetime, window: timedelta) -> bool:
    """Does a signal at ``event_time`` move the incident's bucketed span?"""
    low, high = bucketed_span(entry.first_event, entry.last_event, window)
    at_low, at_high = bucketed_span(event_time, event_time, window)
    return at_low < low or at_high > high


def choose(candidates: Iterable[IndexEntry], event_time: datetime, window: timedelta) -> str | None:
    """The candidate a signal at ``event_time`` joins, or None to open a new incident.

    Eligible: not final, and ``low - window <= event_time <= high + window`` where
    ``[low, high]`` is the incident's span in whole buckets (:func:`bucketed_span`), so
    stores that only keep the bucketed span decide exactly as those that keep the exact
    one. Among several, one whose span contains the time wins, then the nearest, then
    the oldest.
    """
    best: tuple[timedelta, datetime, str] | None = None
    for c in candidates:
        if c.state in FINAL_STATES:
            continue
        low, high = bucketed_span(c.first_event, c.last_event, window)
        if not low - window <= event_time <= high + window:
            continue
        if event_time < low:
            distance = low - event_time
        elif event_time > high:
            distance = event_time - high
        else:
            distance = timedelta(0)
        rank = (distance, low, c.id)
        if best is None or rank < best:
            best = rank
    return best[2] if best else None


def absorb(incident: Incident | None, arrival: Arrival) -> Absorbed:
    """Open an incident for the arrival, or add it to ``incident``."""
    signal, now, policy = arrival.signal, arrival.now, arrival.policy
    if incident is None:
        incident_id = new_incident_id(arrival.key, arrival.entry_id)
        base = Incident(
            id=incident_id,
            key=arrival.key,
            state=State.OPEN,
            opened_at=now,
            updated_at=now,
            first_event=arrival.event_time,
            last_event=arrival.event_time,
            last_signal_at=now,
            settle_at=now + policy.settle_time,
            audit=(
                AuditEvent(now, SYSTEM_ACTOR, None, State.OPEN, f"first signal: {signal.kind}"),
            ),
        )
        created = True
    else:
        if incident.final:
            raise IllegalTransition(f"incident {incident.id} is {incident.state}; cannot join")
        base = incident
        created = False
    keep = base.kept_signals < policy.max_signals
    updated = _count(
        base,
        signal,
        arrival.event_time,
        now,
        keep,
        updated_at=max(base.updated_at, now),
        # Debounce: wait for the storm to calm down; a diagnosed incident is re-diagnosed.
        settle_at=now + policy.settle_time,
        revision=base.revision + 1,
    )
    kept = None
    if keep:
        kept = {**signal.to_dict(), "seq": base.kept_signals, "entry_id": arrival.entry_id}
        if signal.timestamp is None:
            kept["timestamp"] = format_rfc3339(arrival.event_time)
    return Absorbed(updated, created, kept)


def _count(
    base: Incident,
    signal: Signal,
    event_time: datetime,
    arrived: datetime,
    keep: bool,
    **changes: Any,
) -> Incident:
    """``base`` with one more signal counted (counts, span, names, location), and with
    ``changes``."""
    counts = Counter(base.counts)
    counts[signal.kind.value] += 1
    host = signal.physical_host if signal.kind in HOST_FAULT_KINDS else None
    # The location of the first signal naming the cluster is the cluster's (an audit
    # entry's is its VM's zone); until one arrives, the first location seen.
    if base.cluster is None and signal.cluster:
        location = signal.location or base.location
    else:
        location = base.location or signal.location
    return evolve(
        base,
        first_event=min(base.first_event, event_time),
        last_event=max(base.last_event, event_time),
        last_signal_at=max(base.last_signal_at, arrived),
        signal_count=base.signal_count + 1,
        kept_signals=base.kept_signals + (1 if keep else 0),
        counts=dict(counts),
        nodes=_add_name(base.nodes, signal.node or signal.instance),
        hosts=_add_name(base.hosts, host),
        node_pools=_add_name(base.node_pools, signal.node_pool),
        workloads=_add_name(base.workloads, workload_name(signal)),
        clusters=_add_first(base.clusters, signal.cluster),
        workload_kinds=_add_first(base.workload_kinds, signal.workload_kind),
        location=location,
        signal_revision=base.signal_revision + 1,
        **changes,
    )


@dataclass(frozen=True)
class Tallied:
    """One stored signal of an incident, as a store that does not count on ingest keeps it."""

    signal: Signal
    event_time: datetime
    arrived_at: datetime
    entry_id: str


def recount(
    incident: Incident, tallied: Sequence[Tallied], max_signals: int = DEFAULT_MAX_SIGNALS
) -> Incident | None:
    """The incident's counts, span and names derived from all its stored signals.

    Stores that write nothing shared per arrival (Firestore) call this when settling;
    folding the signals in arrival order gives exactly what counting on every arrival
    gives. None when nothing changed.
    """
    if not tallied:
        return None
    ordered = sorted(tallied, key=lambda t: (t.arrived_at, t.entry_id))
    first = ordered[0]
    base = replace(
        incident,
        first_event=first.event_time,
        last_event=first.event_time,
        last_signal_at=first.arrived_at,
        signal_count=0,
        kept_signals=0,
        counts={},
        nodes=(),
        hosts=(),
        node_pools=(),
        workloads=(),
        clusters=(),
        workload_kinds=(),
        location=None,
        signal_revision=0,
    )
    for t in ordered:
        base = _count(base, t.signal, t.event_time, t.arrived_at, base.kept_signals < max_signals)
    if base == incident:
        return None
    return replace(base, revision=incident.revision + 1)


def touch(incident: Incident, arrival: Arrival) -> Incident:
    """What an arrival changes on the head of a store that counts at settle time.

    Only the span (when it leaves its buckets) and, for an incident that is not due, the
    settle time (so a new signal re-triggers its diagnosis).
    """
    settle_at = incident.settle_at
    if settle_at is None and not incident.final:
        settle_at = arrival.now + arrival.policy.settle_time
    return replace(
        incident,
        first_event=min(incident.first_event, arrival.event_time),
        last_event=max(incident.last_event, arrival.event_time),
        last_signal_at=max(incident.last_signal_at, arrival.now),
        updated_at=max(incident.updated_at, arrival.now),
        settle_at=settle_at,
        revision=incident.revision + 1,
    )


def quiet(incident: Incident) -> Incident | None:
    """Nothing is due for a live incident until a new signal arrives (and re-arms it)."""
    if incident.final or incident.settle_at is None:
        return None
    return replace(incident, settle_at=None, revision=incident.revision + 1)


def postpone(incident: Incident, at: datetime) -> Incident | None:
    """Make a live incident due at ``at`` (later than now: it is still receiving signals)."""
    if incident.final or incident.settle_at == at:
        return None
    return replace(incident, settle_at=at, revision=incident.revision + 1)


def _add_name(names: tuple[str, ...], name: str | None) -> tuple[str, ...]:
    if not name or name in names or len(names) >= MAX_NAMES:
        return names
    return tuple(sorted((*names, name)))


def _add_first(names: tuple[str, ...], name: str | None) -> tuple[str, ...]:
    """Like _add_name, but in arrival order: the first name stays first."""
    if not name or name in names or len(names) >= MAX_NAMES:
        return names
    return (*names, name)


def reindex(entries: Iterable[IndexEntry], incident: Incident) -> list[IndexEntry]:
    """The key index after ``incident`` changed: finals and long-past incidents drop out."""
    others = [e for e in entries if e.id != incident.id]
    if not incident.final:
        others.append(IndexEntry.of(incident))
    if not others:
        return []
    newest = max(e.last_event for e in others)
    kept = [e for e in others if e.last_event >= newest - INDEX_RETENTION]
    return sorted(kept, key=lambda e: (e.first_event, e.id))
