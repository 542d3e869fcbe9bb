"""``loopbreaker incidents list|show|report``: what the responder knows, from its store."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loopbreaker.app.settings import (
    PREFIX,
    Runtime,
    Settings,
    StoreKind,
    StoreSpec,
    load_settings,
    parse_duration,
)
from loopbreaker.errors import InvalidInput
from loopbreaker.incidents import Incident, PauseRecord, State, verifying
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.logs import event, get_logger
from loopbreaker.model import HostFailureRecord
from loopbreaker.timeutil import format_rfc3339

LIST_LIMIT = 1000
#: Incidents the report reads (most recently opened first).
REPORT_LIMIT = 5000


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "incidents",
        help="list and show incidents of a store",
        description="Read incidents from the store: state, key, cluster, counts, diagnosis, "
        "approval and audit trail.",
    )
    commands = parser.add_subparsers(dest="incidents_command", metavar="COMMAND")
    commands.required = True
    listing = commands.add_parser("list", help="incidents, most recently opened first")
    store_option(listing)
    listing.add_argument(
        "--state", choices=[s.value for s in State], help="only incidents in this state"
    )
    listing.add_argument("--format", choices=("text", "json"), default="text")
    listing.set_defaults(handler=run_list)
    show = commands.add_parser("show", help="one incident with its audit trail")
    show.add_argument("id", metavar="ID", help="incident id (inc-…)")
    store_option(show)
    show.add_argument("--format", choices=("text", "json"), default="text")
    show.set_defaults(handler=run_show)
    report = commands.add_parser(
        "report",
        help="outcomes: by cause and final state, time to each stage, verified and recurred",
        description="Incidents opened since --since: counts by root cause and final state; "
        "median and p90 from the first signal to diagnosis, approval, remediated and "
        "verified; the share verified and recurred; repeat-offender hosts; pause periods.",
    )
    report.add_argument(
        "--since", default="30d", metavar="DURATION", help="how far back (default: 30d)"
    )
    store_option(report)
    report.add_argument("--format", choices=("text", "json"), default="text")
    report.set_defaults(handler=run_report)


def store_option(parser: argparse.ArgumentParser) -> None:
    """The ``--store`` option of every subcommand that reads the store."""
    parser.add_argument(
        "--store",
        metavar="S",
        help=f"sqlite:PATH, a SQLite file, or firestore (default: {PREFIX}STORE, else the "
        "local store .loopbreaker/incidents.sqlite)",
    )


def open_store(raw: str | None, settings: Settings) -> IncidentStore:
    """The store ``--store`` names; a SQLite file must exist (no typo creates a new one)."""
    spec = settings.store
    if raw:
        if raw == StoreKind.FIRESTORE.value:
            spec = StoreSpec(StoreKind.FIRESTORE)
        else:
            path = raw[len("sqlite:") :] if raw.startswith("sqlite:") else raw
            if not path.strip():
                raise InvalidInput("--store: expected sqlite:PATH, a file, or firestore")
            spec = StoreSpec(StoreKind.SQLITE, Path(path).expanduser())
    if spec.kind is StoreKind.SQLITE:
        assert spec.path is not None
        if not spec.path.is_file():
            raise InvalidInput(f"no incident store at {spec.path}")
    from loopbreaker.app.bootstrap import build_store  # the clients of one store only

    return build_store(replace(settings, store=spec))


def view(incident: Incident) -> dict[str, Any]:
    """The JSON of one incident, as ``incidents show --format json`` prints it."""
    from loopbreaker.app.replay import incident_summary

    d = incident.diagnosis
    out = incident_summary(incident)
    out.update(
        {
            "cluster": incident.cluster,
            "opened_at": format_rfc3339(incident.opened_at),
            "updated_at": format_rfc3339(incident.updated_at),
            "nodes": list(incident.nodes),
            "hosts": list(incident.hosts),
            "diagnosis": (
                {
                    "at": format_rfc3339(d.at),
                    "root_cause": d.root_cause,
                    "remediation_path": d.remediation_path,
                    "requires_approval": d.requires_approval,
                    "summary": d.summary,
                    "suspect_hosts": list(d.suspect_hosts),
                    "target": d.target.to_dict() if d.target else None,
                    "target_reason": d.target_reason,
                    "ticket_draft": dict(d.ticket_draft) if d.ticket_draft else None,
                }
                if d
                else None
            ),
            "approval_request": (
                incident.approval_request.to_dict() if incident.approval_request else None
            ),
            "approval": incident.approval.to_dict() if incident.approval else None,
            "chat": dict(incident.chat) if incident.chat else None,
            "audit": [a.to_dict() for a in incident.audit],
            "audit_dropped": incident.audit_dropped,
            "verification": incident.verification.to_dict() if incident.verification else None,
            "linked": list(incident.linked),
        }
    )
    return out


def run_list(args: argparse.Namespace) -> int:
    settings = load_settings(os.environ, runtime=Runtime.LOCAL)
    store = open_store(args.store, settings)
    try:
        states = {State(args.state)} if args.state else None
        found = store.list_incidents(states=states, limit=LIST_LIMIT)
    finally:
        store.close()
    if args.format == "json":
        print(json.dumps({"incidents": [view(i) for i in found]}, indent=2))
        return 0
    if not found:
        print("no incidents")
        return 0
    for i in found:
        d = i.diagnosis
        verdict = f"{d.root_cause} -> {d.remediation_path}" if d else "not diagnosed"
        decided = ""
        if i.approval:
            decided = f"  {i.approval.decision.value} by {i.approval.actor}"
        print(f"{i.id}  {i.state.value:<17}  {verdict}  {i.key}{decided}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    settings = load_settings(os.environ, runtime=Runtime.LOCAL)
    store = open_store(args.store, settings)
    try:
        incident = store.get(args.id)
    finally:
        store.close()
    if incident is None:
        raise InvalidInput(f"no incident {args.id!r} in the store")
    if args.format == "json":
        print(json.dumps(view(incident), indent=2))
        return 0
    print(to_text(incident))
    return 0


def to_text(incident: Incident) -> str:
    v = view(incident)
    counts = ", ".join(f"{n} {k}" for k, n in v["counts"].items())
    lines = [
        f"Incident {v['id']}: {v['state']}",
        f"  key:      {v['key']}",
        f"  cluster:  {v['cluster'] or '-'}",
        f"  signals:  {v['signal_count']} ({counts})",
        f"  events:   {v['first_event']} .. {v['last_event']}",
    ]
    d = v["diagnosis"]
    if d:
        lines.append(f"  verdict:  {d['root_cause']} -> {d['remediation_path']}")
        lines.append(f"  summary:  {d['summary']}")
        if d["target"]:
            t = d["target"]
            lines.append(
                f"  target:   node {t['node']}, VM {t['instance']} (id {t['instance_id']}), "
                f"{t['zone']}, host {t['physical_host']}"
            )
        elif d["target_reason"]:
            lines.append(f"  target:   none: {d['target_reason']}")
    request = v["approval_request"]
    if request:
        lines.append(
            f"  approval: requested ({request['id']}), valid until {request['expires_at']}"
        )
    approval = v["approval"]
    if approval:
        who = approval["by_name"] or approval["by"]
        published = f", published {approval['published_at']}" if approval["published_at"] else ""
        lines.append(
            f"  approval: {approval['decision']} by {who} ({approval['by']}) via "
            f"{approval['platform']} at {approval['at']}{published}"
        )
    check = v["verification"]
    if check:
        lines.append(
            f"  verify:   {check['verdict']} ({check['checks']} check(s)), watching "
            f"{check['since']} .. {check['until']}, host {check['host'] or '-'}"
        )
        lines += [f"            {f}" for f in check["findings"][-5:]]
        if check["other_incident"]:
            lines.append(f"            another cause opened {check['other_incident']}")
    lines.append("  audit trail:")
    for a in v["audit"]:
        moved = f"{a['from'] or '-'} -> {a['to']}"
        lines.append(f"    {a['at']}  {a['actor']:<24} {moved:<36} {a['note']}")
    if v["audit_dropped"]:
        lines.append(f"    ({v['audit_dropped']} events dropped between head and tail)")
    return "\n".join(lines)


# --- report ------------------------------------------------------------------------------

#: The stages whose time from the first signal the report measures.
STAGES = ("to_diagnosis", "to_approval", "to_remediated", "to_verified")


def _quantile(values: list[float], q: float) -> float | None:
    """Nearest-rank quantile (p50 = median of an odd count), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def report_figures(
    found: list[Incident],
    pauses: list[PauseRecord],
    host_failures: list[HostFailureRecord],
    *,
    since: datetime,
    now: datetime,
) -> dict[str, Any]:
    """The figures of ``incidents report`` (pure; also logged as structured fields)."""
    from loopbreaker.app.responder import durations

    chosen = [i for i in found if i.opened_at >= since]
    by_cause: dict[str, dict[str, int]] = {}
    for i in chosen:
        cause = i.diagnosis.root_cause if i.diagnosis else "not_diagnosed"
        row = by_cause.setdefault(cause, {})
        row[i.state.value] = row.get(i.state.value, 0) + 1
    stages: dict[str, list[float]] = {name: [] for name in STAGES}
    for i in chosen:
        for name, seconds in durations(i).items():
            if seconds is not None:
                stages[name.removeprefix("seconds_")].append(seconds)
    remediated = [i for i in chosen if i.remediation and i.remediation.finished_at]
    verified = [i for i in chosen if i.state is State.VERIFIED]
    recurred = [i for i in chosen if i.state is State.RECURRED]
    judged = len(verified) + len(recurred)
    # Each remembered failure counts once (the engine merges observations of one failure;
    # a recurrence after remediation is remembered as one more).
    failures: dict[str, int] = {}
    for record in host_failures:
        failures[record.host] = failures.get(record.host, 0) + 1
    ranked = sorted((-n, h) for h, n in failures.items() if n >= 2)
    offenders = [{"host": h, "failures": -n} for n, h in ranked]
    return {
        "since": format_rfc3339(since),
        "until": format_rfc3339(now),
        "incidents": len(chosen),
        "by_root_cause": {k: dict(sorted(v.items())) for k, v in sorted(by_cause.items())},
        "seconds": {
            name: {
                "count": len(values),
                "median": _quantile(values, 0.5),
                "p90": _quantile(values, 0.9),
            }
            for name, values in stages.items()
        },
        "remediated": len(remediated),
        "verified": len(verified),
        "recurred": len(recurred),
        "watching": sum(1 for i in chosen if verifying(i)),
        "verified_share": round(len(verified) / judged, 3) if judged else None,
        "recurred_share": round(len(recurred) / judged, 3) if judged else None,
        "repeat_offender_hosts": offenders,
        "pauses": [p.to_dict() for p in pauses],
    }


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.0f}s"
    if value < 7200:
        return f"{value / 60:.1f}m"
    return f"{value / 3600:.1f}h"


