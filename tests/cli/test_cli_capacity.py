"""`loopbreaker diagnose` reads capacity where Compute and the cluster autoscaler report
it: a stockout in Compute's Admin Activity log or a failed scale-up in the autoscaler's
visibility log makes ``capacity`` name the zone, the machine type and the cause, and the
remediation what to do about it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_cli_diagnose import ROOT, context_args, run_json

SCENARIO = ROOT / "examples" / "telemetry" / "capacity"
PROJECT, ZONE = "acme-ml-platform", "us-east5-b"
POOL_GROUP = "gke-tpu-v6e-cluster-v6e-pool-57929601"
# Inside the scenario's window (issue time 11:20): the slice's pods wait from 10:53.
AT = "2026-02-14T10:55:12.481516Z"


def compute_stockout() -> dict[str, Any]:
    """The last Admin Activity entry of the node pool's instance group creating a VM in a
    zone with no capacity for its machine type (the resource availability error's
    wording, Compute Engine's troubleshooting page)."""
    return {
        "insertId": "-x1c2d3e4f5a6",
        "logName": f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Factivity",
        "operation": {
            "id": "operation-1771066512000-5f1a2b3c4d5e6-7a8b9c0d-1e2f3a4b",
            "last": True,
            "producer": "compute.googleapis.com",
        },
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "authenticationInfo": {
                "principalEmail": "123456789012@cloudservices.gserviceaccount.com"
            },
            "methodName": "v1.compute.instances.insert",
            "requestMetadata": {"callerSuppliedUserAgent": "GCE Managed Instance Group for GKE"},
            "resourceName": f"projects/{PROJECT}/zones/{ZONE}/instances/{POOL_GROUP}-zx3k",
            "serviceName": "compute.googleapis.com",
            "status": {
                "code": 8,
                "message": (
                    f"A ct6e-standard-4t VM instance is currently unavailable in the {ZONE} "
                    "zone. Alternatively, you can try your request again with a different "
                    "VM hardware configuration or at a later time. For more information, "
                    "see the troubleshooting documentation."
                ),
            },
        },
        "receiveTimestamp": "2026-02-14T10:55:13.002214Z",
        "resource": {
            "labels": {"instance_id": "5832614907316629041", "project_id": PROJECT, "zone": ZONE},
            "type": "gce_instance",
        },
        "severity": "ERROR",
        "timestamp": AT,
    }


def failed_scale_up() -> dict[str, Any]:
    """The autoscaler's eventResult: its scale-up of the pool's instance group failed."""
    group = (
        f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}"
        f"/instanceGroups/{POOL_GROUP}-grp"
    )
    return {
        "insertId": "1k9qz7xf2m4a8b",
        "jsonPayload": {
            "resultInfo": {
                "measureTime": "1771066520",
                "results": [
                    {
                        "eventId": "6f0c7d1e-3b2a-4c5d-9e8f-0a1b2c3d4e5f",
                        "errorMsg": {
                            "messageId": "scale.up.error.out.of.resources",
                            "parameters": [group],
                        },
                    }
                ],
            }
        },
        "logName": (
            f"projects/{PROJECT}/logs/container.googleapis.com%2Fcluster-autoscaler-visibility"
        ),
        "receiveTimestamp": "2026-02-14T10:55:21.118347Z",
        "resource": {
            "labels": {
                "cluster_name": "tpu-v6e-cluster",
                "location": "us-east5",
                "project_id": PROJECT,
            },
            "type": "k8s_cluster",
        },
        "severity": "DEFAULT",
        "timestamp": "2026-02-14T10:55:20.730102Z",
    }


def telemetry(tmp_path: Path, *extra: dict[str, Any], echoes: bool = True) -> Path:
    """The capacity scenario with ``extra`` entries; without the scheduler's
    FailedScheduling Events when ``echoes`` is false."""
    target = tmp_path / "capacity"
    shutil.copytree(SCENARIO, target)
    logs: list[dict[str, Any]] = json.loads((target / "logs.json").read_text())
    if not echoes:
        logs = [e for e in logs if (e.get("jsonPayload") or {}).get("reason") != "FailedScheduling"]
    (target / "logs.json").write_text(json.dumps([*logs, *extra]))
    return target


def diagnose(capsys: pytest.CaptureFixture[str], directory: Path) -> dict[str, Any]:
    spec = json.loads((SCENARIO / "scenario.json").read_text())
    argv = ["diagnose", *context_args(spec), "--telemetry", str(directory), "--format", "json"]
    return run_json(capsys, argv)


def test_a_stockout_in_computes_audit_log_names_zone_and_machine_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = diagnose(capsys, telemetry(tmp_path, compute_stockout()))
    assert (out["root_cause"], out["remediation"]["path"]) == ("capacity", "add_capacity")
    assert "ct6e-standard-4t" in out["summary"] and ZONE in out["summary"]
    assert "stockout" in out["summary"]
    step4 = [str(f) for f in out["steps"][3]["findings"]]
    # Compute's word comes first; the scheduler's failures follow as its echo.
    assert step4.index(next(m for m in step4 if "Compute Engine is out of" in m)) < step4.index(
        next(m for m in step4 if "scheduling failure" in m)
    )
    actions = " ".join(out["remediation"]["actions"])
    for remedy in ("another zone", "reservation", "flex-start"):
        assert remedy in actions


def test_a_failed_scale_up_alone_makes_capacity_name_the_pools_machine_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = diagnose(capsys, telemetry(tmp_path, failed_scale_up(), echoes=False))
    assert out["root_cause"] == "capacity"
    # The visibility entry names the instance group and its zone; the pool's nodes name
    # its machine type.
    assert "ct6e-standard-4t" in out["summary"] and ZONE in out["summary"]
    assert any("scale.up.error.out.of.resources" in m for m in _messages(out))


def test_the_two_reports_of_one_stockout_are_one_shortage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = diagnose(capsys, telemetry(tmp_path, compute_stockout(), failed_scale_up()))
    shortages = [m for m in _messages(out) if "Compute Engine is out of" in m]
    assert len(shortages) == 1 and "2 report(s)" in shortages[0]


def _messages(out: dict[str, Any]) -> list[str]:
    return [str(f) for step in out["steps"] for f in step["findings"]]
