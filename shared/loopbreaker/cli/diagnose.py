"""``loopbreaker diagnose`` and ``loopbreaker queries``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from loopbreaker.diagnosis.metric_vocabulary import Vocabulary
from loopbreaker.diagnosis.queries import fill, templates_for
from loopbreaker.errors import InvalidContext
from loopbreaker.model import Context, Evidence, WorkloadKind
from loopbreaker.timeutil import format_rfc3339, parse_rfc3339

REQUIRED = ("cluster", "workload", "issue_time")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    diag = sub.add_parser(
        "diagnose",
        help="run the four-step restart-loop diagnosis",
        description="Diagnose why a JobSet (or TFJob/PyTorchJob/TrainJob) keeps restarting.",
    )
    add_context_flags(diag)
    diag.add_argument(
        "--telemetry",
        metavar="DIR",
        type=Path,
        help="directory of offline telemetry (logs.json, *.jsonl, metrics.om, nodes.json, "
        "pods.json, jobs.json, jobsets.json)",
    )
    diag.add_argument(
        "--format",
        choices=("text", "json", "markdown"),
        default="text",
        help="output format (default: text)",
    )
    add_live_flags(diag)
    diag.set_defaults(handler=run_diagnose)

    queries = sub.add_parser(
        "queries",
        help="print every filled query of the workflow",
        description="Print every PromQL, LQL (and deprecated MQL) query, filled from the context;"
        " unknown values keep their {placeholder}.",
    )
    add_context_flags(queries)
    queries.add_argument("--format", choices=("text", "json"), default="text")
    queries.add_argument(
        "--include-deprecated", action="store_true", help="also print the deprecated MQL forms"
    )
    queries.add_argument(
        "--vocabulary",
        choices=[v.value for v in Vocabulary],
        help="only the PromQL of one metric vocabulary (default: both)",
    )
    queries.set_defaults(handler=run_queries)


def add_context_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("context")
    group.add_argument("--project", help="Google Cloud project id")
    group.add_argument("--location", help="cluster location (region or zone)")
    group.add_argument("--cluster", help="GKE cluster name (required)")
    group.add_argument("--namespace", help="Kubernetes namespace of the workload")
    group.add_argument("--workload", help="JobSet (or TFJob/PyTorchJob/TrainJob) name (required)")
    group.add_argument(
        "--workload-kind",
        dest="workload_kind",
        type=str.lower,  # the API kind spelling too: TrainJob, TFJob
        choices=[k.value for k in WorkloadKind],
        default=None,
        help="the controller of the workload: JobSet, Kubeflow's TFJob / PyTorchJob, or "
        "Kubeflow Trainer's TrainJob (runs as a JobSet of its name) "
        "(default: detected from the evidence, else jobset)",
    )
    group.add_argument(
        "--issue-time",
        dest="issue_time",
        metavar="T",
        help="RFC 3339 time of the issue, e.g. 2026-05-20T08:15:00Z (required; no relative times)",
    )


def add_live_flags(parser: argparse.ArgumentParser) -> None:
    """Live sources, wired through loopbreaker.diagnosis.readers.sources when available."""
    try:
        from loopbreaker.diagnosis.readers import sources
    except ImportError:
        return
    add_flags = getattr(sources, "add_flags", None)
    if add_flags is not None:
        add_flags(parser)


def context_from_args(args: argparse.Namespace) -> Context:
    missing = [f"--{name.replace('_', '-')}" for name in REQUIRED if not getattr(args, name)]
    if missing:
        raise InvalidContext(f"missing required flag(s): {', '.join(missing)}")
    issue_time = parse_rfc3339(args.issue_time, what="--issue-time")
    return Context(
        cluster=args.cluster,
        workload=args.workload,
        issue_time=issue_time,
        project=args.project or None,
        location=args.location or None,
        namespace=args.namespace or None,
        workload_kind=WorkloadKind(args.workload_kind or WorkloadKind.JOBSET.value),
    )


def collect_evidence(args: argparse.Namespace, context: Context) -> Evidence:
    from loopbreaker.diagnosis.readers import sources

    options = sources.options_from_args(args)
    if all(o is sources.Origin.NONE for o in sources.plan(context, options, None).values()) and (
        options.telemetry_dir is None
    ):
        raise InvalidContext(
            "no evidence source: give --telemetry DIR, or a live source (--prometheus-url, "
            "--kubeconfig, or --project with --location for Google Cloud)"
        )
    return sources.gather(context, options)


def run_diagnose(args: argparse.Namespace) -> int:
    from loopbreaker.diagnosis import engine, render
    from loopbreaker.diagnosis.scope import resolve

    asked = context_from_args(args)
    evidence = collect_evidence(args, asked)
    resolved = resolve(asked, evidence, kind_given=args.workload_kind is not None)
    context = resolved.context
    live = any(not s.source.startswith(("file:", "none")) for s in evidence.sources.values())
    if context.workload_kind is not asked.workload_kind and live:
        # Live queries are kind-specific (the JobSet and the operator's metrics differ).
        evidence = collect_evidence(args, context)
    # The TrainJob's Failed condition (reason, message) is cited in step 1.
    diagnosis = engine.diagnose(context, evidence)
    if args.format == "json":
        json.dump(render.diagnosis_to_dict(diagnosis), sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.format == "markdown":
        sys.stdout.write(render.to_markdown(diagnosis))
    else:
        sys.stdout.write(render.to_text(diagnosis, note=resolved.note))
    return 0


def run_queries(args: argparse.Namespace) -> int:
    kind = WorkloadKind(args.workload_kind or WorkloadKind.JOBSET.value)
    values: dict[str, str | None] = {
        "project_id": args.project,
        "location": args.location,
        "cluster_name": args.cluster,
        "namespace": args.namespace,
        "workload_name": args.workload,
        "job_kind": kind.api_kind,
        "framework": kind.framework,
        "issue_time": None,
        "start_time": None,
        "end_time": None,
    }
    if args.issue_time:
        ctx = Context(
            cluster=args.cluster or "",
            workload=args.workload or "",
            issue_time=parse_rfc3339(args.issue_time, what="--issue-time"),
        )
        values.update(
            issue_time=format_rfc3339(ctx.issue_time),
            start_time=format_rfc3339(ctx.start_time),
            end_time=format_rfc3339(ctx.end_time),
        )
    chosen = [
        t
        for t in templates_for(kind)
        if (args.include_deprecated or not t.deprecated)
        and (args.vocabulary is None or t.vocabulary in (None, Vocabulary(args.vocabulary)))
    ]
    if args.format == "json":
        out = [
            {
                "id": t.id,
                "step": t.step,
                "workload_kind": kind.value,
                "language": t.language.value,
                "deprecated": t.deprecated,
                "vocabulary": t.vocabulary.value if t.vocabulary else None,
                "description": t.description,
                "text": fill(t.text, values),
            }
            for t in chosen
        ]
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for t in chosen:
        flag = " (deprecated MQL)" if t.deprecated else ""
        where = f" · {t.vocabulary.value}" if t.vocabulary else ""
        sys.stdout.write(
            f"# step {t.step} · {t.id} · {t.language.value}{where}{flag}: {t.description}\n"
        )
        sys.stdout.write(fill(t.text, values) + "\n\n")
    return 0