def report_text(figures: dict[str, Any]) -> str:
    lines = [
        f"Incidents opened {figures['since']} .. {figures['until']}: {figures['incidents']}",
        "",
        "By root cause and state:",
    ]
    for cause, states in figures["by_root_cause"].items():
        shown = ", ".join(f"{n} {state}" for state, n in states.items())
        lines.append(f"  {cause:<24} {shown}")
    if not figures["by_root_cause"]:
        lines.append("  (none)")
    lines += ["", "From the first signal      count  median     p90"]
    for name, row in figures["seconds"].items():
        label = name.replace("to_", "to ")
        lines.append(
            f"  {label:<24} {row['count']:>5}  {_seconds(row['median']):>7} "
            f"{_seconds(row['p90']):>7}"
        )

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}"

    lines += [
        "",
        f"Remediated: {figures['remediated']}; verified {figures['verified']} "
        f"({share(figures['verified_share'])}), recurred {figures['recurred']} "
        f"({share(figures['recurred_share'])}), still watched {figures['watching']}",
        "",
        "Repeat-offender hosts:",
    ]
    for row in figures["repeat_offender_hosts"]:
        lines.append(f"  {row['host']}  {row['failures']} failures")
    if not figures["repeat_offender_hosts"]:
        lines.append("  (none)")
    lines += ["", "Pause periods:"]
    for p in figures["pauses"]:
        end = p["resumed_at"] or p["until"] or "(in force)"
        lines.append(f"  {p['at']} .. {end}  by {p['by']}: {p['reason']}")
    if not figures["pauses"]:
        lines.append("  (none)")
    return "\n".join(lines)


def run_report(args: argparse.Namespace) -> int:
    settings = load_settings(os.environ, runtime=Runtime.LOCAL)
    try:
        span = parse_duration(args.since)
    except ValueError as exc:
        raise InvalidInput(f"--since {args.since!r}: {exc}") from exc
    now = datetime.now(UTC)
    since = now - span
    store = open_store(args.store, settings)
    try:
        found = store.list_incidents(limit=REPORT_LIMIT)
        pauses = store.pauses(since)
        names: set[str] = set()
        for i in found:
            names.update(i.hosts)
            if i.approval is not None:
                names.add(i.approval.target.physical_host)
        history = store.host_history(names)
    finally:
        store.close()
    figures = report_figures(found, pauses, history, since=since, now=now)
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
