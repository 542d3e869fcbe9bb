"""``loopbreaker incidents report``: outcomes, durations and cost over one window.

Every section covers the same window: the incidents opened in ``[since, until]``, the host
failures of those incidents (a failure remembered without its incident: dated in the
window) and the pause periods overlapping it.

Durations never span two clocks. A signal's time is its event time; the diagnosis is
dated by the responder's clock, which in a replay follows the entries' event time. An
approval, a remediation and its verification are dated by the wall clock. So the report
measures signal -> diagnosis on the first clock and approval -> remediated -> verified on
the second, and never diagnosis -> approval (in a replay, months of replay clock).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from loopbreaker.cli.incidents.cost import cost_figures, cost_text
from loopbreaker.cli.store import open_store
from loopbreaker.errors import InvalidInput
from loopbreaker.incidents import Incident, PauseRecord, State, merge_host_failures, verifying
from loopbreaker.logs import event, get_logger
from loopbreaker.model import HostFailureRecord
from loopbreaker.settings.load import Runtime, load_settings, parse_duration
from loopbreaker.timeutil import format_rfc3339

#: Incidents the report reads (most recently opened first).
REPORT_LIMIT = 5000

#: Spans between event time (signals) and the responder's clock (the diagnosis).
EVENT_STAGES = ("signal_to_diagnosis", "first_signal_to_diagnosis")
#: Spans between wall-clock moments: the human's approval and what followed it.
WALL_STAGES = ("approval_to_remediated", "remediated_to_verified")


def _quantile(values: list[float], q: float) -> float | None:
    """Nearest-rank quantile (p50 = median of an odd count), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def trigger_of(incident: Incident, signal_times: list[datetime]) -> datetime | None:
    """The signal that made the verdict possible: the newest one at or before it."""
    if incident.diagnosis is None:
        return None
    before = [t for t in signal_times if t <= incident.diagnosis.at]
    return max(before) if before else incident.first_event


def stage_seconds(incident: Incident, trigger: datetime | None) -> dict[str, float | None]:
    """Seconds of each span, None when a mark is missing; each span on one clock."""
    d, approval = incident.diagnosis, incident.approval
    remediation, check = incident.remediation, incident.verification
    done = remediation.finished_at if remediation else None
    verified = check.decided_at if check else None

    def span(start: datetime | None, end: datetime | None) -> float | None:
        return (end - start).total_seconds() if start and end else None

    return {
        "signal_to_diagnosis": span(trigger, d.at if d else None),
        "first_signal_to_diagnosis": span(incident.first_event, d.at if d else None),
        "approval_to_remediated": span(approval.at if approval else None, done),
        "remediated_to_verified": span(done, verified),
    }


def _stats(values: list[float]) -> dict[str, Any]:
    return {"count": len(values), "median": _quantile(values, 0.5), "p90": _quantile(values, 0.9)}


def report_figures(
    found: list[Incident],
    pauses: list[PauseRecord],
    host_failures: list[HostFailureRecord],
    *,
    since: datetime,
    now: datetime,
    triggers: Mapping[str, datetime] | None = None,
) -> dict[str, Any]:
    """The figures of ``incidents report`` (pure; also logged as structured fields)."""
    chosen = [i for i in found if since <= i.opened_at <= now]
    by_cause: dict[str, dict[str, int]] = {}
    for i in chosen:
        cause = i.diagnosis.root_cause if i.diagnosis else "not_diagnosed"
        row = by_cause.setdefault(cause, {})
        row[i.state.value] = row.get(i.state.value, 0) + 1
    spans: dict[str, list[float]] = {name: [] for name in (*EVENT_STAGES, *WALL_STAGES)}
    for i in chosen:
        trigger = (triggers or {}).get(i.id) or (i.first_event if i.diagnosis else None)
        for name, seconds in stage_seconds(i, trigger).items():
            if seconds is not None:
                spans[name].append(seconds)
    remediated = [i for i in chosen if i.remediation and i.remediation.finished_at]
    verified = [i for i in chosen if i.state is State.VERIFIED]
    recurred = [i for i in chosen if i.state is State.RECURRED]
    judged = len(verified) + len(recurred)
    # Each remembered failure counts once (the engine merges observations of one failure;
    # a recurrence after remediation is remembered as one more), and only in the window.
    inside = {i.id for i in chosen}
    listed = {i.id for i in found}
    kept = [
        record
        for record in host_failures
        if record.incident_id in inside
        or (
            (record.incident_id is None or record.incident_id not in listed)
            and since <= record.at <= now
        )
    ]
    # One failure two incidents remember (a node-pool incident and the workload's merged
    # into it) counts once, as the engine merges its own observations.
    failures = Counter(r.host for r in merge_host_failures(kept))
    ranked = sorted((-n, h) for h, n in failures.items() if n >= 2)
    offenders = [{"host": h, "failures": -n} for n, h in ranked]
    return {
        "since": format_rfc3339(since),
        "until": format_rfc3339(now),
        "incidents": len(chosen),
        "by_root_cause": {k: dict(sorted(v.items())) for k, v in sorted(by_cause.items())},
        "seconds": {name: _stats(spans[name]) for name in EVENT_STAGES},
        "wall_clock_seconds": {name: _stats(spans[name]) for name in WALL_STAGES},
        "remediated": len(remediated),
        "verified": len(verified),
        "recurred": len(recurred),
        "watching": sum(1 for i in chosen if verifying(i)),
        "verified_share": round(len(verified) / judged, 3) if judged else None,
        "recurred_share": round(len(recurred) / judged, 3) if judged else None,
        "repeat_offender_hosts": offenders,
        "cost": cost_figures(chosen),
        "pauses": [p.to_dict() for p in pauses if _overlaps(p, since, now)],
    }


