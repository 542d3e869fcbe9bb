"""The kustomize package in deploy/prometheus works as a kube-prometheus-stack user applies it.

Everything is checked on what ``kubectl kustomize deploy/prometheus`` renders: the rules with
promtool, the AlertmanagerConfig (turned into alertmanager.yml as the operator does) with
amtool, the dashboard ConfigMap with the validate-queries parser and promtool.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.prometheus import (
    alertmanager_config_from_crds,
    kustomize_build,
    load_kubernetes_yaml,
)
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
KUSTOMIZATION = PROMETHEUS / "kustomization.yaml"
RULE_TESTS = sorted((PROMETHEUS / "tests").glob("*_test.yaml"))
DASHBOARD_FILE = ROOT / "deploy" / "grafana" / "loopbreaker-dashboard.json"
GUIDE = ROOT / "docs" / "prometheus.md"
RUNBOOKS = ROOT / "docs" / "runbooks"

NAMESPACE = "monitoring"
RELEASE = "kube-prometheus-stack"
RUNBOOK_BASE = "https://github.com/loopbreaker/loopbreaker/blob/main/docs/runbooks"
#: The Secret the AlertmanagerConfig reads, as docs/prometheus.md has the user create it.
WEBHOOK_SECRET = "loopbreaker-webhook"
WEBHOOK_URL = (
    "https://us-central1-my-project.cloudfunctions.net/loopbreaker-on-alertmanager-webhook"
)
WEBHOOK_TOKEN = "s3cret-token"
#: The receiver name the operator gives the AlertmanagerConfig's receiver.
WEBHOOK_RECEIVER = f"{NAMESPACE}/loopbreaker/webhook"
#: The chart's own Alertmanager configuration (its Watchdog route) plus a team's routes.
CHART_CONFIG: dict[str, Any] = {
    "route": {
        "receiver": "team-default",
        "group_by": ["namespace"],
        "routes": [
            {"receiver": "null", "matchers": ['alertname="Watchdog"']},
            {"receiver": "team-oncall", "matchers": ['severity="critical"']},
        ],
    },
    "receivers": [{"name": "null"}, {"name": "team-default"}, {"name": "team-oncall"}],
}

#: The name the test files give their rule file; the guide's manual recipe writes it.
SPEC_FILE_NAME = "loopbreaker-rules.spec.yaml"
SIGNALS = {"restart_loop", "node_not_ready", "pods_pending", "gpu_health"}
ALERTS = {
    "LoopbreakerJobSetRestartLoop": "restart_loop",
    "LoopbreakerTFJobRestartLoop": "restart_loop",
    "LoopbreakerPyTorchJobRestartLoop": "restart_loop",
    "LoopbreakerTrainingNodeNotReady": "node_not_ready",
    "LoopbreakerTrainingPodsPending": "pods_pending",
    "LoopbreakerTrainingContainerOOMKilled": "restart_loop",
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


@functools.cache
def _rendered() -> str:
    return yaml.safe_dump_all(kustomize_build(PROMETHEUS))


def rendered() -> list[dict[str, Any]]:
    """``kubectl kustomize deploy/prometheus``, rendered once; each caller gets a copy."""
    return load_kubernetes_yaml(_rendered())


def the(kind: str, resources: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    matching = [r for r in (rendered() if resources is None else resources) if r["kind"] == kind]
    assert len(matching) == 1, (kind, [r["metadata"]["name"] for r in matching])
    return matching[0]


def load_rule_crd() -> dict[str, Any]:
    return the("PrometheusRule")


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


def guide_block(marker: str) -> str:
    """The fenced block that follows ``<!-- marker`` in docs/prometheus.md."""
    match = re.search(
        rf"<!-- {re.escape(marker)}\b[^\n]*-->\n```\w*\n(?P<body>.*?)\n```", GUIDE.read_text(), re.S
    )
    assert match, f"docs/prometheus.md has no block marked {marker!r}"
    return match["body"]


def markdown_anchors(path: Path) -> set[str]:
    """GitHub's anchors of the headings of ``path`` (lines in fenced blocks are not headings)."""
    anchors = set()
    fenced = False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif line.startswith("#") and not fenced:
            heading = re.sub(r"[^a-z0-9 _-]", "", line.lstrip("#").strip().lower())
            anchors.add(heading.replace(" ", "-"))
    return anchors


