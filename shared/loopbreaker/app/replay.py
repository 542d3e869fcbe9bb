"""Local replay: feed files of deliveries through the same Responder as ``on_log_entry``.

Each file is a JSON array, one JSON object, or JSON Lines; each item a LogEntry, a
Pub/Sub push envelope or an Eventarc CloudEvent. The clock follows the entries' own
timestamps (never backwards), so grouping and settling behave as they did live; at the
end the clock moves past the settle time and every due incident is diagnosed. Approval
requests the diagnoses open are dated by the wall clock: whoever approves does so now.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from loopbreaker.app.bootstrap import build_responder
from loopbreaker.app.responder import Clock, Responder, SettleReport, Status, system_clock
from loopbreaker.app.settings import Settings, StoreKind, StoreSpec
from loopbreaker.chat.notify import Notifier
from loopbreaker.diagnosis.evidence import EvidenceProvider, TelemetryDirEvidence
from loopbreaker.errors import InvalidContext, InvalidInput
from loopbreaker.incidents import Incident
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.signals.envelope import Delivery, UndecodableMessage, decode
from loopbreaker.timeutil import format_rfc3339, parse_rfc3339

#: Settle passes at the end; each diagnoses up to LOOPBREAKER_SETTLE_BATCH incidents.
MAX_SETTLE_PASSES = 1000


@dataclass(frozen=True)
class Item:
    """One item read from a file: a decoded document, or why it could not be read."""

    index: int
    source: str
    document: object = None
    error: str | None = None


class ReplayClock:
    """Event time as processing time: follows the newest timestamp seen so far."""

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
    rejected: list[dict[str, Any]] = field(default_factory=list)
    incidents: list[Incident] = field(default_factory=list)
    settle: SettleReport = field(default_factory=SettleReport)
    store: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "accepted": self.accepted,
            "duplicates": self.duplicates,
            "ignored": self.ignored,
            "rejected": self.rejected,
            "incidents": [incident_summary(i) for i in self.incidents],
            "settle": self.settle.to_dict(),
            "store": self.store,
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
    }


def read_items(paths: Sequence[Path]) -> Iterator[Item]:
    """Items of every file in order; an unreadable line becomes an error item."""
    index = 0
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"cannot read {path}: {exc}") from exc
        for source, document, error in _parse_file(path, text):
            yield Item(index, source, document, error)
            index += 1


def _parse_file(path: Path, text: str) -> Iterator[tuple[str, object, str | None]]:
    if not text.strip():
        return
    try:
        whole = json.loads(text)
    except ValueError as exc:
        whole = None
        first = next(line for line in text.splitlines() if line.strip())
        if text.lstrip().startswith("[") or not _is_json(first):
            # Not JSON Lines either: a broken JSON document, reported where it breaks
            # rather than as one rejection per line.
            raise InvalidInput(f"{path}: not valid JSON or JSON Lines: {exc}") from exc
    else:
        if isinstance(whole, list):
            for number, item in enumerate(whole):
                yield f"{path}[{number}]", item, None
            return
        if isinstance(whole, dict):
            yield str(path), whole, None
            return
    # JSON Lines: one document per non-empty line.
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield f"{path}:{number}", json.loads(line), None
        except ValueError as exc:
            yield f"{path}:{number}", None, f"not JSON: {exc}"


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _event_time(delivery: Delivery) -> datetime | None:
    entry = delivery.entry
    candidates = []
    if isinstance(entry, dict):
        candidates += [entry.get("timestamp"), entry.get("receiveTimestamp")]
    candidates += [delivery.sink_timestamp, delivery.publish_time]
    for value in candidates:
        if isinstance(value, str):
            try:
                return parse_rfc3339(value)
            except InvalidContext:
                continue
    return None


def run(
    paths: Sequence[Path],
    *,
    settings: Settings,
    telemetry: Path | None = None,
    store_path: Path | None = None,
    notifier: Notifier | None = None,
    approval_clock: Clock | None = None,
) -> Summary:
    """Replay ``paths``; without ``store_path`` the SQLite store is a temporary file."""
    if telemetry is not None and not telemetry.is_dir():
        raise InvalidInput(f"telemetry directory {telemetry} does not exist")
    items = list(read_items(paths))
    decoded: list[_Decoded] = []
    for item in items:
        if item.error is not None:
            decoded.append(_Decoded(item, None, item.error))
            continue
        try:
            decoded.append(_Decoded(item, decode(item.document)))
        except UndecodableMessage as exc:
            decoded.append(_Decoded(item, None, exc.reason, exc.message_id))
    times = [t for d in decoded if d.delivery and (t := _event_time(d.delivery)) is not None]
    clock = ReplayClock(min(times) if times else datetime.now(UTC))

    with tempfile.TemporaryDirectory(prefix="loopbreaker-replay-") as scratch:
        path = store_path or Path(scratch) / "incidents.sqlite"
        local = replace(settings, store=StoreSpec(StoreKind.SQLITE, path))
        store = SqliteStore(path)
        evidence: EvidenceProvider | None = TelemetryDirEvidence(telemetry) if telemetry else None
        responder = build_responder(
            local,
            store=store,
            # The notifier LOOPBREAKER_NOTIFIER names (the console by default).
            notifier=notifier,
            evidence=evidence,
            clock=clock,
            # Approval requests opened by the replay are for a human deciding now.
            approval_clock=approval_clock or system_clock,
        )
        try:
            summary = _feed(responder, decoded, clock)
            summary.store = str(store_path) if store_path else None
            clock.advance_to(clock.now + settings.settle_time + timedelta(seconds=1))
            summary.settle = _settle_all(responder)
            summary.incidents = sorted(
                store.list_incidents(limit=10_000), key=lambda i: (i.first_event, i.id)
            )
        finally:
            store.close()
    return summary


@dataclass(frozen=True)
class _Decoded:
    item: Item
    delivery: Delivery | None
    error: str | None = None
    message_id: str | None = None


def _feed(responder: Responder, decoded: list[_Decoded], clock: ReplayClock) -> Summary:
    summary = Summary(read=len(decoded))
    for entry in decoded:
        item, delivery = entry.item, entry.delivery
        if delivery is None:
            reason = entry.error or "unreadable"
            responder.reject(entry.message_id, reason, index=item.index, source=item.source)
            summary.rejected.append(
                {
                    "index": item.index,
                    "source": item.source,
                    "reason": reason,
                    "message_id": entry.message_id,
                }
            )
            continue
        moment = _event_time(delivery)
        if moment is not None:
            clock.advance_to(moment)
        outcome = responder.handle_delivery(delivery)
        if outcome.status is Status.ACCEPTED:
            summary.accepted += 1
        elif outcome.status is Status.DUPLICATE:
            summary.duplicates += 1
        elif outcome.status is Status.IGNORED:
            # A valid LogEntry that concerns no incident is still accepted (and acked);
            # ``ignored`` says how many of the accepted ones were of that sort.
            summary.accepted += 1
            summary.ignored += 1
        else:
            summary.rejected.append(
                {
                    "index": item.index,
                    "source": item.source,
                    "reason": outcome.reason,
                    "message_id": outcome.message_id,
                }
            )
    return summary


def _settle_all(responder: Responder) -> SettleReport:
    total = SettleReport()
    for _ in range(MAX_SETTLE_PASSES):
        report = responder.settle()
        total.diagnosed += report.diagnosed
        total.expired += report.expired
        total.notified += report.notified
        total.failed += report.failed
        total.pruned += report.pruned
        if not report.diagnosed and not report.expired:
            break
    return total


def to_text(summary: Summary) -> str:
    lines = [
        f"Replayed {summary.read} deliveries: {summary.accepted} accepted "
        f"({summary.ignored} of them matched no failure signature), "
        f"{summary.duplicates} duplicates, {len(summary.rejected)} rejected."
    ]
    if summary.rejected:
        lines.append("Rejected:")
        lines += [f"  #{r['index']} {r['source']}: {r['reason']}" for r in summary.rejected]
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
