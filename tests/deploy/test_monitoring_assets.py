"""The Prometheus rules, Alertmanager route and Grafana dashboard in deploy/ work as shipped."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.tools import ensure_executable

from loopbreaker.diagnosis.validate_queries import (
    FilledQuery,
    Status,
    check_promql_offline,
    find_promtool,
)
from loopbreaker.model import QueryLanguage

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
RULES = PROMETHEUS / "loopbreaker-rules.yaml"
RULE_TESTS = sorted((PROMETHEUS / "tests").glob("*_test.yaml"))
RECEIVER = PROMETHEUS / "alertmanager-receiver.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "loopbreaker-dashboard.json"

#: The name the test files give their rule file; the README's manual recipe writes it.
SPEC_FILE_NAME = "loopbreaker-rules.spec.yaml"
SIGNALS = {"restart_loop", "node_not_ready", "pods_pending", "gpu_health"}
RUNBOOK = "https://github.com/loopbreaker/loopbreaker/blob/main/deploy/prometheus/README.md#"
ALERTS = {
    "LoopbreakerJobSetRestartLoop": "restart_loop",
    "LoopbreakerTFJobRestartLoop": "restart_loop",
    "LoopbreakerPyTorchJobRestartLoop": "restart_loop",
    "LoopbreakerTrainingNodeNotReady": "node_not_ready",
    "LoopbreakerTrainingPodsPending": "pods_pending",
    "LoopbreakerGPUXidError": "gpu_health",
    "LoopbreakerGPUDoubleBitECC": "gpu_health",
}
#: Identity labels each signal's alerts must carry (exp_labels of a firing test case).
IDENTITY = {
    "restart_loop": {"namespace", "workload_kind"},
    "node_not_ready": {"node"},
    "pods_pending": {"namespace", "pod"},
    "gpu_health": {"node"},
}
WORKLOAD_KINDS = {
    "LoopbreakerJobSetRestartLoop": "jobset",
    "LoopbreakerTFJobRestartLoop": "tfjob",
    "LoopbreakerPyTorchJobRestartLoop": "pytorchjob",
}
PROMTOOL_TIMEOUT = 60


# --- helpers ---------------------------------------------------------------------------


def promtool() -> str:
    return ensure_executable("promtool", "prometheus")


def amtool() -> str:
    return ensure_executable("amtool", "prometheus-alertmanager")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=PROMTOOL_TIMEOUT,
        check=False,
    )


def output(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"


def load_rule_crd() -> dict[str, Any]:
    return yaml.safe_load(RULES.read_text())


def alerting_rules(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for group in spec["groups"]:
        yield from (rule for rule in group["rules"] if "alert" in rule)


def write_rules(spec: dict[str, Any], directory: Path) -> Path:
    """The CRD's spec is a plain Prometheus rules file: the single source of truth."""
    path = directory / SPEC_FILE_NAME
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run_rule_tests(
    spec: dict[str, Any], directory: Path, only: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``promtool test rules`` against ``spec``: all test files, or those naming ``only``."""
    rules = write_rules(spec, directory)
    copies = []
    for test_file in RULE_TESTS:
        if only is not None and only not in test_file.read_text():
            continue
        document = yaml.safe_load(test_file.read_text())
        document["rule_files"] = [str(rules)]
        copy_path = directory / test_file.name
        copy_path.write_text(yaml.safe_dump(document, sort_keys=False))
        copies.append(str(copy_path))
    return run(promtool(), "test", "rules", *copies)


def rule_test_cases() -> Iterator[dict[str, Any]]:
    for test_file in RULE_TESTS:
        for test in yaml.safe_load(test_file.read_text())["tests"]:
            yield from test.get("alert_rule_test", [])


# --- PrometheusRule --------------------------------------------------------------------


def test_prometheus_rule_is_a_crd_the_operator_selects() -> None:
    crd = load_rule_crd()
    assert crd["apiVersion"] == "monitoring.coreos.com/v1"
    assert crd["kind"] == "PrometheusRule"
    assert crd["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert set(crd["spec"]) == {"groups"}


def test_every_alert_carries_the_webhook_label_contract() -> None:
    rules = list(alerting_rules(load_rule_crd()["spec"]))
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names)), "duplicate alert names"
    assert set(names) == set(ALERTS)
    for rule in rules:
        name, labels = rule["alert"], rule["labels"]
        assert labels["loopbreaker"] == "true", name
        assert labels["loopbreaker_signal"] in SIGNALS, name
        assert labels["loopbreaker_signal"] == ALERTS[name], name
        assert labels["severity"] in {"warning", "critical"}, name
        assert labels.get("workload_kind") == WORKLOAD_KINDS.get(name), name
        annotations = rule["annotations"]
        assert annotations["summary"].strip() and annotations["description"].strip(), name
        assert annotations["runbook_url"] == RUNBOOK + name.lower(), name


def test_runbook_anchors_exist_in_the_readme() -> None:
    readme = (PROMETHEUS / "README.md").read_text()
    headings = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in readme.splitlines()
        if line.startswith("#")
    }
    for name in ALERTS:
        assert name.lower() in headings, name


def test_rule_expressions_pass_promtool_check_rules(tmp_path: Path) -> None:
    rules = write_rules(load_rule_crd()["spec"], tmp_path)
    done = run(promtool(), "check", "rules", str(rules))
    assert done.returncode == 0, output(done)
    assert f"SUCCESS: {len(ALERTS)} rules found" in done.stdout, output(done)


def test_rule_tests_cover_every_alert_firing_and_silent() -> None:
    fires: dict[str, list[dict[str, Any]]] = {name: [] for name in ALERTS}
    silent = set()
    for case in rule_test_cases():
        if case["exp_alerts"]:
            fires[case["alertname"]] += case["exp_alerts"]
        else:
            silent.add(case["alertname"])
    assert silent == set(ALERTS)
    for name, alerts in fires.items():
        assert alerts, f"{name} never fires in deploy/prometheus/tests"
        signal = ALERTS[name]
        for alert in alerts:
            labels = alert["exp_labels"]
            assert IDENTITY[signal] <= set(labels), (name, labels)
            assert labels["loopbreaker_signal"] == signal
            assert "runbook_url" in alert["exp_annotations"], name
    restarts = [a["exp_labels"] for n in WORKLOAD_KINDS for a in fires[n]]
    assert {labels["workload_kind"] for labels in restarts} == set(WORKLOAD_KINDS.values())
    assert any("cluster" in labels for labels in restarts), "no case keeps `cluster`"


def test_rule_test_files_name_the_extracted_spec() -> None:
    assert RULE_TESTS, "no promtool test files"
    for test_file in RULE_TESTS:
        assert yaml.safe_load(test_file.read_text())["rule_files"] == [SPEC_FILE_NAME]


def test_promtool_rule_tests_pass(tmp_path: Path) -> None:
    done = run_rule_tests(load_rule_crd()["spec"], tmp_path)
    print(output(done))
    assert done.returncode == 0, output(done)
    assert done.stdout.count("SUCCESS") == len(RULE_TESTS), output(done)


def mutate(spec: dict[str, Any], alert: str, old: str, new: str) -> dict[str, Any]:
    mutated = copy.deepcopy(spec)
    (rule,) = [r for r in alerting_rules(mutated) if r["alert"] == alert]
    assert old in rule["expr"], (alert, old)
    rule["expr"] = rule["expr"].replace(old, new)
    return mutated


@pytest.mark.parametrize("alert", sorted(ALERTS))
def test_rule_tests_fail_when_a_threshold_breaks(alert: str, tmp_path: Path) -> None:
    # Every alert compares with "> 0" somewhere; 1000 is above any value the tests feed.
    broken = mutate(load_rule_crd()["spec"], alert, "> 0", "> 1000")
    done = run_rule_tests(broken, tmp_path, only=alert)
    assert done.returncode != 0, output(done)
    assert f"alertname: {alert}" in done.stdout + done.stderr, output(done)


def test_rule_tests_fail_when_the_node_join_ignores_the_cluster(tmp_path: Path) -> None:
    spec = load_rule_crd()["spec"]
    broken = mutate(
        spec, "LoopbreakerTrainingNodeNotReady", "and on (cluster, node)", "and on (node)"
    )
    done = run_rule_tests(broken, tmp_path, only="LoopbreakerTrainingNodeNotReady")
    assert done.returncode != 0, output(done)
    assert 'node="shared-name"' in done.stdout + done.stderr, output(done)


def test_rule_tests_fail_when_a_contract_label_changes(tmp_path: Path) -> None:
    spec = copy.deepcopy(load_rule_crd()["spec"])
    for rule in alerting_rules(spec):
        if rule["alert"] == "LoopbreakerGPUXidError":
            rule["labels"]["loopbreaker_signal"] = "restart_loop"
    done = run_rule_tests(spec, tmp_path, only="LoopbreakerGPUXidError")
    assert done.returncode != 0, output(done)


# --- Alertmanager ------------------------------------------------------------------------


def receiver_values() -> dict[str, Any]:
    return yaml.safe_load(RECEIVER.read_text())


def alertmanager_config() -> dict[str, Any]:
    """A complete alertmanager.yml: the snippet under a default route, plus a team route."""
    config = copy.deepcopy(receiver_values()["alertmanager"]["config"])
    config["route"]["receiver"] = "team-default"
    # A route after loopbreaker's: continue: true must let alerts reach it too.
    config["route"]["routes"].append(
        {"receiver": "team-oncall", "matchers": ['severity="critical"']}
    )
    config["receivers"] += [{"name": "team-default"}, {"name": "team-oncall"}]
    return config


@pytest.fixture
def am_config(tmp_path: Path) -> Path:
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(alertmanager_config(), sort_keys=False))
    return path


def test_alertmanager_config_passes_amtool(am_config: Path) -> None:
    done = run(amtool(), "check-config", str(am_config))
    assert done.returncode == 0, output(done)
    assert "SUCCESS" in done.stdout, output(done)


def test_alertmanager_snippet_routes_to_the_webhook() -> None:
    values = receiver_values()["alertmanager"]
    route = values["config"]["route"]["routes"][0]
    assert route["receiver"] == "loopbreaker"
    assert route["matchers"] == ['loopbreaker="true"']
    assert route["continue"] is True
    assert route["group_by"] == ["alertname", "cluster", "namespace", "workload", "node"]
    assert (route["group_wait"], route["group_interval"], route["repeat_interval"]) == (
        "30s",
        "5m",
        "4h",
    )
    (receiver,) = [r for r in values["config"]["receivers"] if r["name"] == "loopbreaker"]
    (webhook,) = receiver["webhook_configs"]
    assert webhook["url"].endswith("/loopbreaker-on-alertmanager-webhook")
    assert webhook["send_resolved"] is True
    assert webhook["max_alerts"] == 0
    token = "/etc/alertmanager/secrets/loopbreaker-webhook/token"
    assert webhook["http_config"]["authorization"] == {"type": "Bearer", "credentials_file": token}
    # The operator mounts alertmanagerSpec.secrets at /etc/alertmanager/secrets/<name>/.
    assert token.split("/")[4] in values["alertmanagerSpec"]["secrets"]


@pytest.mark.parametrize(
    ("labels", "receivers"),
    [
        (["loopbreaker=true", "severity=critical", "alertname=X"], "loopbreaker,team-oncall"),
        (["loopbreaker=true", "severity=warning", "alertname=X"], "loopbreaker"),
        (["loopbreaker=false", "severity=warning", "alertname=X"], "team-default"),
        (["severity=critical", "alertname=X"], "team-oncall"),
    ],
)
def test_alertmanager_routes_loopbreaker_alerts(
    am_config: Path, labels: list[str], receivers: str
) -> None:
    done = run(amtool(), "config", "routes", "test", f"--config.file={am_config}", *labels)
    assert done.returncode == 0, output(done)
    assert done.stdout.strip() == receivers, output(done)


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
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


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
        "training_operator_jobs_restarted_total",
        "kubernetes_io:node_pool_interruption_count",
        "kube_node_status_condition",
        "label_cloud_google_com_gce_topology_host",
        "kube_pod_status_phase",
        "kube_pod_status_unschedulable",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_XID_ERRORS",
        "logging_googleapis_com:user_loopbreaker_incidents_opened",
        "logging_googleapis_com:user_loopbreaker_remediation_approvals",
        "logging_googleapis_com:user_loopbreaker_remediation_steps",
        "logging_googleapis_com:user_loopbreaker_entries_rejected",
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