# --- the package -----------------------------------------------------------------------


def test_the_package_renders_rules_routing_and_dashboard() -> None:
    resources = rendered()
    assert sorted((r["apiVersion"], r["kind"], r["metadata"]["name"]) for r in resources) == [
        ("monitoring.coreos.com/v1", "PrometheusRule", "loopbreaker"),
        ("monitoring.coreos.com/v1alpha1", "AlertmanagerConfig", "loopbreaker"),
        ("v1", "ConfigMap", "loopbreaker-dashboard"),
    ]
    for resource in resources:
        metadata = resource["metadata"]
        assert metadata["namespace"] == NAMESPACE, metadata
        assert metadata["labels"]["release"] == RELEASE, metadata
        assert metadata["labels"]["app.kubernetes.io/part-of"] == "loopbreaker", metadata
    # The runbook ConfigMap is local-config: it feeds the component and is never applied.
    assert "loopbreaker-runbooks" not in _rendered()
    assert "RUNBOOK_BASE_URL" not in _rendered()


def test_namespace_and_release_are_set_in_the_kustomization_only() -> None:
    kustomization = yaml.safe_load(KUSTOMIZATION.read_text())
    assert kustomization["namespace"] == NAMESPACE
    assert {"release": RELEASE} in [entry["pairs"] for entry in kustomization["labels"]]
    for path in (PROMETHEUS / "loopbreaker-rules.yaml", PROMETHEUS / "alertmanager-config.yaml"):
        metadata = yaml.safe_load(path.read_text())["metadata"]
        assert "namespace" not in metadata, path
        assert "release" not in metadata.get("labels", {}), path


def documented_overlay(directory: Path) -> Path:
    """The guide's overlay example, written to ``directory`` with its remote bases made
    local (the tests reach no network)."""
    overlay = yaml.safe_load(guide_block("overlay-example"))
    remote = "https://github.com/loopbreaker/loopbreaker//deploy/prometheus"
    local = os.path.relpath(PROMETHEUS, directory)
    assert overlay["resources"] == [f"{remote}?ref=main"]
    assert overlay["components"] == [f"{remote}/runbook-urls?ref=main"]
    overlay["resources"] = [local]
    overlay["components"] = [f"{local}/runbook-urls"]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(overlay, sort_keys=False))
    return directory


def test_the_documented_overlay_moves_namespace_release_and_runbooks(tmp_path: Path) -> None:
    resources = kustomize_build(documented_overlay(tmp_path / "overlay"))
    assert sorted(r["kind"] for r in resources) == sorted(r["kind"] for r in rendered())
    for resource in resources:
        metadata = resource["metadata"]
        assert metadata["namespace"] == "observability", metadata
        assert metadata["labels"]["release"] == "prom", metadata
    text = yaml.safe_dump_all(resources)
    assert RELEASE not in text and f"namespace: {NAMESPACE}\n" not in text
    assert "loopbreaker-runbooks" not in text
    urls = {
        rule["alert"]: rule["annotations"]["runbook_url"]
        for rule in alerting_rules(the("PrometheusRule", resources)["spec"])
    }
    assert urls == {name: f"https://wiki.example.com/sre/loopbreaker/{name}.md" for name in ALERTS}


def test_an_overlay_without_the_component_keeps_the_default_runbooks(tmp_path: Path) -> None:
    directory = tmp_path / "release-only"
    directory.mkdir()
    (directory / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(PROMETHEUS, directory)],
                "namespace": "obs",
                "labels": [{"pairs": {"release": "prom"}}],
            }
        )
    )
    rule = the("PrometheusRule", kustomize_build(directory))
    assert rule["metadata"]["namespace"] == "obs"
    assert {r["annotations"]["runbook_url"] for r in alerting_rules(rule["spec"])} == {
        f"{RUNBOOK_BASE}/{name}.md" for name in ALERTS
    }


