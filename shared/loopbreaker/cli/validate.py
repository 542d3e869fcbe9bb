"""``loopbreaker validate-queries``: parse every query template, optionally run it live."""

from __future__ import annotations

import argparse
import json
import sys

from loopbreaker.argtypes import TIMEOUT_SECONDS
from loopbreaker.cli import console
from loopbreaker.diagnosis.queries import Template, templates
from loopbreaker.diagnosis.queries.validate import (
    TEST_VALUES,
    Status,
    to_table,
    validate,
    validation_context,
)
from loopbreaker.diagnosis.readers.flags import (
    add_auth_flags,
    http_url,
    prometheus_auth_from_args,
)
from loopbreaker.errors import InvalidInput
from loopbreaker.model import QueryLanguage

#: Languages accepted by --extra-query.
_EXTRA_LANGUAGES = {"promql": QueryLanguage.PROMQL, "lql": QueryLanguage.LQL}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "validate-queries",
        help="check every PromQL and LQL template (offline parsers; live with flags)",
        description="Fill every query template with test values and check it: PromQL with "
        "promtool (the Prometheus parser), LQL with loopbreaker's Logging query grammar. "
        "With --prometheus-url or --project each query is also run against the endpoint "
        "(401/403/network errors are skipped with a warning). Exit 1 when anything fails.",
    )
    parser.add_argument(
        "--project", help="also run PromQL on Managed Prometheus and LQL on Cloud Logging"
    )
    parser.add_argument(
        "--prometheus-url", metavar="URL", type=http_url, help="also run PromQL against it"
    )
    add_auth_flags(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    values = parser.add_argument_group("test values used to fill the templates")
    for name in ("location", "cluster", "namespace", "workload"):
        values.add_argument(f"--{name}", default=TEST_VALUES[name], help="(default: %(default)s)")
    values.add_argument(
        "--issue-time", dest="issue_time", default=TEST_VALUES["issue_time"], metavar="T"
    )
    parser.add_argument(
        "--promtool", metavar="PATH", help="promtool binary (default: $LOOPBREAKER_PROMTOOL, PATH)"
    )
    parser.add_argument(
        "--extra-query",
        metavar="LANG:TEXT",
        action="append",
        default=[],
        help="also check this query (LANG promql or lql; repeatable), e.g. while editing templates",
    )
    parser.add_argument(
        "--timeout",
        type=TIMEOUT_SECONDS,
        default=30.0,
        metavar="SECONDS",
        help=f"live request timeout, {TIMEOUT_SECONDS.range} seconds (default: 30)",
    )
    parser.set_defaults(handler=run)


def extra_templates(specs: list[str]) -> list[Template]:
    out = []
    for index, spec in enumerate(specs, start=1):
        language, sep, text = spec.partition(":")
        if not sep or language.lower() not in _EXTRA_LANGUAGES:
            raise InvalidInput(f"--extra-query {spec!r}: expected promql:TEXT or lql:TEXT")
        out.append(
            Template(f"extra-{index}", 0, _EXTRA_LANGUAGES[language.lower()], text, "--extra-query")
        )
    return out


def run(args: argparse.Namespace) -> int:
    project = args.project or None
    context = validation_context(
        project=project,
        location=args.location,
        cluster=args.cluster,
        namespace=args.namespace,
        workload=args.workload,
        issue_time=args.issue_time,
    )
    checked = [*templates(), *extra_templates(args.extra_query)]
    prometheus = logging = None
    if args.prometheus_url or project:
        from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials
        from loopbreaker.diagnosis.readers.prometheus import PrometheusReader

        credentials = GoogleCredentials()
        if args.prometheus_url:
            auth = prometheus_auth_from_args(args)
            token = auth.get("prometheus_bearer_token")
            prometheus = PrometheusReader(
                args.prometheus_url,
                timeout=args.timeout,
                token_provider=(lambda: token) if token is not None else None,
                basic_auth=auth.get("prometheus_basic_auth"),
            )
        elif project:
            prometheus = PrometheusReader.managed(
                project, credentials=credentials, timeout=args.timeout
            )
        if project:
            from loopbreaker.diagnosis.readers.logging_reader import CloudLoggingReader

            logging = CloudLoggingReader(project, credentials=credentials, timeout=args.timeout)
    report = validate(
        context,
        templates=checked,
        promtool=args.promtool,
        prometheus=prometheus,
        logging=logging,
    )
    if args.format == "json":
        json.dump(report.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(to_table(report))
    skipped = [r for r in report.results if r.status is Status.SKIP and r.check != "deprecated"]
    live = [r for r in skipped if r.check.startswith("live ")]
    if live:
        # A live check was asked for and could not run: that is not a pass.
        console.error(f"{len(live)} live check(s) could not run: {live[0].message}")
        return 1
    if skipped:
        console.line(f"warning: {len(skipped)} check(s) skipped: {skipped[0].message}")
    return 0 if report.ok else 1
