"""The AlertmanagerConfig of deploy/prometheus, turned into alertmanager.yml as the operator
does, checked with amtool and a real Alertmanager's routing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from harness.monitoring_assets import (
    CHART_CONFIG,
    GUIDE,
    NAMESPACE,
    WEBHOOK_RECEIVER,
    WEBHOOK_SECRET,
    WEBHOOK_TOKEN,
    WEBHOOK_URL,
    amtool,
    guide_block,
    output,
    rendered,
    run,
    the,
)
from harness.prometheus import (
    alertmanager_config_from_crds,
)

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
