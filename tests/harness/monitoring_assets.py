"""Shared by the tests of deploy/prometheus and deploy/grafana: the rendered package, the
promtool and amtool runs, the guide's code blocks."""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from harness.prometheus import (
    kustomize_build,
    load_kubernetes_yaml,
)
from harness.tools import ensure_executable

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
    "LoopbreakerGPUHardwareXid": "gpu_health",
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
