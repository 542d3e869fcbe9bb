"""`loopbreaker validate-queries` and the LQL grammar checker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakeservers import Fault, LoggingServer, ManagedPrometheusProxy
from harness.fixtures import PrometheusFactory
from hypothesis import given
from hypothesis import strategies as st

from loopbreaker.cli.main import main
from loopbreaker.diagnosis import lql
from loopbreaker.diagnosis.metric_vocabulary import Vocabulary
from loopbreaker.diagnosis.queries import TEMPLATES, Template
from loopbreaker.diagnosis.queries.validate import (
    INSTALL_HINT,
    Status,
    rules_document,
    validate,
    validation_context,
)
from loopbreaker.diagnosis.readers.google_auth import anonymous
from loopbreaker.diagnosis.readers.logging_reader import CloudLoggingReader
from loopbreaker.diagnosis.readers.prometheus import PrometheusReader
from loopbreaker.model import QueryLanguage

CONTEXT = validation_context()
BROKEN_PROMQL = Template("broken_promql", 1, QueryLanguage.PROMQL, "sum(rate(x[5m])", "broken")
BROKEN_LQL = Template(
    "broken_lql", 2, QueryLanguage.LQL, 'resource.type="gke_nodepool" AND (severity>=ERROR', "x"
)


def by_id(report: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for result in report.results:
        out.setdefault(result.query_id, []).append(result)
    return out


# --- offline -------------------------------------------------------------------------------


def test_shipped_templates_pass() -> None:
    report = validate(CONTEXT)
    assert report.ok, [r for r in report.results if r.status is Status.FAIL]
    checked = {r.query_id for r in report.results if r.status is Status.PASS}
    live = {t.qualified_id for t in TEMPLATES if not t.deprecated}
    assert checked == live  # every non-deprecated template, not a subset
    deprecated = {r.query_id for r in report.results if r.check == "deprecated"}
    assert deprecated == {t.qualified_id for t in TEMPLATES if t.deprecated}


def test_broken_templates_fail_and_are_named() -> None:
    report = validate(CONTEXT, templates=[*TEMPLATES, BROKEN_PROMQL, BROKEN_LQL])
    assert not report.ok
    failures = {r.query_id: r.message for r in report.results if r.status is Status.FAIL}
    assert set(failures) == {"broken_promql", "broken_lql"}
    assert "unclosed left parenthesis" in failures["broken_promql"]
    assert "'(' is never closed (line 1, column 34)" in failures["broken_lql"]
    # The good ones still pass when the batch file fails.
    assert by_id(report)["restarts[jobset]"][0].status is Status.PASS
    assert by_id(report)["restarts[kubeflow]"][0].status is Status.PASS


def test_unfilled_placeholder_fails() -> None:
    template = Template("t", 1, QueryLanguage.PROMQL, 'up{job="{unknown}", c="{cluster_name}"}', "")
    report = validate(CONTEXT, templates=[template])
    assert report.ok  # {unknown} is not a placeholder of ours: plain text, valid PromQL
    context = validation_context()
    no_project = type(context)(context.cluster, context.workload, context.issue_time)
    report = validate(no_project, templates=[t for t in TEMPLATES if t.id == "system_events"])
    (result,) = report.results
    assert result.status is Status.FAIL and result.message == "unfilled placeholder {project_id}"


def test_missing_promtool_is_a_clear_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPBREAKER_PROMTOOL", "/nonexistent/promtool")
    report = validate(CONTEXT)
    (failure,) = [r for r in report.results if r.status is Status.FAIL]
    assert failure.message == INSTALL_HINT
    assert "apt-get install prometheus" in failure.message


def test_rules_document_shape() -> None:
    from loopbreaker.diagnosis.queries.validate import FilledQuery

    doc = rules_document([FilledQuery("a", QueryLanguage.PROMQL, "up")])
    assert doc == {
        "groups": [{"name": "loopbreaker-templates", "rules": [{"record": "lb:q0", "expr": "up"}]}]
    }


def test_cli_passes_on_shipped_templates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate-queries"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["STATUS", "ID", "LANG", "CHECK", "DETAIL"]
    live = [t for t in TEMPLATES if not t.deprecated]
    assert f"OK: {len(live)} pass, 0 fail, 6 skip" in out
    # Both vocabularies are checked: each kube-prometheus-stack form has its own row.
    kps = [t for t in live if t.vocabulary is Vocabulary.KUBE_PROMETHEUS_STACK]
    assert len(kps) >= 20
    assert all(f"PASS    {t.qualified_id} " in out for t in kps)


def test_cli_fails_on_a_broken_query(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "validate-queries",
            "--format",
            "json",
            "--extra-query",
            "promql:sum(",
            "--extra-query",
            'lql:logName="x" OR',
        ]
    )
    assert code == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False
    failed = {r["id"]: r["message"] for r in out["results"] if r["status"] == "fail"}
    assert set(failed) == {"extra-1", "extra-2"}
    assert "dangling OR" in failed["extra-2"]


def test_cli_rejects_unknown_extra_language(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate-queries", "--extra-query", "mql:fetch x"]) == 2
    assert "expected promql:TEXT or lql:TEXT" in capsys.readouterr().err


# --- live ----------------------------------------------------------------------------------


def test_live_prometheus_accepts_templates_and_rejects_broken(
    prometheus_factory: PrometheusFactory,
) -> None:
    prom = prometheus_factory([])
    reader = PrometheusReader(prom.url, timeout=10)
    report = validate(CONTEXT, templates=[*TEMPLATES, BROKEN_PROMQL], prometheus=reader)
    live = [r for r in report.results if r.check.startswith("live")]
    assert {r.query_id for r in live} == {
        t.qualified_id for t in TEMPLATES if t.language is QueryLanguage.PROMQL
    } | {"broken_promql"}
    failed = [r for r in live if r.status is Status.FAIL]
    assert [r.query_id for r in failed] == ["broken_promql"]
    assert "HTTP 400 query rejected" in failed[0].message  # the server's own parser said no
    assert all("empty result" in r.message for r in live if r.status is Status.PASS)


def test_live_prometheus_403_is_skipped_once(capsys: pytest.CaptureFixture[str]) -> None:
    with ManagedPrometheusProxy(project="P") as gmp:
        gmp.inject(Fault.FORBIDDEN, times=100)
        code = main(["validate-queries", "--prometheus-url", gmp.prefix(), "--format", "json"])
        assert len(gmp.requests) == 1
    captured = capsys.readouterr()
    # Offline checks pass, but the live checks that were asked for could not run: not a pass.
    assert code == 1
    out = json.loads(captured.out)
    live = [r for r in out["results"] if r["check"].startswith("live")]
    assert {r["status"] for r in live} == {"skip"}
    assert "HTTP 403" in live[0]["message"]
    assert "not sent: HTTP 403" in live[1]["message"]
    assert f"{len(live)} live check(s) could not run: HTTP 403" in captured.err


def test_live_prometheus_unreachable_fails(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    code = main(["validate-queries", "--prometheus-url", url, "--timeout", "2"])
    captured = capsys.readouterr()
    assert code == 1
    assert "live check(s) could not run" in captured.err


def test_live_logging_one_entry_reads(tmp_path: Path) -> None:
    with LoggingServer([]) as server:
        reader = CloudLoggingReader(
            "test-project", credentials=anonymous(), api_endpoint=server.url, timeout=2
        )
        report = validate(CONTEXT, templates=[*TEMPLATES, BROKEN_LQL], logging=reader)
        bodies = [r.json() for r in server.requests]
    live = {r.query_id: r for r in report.results if r.check.startswith("live")}
    lql_ids = {t.qualified_id for t in TEMPLATES if t.language is QueryLanguage.LQL}
    assert set(live) == lql_ids | {"broken_lql"}
    assert all(live[i].status is Status.PASS for i in lql_ids)
    # The fake rejects what does not parse, like the API (400 INVALID_ARGUMENT).
    assert live["broken_lql"].status is Status.FAIL
    assert "filter rejected" in live["broken_lql"].message
    assert {b["pageSize"] for b in bodies} == {1}
    assert bodies[0]["resourceNames"] == ["projects/test-project"]


def test_live_logging_403_skips_the_rest() -> None:
    with LoggingServer([]) as server:
        server.inject(Fault.FORBIDDEN, times=100)
        reader = CloudLoggingReader("p", credentials=anonymous(), api_endpoint=server.url)
        report = validate(CONTEXT, logging=reader)
        assert len(server.requests) == 1
    live = [r for r in report.results if r.check.startswith("live")]
    assert {r.status for r in live} == {Status.SKIP}
    assert report.ok


# --- the LQL grammar -------------------------------------------------------------------------

VALID = [
    "",
    'resource.type="gce_instance" AND severity>=ERROR AND NOT textPayload:robot',
    'resource.type = ("k8s_cluster" OR "gce_instance")',
    'resource.type="gae_app" AND (severity="ERROR" OR "error")',
    '-resource.type="k8s_node" "free text"',
    'log_id("cloudaudit.googleapis.com/system_event") AND operation.producer="x.hostError"',
    "sample(insertId, 0.25)",
    'SEARCH(textPayload, "hello world")',
    'labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="w"',
    'jsonPayload.message=~"^NCCL.*timeout" OR jsonPayload.message!~"ok"',
    'timestamp >= "2026-05-20T07:45:00Z" timestamp<="2026-05-20T08:45:00Z"',
    "a OR NOT b AND NOT c OR d",
    'textPayload:"say \\"hi\\"" -- a comment\nAND severity!=DEBUG',
    "jsonPayload.field:*",
    'NOT (a="1" OR b="2")',
    'protoPayload.methodName=("compute.instances.preempted" OR "compute.instances.hostError")',
]

INVALID = [
    ("a AND", "dangling AND", 3),
    ("a OR OR b", "dangling OR", 3),
    ("NOT", "dangling NOT", 1),
    ("(a", "'(' is never closed", 1),
    ("a)", "unexpected ')'", 2),
    ('f="abc', "unterminated string", 3),
    ("f=", "missing value after '='", 2),
    ("f= AND g=1", "missing value after '='", 2),
    ('= "x"', "comparison operator '=' without a field", 1),
    ("insertId = abc:def", "quote values", 15),
    ('f=("a" OR )', "dangling OR", 8),
    ('log_id("x"', "never closed", 7),
    ("()", "empty parentheses", 1),
    ("a..b=1", "empty segment", 1),
    ("x ! y", "unknown operator", 3),
    ('"quoted"="x"', "quoted string cannot be compared", 1),
]


@pytest.mark.parametrize("text", VALID)
def test_lql_valid(text: str) -> None:
    lql.check(text)


@pytest.mark.parametrize(("text", "message", "column"), INVALID)
def test_lql_invalid_with_position(text: str, message: str, column: int) -> None:
    with pytest.raises(lql.LqlSyntaxError) as info:
        lql.check(text)
    assert message in str(info.value)
    assert info.value.column == column and info.value.line == 1


def test_lql_error_line_and_column() -> None:
    with pytest.raises(lql.LqlSyntaxError) as info:
        lql.check('resource.type="x"\nAND (\n  severity>=ERROR')
    assert (info.value.line, info.value.column) == (2, 5)


def test_lql_precedence_or_binds_tighter_than_and() -> None:
    tree = lql.parse("a OR b AND c")
    assert isinstance(tree, lql.BoolOp) and tree.op == "AND"
    assert isinstance(tree.items[0], lql.BoolOp) and tree.items[0].op == "OR"


def test_lql_warns_about_lower_case_operators() -> None:
    assert lql.warnings("a and b") == [
        "lower-case 'and' at offset 2 is searched as text; write AND for the boolean operator"
    ]


@given(st.text(alphabet='ab=:!<>~()"\\ -.,ORNDTA\n', max_size=40))
def test_lql_never_crashes(text: str) -> None:
    try:
        lql.parse(text)
    except lql.LqlSyntaxError as exc:
        assert 0 <= exc.offset <= len(text)


def test_live_checks_run_at_the_end_of_the_window() -> None:
    from datetime import datetime

    from loopbreaker.diagnosis.queries.validate import validate, validation_context

    class RecordingEndpoint:
        source = "recording"

        def __init__(self) -> None:
            self.times: list[datetime | None] = []

        def query(self, promql: str, time: datetime | None = None) -> dict[str, Any]:
            self.times.append(time)
            return {"resultType": "vector", "result": []}

    context = validation_context(issue_time="2026-05-20T08:15:00Z")
    endpoint = RecordingEndpoint()
    validate(context, prometheus=endpoint)
    assert endpoint.times
    assert set(endpoint.times) == {context.end_time}
