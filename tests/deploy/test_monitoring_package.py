"""The kustomize package in deploy/prometheus as a kube-prometheus-stack user applies it:
what it renders, its runbooks, and the PrometheusRule checked and unit-tested with promtool."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.monitoring_assets import (
    ALERTS,
    GUIDE,
    IDENTITY,
    KUSTOMIZATION,
    NAMESPACE,
    PROMETHEUS,
    RELEASE,
    ROOT,
    RULE_TESTS,
    RUNBOOK_BASE,
    RUNBOOKS,
    SIGNALS,
    SPEC_FILE_NAME,
    WORKLOAD_KINDS,
    _rendered,
    alerting_rules,
    guide_block,
    load_rule_crd,
    markdown_anchors,
    output,
    promtool,
    rendered,
    rule_test_cases,
    run,
    run_rule_tests,
    the,
    write_rules,
)
from harness.prometheus import (
    kustomize_build,
)

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
    """The guide's overlay example, verbatim, in ``directory``, with this checkout next to
    it as ``../loopbreaker``: the layout the example's comment tells the user to have."""
    text = guide_block("overlay-example")
    overlay = yaml.safe_load(text)
    assert overlay["resources"] == ["../loopbreaker/deploy/prometheus"]
    assert overlay["components"] == ["../loopbreaker/deploy/prometheus/runbook-urls"]
    (directory.parent / "loopbreaker").symlink_to(ROOT, target_is_directory=True)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "kustomization.yaml").write_text(text)
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


def test_the_hardware_xid_alert_reads_the_diagnosis_class_table() -> None:
    """LoopbreakerGPUHardwareXid fires on the XIDs the diagnosis counts as a host's failure:
    the HARDWARE class of NVIDIA's catalog (loopbreaker.signals.xid), no more, no fewer."""
    from loopbreaker.signals.xid import XIDS, XidClass

    (rule,) = [
        r
        for r in alerting_rules(load_rule_crd()["spec"])
        if r["alert"] == "LoopbreakerGPUHardwareXid"
    ]
    found = re.search(r'"xid_class", "hardware", "xid", "([0-9|]+)"', rule["expr"])
    assert found is not None, rule["expr"]
    hardware = {n for n, row in XIDS.items() if row.cls is XidClass.HARDWARE}
    assert {int(n) for n in found[1].split("|")} == hardware
