"""``loopbreaker incidents list|show|report``: what the responder knows, from its store."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from loopbreaker.cli.incidents.report import run as run_report
from loopbreaker.cli.store import open_store, store_option
from loopbreaker.errors import InvalidInput
from loopbreaker.incidents import Incident, State
from loopbreaker.settings.load import (
    Runtime,
    load_settings,
)
from loopbreaker.timeutil import format_rfc3339

LIST_LIMIT = 1000


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
    report.add_argument(
        "--route", metavar="NAME", help="only incidents routed to this route (LOOPBREAKER_ROUTES)"
    )
    report.add_argument("--format", choices=("text", "json"), default="text")
    report.set_defaults(handler=run_report)


def view(incident: Incident) -> dict[str, Any]:
    """The JSON of one incident, as ``incidents show --format json`` prints it."""
    from loopbreaker.replay.run import incident_summary

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
            "linked_to": incident.linked_to,
            "linked": list(incident.linked),
        }
    )
    return out


def run_list(args: argparse.Namespace) -> int:
    settings = load_settings(os.environ, runtime=Runtime.LOCAL)
    store = open_store(args.store, settings, again="loopbreaker incidents list")
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
        route = f"  route {i.route}" if i.route else ""
        print(f"{i.id}  {i.state.value:<17}  {verdict}  {i.key}{route}{decided}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    settings = load_settings(os.environ, runtime=Runtime.LOCAL)
    store = open_store(args.store, settings, again=f"loopbreaker incidents show {args.id}")
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
        f"  route:    {v['route'] or '-'}",
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
    if v["linked_to"]:
        lines.append(f"  linked:   to {v['linked_to']}, which holds the one approval")
    if v["linked"]:
        lines.append(f"  linked:   {', '.join(v['linked'])}")
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
