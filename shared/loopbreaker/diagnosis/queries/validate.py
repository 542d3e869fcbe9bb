"""Check every query template: offline with real parsers, optionally against live endpoints.

Offline (always):
  * PromQL: all non-deprecated templates, filled with test values, go into one rules file
    (one recording rule ``lb:q<index>`` each) checked by ``promtool check rules``, the
    Prometheus Go parser. On failure each query is checked alone to name the broken ones.
  * LQL: :mod:`loopbreaker.diagnosis.lql` parses each filter.
  * Any ``{placeholder}`` left after filling fails.
  * Deprecated MQL is reported as skipped (Google ended MQL support; never executed).
Live (when asked): each PromQL is sent to the Prometheus API (200 passes, 400/422 fails with
the server's message, 401/403/network/timeout skip with a warning and stop asking that
endpoint), and each LQL filter is tried with a one-entry Cloud Logging read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from loopbreaker.diagnosis import lql
from loopbreaker.diagnosis.queries import Template, fill
from loopbreaker.diagnosis.queries import templates as every_template
from loopbreaker.errors import SourceUnavailable
from loopbreaker.model import Context, QueryLanguage

#: The values the workflow's own validator uses, plus a fixed issue time.
TEST_VALUES = {
    "project": "test-project",
    "location": "us-central1",
    "cluster": "test-cluster",
    "namespace": "default",
    "workload": "test-jobset",
    "issue_time": "2026-05-20T08:15:00Z",
}
PROMTOOL_ENV = "LOOPBREAKER_PROMTOOL"
PROMTOOL_TIMEOUT = 60.0
INSTALL_HINT = (
    "promtool not found: install the Debian/Ubuntu package 'prometheus' "
    "(apt-get install prometheus), or point --promtool / $LOOPBREAKER_PROMTOOL at a promtool "
    "binary from https://prometheus.io/download/"
)
_LEFTOVER = re.compile(
    r"\{(project_id|location|cluster_name|namespace|workload_name|job_kind|framework|"
    r"issue_time|start_time|end_time)\}"
)
_PARSE_ERROR = re.compile(r"could not parse expression: (?P<msg>.+)$", re.MULTILINE)


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class CheckResult:
    query_id: str
    language: str
    check: str
    status: Status
    message: str = ""
    text: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.query_id,
            "language": self.language,
            "check": self.check,
            "status": self.status.value,
            "message": self.message,
            "text": self.text,
        }


@dataclass(frozen=True)
class Report:
    results: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        return all(r.status is not Status.FAIL for r in self.results)

    def count(self, status: Status) -> int:
        return sum(1 for r in self.results if r.status is status)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "summary": {s.value: self.count(s) for s in Status},
            "results": [r.to_dict() for r in self.results],
        }


@dataclass(frozen=True)
class FilledQuery:
    id: str
    language: QueryLanguage
    text: str


class PromQLEndpoint(Protocol):
    """What live PromQL validation needs (PrometheusReader satisfies it)."""

    @property
    def source(self) -> str: ...

    def query(self, promql: str, time: datetime | None = None) -> dict[str, Any]: ...


class LogEndpoint(Protocol):
    """What live LQL validation needs (CloudLoggingReader satisfies it)."""

    @property
    def source(self) -> str: ...

    def read_one(self, text: str) -> int: ...


def validation_context(**overrides: str | None) -> Context:
    """The context used to fill templates for validation."""
    from loopbreaker.timeutil import parse_rfc3339

    values = {**TEST_VALUES, **{k: v for k, v in overrides.items() if v}}
    return Context(
        cluster=str(values["cluster"]),
        workload=str(values["workload"]),
        issue_time=parse_rfc3339(str(values["issue_time"]), what="--issue-time"),
        project=values["project"],
        location=values["location"],
        namespace=values["namespace"],
    )


def validate(
    context: Context,
    *,
    templates: Sequence[Template] | None = None,
    promtool: str | None = None,
    prometheus: PromQLEndpoint | None = None,
    logging: LogEndpoint | None = None,
) -> Report:
    """Check ``templates`` (every template of the workflow unless given); see the module
    docstring."""
    if templates is None:
        templates = every_template()
    results: list[CheckResult] = []
    promql: list[FilledQuery] = []
    logql: list[FilledQuery] = []
    for template in templates:
        # A kind-specific variant is filled as that kind's job would fill it.
        kind = context.workload_kind
        if not template.serves(kind):
            kind = sorted(template.kinds)[0]
        text = fill(template.text, replace(context, workload_kind=kind).placeholders())
        language = template.language
        if template.deprecated:
            results.append(
                CheckResult(
                    template.qualified_id,
                    language.value,
                    "deprecated",
                    Status.SKIP,
                    "deprecated MQL: kept for reference, never executed",
                    text,
                )
            )
            continue
        leftover = _LEFTOVER.search(text)
        if leftover:
            results.append(
                CheckResult(
                    template.qualified_id,
                    language.value,
                    "placeholders",
                    Status.FAIL,
                    f"unfilled placeholder {leftover.group(0)}",
                    text,
                )
            )
            continue
        query = FilledQuery(template.qualified_id, language, text)
        if language is QueryLanguage.PROMQL:
            promql.append(query)
        elif language is QueryLanguage.LQL:
            logql.append(query)
        else:
            results.append(
                CheckResult(
                    template.qualified_id,
                    language.value,
                    "language",
                    Status.FAIL,
                    "no checker",
                    text,
                )
            )
    results += check_promql_offline(promql, promtool, live_fallback=prometheus is not None)
    results += check_lql_offline(logql)
    if prometheus is not None:
        results += check_promql_live(promql, prometheus, at=context.end_time)
    if logging is not None:
        results += check_lql_live(logql, logging)
    order = {t.qualified_id: i for i, t in enumerate(templates)}
    results.sort(key=lambda r: order.get(r.query_id, len(order)))
    return Report(tuple(results))


# --- offline PromQL: promtool ----------------------------------------------------------


def find_promtool(explicit: str | None = None) -> str | None:
    for candidate in (explicit, os.environ.get(PROMTOOL_ENV)):
        if candidate:
            return candidate if Path(candidate).is_file() else shutil.which(candidate)
    found = shutil.which("promtool")
    if found:
        return found
    fallback = Path("/usr/bin/promtool")
    return str(fallback) if os.access(fallback, os.X_OK) else None


def check_promql_offline(
    queries: Sequence[FilledQuery], promtool: str | None = None, *, live_fallback: bool = False
) -> list[CheckResult]:
    if not queries:
        return []
    binary = find_promtool(promtool)
    if binary is None:
        status = Status.SKIP if live_fallback else Status.FAIL
        hint = INSTALL_HINT + ("; relying on the live endpoint" if live_fallback else "")
        return [CheckResult("*", "promql", "promtool", status, hint)]
    ok, output = _promtool_check(binary, queries)
    if ok:
        return [CheckResult(q.id, "promql", "promtool", Status.PASS, "", q.text) for q in queries]
    results = []
    for query in queries:
        alone_ok, alone_output = _promtool_check(binary, [query])
        if alone_ok:
            results.append(CheckResult(query.id, "promql", "promtool", Status.PASS, "", query.text))
        else:
            results.append(
                CheckResult(
                    query.id,
                    "promql",
                    "promtool",
                    Status.FAIL,
                    _parse_error(alone_output),
                    query.text,
                )
            )
    if all(r.status is Status.PASS for r in results):
        # The file failed as a whole but no query does alone (e.g. promtool broke).
        results.append(CheckResult("*", "promql", "promtool", Status.FAIL, _parse_error(output)))
    return results


def rules_document(queries: Iterable[FilledQuery]) -> dict[str, Any]:
    """A Prometheus rules file (JSON is valid YAML) with one recording rule per query."""
    return {
        "groups": [
            {
                "name": "loopbreaker-templates",
                "rules": [
                    {"record": f"lb:q{index}", "expr": query.text}
                    for index, query in enumerate(queries)
                ],
            }
        ]
    }


def _promtool_check(binary: str, queries: Sequence[FilledQuery]) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="loopbreaker-validate-") as tmp:
        path = Path(tmp) / "rules.json"
        path.write_text(json.dumps(rules_document(queries), indent=2))
        try:
            done = subprocess.run(
                [binary, "check", "rules", str(path)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=PROMTOOL_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"cannot run {binary}: {exc}"
    return done.returncode == 0, (done.stdout + done.stderr).strip()


def _parse_error(output: str) -> str:
    match = _PARSE_ERROR.search(output)
    text = match.group("msg") if match else output
    return text.strip()[:500] or "promtool failed without output"


# --- offline LQL ---------------------------------------------------------------------------


def check_lql_offline(queries: Sequence[FilledQuery]) -> list[CheckResult]:
    results = []
    for query in queries:
        try:
            lql.check(query.text)
        except lql.LqlSyntaxError as exc:
            results.append(
                CheckResult(query.id, "lql", "lql-syntax", Status.FAIL, str(exc), query.text)
            )
            continue
        warnings = lql.warnings(query.text)
        results.append(
            CheckResult(query.id, "lql", "lql-syntax", Status.PASS, "; ".join(warnings), query.text)
        )
    return results


# --- live --------------------------------------------------------------------------------


def check_promql_live(
    queries: Sequence[FilledQuery], endpoint: PromQLEndpoint, *, at: datetime | None = None
) -> list[CheckResult]:
    """Run each query at ``at`` (the window's end, where diagnose evaluates them)."""
    from loopbreaker.diagnosis.readers import QueryRejected, SourceUnreachable

    check = f"live {endpoint.source}"
    results = []
    stop: str | None = None
    for query in queries:
        if stop is not None:
            results.append(CheckResult(query.id, "promql", check, Status.SKIP, stop, query.text))
            continue
        try:
            data = endpoint.query(query.text, at)
        except QueryRejected as exc:
            results.append(
                CheckResult(query.id, "promql", check, Status.FAIL, exc.reason, query.text)
            )
            continue
        except SourceUnavailable as exc:
            if isinstance(exc, SourceUnreachable):
                stop = f"not sent: {exc.reason}"
            results.append(
                CheckResult(query.id, "promql", check, Status.SKIP, exc.reason, query.text)
            )
            continue
        result = data.get("result")
        size = len(result) if isinstance(result, list) else 0
        note = f"{size} series" if size else "empty result (parses; no data for the test values)"
        results.append(CheckResult(query.id, "promql", check, Status.PASS, note, query.text))
    return results


def check_lql_live(queries: Sequence[FilledQuery], endpoint: LogEndpoint) -> list[CheckResult]:
    from loopbreaker.diagnosis.readers import QueryRejected, SourceUnreachable

    check = f"live {endpoint.source}"
    results = []
    stop: str | None = None
    for query in queries:
        if stop is not None:
            results.append(CheckResult(query.id, "lql", check, Status.SKIP, stop, query.text))
            continue
        try:
            found = endpoint.read_one(query.text)
        except QueryRejected as exc:
            results.append(CheckResult(query.id, "lql", check, Status.FAIL, exc.reason, query.text))
            continue
        except SourceUnavailable as exc:
            if isinstance(exc, SourceUnreachable):
                stop = f"not sent: {exc.reason}"
            results.append(CheckResult(query.id, "lql", check, Status.SKIP, exc.reason, query.text))
            continue
        note = "1 entry" if found else "no entries (parses; no data for the test values)"
        results.append(CheckResult(query.id, "lql", check, Status.PASS, note, query.text))
    return results


# --- output ------------------------------------------------------------------------------


def to_table(report: Report) -> str:
    rows = [("STATUS", "ID", "LANG", "CHECK", "DETAIL")]
    for r in report.results:
        rows.append((r.status.value.upper(), r.query_id, r.language, r.check, r.message))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [
        (
            "  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True))
            + "  "
            + row[4]
        ).rstrip()
        for row in rows
    ]
    summary = ", ".join(f"{report.count(s)} {s.value}" for s in Status)
    verdict = "OK" if report.ok else "FAILED"
    lines.append("")
    lines.append(f"{verdict}: {summary}")
    return "\n".join(lines) + "\n"