# --- runbooks --------------------------------------------------------------------------


def test_runbook_urls_come_from_the_one_base_in_the_kustomization() -> None:
    (generator,) = yaml.safe_load(KUSTOMIZATION.read_text())["configMapGenerator"]
    assert generator["name"] == "loopbreaker-runbooks"
    assert generator["literals"] == [f"baseURL={RUNBOOK_BASE}"]
    assert generator["options"]["annotations"] == {"config.kubernetes.io/local-config": "true"}
    for rule in alerting_rules(load_rule_crd()["spec"]):
        assert rule["annotations"]["runbook_url"] == f"{RUNBOOK_BASE}/{rule['alert']}.md"


def test_every_alert_has_its_runbook() -> None:
    index = (RUNBOOKS / "README.md").read_text()
    for name in ALERTS:
        page = RUNBOOKS / f"{name}.md"
        assert page.is_file(), page
        assert page.read_text().splitlines()[0] == f"# {name}", page
        assert f"[{name}]({name}.md)" in index, name
    assert {p.stem for p in RUNBOOKS.glob("Loopbreaker*.md")} == set(ALERTS)


def test_links_between_the_guide_runbooks_and_package_resolve() -> None:
    """Relative links of docs/prometheus.md and docs/runbooks/ into those pages and into
    deploy/: the file exists and, into the guide, so does the heading."""
    anchors = markdown_anchors(GUIDE)
    checked = 0
    for page in [*RUNBOOKS.glob("*.md"), GUIDE]:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([\w-]+))?\)", page.read_text()):
            if target.startswith(("http://", "https://")):
                continue
            path = (page.parent / target).resolve() if target else page
            if not (path == GUIDE or RUNBOOKS in path.parents or ROOT / "deploy" in path.parents):
                continue  # other engineers' pages
            assert path.exists(), (page.name, target)
            if anchor and path == GUIDE:
                assert anchor in anchors, (page.name, anchor)
            checked += 1
    assert checked > 30, checked


# --- PrometheusRule --------------------------------------------------------------------


def test_prometheus_rule_is_a_crd_the_operator_selects() -> None:
    crd = load_rule_crd()
    assert crd["apiVersion"] == "monitoring.coreos.com/v1"
    assert crd["kind"] == "PrometheusRule"
    assert crd["metadata"]["labels"]["release"] == RELEASE
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
            assert alert["exp_annotations"]["runbook_url"] == f"{RUNBOOK_BASE}/{name}.md"
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
    spec = load_rule_crd()["spec"]
    for rule in alerting_rules(spec):
        if rule["alert"] == "LoopbreakerGPUXidError":
            rule["labels"]["loopbreaker_signal"] = "restart_loop"
    done = run_rule_tests(spec, tmp_path, only="LoopbreakerGPUXidError")
    assert done.returncode != 0, output(done)


#: The GPU alerts before they resolved the node: DCGM's Hostname copied into `node`.
HOSTNAME_ONLY = {
    "LoopbreakerGPUXidError": """label_replace(
  max by (cluster, Hostname, gpu, UUID, modelName) (max_over_time(DCGM_FI_DEV_XID_ERRORS[10m])),
  "node", "$1", "Hostname", "(.+)"
) > 0""",
    "LoopbreakerGPUDoubleBitECC": """label_replace(
  sum by (cluster, Hostname, gpu, UUID, modelName) (increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m])),
  "node", "$1", "Hostname", "(.+)"
) > 0""",
}


