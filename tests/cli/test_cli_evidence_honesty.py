"""Evidence honesty, as a new user meets it: `loopbreaker diagnose --telemetry DIR` on
copies of the bundled scenarios with files broken or taken away (issue 28, item 5).

- A telemetry file that cannot be read at all is refused whatever its name: exit 2, one
  line naming it, nothing on stdout, no traceback.
- A step without its evidence is `unavailable`, with part of it `partial`, in the JSON and
  in the text markers; no finding claims an absence that the missing evidence could have
  shown, and the complete scenarios still claim them (the gate is not a blanket).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopbreaker.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "telemetry"
CLI = Path(sys.executable).with_name("loopbreaker")
SINK_FILE = "stdout/2026/05/20/08:00:00_08:59:59_S0.json"

# What the tools write when the flag that makes JSON is forgotten, or the export fails.
# gcloud's default output format is YAML ("gcloud topic formats"; the gcloud logging read
# reference asks for --format=json to get JSON).
GCLOUD_YAML = """---
insertId: 1g8k2x9f3a7b
logName: projects/customer-ai-project-123/logs/events
receiveTimestamp: '2026-05-20T08:00:01.482913223Z'
resource:
  labels:
    cluster_name: tpu-cluster-prod
    location: us-east5
  type: k8s_cluster
timestamp: '2026-05-20T08:00:00Z'
"""
# Cloud Storage's XML API error body, as `curl` of a sink object without credentials gets
# it (cloud.google.com/storage/docs/xml-api/reference-status).
GCS_ERROR = (
    "<?xml version='1.0' encoding='UTF-8'?><Error><Code>AccessDenied</Code>"
    "<Message>Access denied.</Message></Error>\n"
)
# The Prometheus HTTP API's error envelope (prometheus docs/querying/api.md: status,
# errorType, error): JSON, but not OpenMetrics.
PROMETHEUS_ERROR = (
    '{"status":"error","errorType":"bad_data","error":"invalid parameter \\"query\\": '
    '1:1: parse error: unexpected end of input"}\n'
)
# kubectl's default table output (no -o json). JobSet's columns are its printcolumns
# (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go: TerminalState, Restarts,
# Completed, Suspended, Age); -A adds NAMESPACE.
KUBECTL_TABLES = {
    "nodes.json": "NAME                                          STATUS   ROLES    AGE   VERSION\n"
    "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-x7k2   Ready    <none>   12d   v1.30.5-gke.1014001\n",
    "pods.json": "NAMESPACE   NAME                                  READY   STATUS    RESTARTS   "
    "AGE\n"
    "default     llama3-70b-training-slice-0-0-5kq2m   1/1     Running   0          9m\n",
    "jobs.json": "NAMESPACE   NAME          STATE       AGE\n"
    "ml-jobs     resnet50-ps   Restarting  2h\n",
    "jobsets.json": "NAMESPACE   NAME                  TERMINALSTATE   RESTARTS   COMPLETED   "
    "SUSPENDED   AGE\n"
    "default     llama3-70b-training                   8                      false       3h\n",
}


def _spec(name: str) -> dict[str, Any]:
    spec: dict[str, Any] = json.loads((EXAMPLES / name / "scenario.json").read_text())
    return spec


def _args(spec: dict[str, Any], directory: Path, fmt: str = "json") -> list[str]:
    args = ["diagnose", "--telemetry", str(directory), "--offline", "--format", fmt]
    for key, value in spec["context"].items():
        if value:
            args += [f"--{key.replace('_', '-')}", value]
    return args


def _copy(name: str, tmp_path: Path, keep: set[str] | None = None) -> Path:
    target = tmp_path / name
    shutil.copytree(EXAMPLES / name, target)
    if keep is not None:
        for path in target.iterdir():
            if path.name not in keep | {"scenario.json"}:
                path.unlink()
    return target


def _run_cli(spec: dict[str, Any], directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), *_args(spec, directory)], capture_output=True, text=True, timeout=120
    )


def _diagnose(
    capsys: pytest.CaptureFixture[str], spec: dict[str, Any], directory: Path
) -> tuple[dict[str, Any], str]:
    """The JSON and the text output of one diagnosis (both exit 0)."""
    assert main(_args(spec, directory)) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert main(_args(spec, directory, "text")) == 0
    return out, capsys.readouterr().out


def _findings(out: dict[str, Any], step: int) -> list[str]:
    return list(out["steps"][step - 1]["findings"])


def _assert_refused(result: subprocess.CompletedProcess[str], name: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert name in lines[0]


# --- a file that cannot be read at all ------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "name", "text"),
    [
        ("faulty-host", "logs.json", GCLOUD_YAML),
        ("faulty-host", "extra.jsonl", GCLOUD_YAML),
        ("faulty-host", SINK_FILE, GCS_ERROR),
        ("faulty-host", "metrics.om", PROMETHEUS_ERROR),
        ("faulty-host", "nodes.json", KUBECTL_TABLES["nodes.json"]),
        ("faulty-host", "pods.json", KUBECTL_TABLES["pods.json"]),
        ("tfjob-faulty-host", "jobs.json", KUBECTL_TABLES["jobs.json"]),
        ("faulty-host", "jobsets.json", KUBECTL_TABLES["jobsets.json"]),
    ],
)
def test_a_file_that_is_not_json_is_refused_whatever_its_name(
    scenario: str, name: str, text: str, tmp_path: Path
) -> None:
    directory = _copy(scenario, tmp_path)
    (directory / name).parent.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(text)
    _assert_refused(_run_cli(_spec(scenario), directory), name)


@pytest.mark.parametrize("name", ["logs.json", "pods.json", "nodes.json"])
def test_a_file_in_utf16_is_refused(name: str, tmp_path: Path) -> None:
    """Windows PowerShell 5.1's `>` writes UTF-16 (about_Redirection): valid JSON in an
    encoding the tools never write, refused rather than guessed."""
    directory = _copy("faulty-host", tmp_path)
    text = (directory / name).read_text(encoding="utf-8")
    (directory / name).write_text(text, encoding="utf-16")
    _assert_refused(_run_cli(_spec("faulty-host"), directory), name)


@pytest.mark.parametrize("name", ["logs.json", "pods.json", "nodes.json"])
def test_an_empty_document_file_is_a_failed_export(name: str, tmp_path: Path) -> None:
    """`gcloud ... > logs.json` that fails (no credentials) leaves an empty file: gcloud
    writes `[]` when nothing matched, kubectl a List, so empty is never "nothing"."""
    directory = _copy("faulty-host", tmp_path)
    (directory / name).write_text("")
    _assert_refused(_run_cli(_spec("faulty-host"), directory), name)


def test_a_directory_under_a_telemetry_name_is_refused(tmp_path: Path) -> None:
    directory = _copy("faulty-host", tmp_path)
    (directory / "pods.json").unlink()
    (directory / "pods.json").mkdir()
    _assert_refused(_run_cli(_spec("faulty-host"), directory), "pods.json")


def test_empty_results_in_the_tools_own_form_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`[]` from gcloud and an empty JSON Lines file (jq -c '.[]' of []) are no entries,
    not errors: the verdict stands on the other files."""
    spec = _spec("faulty-host")
    directory = _copy("faulty-host", tmp_path)
    (directory / "none.jsonl").write_text("")
    out, _ = _diagnose(capsys, spec, directory)
    assert out["root_cause"] == spec["expect"]["root_cause"]
    assert [s["status"] for s in out["steps"]] == ["done"] * 4


