"""End to end: the shipped TFJob restart alert opens one incident that names the TFJob.

Real pieces: ``kubectl kustomize deploy/prometheus``; Prometheus evaluating the rendered
PrometheusRule over ``training_operator_jobs_restarted_total`` as kube-prometheus-stack
stores it (the ServiceMonitor's target labels, ``namespace="kubeflow"`` the operator's,
``job_namespace`` the job's; the operator's external label ``prometheus``; no cluster);
Alertmanager running the rendered AlertmanagerConfig, re-sending the group every few
seconds; ``on_alertmanager_webhook`` and ``on_schedule`` under functions-framework on the
Firestore emulator, with the offline telemetry the deployed service reads
(``LOOPBREAKER_TELEMETRY_DIR``: the operator's TFJobRestarting Events, the pods).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.prometheus import alertmanager_config_from_crds
from test_e2e_alertmanager import post, rendered_package, rules_file, webhook_secret

from loopbreaker.incidents import Scope
from loopbreaker.incidents.store.firestore import FirestoreStore
from loopbreaker.timeutil import format_rfc3339

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "functions" / "main.py"
TOKEN = "e2e-alert-token-7f3a91"  # the token webhook_secret writes
PROJECT, NS, JOB = "lumen-vision-prod", "ml-jobs", "resnet50-ps"
# What a ServiceMonitor on the operator's Service adds to its series (the target labels of
# prometheus-operator's generated scrape config), the operator running in "kubeflow".
SCRAPED = (
    'job_namespace="{ns}",framework="tensorflow",namespace="kubeflow",'
    'pod="training-operator-7d9f8c6b5-x2m4q",service="training-operator",'
    'endpoint="monitoring-port",job="training-operator",container="training-operator",'
    'instance="10.8.1.17:8080"'
)


def counter(now: datetime, steps: dict[int, int], ns: str) -> str:
    """``training_operator_jobs_restarted_total`` over the last 100 minutes, one sample a
    minute; ``steps`` maps minutes-ago to the count from then on."""
    lines = [
        "# HELP training_operator_jobs_restarted Counts number of jobs restarted",
        "# TYPE training_operator_jobs_restarted counter",
    ]
    for ago in range(100, -1, -1):
        value = max((v for m, v in steps.items() if ago <= m), default=0)
        stamp = int((now - timedelta(minutes=ago)).timestamp())
        labels = SCRAPED.format(ns=ns)
        lines.append(f"training_operator_jobs_restarted_total{{{labels}}} {value} {stamp}")
    return "\n".join(lines) + "\n# EOF\n"


def restart_event(job: str, namespace: str, at: datetime) -> dict[str, Any]:
    """kubeflow/training-operator v1.8.0, pkg/controller.v1/common/pod.go: reason
    ``TFJobRestarting``, "job %s is restarting because %s replica(s) failed."."""
    stamp = format_rfc3339(at)
    return {
        "insertId": f"ev-{job}-{int(at.timestamp())}",
        "logName": f"projects/{PROJECT}/logs/events",
        "resource": {"type": "k8s_cluster", "labels": {"project_id": PROJECT}},
        "severity": "WARNING",
        "timestamp": stamp,
        "jsonPayload": {
            "kind": "Event",
            "involvedObject": {
                "apiVersion": "kubeflow.org/v1",
                "kind": "TFJob",
                "name": job,
                "namespace": namespace,
            },
            "reason": "TFJobRestarting",
            "message": f"job {job} is restarting because Worker replica(s) failed.",
            "type": "Warning",
            "source": {"component": "tfjob-controller"},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
        },
    }


def telemetry(directory: Path, now: datetime) -> Path:
    directory.mkdir()
    logs = [
        restart_event(JOB, NS, now - timedelta(minutes=45)),
        restart_event(JOB, NS, now - timedelta(minutes=9)),
        # Another namespace's TFJob: the alert of ml-jobs is not about it.
        restart_event("other-tf", "team-b", now - timedelta(minutes=9)),
    ]
    (directory / "logs.json").write_text(json.dumps(logs))
    (directory / "metrics.om").write_text(counter(now, {45: 4, 9: 5, 100: 3}, NS))
    return directory


def prometheus_config(rules: Path, alertmanager_port: int) -> str:
    return yaml.safe_dump(
        {
            # prometheus-operator's external label (kube-prometheus-stack release "monitoring").
            "global": {
                "evaluation_interval": "1s",
                "external_labels": {"prometheus": "monitoring/kube-prometheus-stack-prometheus"},
            },
            "rule_files": [str(rules)],
            "alerting": {
                "alertmanagers": [
                    {"static_configs": [{"targets": [f"127.0.0.1:{alertmanager_port}"]}]}
                ]
            },
            "scrape_configs": [],
        }
    )


def resending_alertmanager(resources: list[dict[str, Any]], secrets: Path) -> str:
    """The rendered AlertmanagerConfig, re-sending a firing group every 3 seconds."""
    [am_config] = [r for r in resources if r["kind"] == "AlertmanagerConfig"]
    am_config["spec"]["route"].update(groupWait="1s", groupInterval="1s", repeatInterval="3s")
    config = alertmanager_config_from_crds(
        resources,
        {"route": {"receiver": "null"}, "receivers": [{"name": "null"}]},
        secrets,
        alertmanager_namespace=am_config["metadata"]["namespace"],
    )
    return yaml.safe_dump(config)


def test_the_tfjob_restart_alert_opens_one_incident_that_names_the_tfjob(
    tmp_path: Path,
    firestore_emulator: Any,
    prometheus_factory: Any,
    alertmanager_factory: Any,
    function_server_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in firestore_emulator.env.items():
        monkeypatch.setenv(name, value)
    now = datetime.now(UTC).replace(microsecond=0)
    directory = telemetry(tmp_path / "telemetry", now)
    prefix = "kf" + uuid.uuid4().hex[:10]
    env = {
        **firestore_emulator.env,
        "LOOPBREAKER_STORE": "firestore",
        "LOOPBREAKER_PROJECT": PROJECT,
        "LOOPBREAKER_COLLECTION_PREFIX": prefix,
        "LOOPBREAKER_ALERT_WEBHOOK_TOKEN": TOKEN,
        "LOOPBREAKER_SETTLE_TIME": "1s",
        "LOOPBREAKER_LIVE_SOURCES": "false",
        "LOOPBREAKER_TELEMETRY_DIR": str(directory),
        "LOOPBREAKER_NOTIFIER": "log",
    }
    webhook = function_server_factory("on_alertmanager_webhook", SOURCE, "http", env)
    package = rendered_package()
    secrets = webhook_secret(tmp_path / "secrets", webhook.url + "/")
    alertmanager = alertmanager_factory(resending_alertmanager(package, secrets))
    prometheus_factory(
        [directory / "metrics.om"],
        config_yaml=prometheus_config(
            rules_file(package, tmp_path / "rules.yaml"), alertmanager.port
        ),
    )
    store = FirestoreStore.connect(project=PROJECT, database="(default)", prefix=prefix)

    def deliveries() -> list[dict[str, Any]]:
        found = []
        for line in webhook.log().splitlines():
            start = line.find("{")
            if '"alerts_received"' in line and start >= 0:
                found.append(json.loads(line[start:]))
        return found

    # Alertmanager delivers, then re-sends the same alert: still one incident.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(deliveries()) < 3:
        time.sleep(0.5)
    sent = deliveries()
    assert len(sent) >= 3, "webhook log: " + webhook.log()[-3000:]
    assert [d.get("accepted") for d in sent[:3]] == [1, 0, 0]
    [incident] = store.list_incidents()
    assert incident.key.scope is Scope.WORKLOAD and incident.key.name == f"{NS}/"
    assert incident.cluster is None and incident.workload_kinds == ("tfjob",)

    schedule = function_server_factory("on_schedule", SOURCE, "http", env)
    deadline = time.monotonic() + 60
    diagnosis = None
    while time.monotonic() < deadline and diagnosis is None:
        post(schedule.url + "/")
        current = store.get(incident.id)
        diagnosis = current.diagnosis if current is not None else None
        time.sleep(1)
    assert diagnosis is not None
    assert "kubeflow_alert" in diagnosis.document, (diagnosis.summary, store.get(incident.id))
    found = diagnosis.document["kubeflow_alert"]
    assert [(j["kind"], j["name"], j["restarts"]) for j in found["jobs"]] == [("tfjob", JOB, 2)]
    assert re.match(
        rf"The TFJob restart alert of namespace {NS} is TFJob {JOB} ", diagnosis.summary
    )
    assert diagnosis.document["context"]["workload"] == JOB
    assert diagnosis.document["restart_loop"] is True
    assert [i.id for i in store.list_incidents()] == [incident.id]
    # The webhook's answers stayed 200: nothing was retried into a second incident.
    assert "alert notification refused" not in webhook.log()
    store.close()