@pytest.mark.parametrize("alert", sorted(HOSTNAME_ONLY))
def test_gpu_rule_tests_fail_when_the_node_comes_from_hostname_only(
    alert: str, tmp_path: Path
) -> None:
    spec = load_rule_crd()["spec"]
    for rule in alerting_rules(spec):
        if rule["alert"] == alert:
            rule["expr"] = HOSTNAME_ONLY[alert]
    done = run_rule_tests(spec, tmp_path, only=alert)
    assert done.returncode != 0, output(done)
    # The exporter pod's name instead of the node of the node / kubernetes_node shapes.
    assert re.search(r'node="(nvidia-)?dcgm-exporter-\w+"', done.stdout + done.stderr), output(done)


def test_gpu_rule_tests_fail_when_kubernetes_node_beats_node(tmp_path: Path) -> None:
    selector = 'increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{node!=""}[10m])'
    broken = mutate(
        load_rule_crd()["spec"],
        "LoopbreakerGPUDoubleBitECC",
        selector,
        f'label_replace({selector}, "node", "$1", "kubernetes_node", "(.+)")',
    )
    done = run_rule_tests(broken, tmp_path, only="LoopbreakerGPUDoubleBitECC")
    assert done.returncode != 0, output(done)
    assert 'node="stale-name"' in done.stdout + done.stderr, output(done)


# --- Alertmanager ------------------------------------------------------------------------


def test_alertmanager_config_routes_loopbreaker_alerts_to_the_webhook() -> None:
    resource = the("AlertmanagerConfig")
    assert resource["apiVersion"] == "monitoring.coreos.com/v1alpha1"
    spec = resource["spec"]
    route = spec["route"]
    assert route["receiver"] == "webhook"
    assert route["matchers"] == [{"name": "loopbreaker", "value": "true", "matchType": "="}]
    assert route["continue"] is True
    assert route["groupBy"] == ["alertname", "cluster", "namespace", "workload", "node"]
    assert (route["groupWait"], route["groupInterval"], route["repeatInterval"]) == (
        "30s",
        "5m",
        "4h",
    )
    (receiver,) = spec["receivers"]
    assert receiver["name"] == "webhook"
    (webhook,) = receiver["webhookConfigs"]
    assert webhook["urlSecret"] == {"name": WEBHOOK_SECRET, "key": "url"}
    assert "url" not in webhook
    assert webhook["sendResolved"] is True
    assert webhook.get("maxAlerts", 0) == 0
    assert webhook["httpConfig"] == {
        "authorization": {"type": "Bearer", "credentials": {"name": WEBHOOK_SECRET, "key": "token"}}
    }


def test_the_guide_creates_the_secret_the_alertmanager_config_reads() -> None:
    command = re.search(
        r"kubectl -n monitoring create secret generic (?P<name>\S+) \\\n(?P<rest>(?:.*\\\n)*.*)",
        GUIDE.read_text(),
    )
    assert command, "docs/prometheus.md does not create the webhook Secret"
    assert command["name"] == WEBHOOK_SECRET
    assert set(re.findall(r"--from-literal=(\w+)=", command["rest"])) == {"url", "token"}


def webhook_secret(directory: Path, url: str = WEBHOOK_URL, token: str = WEBHOOK_TOKEN) -> Path:
    """Secret ``loopbreaker-webhook`` as files, as ``kubectl create secret`` would hold it."""
    secret = directory / WEBHOOK_SECRET
    secret.mkdir(parents=True)
    (secret / "url").write_text(url)
    (secret / "token").write_text(token)
    return directory


def translated(directory: Path, strategy: str) -> Path:
    """alertmanager.yml as the operator generates it from the chart's config and the package."""
    config = alertmanager_config_from_crds(
        rendered(),
        CHART_CONFIG,
        webhook_secret(directory / "secrets"),
        alertmanager_namespace=NAMESPACE,
        matcher_strategy=strategy,
    )
    path = directory / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture
def am_config(tmp_path: Path) -> Path:
    return translated(tmp_path, "OnNamespaceExceptForAlertmanagerNamespace")