def test_one_bad_line_among_good_ones_is_a_rejected_entry_and_makes_the_logs_partial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSON Lines file cut short in a copy: its whole lines are read, the cut one is
    skipped and reported, and nothing is ruled out from logs that lost an entry."""
    spec = _spec("faulty-host")
    directory = _copy("faulty-host", tmp_path)
    entries = json.loads((directory / "logs.json").read_text())
    lines = [json.dumps(e) for e in entries[:3]]
    (directory / "extra.jsonl").write_text("\n".join([*lines, lines[0][:40]]) + "\n")
    out, text = _diagnose(capsys, spec, directory)
    assert out["root_cause"] == spec["expect"]["root_cause"]
    assert out["partial"] is True
    assert any(m.startswith("logs: partial: 1 log entr") for m in out["missing_evidence"])
    assert any("1 log entr(y/ies) skipped as unreadable" in f["message"] for f in out["evidence"])
    assert [s["status"] for s in out["steps"][1:]] == ["partial"] * 3
    assert "No preemption inside the window." not in text
    assert "A preemption not ruled out" in text


# --- steps without their evidence -------------------------------------------------------------

#: Every absence the complete `unknown` scenario (a loop with no cause found) claims.
ABSENCES = {
    2: ("No preemption inside the window.", "No host maintenance inside the window."),
    3: ("No node failure inside the window.",),
    4: (
        "Every pod of the workload was scheduled",
        "No NCCL, collective or worker-crash signal in the coordinator's logs.",
        "No OOM kill, accelerator out of memory, priority preemption, node-pressure "
        "eviction or image pull failure",
    ),
}


def test_the_complete_scenario_claims_every_absence_and_every_step_is_done(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out, text = _diagnose(capsys, _spec("unknown"), EXAMPLES / "unknown")
    assert [s["status"] for s in out["steps"]] == ["done"] * 4
    assert out["partial"] is False
    for step, claims in ABSENCES.items():
        for claim in claims:
            assert any(f.startswith(claim) for f in _findings(out, step)), claim
    assert text.count("[done]") == 4
    assert "[partial]" not in text and "[unavailable]" not in text
    assert "no infrastructure cause found" in out["summary"]
    assert "No node action: the infrastructure shows no cause." in out["remediation"]["actions"]


@pytest.mark.parametrize(
    ("keep", "statuses", "kept_claims"),
    [
        # Logs alone: the interruption metric, node conditions, pods are missing.
        (
            {"logs.json"},
            ["partial", "partial", "partial"],
            ["No NCCL, collective", "No accelerator out of memory of"],
        ),
        # Metrics alone: no logs, nodes or pods.
        ({"metrics.om"}, ["partial", "partial", "partial"], []),
        # Pods alone: steps 2 and 3 have nothing at all.
        ({"pods.json"}, ["unavailable", "unavailable", "partial"], []),
        # Metrics and logs: step 2 whole; step 3 claims its absence (conditions and logs
        # read), the pods' causes that the logs alone show are ruled out, the others not.
        (
            {"metrics.om", "logs.json"},
            ["done", "partial", "partial"],
            [
                "No preemption inside the window.",
                "No host maintenance inside the window.",
                "No node failure inside the window.",
                "No NCCL, collective",
                "No accelerator out of memory of",
            ],
        ),
    ],
    ids=["logs-only", "metrics-only", "pods-only", "metrics-and-logs"],
)
def test_a_step_without_its_evidence_claims_no_absence(
    keep: set[str],
    statuses: list[str],
    kept_claims: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = _spec("unknown")
    out, text = _diagnose(capsys, spec, _copy("unknown", tmp_path, keep))
    assert [s["status"] for s in out["steps"][1:]] == statuses
    assert out["partial"] is True
    findings = [f for step in (2, 3, 4) for f in _findings(out, step)]
    for claims in ABSENCES.values():
        for claim in claims:
            wanted = any(claim.startswith(k) or k.startswith(claim) for k in kept_claims)
            assert any(f.startswith(claim) for f in findings) == wanted, (claim, findings)
    for claim in kept_claims:
        assert any(f.startswith(claim) for f in findings), (claim, findings)
    for step, status in zip((2, 3, 4), statuses, strict=True):
        report = out["steps"][step - 1]
        title = report["title"]
        assert f"Step {step}: {title} [{status}]" in text
        if status == "unavailable":
            assert report["findings"] == []
        if status != "done":
            # The reason names what is missing.
            assert report["reason"] and "found" in report["reason"]
    # The verdict does not clear the infrastructure over steps 2-3 read in part.
    assert out["root_cause"] == "unknown"
    assert "no infrastructure cause found" not in out["summary"]
    assert "no infrastructure cause in the evidence read (step " in out["summary"]
    assert not any("infrastructure shows no cause" in a for a in out["remediation"]["actions"])
    # What is not ruled out is said, with the evidence that was not read.
    if statuses[0] == "partial":
        assert any(f.startswith("A preemption not ruled out:") for f in findings)
    if statuses[2] == "partial":
        assert any("not ruled out: none in the evidence read, but" in f for f in findings)


def test_node_conditions_with_nothing_inside_the_window_rule_out_no_node_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A metrics export without the node condition metric: metrics.om is there, but it
    cannot show a NotReady node, so step 3 says so instead of "No node failure"."""
    spec = _spec("unknown")
    directory = _copy("unknown", tmp_path)
    metrics = directory / "metrics.om"
    kept = [
        line
        for line in metrics.read_text().splitlines()
        if "kubernetes_io:node_status_condition" not in line
    ]
    metrics.write_text("\n".join(kept) + "\n")
    out, text = _diagnose(capsys, spec, directory)
    step3 = out["steps"][2]
    assert step3["status"] == "partial"
    assert "no node condition sample inside the window" in step3["reason"]
    assert not any(f.startswith("No node failure") for f in step3["findings"])
    assert any(f.startswith("A node failure not ruled out:") for f in step3["findings"])
    assert any(m.startswith("node_conditions: partial:") for m in out["missing_evidence"])
    assert "Step 3: Nodes and host VMs [partial]" in text


