"""Live readers give the same verdict as the offline files, on every bundled scenario.

Metrics come from a real Prometheus back-filled (promtool) from the scenario's own
``metrics.om``; the diagnosis on the directory without ``metrics.om`` plus
``--prometheus-url`` must match the diagnosis on the full directory.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fakeservers import ComputeServer, KubernetesServer, LoggingServer, write_kubeconfig
from harness.fixtures import PrometheusFactory

from loopbreaker.cli.main import main
from loopbreaker.diagnosis import engine, render
from loopbreaker.diagnosis.readers.compute import ComputeHostLookup
from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials, anonymous
from loopbreaker.diagnosis.readers.sources import Mode, Readers, SourceOptions, gather
from loopbreaker.model import Context, EvidenceKind, WorkloadKind
from loopbreaker.timeutil import parse_rfc3339

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(p.parent for p in (ROOT / "examples" / "telemetry").glob("*/scenario.json"))
IDS = [p.name for p in SCENARIOS]


def spec_of(scenario: Path) -> dict[str, Any]:
    spec: dict[str, Any] = json.loads((scenario / "scenario.json").read_text())
    return spec


def context_args(spec: dict[str, Any]) -> list[str]:
    return [
        arg
        for key, value in spec["context"].items()
        if value
        for arg in (f"--{key.replace('_', '-')}", value)
    ]


def context_of(spec: dict[str, Any]) -> Context:
    c = spec["context"]
    return Context(
        cluster=c["cluster"],
        workload=c["workload"],
        issue_time=parse_rfc3339(c["issue_time"]),
        project=c.get("project"),
        location=c.get("location"),
        namespace=c.get("namespace"),
        workload_kind=WorkloadKind(c.get("workload_kind", "jobset")),
    )


def without(scenario: Path, tmp_path: Path, *names: str) -> Path:
    target = tmp_path / scenario.name
    target.mkdir()
    for path in scenario.iterdir():
        if path.name not in names:
            shutil.copy(path, target / path.name)
    return target


def diagnose_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    assert main(["diagnose", *argv, "--format", "json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def verdict(out: dict[str, Any]) -> dict[str, Any]:
    return {
        "restart_loop": out["restart_loop"],
        "root_cause": out["root_cause"],
        "remediation_path": out["remediation"]["path"],
        "suspect_hosts": sorted(
            (h["host"], tuple(sorted(h["nodes"])), h["failures"]) for h in out["suspect_hosts"]
        ),
        "restart_increase": out["restart_increase"],
        "restart_total": out["restart_total"],
        "partial": out["partial"],
    }


def test_every_scenario_is_covered() -> None:
    assert len(SCENARIOS) >= 21
    assert all((s / "metrics.om").is_file() for s in SCENARIOS)


def test_every_cause_has_a_jobset_and_a_kubeflow_scenario() -> None:
    """Each root cause the infrastructure did not cause runs through parity as a JobSet
    and as a TFJob (issue 20)."""
    by_cause: dict[str, set[WorkloadKind]] = {}
    for scenario in SCENARIOS:
        spec = spec_of(scenario)
        by_cause.setdefault(spec["expect"]["root_cause"], set()).add(context_of(spec).workload_kind)
    for cause in ("out_of_memory", "priority_preemption", "node_pressure_eviction", "image_pull"):
        assert by_cause[cause] >= {WorkloadKind.JOBSET, WorkloadKind.TFJOB}, cause


def test_every_workload_kind_is_covered() -> None:
    """The Kubeflow scenarios run through the same parity tests as the JobSet ones."""
    kinds = {s.name: context_of(spec_of(s)).workload_kind for s in SCENARIOS}
    assert kinds["tfjob-faulty-host"] is WorkloadKind.TFJOB
    assert kinds["pytorchjob-nccl-timeout"] is WorkloadKind.PYTORCHJOB
    assert set(kinds.values()) == set(WorkloadKind)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_prometheus_url_matches_files(
    scenario: Path,
    tmp_path: Path,
    prometheus_factory: PrometheusFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    live_matches_files(scenario, spec_of(scenario), tmp_path, prometheus_factory, capsys)


def live_matches_files(
    files: Path,
    spec: dict[str, Any],
    tmp_path: Path,
    prometheus_factory: PrometheusFactory,
    capsys: pytest.CaptureFixture[str],
) -> dict[str, Any]:
    """``files`` diagnosed offline and with its metrics.om served by a real Prometheus give
    one verdict, the scenario's own; every metric came from Prometheus. The live output."""
    prom = prometheus_factory([files / "metrics.om"])
    no_metrics = without(files, tmp_path, "metrics.om")
    offline = diagnose_json(capsys, [*context_args(spec), "--telemetry", str(files)])
    live = diagnose_json(
        capsys,
        [*context_args(spec), "--telemetry", str(no_metrics), "--prometheus-url", prom.url],
    )
    assert verdict(live) == verdict(offline)
    expect = spec["expect"]
    assert live["root_cause"] == expect["root_cause"]
    assert live["remediation"]["path"] == expect["remediation_path"]
    # Every metric came from Prometheus, and the findings say so.
    step1 = live["steps"][0]
    assert step1["status"] == "done", step1
    assert any(s.startswith(f"prometheus:{prom.url}") for s in step1["sources"])
    assert not any("metrics.om" in s for step in live["steps"] for s in step["sources"])
    return live