def test_generated_alertmanager_config_passes_amtool(am_config: Path) -> None:
    done = run(amtool(), "check-config", str(am_config))
    assert done.returncode == 0, output(done)
    assert "SUCCESS" in done.stdout, output(done)


def test_generated_receiver_carries_the_secret(am_config: Path) -> None:
    config = yaml.safe_load(am_config.read_text())
    assert config["route"]["routes"][0]["receiver"] == WEBHOOK_RECEIVER
    (receiver,) = [r for r in config["receivers"] if r["name"] == WEBHOOK_RECEIVER]
    assert receiver["webhook_configs"] == [
        {
            "url": WEBHOOK_URL,
            "send_resolved": True,
            "http_config": {"authorization": {"type": "Bearer", "credentials": WEBHOOK_TOKEN}},
        }
    ]


@pytest.mark.parametrize(
    ("labels", "receivers"),
    [
        (
            ["loopbreaker=true", "severity=critical", "namespace=ml", "alertname=X"],
            f"{WEBHOOK_RECEIVER},team-oncall",
        ),
        (["loopbreaker=true", "severity=warning", "node=n1", "alertname=X"], WEBHOOK_RECEIVER),
        (["loopbreaker=false", "severity=warning", "alertname=X"], "team-default"),
        (["severity=critical", "alertname=X"], "team-oncall"),
        (["alertname=Watchdog", "severity=none"], "null"),
    ],
)
def test_alertmanager_routes_loopbreaker_alerts(
    am_config: Path, labels: list[str], receivers: str
) -> None:
    done = run(amtool(), "config", "routes", "test", f"--config.file={am_config}", *labels)
    assert done.returncode == 0, output(done)
    assert done.stdout.strip() == receivers, output(done)


@pytest.mark.parametrize(
    ("strategy", "reaches_webhook"),
    [("OnNamespace", False), ("OnNamespaceExceptForAlertmanagerNamespace", True), ("None", True)],
)
def test_the_matcher_strategy_decides_whether_alerts_reach_the_webhook(
    tmp_path: Path, strategy: str, reaches_webhook: bool
) -> None:
    """Why the guide's first install step exists: under the operator's default strategy the
    route only takes alerts from pods in `monitoring`, and loopbreaker's never are."""
    path = translated(tmp_path, strategy)
    for labels in (["namespace=ml"], ["node=gke-a3-pool-1"]):
        done = run(
            amtool(),
            "config",
            "routes",
            "test",
            f"--config.file={path}",
            "loopbreaker=true",
            "alertname=X",
            *labels,
        )
        assert done.returncode == 0, output(done)
        assert (WEBHOOK_RECEIVER in done.stdout.strip().split(",")) is reaches_webhook, output(done)
    guide = GUIDE.read_text()
    assert "alertmanager.alertmanagerSpec.alertmanagerConfigMatcherStrategy.type" in guide
    assert "=OnNamespaceExceptForAlertmanagerNamespace" in guide


def test_the_guides_plain_alertmanager_snippet_matches_the_alertmanager_config(
    am_config: Path,
) -> None:
    snippet = yaml.safe_load(guide_block("plain-alertmanager"))
    generated = yaml.safe_load(am_config.read_text())
    (plain_route,) = snippet["route"]["routes"]
    generated_route = generated["route"]["routes"][0]
    assert {k: v for k, v in plain_route.items() if k != "receiver"} == {
        k: v for k, v in generated_route.items() if k != "receiver"
    }
    (plain,) = snippet["receivers"]
    assert plain["name"] == plain_route["receiver"]
    (generated_receiver,) = [r for r in generated["receivers"] if r["name"] == WEBHOOK_RECEIVER]
    (plain_hook,) = plain["webhook_configs"]
    (generated_hook,) = generated_receiver["webhook_configs"]
    assert set(plain_hook) == set(generated_hook)
    assert plain_hook["send_resolved"] == generated_hook["send_resolved"]
    assert plain_hook["http_config"]["authorization"]["type"] == "Bearer"


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
