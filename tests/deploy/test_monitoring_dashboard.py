"""The Grafana dashboard ConfigMap: every panel query checked with the validate-queries
parser and promtool."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from harness.monitoring_assets import (
    DASHBOARD_FILE,
    output,
    promtool,
    run,
    the,
)

from loopbreaker.diagnosis.queries.validate import (
    FilledQuery,
    Status,
    check_promql_offline,
    find_promtool,
)
from loopbreaker.model import QueryLanguage

# --- Grafana -----------------------------------------------------------------------------

#: Grafana's own variables: no templating entry defines them.
BUILTINS = {
    "__rate_interval",
    "__interval",
    "__interval_ms",
    "__range",
    "__range_s",
    "__range_ms",
    "__from",
    "__to",
    "__dashboard",
    "__org",
    "__user",
    "__all",
}
#: What Grafana substitutes: multi-value variables become a regex alternation.
SUBSTITUTIONS = {
    "cluster": "(test-cluster|other-cluster)",
    "namespace": "(default|ml-training)",
    "__rate_interval": "5m",
    "__interval": "1m",
    "__range": "6h",
    "datasource": "prometheus-uid",
}
# Grafana leaves $1 (a label_replace group) alone: no variable name starts with a digit.
_VARIABLE = re.compile(r"\$\{([A-Za-z_]\w*)(?::\w+)?\}|\$([A-Za-z_]\w*)")


def dashboard_config_map() -> dict[str, Any]:
    return the("ConfigMap")


def dashboard() -> dict[str, Any]:
    """The dashboard as the package installs it: the JSON inside the rendered ConfigMap."""
    config_map = dashboard_config_map()
    text: str = config_map["data"]["loopbreaker-dashboard.json"]
    board: dict[str, Any] = json.loads(text)
    return board


def all_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


def data_panels() -> list[dict[str, Any]]:
    return [p for p in all_panels(dashboard()["panels"]) if p["type"] != "row"]


def variables_in(text: str) -> set[str]:
    return {braced or bare for braced, bare in _VARIABLE.findall(text)}


def substitute(text: str) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return SUBSTITUTIONS[name]

    return _VARIABLE.sub(value, text)


def dashboard_queries() -> list[FilledQuery]:
    queries = []
    for panel in data_panels():
        for target in panel["targets"]:
            query_id = f"panel {panel['id']} ({panel['title']}) {target['refId']}"
            queries.append(FilledQuery(query_id, QueryLanguage.PROMQL, substitute(target["expr"])))
    return queries


def variable_selectors() -> list[FilledQuery]:
    """The series selector inside each ``label_values(selector, label)`` variable query."""
    found = []
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]
        text = query["query"] if isinstance(query, dict) else query
        match = re.fullmatch(r"label_values\((?P<selector>.+),\s*(?P<label>\w+)\)", text)
        assert match, (variable["name"], text)
        found.append(
            FilledQuery(
                f"variable {variable['name']}",
                QueryLanguage.PROMQL,
                substitute(match["selector"]),
            )
        )
    return found


def test_dashboard_identity() -> None:
    board = dashboard()
    assert board["uid"] == "loopbreaker-training"
    assert board["title"] == "loopbreaker: training restart loops"
    assert board["schemaVersion"] == 39


def test_dashboard_variables() -> None:
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("cluster", "namespace"):
        variable = variables[name]
        assert variable["type"] == "query", name
        assert variable["datasource"]["uid"] == "${datasource}", name
        assert variable["includeAll"] is True and variable["multi"] is True, name
        # With All = .*, a Prometheus without a `cluster` label still matches.
        assert variable["allValue"] == ".*", name


def test_every_panel_has_targets_and_unique_id() -> None:
    panels = list(all_panels(dashboard()["panels"]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    for panel in data_panels():
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip(), panel["title"]


def test_every_panel_uses_the_datasource_variable() -> None:
    for panel in data_panels():
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["id"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["id"]


def test_dashboard_variables_are_defined() -> None:
    board = dashboard()
    defined = {v["name"] for v in board["templating"]["list"]} | BUILTINS
    multi = {v["name"] for v in board["templating"]["list"] if v.get("multi")}
    used: set[str] = set()
    for panel in data_panels():
        used |= variables_in(json.dumps(panel["datasource"]))
        for target in panel["targets"]:
            used |= variables_in(target["expr"]) | variables_in(json.dumps(target["datasource"]))
            # A multi-value variable expands to a|b: only a regex matcher accepts it.
            for name in multi & variables_in(target["expr"]):
                for line in target["expr"].splitlines():
                    uses = len(re.findall(rf"\$\{{?{name}\b", line))
                    in_regex = len(re.findall(rf'=~"[^"]*\$\{{?{name}\b', line))
                    assert uses == in_regex, (panel["title"], line)
    assert used <= defined, used - defined
    assert {"cluster", "namespace", "datasource", "__rate_interval", "__range"} <= used


def test_dashboard_covers_the_metrics() -> None:
    exprs = "\n".join(q.text for q in dashboard_queries())
    for metric in (
        "kube_jobset_restarts",
        "kube_jobset_job_restarts",
        "training_operator_jobs_restarted_total",
        "kubernetes_io:node_pool_interruption_count",
        "kube_node_status_condition",
        "kube_node_spec_unschedulable",
        "kube_node_spec_taint",
        "label_cloud_google_com_gce_topology_host",
        "kube_pod_status_phase",
        "kube_pod_status_unschedulable",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_XID_ERRORS",
        "logging_googleapis_com:user_loopbreaker_incidents_opened",
        "logging_googleapis_com:user_loopbreaker_remediation_approvals",
        "logging_googleapis_com:user_loopbreaker_remediation_steps",
        "logging_googleapis_com:user_loopbreaker_entries_rejected",
        "logging_googleapis_com:user_loopbreaker_accelerator_hours_lost_sum",
    ):
        assert metric in exprs, metric


def test_dashboard_queries_parse_with_validate_queries_parser() -> None:
    promtool()  # installs the Debian package when missing; find_promtool then sees it
    binary = find_promtool()
    assert binary, "promtool not found"
    queries = dashboard_queries() + variable_selectors()
    assert len(queries) > len(data_panels())
    results = check_promql_offline(queries, binary)
    failures = [
        f"{r.query_id}: {r.message}\n{r.text}" for r in results if r.status is not Status.PASS
    ]
    assert not failures, "\n\n".join(failures)
    assert {r.query_id for r in results} == {q.id for q in queries}


def test_the_dashboard_parser_check_is_not_vacuous() -> None:
    promtool()
    good, *_ = dashboard_queries()
    broken = FilledQuery("broken", QueryLanguage.PROMQL, good.text.replace(")", "", 1))
    unfilled = FilledQuery(
        "unfilled", QueryLanguage.PROMQL, 'up{cluster=~"$cluster"}[$__rate_interval]'
    )
    results = {r.query_id: r for r in check_promql_offline([good, broken, unfilled])}
    assert results[good.id].status is Status.PASS
    assert results["broken"].status is Status.FAIL
    # Left unsubstituted, Grafana's interval variables are not PromQL.
    assert results["unfilled"].status is Status.FAIL


# --- what each panel's data needs ---------------------------------------------------------

#: PromQL names of Cloud Monitoring metrics (GKE system metrics, log-based metrics): only
#: Managed Service for Prometheus serves them.
CLOUD_MONITORING_PREFIXES = ("kubernetes_io:", "logging_googleapis_com:")
GMP_ONLY = "Managed Service for Prometheus only"


def panels_with_rows() -> Iterator[tuple[str | None, dict[str, Any]]]:
    """Each data panel with the title of the row it sits under (uncollapsed rows own the
    panels that follow them, collapsed rows the ones they hold)."""
    row_title = None
    for panel in dashboard()["panels"]:
        if panel["type"] == "row":
            row_title = panel["title"]
            for child in panel.get("panels", []):
                yield row_title, child
        else:
            yield row_title, panel


def reads_cloud_monitoring(panel: dict[str, Any]) -> bool:
    return any(
        prefix in target["expr"]
        for target in panel["targets"]
        for prefix in CLOUD_MONITORING_PREFIXES
    )


def test_the_dashboard_config_map_is_the_json_file_for_the_sidecar() -> None:
    config_map = dashboard_config_map()
    assert config_map["metadata"]["name"] == "loopbreaker-dashboard"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    # Generated from the file, byte for byte: the file stays the one source.
    assert config_map["data"] == {"loopbreaker-dashboard.json": DASHBOARD_FILE.read_text()}


def test_no_panel_turns_missing_data_into_zero() -> None:
    for panel in data_panels():
        for target in panel["targets"]:
            assert "vector(" not in target["expr"], (panel["title"], target["expr"])


def test_cloud_monitoring_panels_sit_in_rows_that_say_so() -> None:
    seen = set()
    for row_title, panel in panels_with_rows():
        assert row_title is not None, panel["title"]
        gmp_only = reads_cloud_monitoring(panel)
        assert (GMP_ONLY in row_title) is gmp_only, (row_title, panel["title"])
        if gmp_only:
            seen.add(row_title)
            assert panel["description"].startswith(
                "Needs Google Cloud Managed Service for Prometheus"
            ), panel["title"]
            no_value = panel["fieldConfig"]["defaults"]["noValue"]
            assert "needs Managed Service for Prometheus" in no_value, panel["title"]
    assert len(seen) == 2, seen  # GKE system metrics, and the responder's log-based metrics


def test_every_panel_says_where_its_data_comes_from() -> None:
    for panel in data_panels():
        assert panel.get("description", "").strip(), panel["title"]


def test_gpu_panels_name_the_node_as_the_alerts_do() -> None:
    for panel in data_panels():
        for target in panel["targets"]:
            if "{{node}}" in target.get("legendFormat", ""):
                expr = target["expr"]
                assert 'node!=""' in expr and '"kubernetes_node", "(.+)"' in expr, expr
                assert '"Hostname", "(.+)"' in expr, expr
            assert "{{Hostname}}" not in target.get("legendFormat", ""), panel["title"]


def test_panels_do_not_overlap() -> None:
    taken: dict[tuple[int, int], str] = {}
    for panel in all_panels(dashboard()["panels"]):
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for y in range(grid["y"], grid["y"] + grid["h"]):
            for x in range(grid["x"], grid["x"] + grid["w"]):
                assert (x, y) not in taken, (panel["title"], taken.get((x, y)))
                taken[(x, y)] = panel["title"]


def stat_expr(title: str) -> str:
    (panel,) = [p for p in data_panels() if p["title"] == title]
    (target,) = panel["targets"]
    text: str = target["expr"]
    return text.replace('{cluster=~"$cluster"}', "").replace("$__range", "1h")


def test_gpu_counts_read_zero_with_the_exporter_and_no_data_without(tmp_path: Path) -> None:
    """promtool evaluates the stat panels' queries: 0 when DCGM reports and nothing
    happened, no sample at all (Grafana's No data) when no DCGM exporter is scraped."""
    xid = stat_expr("GPUs with XID errors (range)")
    ecc = stat_expr("Double-bit ECC errors (range)")
    healthy = [
        {"series": 'DCGM_FI_DEV_XID_ERRORS{UUID="GPU-1", node="n1"}', "values": "0x60"},
        {"series": 'DCGM_FI_DEV_XID_ERRORS{UUID="GPU-2", node="n1"}', "values": "0x60"},
        {"series": 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{UUID="GPU-1", node="n1"}', "values": "3x60"},
    ]
    faulty = [
        # GPU-1 seen by two exporter pods (a restart): still one GPU.
        {"series": 'DCGM_FI_DEV_XID_ERRORS{UUID="GPU-1", pod="a"}', "values": "0x20 79 0x9"},
        {"series": 'DCGM_FI_DEV_XID_ERRORS{UUID="GPU-1", pod="b"}', "values": "_x30 79 0x29"},
        {"series": 'DCGM_FI_DEV_XID_ERRORS{UUID="GPU-2", pod="b"}', "values": "0x60"},
        {"series": 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{UUID="GPU-1", pod="b"}', "values": "0x30 2x30"},
    ]

    def case(series: list[dict[str, str]], xid_value: int | None, ecc_value: int | None):
        return {
            "interval": "1m",
            "input_series": series,
            "promql_expr_test": [
                {
                    "expr": expr,
                    "eval_time": "60m",
                    "exp_samples": [] if value is None else [{"labels": "{}", "value": value}],
                }
                for expr, value in ((xid, xid_value), (ecc, ecc_value))
            ],
        }

    tests = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            case(healthy, 0, 0),
            case(faulty, 1, 2),
            case([{"series": 'up{job="node"}', "values": "1x60"}], None, None),
        ],
    }
    path = tmp_path / "stat_test.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    done = run(promtool(), "test", "rules", str(path))
    assert done.returncode == 0, output(done)


def test_the_gpu_health_table_lists_only_hardware_class_xids(tmp_path: Path) -> None:
    """promtool evaluates the table's query: a GPU whose last XID is 79 is listed with its
    node and code; XID 13 (the application's) and 63 (a repair recorded) are not."""
    (panel,) = [p for p in data_panels() if p["title"] == "GPUs with a hardware-class XID (range)"]
    (target,) = panel["targets"]
    expr = target["expr"].replace('cluster=~"$cluster", ', "").replace("$__range", "1h")
    labels = 'modelName="H100", Hostname="n1"'
    series = [
        {
            "series": f'DCGM_FI_DEV_XID_ERRORS{{gpu="3", UUID="GPU-3", {labels}}}',
            "values": "0x20 79x39",
        },
        {
            "series": f'DCGM_FI_DEV_XID_ERRORS{{gpu="0", UUID="GPU-0", {labels}}}',
            "values": "0x20 13x39",
        },
        {
            "series": f'DCGM_FI_DEV_XID_ERRORS{{gpu="1", UUID="GPU-1", {labels}}}',
            "values": "0x20 63x39",
        },
    ]
    listed = '{node="n1", gpu="3", UUID="GPU-3", modelName="H100", xid="79", xid_class="hardware"}'
    tests = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": expr,
                        "eval_time": "59m",
                        "exp_samples": [{"labels": listed, "value": 1}],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "gpu_health_table_test.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    done = run(promtool(), "test", "rules", str(path))
    assert done.returncode == 0, output(done)
