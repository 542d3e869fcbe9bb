"""GPU faults that only dcgm-exporter saw decide step 3, from a metrics.om telemetry directory.

A hardware-class Xid rising twice on one GPU (the node's other GPUs quiet) is that host's
failure each time: faulty_host, and the host's approval request. Application-class Xids on
every GPU at once are the application's, with no host named and nothing to approve.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from dcgm_scenarios import (
    FAULTY_GPU,
    FAULTY_HOST,
    FAULTY_NODE,
    KPS,
    MANAGED,
    application_every_gpu,
    context_args,
    hardware_twice,
    write,
)

from loopbreaker.cli.main import main
from loopbreaker.diagnosis.steps import gpu_metrics
from loopbreaker.model import Sample, Series, SignalKind


def diagnose(directory: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert (
        main(["diagnose", *context_args(), "--telemetry", str(directory), "--format", "json"]) == 0
    )
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def step3_findings(out: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in out["evidence"] if e["step"] == 3]


@pytest.mark.parametrize("vocabulary", [MANAGED, KPS])
def test_a_gpu_failing_twice_seen_only_by_dcgm_is_a_faulty_host(
    vocabulary: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = diagnose(write(tmp_path / "t", hardware_twice, vocabulary), capsys)
    assert out["root_cause"] == "faulty_host"
    assert out["remediation"]["requires_approval"] is True
    [host] = out["suspect_hosts"]
    assert (host["host"], host["nodes"], host["failures"]) == (FAULTY_HOST, [FAULTY_NODE], 2)
    assert host["fault_reason"] == "UNRECOVERABLE_GPU_ERROR"
    assert host["gpu_faults"] == [
        f"Xid 48 (hardware: Double Bit ECC Error) on GPU {FAULTY_GPU} "
        f"(GPU-01{FAULTY_GPU:02d}a1c4-7d2e-4f6b-9c3a-5e8f0b2d1{FAULTY_GPU}1e), per DCGM"
    ]
    said = [f for f in step3_findings(out) if "Xid 48" in f["message"]]
    assert len(said) == 2, step3_findings(out)
    assert [f["source"] for f in said] == ["file:metrics.om"] * 2
    assert "file:metrics.om" in out["steps"][2]["sources"]


@pytest.mark.parametrize("vocabulary", [MANAGED, KPS])
def test_application_xids_on_every_gpu_at_once_are_the_application(
    vocabulary: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = diagnose(write(tmp_path / "t", application_every_gpu, vocabulary), capsys)
    assert out["root_cause"] == "application"
    assert out["suspect_hosts"] == []
    assert out["remediation"]["requires_approval"] is False
    groups = [
        f["message"] for f in step3_findings(out) if "one failure of the workload" in f["message"]
    ]
    # Xid 13 and Xid 31, each on the 4 nodes within the 21 s the scrapes spread over.
    assert len(groups) == 2, step3_findings(out)
    assert all("all 4 nodes" in g for g in groups)
    assert any(g.startswith("Xid 13 ") for g in groups)
    assert any(g.startswith("Xid 31 ") for g in groups)


# --- reading the gauge ------------------------------------------------------------------

T0 = datetime(2026, 3, 24, 19, 0, tzinfo=UTC)


def gauge(values: list[int], **labels: str) -> Series:
    base = {"gpu": "0", "UUID": "GPU-a", "Hostname": "node-a", **labels}
    samples = tuple(Sample(T0 + timedelta(seconds=30 * i), float(v)) for i, v in enumerate(values))
    return Series("DCGM_FI_DEV_XID_ERRORS", base, samples)


def test_a_rise_is_a_new_last_xid_and_a_stale_one_is_none() -> None:
    # Already 79 when first seen: when it came is unknown. 79 -> 48 is a new fault.
    found = gpu_metrics.signals([gauge([79, 79, 48, 48, 0, 0, 13])])
    assert [(s.reason or "").split(" (")[0] for s in found] == ["Xid 48", "Xid 13"]
    assert [s.kind for s in found] == [
        SignalKind.HARDWARE_FAILURE,
        SignalKind.GPU_APPLICATION_ERROR,
    ]
    assert found[0].timestamp == T0 + timedelta(seconds=60)


def test_one_gpu_across_exporter_restarts_is_one_timeline() -> None:
    before = gauge([0, 0], pod="dcgm-exporter-a")
    after = Series(
        before.metric,
        {**before.labels, "pod": "dcgm-exporter-b"},
        (Sample(T0 + timedelta(seconds=90), 0.0), Sample(T0 + timedelta(seconds=120), 95.0)),
    )
    [found] = gpu_metrics.signals([before, after])
    assert found.reason is not None and found.reason.startswith("Xid 95 (hardware")


@pytest.mark.parametrize(
    ("labels", "pod", "namespace"),
    [
        # kube-prometheus-stack / Managed Prometheus: the target's pod won.
        (
            {"pod": "dcgm-exporter-x", "exported_pod": "job-0", "exported_namespace": "ml"},
            "job-0",
            "ml",
        ),
        # The exporter scraped with honor_labels: its own pod label is the workload's.
        ({"pod": "job-0", "namespace": "ml", "container": "pytorch"}, "job-0", "ml"),
        # No pod mapping: the target's labels only.
        ({"pod": "nvidia-dcgm-exporter-x", "container": "nvidia-dcgm-exporter"}, None, None),
    ],
)
def test_the_workload_pod_is_the_exporters_pod_label_as_the_collector_left_it(
    labels: dict[str, str], pod: str | None, namespace: str | None
) -> None:
    [found] = gpu_metrics.signals([gauge([0, 13], **labels)])
    assert (found.pod, found.namespace) == (pod, namespace)


def test_the_node_is_a_scrape_label_first_then_dcgms_hostname() -> None:
    [found] = gpu_metrics.signals([gauge([0, 79], node="gke-node-1", Hostname="dcgm-pod")])
    assert found.node == "gke-node-1"
    assert gpu_metrics.signals([gauge([0, 79], Hostname="")]) == []
