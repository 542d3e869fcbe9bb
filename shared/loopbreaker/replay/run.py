"""Local replay: feed files of deliveries through the same Responder as ``on_log_entry``.

Each file is a JSON array, one JSON object, or JSON Lines (a directory: the Cloud Storage
sink layout, its ``.json`` and ``.jsonl`` files); each item a LogEntry, a Pub/Sub push
envelope or an Eventarc CloudEvent. Files are read as streams
(:mod:`loopbreaker.signals.files`): one item at a time, so memory does not grow with the
file. An item that cannot be decoded is rejected with its position and the replay goes
on; a file whose structure breaks is read up to the break, reported in
``Summary.unreadable``, and the next file is read.

The replay runs on the live timeline: the deliveries are staged on disk and fed in
event-time order (:class:`~loopbreaker.replay.reader.EventOrder`; exports are newest
first; entries that match no rule touch no incident and are handled as read), the
clock following their timestamps, and ``settle`` runs at each incident's own settle time,
as ``on_schedule`` does within its minute. A failure is diagnosed when it
settles, before the next one arrives. At the end the clock runs on past the last settle
time. Approval requests the diagnoses open are dated by the wall clock: whoever approves
does so now. Per-item log lines are INFO (rejections included): the summary lists the
rejections.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from loopbreaker.app.bootstrap import build_responder
from loopbreaker.chat.notify import Notifier
from loopbreaker.diagnosis.evidence import EvidenceProvider, TelemetryDirEvidence
from loopbreaker.errors import InvalidInput
from loopbreaker.incidents import Incident
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.replay import reader as replay_reader
from loopbreaker.replay.evidence import AsOfClock, SnapshotPods
from loopbreaker.replay.reader import DELIVERY, ERROR, QUIET, EventOrder, Record, event_time
from loopbreaker.responder.pod_owners import PodWorkloads
from loopbreaker.responder.service import Clock, Responder, SettleReport, Status, system_clock
from loopbreaker.settings.load import Settings, StoreKind, StoreSpec
from loopbreaker.signals import files
from loopbreaker.signals.classify import prepare as prepare_classifier
from loopbreaker.timeutil import format_rfc3339

#: Settle passes at the end; each diagnoses up to LOOPBREAKER_SETTLE_BATCH incidents.
MAX_SETTLE_PASSES = 1000
#: Rejections listed one by one in the summary; the rest are only counted.
MAX_REJECTED_LISTED = 1000
#: How often (in items) the progress callback is called.
PROGRESS_EVERY = 1000
#: Items whose store writes are committed together (one SQLite transaction).
BATCH = 500
#: on_schedule's period: Cloud Scheduler calls it every minute, on the minute
#: (infra/terraform/scheduler.tf, ``schedule = "* * * * *"``).
TICK = timedelta(minutes=1)
#: What a directory is read for (the sink writes ``.json`` objects): its other files
#: (a README, a script) are skipped and named in the summary.
LOG_SUFFIXES = (".json", ".jsonl")


class ReplayClock:
    """Event time as processing time. While the deliveries are fed (oldest first) it only
    moves on; before, it dates each quiet entry's dedup key by the entry's own time."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance_to(self, moment: datetime) -> None:
        if moment > self.now:
            self.now = moment


@dataclass
class Summary:
    read: int = 0
    accepted: int = 0
    duplicates: int = 0
    ignored: int = 0
    #: The first MAX_REJECTED_LISTED rejections; ``rejected_total`` counts them all.
    rejected: list[dict[str, Any]] = field(default_factory=list)
    rejected_total: int = 0
    #: Files whose structure broke: "<file>: <why>"; items after the break were not read.
    unreadable: list[str] = field(default_factory=list)
    incidents: list[Incident] = field(default_factory=list)
    settle: SettleReport = field(default_factory=SettleReport)
    store: str | None = None
    #: Signals about a pod whose workload nothing confirmed (pod Events carry no labels).
    unresolved_pods: int = 0
    #: Files of the directories given that are not log files, not read.
    skipped: list[str] = field(default_factory=list)
    #: Entries of projects outside LOOPBREAKER_PROJECTS (acknowledged, nothing more), by
    #: project.
    foreign_projects: dict[str, int] = field(default_factory=dict)

    def reject(self, index: int, source: str, reason: str, message_id: str | None) -> None:
        self.rejected_total += 1
        if len(self.rejected) < MAX_REJECTED_LISTED:
            self.rejected.append(
                {
                    "index": index,
                    "source": source,
                    "reason": reason,
                    "message_id": message_id,
                }
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "accepted": self.accepted,
            "duplicates": self.duplicates,
            "ignored": self.ignored,
            "rejected": self.rejected,
            "rejected_total": self.rejected_total,
            "unreadable": self.unreadable,
            "incidents": [incident_summary(i) for i in self.incidents],
            "settle": self.settle.to_dict(),
            "store": self.store,
            "unresolved_pods": self.unresolved_pods,
            "skipped": self.skipped,
            "foreign_projects": dict(sorted(self.foreign_projects.items())),
        }


