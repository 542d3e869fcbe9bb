"""Recording fakes for the responder's ports; injected through build_responder, never patched.

FakeStore follows the IncidentStore contract (tests/incidents/test_store_contract.py runs it next
to SQLite and Firestore) and takes per-method failure "reactors":
``FakeStore(fail={"ingest": [TransientError("contention")]})`` raises on the next ingest.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from loopbreaker import incidents
from loopbreaker.chat.notify import Notification
from loopbreaker.diagnosis.evidence import QueryBudget
from loopbreaker.diagnosis.readers import HostLookupResult, LogReadResult
from loopbreaker.incidents import Arrival, Incident, IncidentKey, IndexEntry, PauseRecord, State
from loopbreaker.incidents.store.base import HOUR, Change, IncidentStore, IngestResult, UpdateResult
from loopbreaker.model import (
    Context,
    Evidence,
    HostFailureRecord,
    NodeInfo,
    PodInfo,
    Series,
    Signal,
)


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 5, 20, 8, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now

    def set(self, moment: datetime) -> None:
        self.now = moment


#: Opens another handle on one shared store (a new connection), for concurrency tests.
StoreFactory = Callable[[], IncidentStore]


class FakeStore:
    """In-memory IncidentStore; one lock plays the part of a transaction."""

    def __init__(self, fail: dict[str, list[Exception]] | None = None) -> None:
        self.incidents: dict[str, Incident] = {}
        self.kept: dict[str, list[Signal]] = {}
        self.dedup: dict[str, datetime] = {}
        self.hosts: dict[str, HostFailureRecord] = {}
        self.deletions: dict[tuple[str, str], datetime] = {}
        self.claims: dict[str, str] = {}
        #: Every pause, oldest first; the last one not resumed may be in force.
        self.pause_records: list[PauseRecord] = []
        self.fail = {k: list(v) for k, v in (fail or {}).items()}
        self.transactions = 0
        self.calls: list[str] = []
        self._lock = threading.RLock()

    def _react(self, verb: str) -> None:
        self.calls.append(verb)
        queue = self.fail.get(verb)
        if queue:
            raise queue.pop(0)

    def ingest(self, arrival: Arrival) -> IngestResult:
        with self._lock:
            self._react("ingest")
            self.transactions += 1
            if any(i in self.dedup for i in arrival.dedup_ids):
                return IngestResult(duplicate=True)
            key = str(arrival.key)
            candidates = [IndexEntry.of(i) for i in self.incidents.values() if str(i.key) == key]
            target = incidents.choose(
                candidates, arrival.event_time, arrival.policy.grouping_window
            )
            if target is None and arrival.join_only:
                for dedup_id in arrival.dedup_ids:
                    self.dedup[dedup_id] = arrival.now
                return IngestResult(duplicate=False)
            absorbed = incidents.absorb(self.incidents.get(target) if target else None, arrival)
            self.incidents[absorbed.incident.id] = absorbed.incident
            for dedup_id in arrival.dedup_ids:
                self.dedup[dedup_id] = arrival.now
            if absorbed.kept_signal is not None:
                self.kept.setdefault(absorbed.incident.id, []).append(
                    Signal.from_dict(copy.deepcopy(dict(absorbed.kept_signal)))
                )
            return IngestResult(False, absorbed.incident, absorbed.created)

    def remember(self, dedup_ids: Sequence[str], now: datetime) -> bool:
        with self._lock:
            self._react("remember")
            if not dedup_ids:
                return False
            self.transactions += 1
            if any(i in self.dedup for i in dedup_ids):
                return True
            for dedup_id in dedup_ids:
                self.dedup[dedup_id] = now
            return False

    def known_keys(self, keys: Sequence[IncidentKey]) -> set[IncidentKey]:
        with self._lock:
            self._react("known_keys")
            seen = {str(i.key) for i in self.incidents.values()}
            return {key for key in keys if str(key) in seen}

    def update(self, incident_id: str, change: Change) -> UpdateResult:
        with self._lock:
            self._react("update")
            self.transactions += 1
            current = self.incidents.get(incident_id)
            if current is None:
                return UpdateResult(None, False)
            updated = change(current)
            if updated is None:
                return UpdateResult(current, False)
            self.incidents[incident_id] = updated
            return UpdateResult(updated, True)

    def get(self, incident_id: str) -> Incident | None:
        self._react("get")
        return self.incidents.get(incident_id)

    def list_incidents(
        self, *, states: Collection[State] | None = None, limit: int = 100
    ) -> list[Incident]:
        self._react("list_incidents")
        found = [i for i in self.incidents.values() if states is None or i.state in states]
        found.sort(key=lambda i: (i.opened_at, i.id), reverse=True)
        return found[:limit]

    def due(self, now: datetime, limit: int) -> list[str]:
        self._react("due")
        due = [i for i in self.incidents.values() if i.settle_at and i.settle_at <= now]
        return [i.id for i in sorted(due, key=lambda i: (i.settle_at, i.id))][:limit]

    def next_settle(self, after: datetime) -> datetime | None:
        self._react("next_settle")
        later = [
            i.settle_at for i in self.incidents.values() if i.settle_at and i.settle_at > after
        ]
        return min(later) if later else None

    def expiring(self, now: datetime, limit: int) -> list[str]:
        self._react("expiring")
        found = [i for i in self.incidents.values() if i.expires_at and i.expires_at <= now]
        return [i.id for i in sorted(found, key=lambda i: (i.expires_at, i.id))][:limit]

    def signals(self, incident_id: str) -> list[Signal]:
        self._react("signals")
        return list(self.kept.get(incident_id, ()))

    def tally(self, incident_id: str) -> list[incidents.Tallied] | None:
        self._react("tally")
        return None

    def host_history(
        self, names: Collection[str], *, exclude_incident: str | None = None
    ) -> list[HostFailureRecord]:
        self._react("host_history")
        wanted = set(names)
        return sorted(
            (
                r
                for r in self.hosts.values()
                if (r.host in wanted or r.node in wanted) and r.incident_id != exclude_incident
            ),
            key=lambda r: (r.at, r.host),
        )

    def record_host_failures(self, records: Sequence[HostFailureRecord]) -> None:
        self._react("record_host_failures")
        for r in records:
            self.hosts[incidents.host_failure_id(r)] = r

    def prune(self, before: datetime) -> int:
        self._react("prune")
        old = [k for k, at in self.dedup.items() if at < before]
        for k in old:
            del self.dedup[k]
        return len(old)

    def deletions_since(self, cluster: str, since: datetime) -> int:
        self._react("deletions_since")
        return sum(1 for (c, _), at in self.deletions.items() if c == cluster and at >= since)

    def reserve_deletion(
        self, cluster: str, incident_id: str, at: datetime, limit: int, window: timedelta = HOUR
    ) -> bool:
        with self._lock:
            self._react("reserve_deletion")
            if (cluster, incident_id) in self.deletions:
                return True
            recent = [
                t for (c, _), t in self.deletions.items() if c == cluster and t >= at - window
            ]
            if len(recent) >= limit:
                return False
            self.deletions[(cluster, incident_id)] = at
            return True

    def claim_target(self, keys: Sequence[str], incident_id: str) -> str | None:
        with self._lock:
            self._react("claim_target")
            for key in keys:
                holder = self.claims.get(key)
                incident = self.incidents.get(holder) if holder else None
                if holder != incident_id and incident is not None and not incident.final:
                    return holder
            for key in keys:
                self.claims[key] = incident_id
            return None

    def _latest_pause(self) -> PauseRecord | None:
        return next((p for p in reversed(self.pause_records) if p.resumed_at is None), None)

    def pause(self, record: PauseRecord) -> PauseRecord | None:
        with self._lock:
            self._react("pause")
            latest = self._latest_pause()
            if latest is not None and latest.active(record.at):
                return latest
            self.pause_records.append(record)
            return None

    def resume(self, by: str, at: datetime) -> PauseRecord | None:
        with self._lock:
            self._react("resume")
            latest = self._latest_pause()
            if latest is None or not latest.active(at):
                return None
            ended = dataclasses.replace(latest, resumed_at=at, resumed_by=by)
            self.pause_records[self.pause_records.index(latest)] = ended
            return ended

    def current_pause(self, now: datetime) -> PauseRecord | None:
        with self._lock:
            self._react("current_pause")
            latest = self._latest_pause()
            return latest if latest is not None and latest.active(now) else None

    def pauses(self, since: datetime) -> list[PauseRecord]:
        with self._lock:
            return [p for p in self.pause_records if (p.ended_at() or since) >= since]

    def close(self) -> None:
        self.calls.append("close")


class FakeNotifier:
    """Records every post; ``messages`` keeps the current message per incident.

    Like a chat platform it returns where the message lives (``{"platform": "fake",
    "message": "m-<n>"}``) and ``wheres`` records the location each post was given.
    """

    def __init__(self, fail: list[Exception] | None = None) -> None:
        self.posted: list[Notification] = []
        self.messages: dict[str, Notification] = {}
        self.wheres: list[Mapping[str, str] | None] = []
        self.fail = list(fail or [])

    def post(
        self, notification: Notification, where: Mapping[str, str] | None = None
    ) -> Mapping[str, str] | None:
        if self.fail:
            raise self.fail.pop(0)
        self.posted.append(notification)
        self.wheres.append(where)
        self.messages[notification.incident_id] = notification
        return dict(where) if where else {"platform": "fake", "message": f"m-{len(self.posted)}"}


@dataclass
class FakeEvidence:
    """Returns fixed evidence and spends ``queries`` from the budget, like live readers."""

    evidence: Evidence = field(default_factory=Evidence)
    queries: int = 0
    contexts: list[Context] = field(default_factory=list)
    budgets: list[QueryBudget] = field(default_factory=list)

    def collect(self, context: Context, budget: QueryBudget) -> Evidence:
        self.contexts.append(context)
        self.budgets.append(budget)
        for _ in range(self.queries):
            if not budget.take():
                break
        return self.evidence


# --- Telemetry readers (diagnosis.readers ports), for tests of diagnosis.readers.sources ---


class FakeMetricsReader:
    """MetricsReader: raw series by metric name; ``fail`` raises per call, in order."""

    def __init__(
        self,
        series: dict[str, tuple[Series, ...]] | None = None,
        *,
        fail: list[Exception] | None = None,
        source: str = "fake-prometheus",
    ) -> None:
        self.series = dict(series or {})
        self.fail = list(fail or [])
        self.selectors: list[str] = []
        self.source = source

    def raw_series(self, selector: str, start: datetime, end: datetime) -> tuple[Series, ...]:
        self.selectors.append(selector)
        if self.fail:
            raise self.fail.pop(0)
        name = selector.split("{", 1)[0]
        return self.series.get(name, ())


class FakeLogReader:
    """LogReader returning a fixed result (or raising ``fail``)."""

    def __init__(
        self,
        result: LogReadResult | None = None,
        *,
        fail: Exception | None = None,
        source: str = "fake-logging",
    ) -> None:
        self.result = result or LogReadResult(signals=(), entries_read=0)
        self.fail = fail
        self.contexts: list[Context] = []
        self.source = source

    def read(self, context: Context) -> LogReadResult:
        self.contexts.append(context)
        if self.fail is not None:
            raise self.fail
        return self.result


class FakeClusterReader:
    """ClusterReader over fixed nodes and pods; ``fail`` maps "nodes"/"pods" to an error."""

    def __init__(
        self,
        nodes: tuple[NodeInfo, ...] = (),
        pods: tuple[PodInfo, ...] = (),
        *,
        fail: dict[str, Exception] | None = None,
        source: str = "fake-kubernetes",
    ) -> None:
        self._nodes = nodes
        self._pods = pods
        self.fail = dict(fail or {})
        self.calls: list[str] = []
        self.source = source

    def nodes(self) -> tuple[NodeInfo, ...]:
        self.calls.append("nodes")
        if "nodes" in self.fail:
            raise self.fail["nodes"]
        return self._nodes

    def pods(self, namespace: str | None) -> tuple[PodInfo, ...]:
        self.calls.append(f"pods:{namespace}")
        if "pods" in self.fail:
            raise self.fail["pods"]
        return self._pods


class FakeHostLookup:
    """HostLookup from a fixed map; records the nodes it was asked about."""

    def __init__(
        self, hosts: dict[str, str], *, failure: str | None = None, source: str = "fake-hosts"
    ) -> None:
        self.known = dict(hosts)
        self.failure = failure
        self.asked: list[list[str]] = []
        self.source = source

    def hosts(self, nodes: Sequence[NodeInfo]) -> HostLookupResult:
        self.asked.append([n.name for n in nodes])
        return HostLookupResult(
            {n.name: self.known[n.name] for n in nodes if n.name in self.known}, self.failure
        )


class RecordingSleep:
    """A sleep for retry policies that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


class FakeQueue:
    """RemediationQueue that records what was published; ``fail`` raises per call, in order."""

    def __init__(self, fail: list[Exception] | None = None) -> None:
        self.published: list[dict[str, object]] = []
        self.fail = list(fail or [])
        self._lock = threading.Lock()

    def publish(self, request: Mapping[str, object]) -> str:
        with self._lock:
            if self.fail:
                raise self.fail.pop(0)
            self.published.append(dict(request))
            return f"fake-{len(self.published)}"
