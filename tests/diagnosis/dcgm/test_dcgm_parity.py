"""The same DCGM series served by a real Prometheus give the offline verdict, in both
vocabularies: Managed Service for Prometheus' labels behind its route prefix
(``/v1/projects/PROJECT/location/global/prometheus``), and kube-prometheus-stack's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from dcgm_scenarios import (
    FAULTY_HOST,
    KPS,
    MANAGED,
    SPEC,
    Timeline,
    application_every_gpu,
    context_args,
    hardware_twice,
    write,
)
from harness.fixtures import PrometheusFactory

from loopbreaker.cli.main import main


def diagnose(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["diagnose", *context_args(), *argv, "--format", "json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def verdict(out: dict[str, Any]) -> dict[str, Any]:
    return {
        "root_cause": out["root_cause"],
        "requires_approval": out["remediation"]["requires_approval"],
        "suspect_hosts": [
            (h["host"], h["failures"], h["gpu_faults"]) for h in out["suspect_hosts"]
        ],
        "step3": [e["message"] for e in out["evidence"] if e["step"] == 3],
    }


@pytest.mark.parametrize("vocabulary", [MANAGED, KPS])
@pytest.mark.parametrize(
    ("timeline", "cause"),
    [(hardware_twice, "faulty_host"), (application_every_gpu, "application")],
    ids=["hardware-twice", "application-every-gpu"],
)
def test_prometheus_gives_the_files_verdict(
    vocabulary: str,
    timeline: Timeline,
    cause: str,
    tmp_path: Path,
    prometheus_factory: PrometheusFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = write(tmp_path / "files", timeline, vocabulary)
    prefix = (
        f"/v1/projects/{SPEC['context']['project']}/location/global/prometheus"
        if vocabulary == MANAGED
        else None
    )
    prom = prometheus_factory([files / "metrics.om"], route_prefix=prefix)
    no_metrics = tmp_path / "live"
    shutil.copytree(files, no_metrics, ignore=shutil.ignore_patterns("metrics.om"))

    offline = diagnose(capsys, "--telemetry", str(files))
    live = diagnose(capsys, "--telemetry", str(no_metrics), "--prometheus-url", prom.url)

    assert offline["root_cause"] == cause
    assert verdict(live) == verdict(offline)
    step3 = live["steps"][2]
    assert any(s.startswith(f"prometheus:{prom.url}") for s in step3["sources"]), step3
    if cause == "faulty_host":
        assert [h["host"] for h in live["suspect_hosts"]] == [FAULTY_HOST]
    # The GPU series are no gap where they exist, and none where they do not.
    assert not any(m.startswith("gpu_xids") for m in live["missing_evidence"])