def incident_summary(incident: Incident) -> dict[str, Any]:
    d = incident.diagnosis
    return {
        "id": incident.id,
        "key": str(incident.key),
        "project": incident.key.project,
        "cluster_name": incident.cluster,
        "scope": incident.key.scope.value,
        "name": incident.key.name,
        "state": incident.state.value,
        "signal_count": incident.signal_count,
        "counts": dict(sorted(incident.counts.items())),
        "first_event": format_rfc3339(incident.first_event),
        "last_event": format_rfc3339(incident.last_event),
        "root_cause": d.root_cause if d else None,
        "remediation_path": d.remediation_path if d else None,
        "requires_approval": d.requires_approval if d else None,
        "suspect_hosts": list(d.suspect_hosts) if d else [],
        "summary": d.summary if d else None,
        "diagnoses": incident.diagnoses,
        "queries_spent": incident.queries_spent,
        "notifications": incident.notifications,
        "expires_at": format_rfc3339(incident.expires_at) if incident.expires_at else None,
        "approval": incident.approval.to_dict() if incident.approval else None,
        "route": incident.route,
    }


def run(
    paths: Sequence[Path],
    *,
    settings: Settings,
    telemetry: Path | None = None,
    store_path: Path | None = None,
    notifier: Notifier | None = None,
    approval_clock: Clock | None = None,
    progress: Callable[[int], None] | None = None,
    reader_process: bool | None = None,
) -> Summary:
    """Replay ``paths``; without ``store_path`` the SQLite store is a temporary file.

    ``progress`` is called with the number of items read every PROGRESS_EVERY items.
    ``reader_process`` says whether a child process reads the files (default: when they
    are large and two cores are free; see :mod:`loopbreaker.replay.reader`).
    """
    if telemetry is not None and not telemetry.is_dir():
        raise InvalidInput(f"telemetry directory {telemetry} does not exist")
    # Every path is checked before anything is read: a typo fails at once.
    expanded, skipped = expand(paths)

    with (
        # Started first: a reader process starts up while the store and responder do.
        replay_reader.read(expanded, child=reader_process) as records,
        tempfile.TemporaryDirectory(prefix="loopbreaker-replay-") as scratch,
    ):
        path = store_path or Path(scratch) / "incidents.sqlite"
        local = replace(settings, store=StoreSpec(StoreKind.SQLITE, path))
        store = SqliteStore(path, scratch=store_path is None)
        staged = EventOrder(Path(scratch) / "staged.sqlite")
        clock = ReplayClock(datetime.now(UTC))
        # A diagnosis sees what had happened by its moment, not the directory's whole story.
        evidence: EvidenceProvider | None = (
            AsOfClock(TelemetryDirEvidence(telemetry), clock) if telemetry else None
        )
        pods = SnapshotPods(telemetry) if telemetry else None
        responder = build_responder(
            local,
            store=store,
            pod_workloads=PodWorkloads(store, pods, default_project=settings.project),
            # The notifier LOOPBREAKER_NOTIFIER names (the console by default).
            notifier=notifier,
            evidence=evidence,
            clock=clock,
            # Approval requests opened by the replay are for a human deciding now.
            approval_clock=approval_clock or system_clock,
        )
        # The summary lists every rejection: one INFO line each, not an ERROR storm.
        responder.reject_level = logging.INFO
        # While a reader process starts and reads: the rules the staged deliveries are
        # classified by, compiled now and not in the replay's tail.
        prepare_classifier()
        try:
            summary = Summary(skipped=skipped)
            _first_pass(responder, records, summary, progress, clock, store.batch, staged)
            first = replay_reader.moment(staged.first_us())
            if first is not None:
                clock.now = first
            schedule = _Schedule(responder, store, clock, summary.settle)
            _feed(responder, iter(staged), clock, schedule, summary, store.batch)
            summary.unresolved_pods = responder.pod_workloads.counts.get("unresolved", 0)
            summary.store = str(store_path) if store_path else None
            # Every settle time the last arrivals set, at its minute; then whatever a
            # settle batch left over.
            schedule.run_until(clock.now + settings.settle_time + TICK)
            clock.advance_to(clock.now + settings.settle_time + timedelta(seconds=1))
            summary.settle.add(_settle_all(responder))
            summary.incidents = sorted(
                store.list_incidents(limit=10_000), key=lambda i: (i.first_event, i.id)
            )
        finally:
            staged.close()
            store.close()
    return summary


