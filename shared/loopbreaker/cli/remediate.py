"""``loopbreaker remediate``: the remediation executor, run locally on an approved incident."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from pathlib import Path

from loopbreaker.cli.store import open_store
from loopbreaker.errors import InvalidInput
from loopbreaker.incidents import State
from loopbreaker.remediation.executor import Report, Result
from loopbreaker.remediation.queue import request_for
from loopbreaker.settings.load import Runtime, load_settings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "remediate",
        help="run the remediation of an approved incident (dry run by default)",
        description=(
            "Run the same executor as on_remediation_request on an incident approved in chat: "
            "re-check, cordon, drain, delete the VM (or report its host), file the support "
            "case. A dry run (the default, or LOOPBREAKER_DRY_RUN) reads the cluster and VM "
            "and prints the exact calls it would make; --no-dry-run acts. An incident that "
            "is not approved is refused."
        ),
    )
    parser.add_argument("id", metavar="ID", help="incident id (inc-…)")
    parser.add_argument("--store", metavar="S", help="sqlite:PATH, a SQLite file, or firestore")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", dest="dry_run", action="store_true", default=None)
    mode.add_argument("--no-dry-run", dest="dry_run", action="store_false")
    parser.add_argument("--kubeconfig", metavar="K", type=Path, help="kubeconfig of the cluster")
    parser.add_argument(
        "--compute-endpoint", metavar="URL", help="Compute Engine API endpoint (default Google's)"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(handler=run_remediate)


def run_remediate(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    if args.kubeconfig is not None:
        env["LOOPBREAKER_KUBECONFIG"] = str(args.kubeconfig)
    if args.compute_endpoint:
        env["LOOPBREAKER_COMPUTE_ENDPOINT"] = args.compute_endpoint
    settings = load_settings(env, runtime=Runtime.LOCAL)
    if args.dry_run is not None:
        policy = replace(settings.remediation.policy, dry_run=args.dry_run)
        settings = replace(settings, remediation=replace(settings.remediation, policy=policy))
    store = open_store(args.store, settings)
    try:
        incident = store.get(args.id)
        if incident is None:
            raise InvalidInput(f"no incident {args.id!r} in the store")
        if incident.state not in (State.APPROVED, State.REMEDIATING):
            raise InvalidInput(
                f"incident {incident.id} is {incident.state.value}: only an approved incident "
                "is remediated"
            )
        from loopbreaker.app.bootstrap import build_remediator

        remediator = build_remediator(settings, store=store)
        report = remediator.handle(request_for(incident))
    finally:
        store.close()
    if args.format == "json":
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(to_text(report, dry_run=settings.remediation.policy.dry_run))
    if report.result is Result.PLANNED:
        # A plan whose re-check fails is a remediation that would not happen.
        return 1 if any(s.outcome.value == "failed" for s in report.steps) else 0
    return 0 if report.result in (Result.REMEDIATED, Result.DUPLICATE) else 1


def to_text(report: Report, *, dry_run: bool) -> str:
    title = "Dry-run remediation plan" if dry_run else "Remediation"
    outcome = report.result.value
    failed = [s.step.value for s in report.steps if s.outcome.value == "failed"]
    if report.result is Result.PLANNED and failed:
        # A plan whose re-check fails is a remediation that would not happen: say so first.
        outcome = f"failed ({', '.join(failed)} would fail; nothing would be done)"
    lines = [f"{title} of {report.incident_id}: {outcome}", f"  {report.reason}"]
    for step in report.steps:
        lines.append(f"  {step.step.value:<20} {step.outcome.value:<8} {step.detail}")
        lines += [f"      {call}" for call in step.calls]
    return "\n".join(lines)