def test_job_conditions_without_logs_rule_out_no_log_signal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """jobs.json without logs: its Restarting condition counts for step 1, but it is no
    log, so the coordinator's NCCL line and the other log signals are not ruled out."""
    spec = _spec("tfjob-faulty-host")
    directory = _copy("tfjob-faulty-host", tmp_path, {"metrics.om", "nodes.json", "pods.json"})
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "resnet50-ps", "namespace": "ml-jobs"},
        "status": {
            "conditions": [
                {
                    "type": "Restarting",
                    "status": "True",
                    # training-operator pkg/util/status.go: <Kind>Restarting.
                    "reason": "TFJobRestarting",
                    "message": "TFJob ml-jobs/resnet50-ps is restarting because 1 Worker "
                    "replica(s) failed.",
                    "lastTransitionTime": "2026-10-06T13:54:20Z",
                }
            ]
        },
    }
    (directory / "jobs.json").write_text(json.dumps({"kind": "List", "items": [job]}))
    out, text = _diagnose(capsys, spec, directory)
    assert any(m.startswith("logs: partial: job conditions only") for m in out["missing_evidence"])
    step4 = out["steps"][3]
    assert step4["status"] == "partial"
    assert not any(f.startswith("No NCCL") for f in step4["findings"])
    assert "No preemption inside the window." not in text