def expand(paths: Sequence[Path]) -> tuple[list[Path], list[str]]:
    """The files to replay, and the files of the directories given that are not log
    files (by LOG_SUFFIXES); a file named on its own is always read."""
    found: list[Path] = []
    skipped: list[str] = []
    for path in paths:
        for file in files.expand([path]):
            if file == path or file.suffix in LOG_SUFFIXES:
                found.append(file)
            else:
                skipped.append(str(file))
    return found, skipped


def _first_pass(
    responder: Responder,
    records: Iterator[Record],
    summary: Summary,
    progress: Callable[[int], None] | None,
    clock: ReplayClock,
    batch: Callable[[], AbstractContextManager[None]],
    staged: EventOrder,
) -> None:
    """Stage the deliveries; handle the rest as they are read, in reading order, while
    the reader reads on: an item that could not be decoded has no time to be ordered by,
    and an entry that matches no rule (most of a job's logs) touches no incident, only
    the dedup memory, dated by its own time."""
    quiet = 0
    with ExitStack() as open_batch:
        open_batch.enter_context(batch())
        for record in records:
            summary.read += 1
            if progress is not None and summary.read % PROGRESS_EVERY == 0:
                progress(summary.read)
            if record[0] == DELIVERY:
                staged.add((record,))
                continue
            if record[0] == ERROR and record[5] is not None:
                summary.unreadable.append(record[5])
            elif record[0] == QUIET:
                quiet += 1
                if quiet % BATCH == 0:
                    open_batch.close()
                    open_batch.enter_context(batch())
                moment = replay_reader.moment(record[4])
                if moment is not None:
                    clock.now = moment
            _feed_one(responder, record, summary)
    if progress is not None:
        progress(summary.read)


class _Schedule:
    """``on_schedule`` on the replay clock, as it runs live (``Responder.settle_minute``):
    each incident settled at its own settle time, and what a settle batch left over at
    the next minute's run. A quiet hour costs no settle."""

    def __init__(
        self, responder: Responder, store: SqliteStore, clock: ReplayClock, total: SettleReport
    ) -> None:
        self.responder, self.store, self.clock, self.total = responder, store, clock, total
        #: The moment of the last settle (nothing before the first entry is due).
        self.last = clock.now

    def run_until(self, moment: datetime, between: Callable[[], None] | None = None) -> None:
        """Run every settle due up to ``moment``; ``between`` is called before each."""
        # Each pass moves ``last`` on: it ends.
        while (tick := self._next(moment)) is not None:
            if between is not None:
                between()
            self.clock.advance_to(tick)
            self.total.add(self.responder.settle(tick))
            self.last = tick

    def _next(self, moment: datetime) -> datetime | None:
        """The next settle in (last, moment]: the earliest settle time after the last run,
        or, for incidents a batch left due, the next minute's run."""
        found = []
        later = self.store.next_settle(self.last)
        if later is not None and later <= moment:
            found.append(later)
        if self.store.due(self.last, 1):
            minute = _minute(self.last) + TICK
            if minute <= moment:
                found.append(minute)
        return min(found) if found else None


def _minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def _feed(
    responder: Responder,
    records: Iterator[Record],
    clock: ReplayClock,
    schedule: _Schedule,
    summary: Summary,
    batch: Callable[[], AbstractContextManager[None]],
) -> None:
    """Feed the staged records in event-time order, BATCH of them per store commit,
    running the schedule's due minutes before each record's time."""
    fed = 0
    with ExitStack() as open_batch:
        open_batch.enter_context(batch())

        def commit() -> None:
            # A settle sees (and notifies) only what is committed.
            open_batch.close()
            open_batch.enter_context(batch())

        for record in records:
            fed += 1
            if fed % BATCH == 0:
                commit()
            moment = _moment(record)
            if moment is not None and moment > clock.now:
                schedule.run_until(moment, commit)
                clock.advance_to(moment)
            _feed_one(responder, record, summary)


