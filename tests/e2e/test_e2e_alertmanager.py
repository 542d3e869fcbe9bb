"""End to end: back-filled series -> the shipped rule fires -> Alertmanager -> the webhook.

Real pieces: ``kubectl kustomize deploy/prometheus``, the package a user applies; Prometheus
evaluating its PrometheusRule over the faulty-host scenario's metrics, shifted so that its
issue time is now; Alertmanager running the configuration the prometheus-operator would
generate from its AlertmanagerConfig, with the webhook URL and bearer token read from the
Secret the guide creates (as files); ``on_alertmanager_webhook`` and ``on_schedule`` served
by functions-framework on one Firestore emulator database. The incident the alert opens is
diagnosed from the same (shifted) telemetry: a faulty host under the right JobSet.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.prometheus import alertmanager_config_from_crds, kustomize_build

from loopbreaker.incidents import Scope
from loopbreaker.incidents.store.base import refresh
from loopbreaker.incidents.store.firestore import FirestoreStore
from loopbreaker.timeutil import format_rfc3339, parse_rfc3339

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "functions" / "main.py"
SCENARIO = ROOT / "examples" / "telemetry" / "faulty-host"
PACKAGE = ROOT / "deploy" / "prometheus"
TOKEN = "e2e-alert-token-7f3a91"
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_SAMPLE_TIME = re.compile(r"^(?P<head>[^#].*\s)(?P<ts>\d+(?:\.\d+)?)$")
_TIME_KEYS = {"timestamp", "receiveTimestamp", "firstTimestamp", "lastTimestamp", "eventTime"}


def shift_scenario(target: Path, delta: timedelta) -> Path:
    """A copy of the scenario with every sample and log timestamp moved by ``delta``."""
    shutil.copytree(SCENARIO, target)
    lines = []
    for line in (SCENARIO / "metrics.om").read_text().splitlines():
        match = _SAMPLE_TIME.match(line)
        if match:
            line = f"{match['head']}{int(float(match['ts']) + delta.total_seconds())}"
        lines.append(line)
    (target / "metrics.om").write_text("\n".join(lines) + "\n")

    def move(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: format_rfc3339(parse_rfc3339(v) + delta)
                if k in _TIME_KEYS and isinstance(v, str)
                else move(v)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [move(v) for v in value]
        return value

    logs = json.loads((SCENARIO / "logs.json").read_text())
    (target / "logs.json").write_text(json.dumps(move(logs)))
    return target


def prometheus_config(rules: Path, alertmanager_port: int) -> str:
    return yaml.safe_dump(
        {
            "global": {"evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "alerting": {
                "alertmanagers": [
                    {"static_configs": [{"targets": [f"127.0.0.1:{alertmanager_port}"]}]}
                ]
            },
            "scrape_configs": [],
        }
    )


def rendered_package() -> list[dict[str, Any]]:
    resources = kustomize_build(PACKAGE)
    kinds = sorted(r["kind"] for r in resources)
    assert kinds == ["AlertmanagerConfig", "ConfigMap", "PrometheusRule"], kinds
    return resources


def alertmanager_config(resources: list[dict[str, Any]], secrets: Path) -> str:
    """The rendered AlertmanagerConfig as the operator would run it, with fast timers."""
    [am_config] = [r for r in resources if r["kind"] == "AlertmanagerConfig"]
    am_config["spec"]["route"].update(groupWait="1s", groupInterval="1s", repeatInterval="1h")
    config = alertmanager_config_from_crds(
        resources,
        {"route": {"receiver": "null"}, "receivers": [{"name": "null"}]},
        secrets,
        alertmanager_namespace=am_config["metadata"]["namespace"],
    )
    return yaml.safe_dump(config)


def webhook_secret(directory: Path, url: str) -> Path:
    """Secret loopbreaker-webhook, as docs/prometheus.md creates it, held as files."""
    secret = directory / "loopbreaker-webhook"
    secret.mkdir(parents=True)
    (secret / "url").write_text(url)
    (secret / "token").write_text(TOKEN)
    return directory


def rules_file(resources: list[dict[str, Any]], target: Path) -> Path:
    [rule] = [r for r in resources if r["kind"] == "PrometheusRule"]
    target.write_text(yaml.safe_dump(rule["spec"]))
    return target


def post(url: str, body: bytes = b"{}") -> dict[str, Any]:
    request = urllib.request.Request(url, data=body, method="POST")
    with DIRECT.open(request, timeout=60) as response:
        result: dict[str, Any] = json.loads(response.read())
        return result


def test_the_shipped_rule_fires_and_alertmanager_opens_the_right_incident(
    tmp_path: Path,
    firestore_emulator: Any,
    prometheus_factory: Any,
    alertmanager_factory: Any,
    function_server_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in firestore_emulator.env.items():
        monkeypatch.setenv(name, value)
    spec = json.loads((SCENARIO / "scenario.json").read_text())
    context = spec["context"]
    issue_time = parse_rfc3339(context["issue_time"])
    # The scenario's issue time becomes five minutes ago: its second host failure (T+5m)
    # is now, and the rule evaluated now sees the restarts of the last hour.
    now = datetime.now(UTC).replace(microsecond=0)
    telemetry = shift_scenario(tmp_path / "telemetry", now - timedelta(minutes=5) - issue_time)

    prefix = "am" + uuid.uuid4().hex[:10]
    env = {
        **firestore_emulator.env,
        "LOOPBREAKER_STORE": "firestore",
        "LOOPBREAKER_PROJECT": context["project"],
        "LOOPBREAKER_COLLECTION_PREFIX": prefix,
        "LOOPBREAKER_ALERT_WEBHOOK_TOKEN": TOKEN,
        "LOOPBREAKER_SETTLE_TIME": "1s",
        "LOOPBREAKER_LIVE_SOURCES": "false",
        "LOOPBREAKER_TELEMETRY_DIR": str(telemetry),
        "LOOPBREAKER_NOTIFIER": "log",
    }
    webhook = function_server_factory("on_alertmanager_webhook", SOURCE, "http", env)
    package = rendered_package()
    secrets = webhook_secret(tmp_path / "secrets", webhook.url + "/")
    alertmanager = alertmanager_factory(alertmanager_config(package, secrets))
    prometheus = prometheus_factory(
        [telemetry / "metrics.om"],
        config_yaml=prometheus_config(
            rules_file(package, tmp_path / "rules.yaml"), alertmanager.port
        ),
    )

    store = FirestoreStore.connect(project=context["project"], database="(default)", prefix=prefix)
    deadline = time.monotonic() + 90
    found = []
    while time.monotonic() < deadline and not found:
        found = store.list_incidents()
        time.sleep(0.5)
    assert found, (
        "no incident. Prometheus ALERTS: "
        + json.dumps(prometheus.query("ALERTS")["data"]["result"])[:2000]
        + "\nAlertmanager: "
        + DIRECT.open(alertmanager.url + "/api/v2/alerts", timeout=10).read().decode()[:2000]
        + "\nwebhook log: "
        + webhook.log()[-3000:]
    )
    [incident] = found
    assert incident.key.scope is Scope.WORKLOAD
    assert incident.key.name == f"{context['namespace']}/{context['workload']}"
    assert incident.cluster == context["cluster"]
    head = refresh(store, incident.id, 500)
    assert head is not None and head.counts.get("job_restarting", 0) >= 1
    # The same endpoint without the token: refused, and nothing else is opened.
    forged = urllib.request.Request(webhook.url + "/", data=b'{"version": "4"}', method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        DIRECT.open(forged, timeout=30)
    assert refused.value.code == 401
    assert [i.id for i in store.list_incidents()] == [incident.id]

    # The same store, settled by on_schedule: the alert's incident is the faulty host.
    schedule = function_server_factory("on_schedule", SOURCE, "http", env)
    deadline = time.monotonic() + 60
    diagnosed = None
    while time.monotonic() < deadline and diagnosed is None:
        post(schedule.url + "/")
        current = store.get(incident.id)
        diagnosed = current if current is not None and current.diagnosis else None
        time.sleep(1)
    assert diagnosed is not None and diagnosed.diagnosis is not None
    assert diagnosed.diagnosis.root_cause == spec["expect"]["root_cause"] == "faulty_host"
    assert diagnosed.diagnosis.suspect_hosts == tuple(
        h["host"] for h in spec["expect"]["suspect_hosts"]
    )
    store.close()