def _overlaps(pause: PauseRecord, since: datetime, until: datetime) -> bool:
    ended = pause.ended_at()
    return pause.at <= until and (ended is None or ended >= since)


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.0f}s"
    if value < 7200:
        return f"{value / 60:.1f}m"
    return f"{value / 3600:.1f}h"


LABELS = {
    "signal_to_diagnosis": "enabling signal -> diagnosis",
    "first_signal_to_diagnosis": "first signal -> diagnosis",
    "approval_to_remediated": "approval -> remediated",
    "remediated_to_verified": "remediated -> verified",
}


def _table(title: str, rows: Mapping[str, Mapping[str, Any]]) -> list[str]:
    lines = [f"{title:<32} count  median     p90"]
    for name, row in rows.items():
        lines.append(
            f"  {LABELS[name]:<30} {row['count']:>5}  {_seconds(row['median']):>7} "
            f"{_seconds(row['p90']):>7}"
        )
    return lines


def report_text(figures: dict[str, Any]) -> str:
    lines = [
        f"Window: {figures['since']} .. {figures['until']} (every section below covers it)",
        f"Incidents opened in the window: {figures['incidents']}",
        "",
        "By root cause and state:",
    ]
    if figures.get("route"):
        lines.insert(1, f"Route: {figures['route']} (incidents routed there only)")
    for cause, states in figures["by_root_cause"].items():
        shown = ", ".join(f"{n} {state}" for state, n in states.items())
        lines.append(f"  {cause:<24} {shown}")
    if not figures["by_root_cause"]:
        lines.append("  (none)")
    lines += ["", *_table("Event time -> responder's clock", figures["seconds"])]
    lines += ["", *_table("Wall clock (after a human)", figures["wall_clock_seconds"])]
    lines.append(
        "  (diagnosis -> approval is not shown: in a replay the diagnosis runs on the "
        "replay's clock, the approval on the wall clock)"
    )

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}"

    lines += [
        "",
        f"Remediated: {figures['remediated']}; verified {figures['verified']} "
        f"({share(figures['verified_share'])}), recurred {figures['recurred']} "
        f"({share(figures['recurred_share'])}), still watched {figures['watching']}",
        "",
        *cost_text(figures["cost"]),
        "",
        "Repeat-offender hosts (failures in the window):",
    ]
    for row in figures["repeat_offender_hosts"]:
        lines.append(f"  {row['host']}  {row['failures']} failures")
    if not figures["repeat_offender_hosts"]:
        lines.append("  (none)")
    lines += ["", "Pause periods overlapping the window:"]
    for p in figures["pauses"]:
        end = p["resumed_at"] or p["until"] or "(in force)"
        lines.append(f"  {p['at']} .. {end}  by {p['by']}: {p['reason']}")
    if not figures["pauses"]:
        lines.append("  (none)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    settings = load_settings(os.environ, runtime=Runtime.LOCAL)
    try:
        span = parse_duration(args.since)
    except ValueError as exc:
        raise InvalidInput(f"--since {args.since!r}: {exc}") from exc
    now = datetime.now(UTC)
    since = now - span
    store = open_store(args.store, settings, again="loopbreaker incidents report")
    try:
        found = store.list_incidents(limit=REPORT_LIMIT)
        if args.route:
            found = [i for i in found if i.route == args.route]
        chosen = [i for i in found if since <= i.opened_at <= now]
        pauses = store.pauses(since)
        names: set[str] = set()
        triggers: dict[str, datetime] = {}
        for i in chosen:
            names.update(i.hosts)
            if i.approval is not None:
                names.add(i.approval.target.physical_host)
            if i.diagnosis is not None:
                names.update(i.diagnosis.suspect_hosts)
                times = [s.timestamp for s in store.signals(i.id) if s.timestamp]
                trigger = trigger_of(i, times)
                if trigger is not None:
                    triggers[i.id] = trigger
        history = store.host_history(names)
    finally:
        store.close()
    figures = report_figures(found, pauses, history, since=since, now=now, triggers=triggers)
    figures["route"] = args.route
    event(
        get_logger("report"),
        logging.INFO,
        f"incidents report: {figures['incidents']} incident(s) since {figures['since']}",
        event="incidents_report",
        **{k: v for k, v in figures.items() if k not in ("since", "until")},
    )
    if args.format == "json":
        print(json.dumps(figures, indent=2))
    else:
        print(report_text(figures))
    return 0