def _moment(record: Record) -> datetime | None:
    if record[0] == QUIET:
        return replay_reader.moment(record[4])
    return event_time(record[3]) if record[0] == DELIVERY else None


def _feed_one(responder: Responder, record: Record, summary: Summary) -> None:
    if record[0] == QUIET:
        _, index, message_id, entry_key, _, identity, insert_id = record
        outcome = responder.handle_screened(
            message_id, replay_reader.entry_id(entry_key, insert_id), identity, insert_id
        )
        source = ""
    elif record[0] == DELIVERY:
        _, index, source, delivery = record
        outcome = responder.handle_delivery(delivery)
    else:
        _, index, source, reason, message_id, _ = record
        responder.reject(message_id, reason, index=index, source=source)
        summary.reject(index, source, reason, message_id)
        return
    if outcome.status is Status.ACCEPTED:
        summary.accepted += 1
    elif outcome.status is Status.DUPLICATE:
        summary.duplicates += 1
    elif outcome.status is Status.IGNORED:
        # A valid LogEntry that concerns no incident is still accepted (and acked);
        # ``ignored`` says how many of the accepted ones were of that sort.
        summary.accepted += 1
        summary.ignored += 1
    elif outcome.status is Status.FOREIGN:
        # Acknowledged like any valid entry, and counted apart: not ours to act on.
        summary.accepted += 1
        project = outcome.project or "?"
        summary.foreign_projects[project] = summary.foreign_projects.get(project, 0) + 1
    else:
        summary.reject(index, source, outcome.reason or "rejected", outcome.message_id)


def _settle_all(responder: Responder) -> SettleReport:
    total = SettleReport()
    for _ in range(MAX_SETTLE_PASSES):
        report = responder.settle()
        total.add(report)
        if not report.diagnosed and not report.expired:
            break
    return total


def to_text(summary: Summary) -> str:
    lines = [
        f"Replayed {summary.read} deliveries: {summary.accepted} accepted "
        f"({summary.ignored} of them ignored: no failure signature, or nothing to group by), "
        f"{summary.duplicates} duplicates, {summary.rejected_total} rejected."
    ]
    if summary.skipped:
        names = ", ".join(Path(s).name for s in summary.skipped[:5])
        rest = f" and {len(summary.skipped) - 5} more" if len(summary.skipped) > 5 else ""
        lines.append(
            f"Skipped {len(summary.skipped)} file(s) that are not log files "
            f"({', '.join(LOG_SUFFIXES)}): {names}{rest}."
        )
    if summary.foreign_projects:
        named = ", ".join(f"{p} ({n})" for p, n in sorted(summary.foreign_projects.items()))
        lines.append(
            f"{sum(summary.foreign_projects.values())} accepted entr(ies) came from projects "
            f"outside LOOPBREAKER_PROJECTS and were not acted on: {named}."
        )
    if summary.unresolved_pods:
        lines.append(
            f"{summary.unresolved_pods} signal(s) named a pod whose workload neither the "
            "incidents nor the pods (--telemetry pods.json) confirm."
        )
    if summary.rejected:
        lines.append("Rejected:")
        lines += [f"  #{r['index']} {r['source']}: {r['reason']}" for r in summary.rejected]
        more = summary.rejected_total - len(summary.rejected)
        if more:
            lines.append(f"  ... and {more} more")
    if summary.unreadable:
        lines.append("Files read only up to a break:")
        lines += [f"  {u}" for u in summary.unreadable]
    lines.append(f"Incidents: {len(summary.incidents)}")
    for incident in summary.incidents:
        s = incident_summary(incident)
        verdict = (
            f"{s['root_cause']} -> {s['remediation_path']}" if s["root_cause"] else "not diagnosed"
        )
        counts = ", ".join(f"{n} {k}" for k, n in s["counts"].items())
        lines.append(f"  {s['id']}  {s['state']:<17}  {verdict}")
        lines.append(f"      {s['key']}: {s['signal_count']} signals ({counts})")
        if s["summary"]:
            lines.append(f"      {s['summary']}")
    if summary.settle.failed:
        lines.append("Diagnoses that failed:")
        lines += [f"  {f['incident_id']}: {f['reason']}" for f in summary.settle.failed]
    if summary.store:
        lines.append(f"Store: {summary.store}")
    return "\n".join(lines)
