"""End to end: back-filled series -> the shipped rule fires -> Alertmanager -> the webhook.

Real pieces: Prometheus evaluating ``deploy/prometheus/loopbreaker-rules.yaml`` over the
faulty-host scenario's metrics, shifted so that its issue time is now; Alertmanager with
the receiver of ``deploy/prometheus/alertmanager-receiver.yaml`` (its bearer token read
from a file, as in the cluster); ``on_alertmanager_webhook`` and ``on_schedule`` served by
functions-framework on one Firestore emulator database. The incident the alert opens is
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

from loopbreaker.incidents import Scope
from loopbreaker.incidents.store.base import refresh
from loopbreaker.incidents.store.firestore import FirestoreStore
from loopbreaker.timeutil import format_rfc3339, parse_rfc3339

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "functions" / "main.py"
SCENARIO = ROOT / "examples" / "telemetry" / "faulty-host"
RULES = ROOT / "deploy" / "prometheus" / "loopbreaker-rules.yaml"
RECEIVER = ROOT / "deploy" / "prometheus" / "alertmanager-receiver.yaml"
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


def alertmanager_config(webhook_url: str, token_file: Path) -> str:
    """The shipped receiver and route, pointed at the local function, with fast timers."""
    snippet = yaml.safe_load(RECEIVER.read_text())["alertmanager"]["config"]
    [route] = [r for r in snippet["route"]["routes"] if r.get("receiver") == "loopbreaker"]
    [receiver] = [r for r in snippet["receivers"] if r["name"] == "loopbreaker"]
    [hook] = receiver["webhook_configs"]
    hook["url"] = webhook_url
    hook["http_config"]["authorization"]["credentials_file"] = str(token_file)
    route.update(group_wait="1s", group_interval="1s", repeat_interval="1h")
    return yaml.safe_dump(
        {
            "route": {"receiver": "null", "routes": [route]},
            "receivers": [{"name": "null"}, receiver],
        }
    )


def rules_file(target: Path) -> Path:
    spec = yaml.safe_load(RULES.read_text())["spec"]
    target.write_text(yaml.safe_dump(spec))
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
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    alertmanager = alertmanager_factory(alertmanager_config(webhook.url + "/", token_file))
    prometheus = prometheus_factory(
        [telemetry / "metrics.om"],
        config_yaml=prometheus_config(rules_file(tmp_path / "rules.yaml"), alertmanager.port),
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