def _static_token() -> GoogleCredentials:
    from google.oauth2.credentials import Credentials

    return GoogleCredentials(Credentials(token="test-token"))


def test_managed_prometheus_url_shape_end_to_end(
    tmp_path: Path, prometheus_factory: PrometheusFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = next(s for s in SCENARIOS if s.name == "faulty-host")
    spec = spec_of(scenario)
    project = spec["context"]["project"]
    prefix = f"/v1/projects/{project}/location/global/prometheus"
    prom = prometheus_factory([scenario / "metrics.om"], route_prefix=prefix)
    assert prom.url == f"{prom.base_url}{prefix}"
    no_metrics = without(scenario, tmp_path, "metrics.om")
    offline = diagnose_json(capsys, [*context_args(spec), "--telemetry", str(scenario)])

    # 1. --prometheus-url with the Managed Prometheus path.
    live = diagnose_json(
        capsys,
        [*context_args(spec), "--telemetry", str(no_metrics), "--prometheus-url", prom.url],
    )
    assert verdict(live) == verdict(offline)

    # 2. --project style: the URL is built from the project, with a bearer token.
    context = context_of(spec)
    evidence = gather(
        context,
        SourceOptions(
            telemetry_dir=no_metrics, managed_prometheus=Mode.ON, gmp_endpoint=prom.base_url
        ),
        credentials=_static_token(),
    )
    status = evidence.sources[EvidenceKind.RESTARTS]
    assert status.available, status
    assert status.source == f"managed-prometheus:projects/{project}"
    managed = render.diagnosis_to_dict(engine.diagnose(context, evidence))
    assert verdict(managed) == verdict(offline)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_all_live_readers_match_files(
    scenario: Path,
    tmp_path: Path,
    prometheus_factory: PrometheusFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Metrics from Prometheus, logs from Cloud Logging, nodes and pods from Kubernetes."""
    spec = spec_of(scenario)
    context = context_of(spec)
    offline = diagnose_json(capsys, [*context_args(spec), "--telemetry", str(scenario)])
    prom = prometheus_factory([scenario / "metrics.om"])
    entries = json.loads((scenario / "logs.json").read_text())
    nodes = json.loads((scenario / "nodes.json").read_text())["items"]
    pods = json.loads((scenario / "pods.json").read_text())["items"]
    with (
        LoggingServer(entries) as logging_server,
        KubernetesServer(nodes, pods, token="t") as kube,
        ComputeServer() as compute,
    ):
        options = SourceOptions(
            prometheus_url=prom.url,
            live_logs=Mode.ON,
            kubeconfig=write_kubeconfig(tmp_path / "kubeconfig", kube.url, token="t"),
            logging_endpoint=logging_server.url,
            timeout=10,
        )
        credentials = anonymous()
        lookups = [
            ComputeHostLookup(context.project, credentials=credentials, api_endpoint=compute.url)
        ]
        evidence = gather(
            context, options, credentials=credentials, readers=Readers(host_lookups=lookups)
        )
    unavailable = set(spec_of(scenario)["expect"].get("unavailable", []))
    assert all(s.available for k, s in evidence.sources.items() if k.value not in unavailable), (
        evidence.sources
    )
    assert {s.source.split(":")[0] for s in evidence.sources.values()} == {
        "prometheus",
        "cloud-logging",
        "kubernetes",
    }
    live = render.diagnosis_to_dict(engine.diagnose(context, evidence))
    assert verdict(live) == verdict(offline)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_live_log_filters_see_every_node_and_workload_signal(scenario: Path) -> None:
    from collections import Counter

    from loopbreaker.diagnosis.readers.logging_reader import CloudLoggingReader
    from loopbreaker.diagnosis.telemetry import load_directory
    from loopbreaker.model import (
        HOST_FAULT_KINDS,
        INTERRUPTION_KINDS,
        POD_FAULT_KINDS,
        WORKLOAD_FAULT_KINDS,
    )

    context = context_of(spec_of(scenario))
    kinds = HOST_FAULT_KINDS | INTERRUPTION_KINDS | WORKLOAD_FAULT_KINDS | POD_FAULT_KINDS

    def counted(signals: Any) -> Counter[str]:
        return Counter(
            s.kind.value for s in signals if s.kind in kinds and context.in_window(s.timestamp)
        )

    offline = counted(load_directory(scenario).signals or ())
    with LoggingServer(json.loads((scenario / "logs.json").read_text())) as server:
        reader = CloudLoggingReader(
            str(context.project), credentials=anonymous(), api_endpoint=server.url
        )
        live = counted(reader.read(context).signals)
    assert live == offline
