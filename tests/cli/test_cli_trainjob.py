"""``loopbreaker diagnose`` on a Kubeflow Trainer v2 TrainJob (examples/telemetry/
trainjob-faulty-host): detected, named with its JobSet, its Failed reason cited, offline and
through the Kubernetes API (the real client against the local fake server)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fakeservers import KubernetesServer, write_kubeconfig

from loopbreaker.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "examples" / "telemetry" / "trainjob-faulty-host"
SPEC: dict[str, Any] = json.loads((SCENARIO / "scenario.json").read_text())
FAILED = "TrainJob ml/llama-ft is Failed since 2026-11-17T09:36:54Z, reason ReachedMaxRestarts"


def args(*, kind: bool = False) -> list[str]:
    """The scenario's context flags; its workload kind only when ``kind``."""
    out = []
    for key, value in SPEC["context"].items():
        if key != "workload_kind" or kind:
            out += [f"--{key.replace('_', '-')}", value]
    return out


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(["diagnose", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def copy_without(tmp_path: Path, *names: str) -> Path:
    target = tmp_path / SCENARIO.name
    target.mkdir()
    for path in SCENARIO.iterdir():
        if path.name not in names:
            shutil.copy(path, target / path.name)
    return target


def test_the_text_names_the_trainjob_its_jobset_and_the_failed_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, [*args(), "--telemetry", str(SCENARIO)])
    assert code == 0
    assert "TrainJob a3-ft-usc1/ml/llama-ft (JobSet ml/llama-ft), window" in out
    assert "workload kind TrainJob detected from the evidence" in out
    assert FAILED in out
    assert out.startswith("Verdict: faulty_host → isolate_host")


def test_the_json_carries_the_kind_the_jobset_and_the_failed_finding(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, [*args(), "--telemetry", str(SCENARIO), "--format", "json"])
    assert code == 0
    d = json.loads(out)
    assert d["context"]["workload_kind"] == "trainjob"
    assert d["context"]["jobset"] == d["context"]["workload"] == "llama-ft"
    expect = SPEC["expect"]
    assert (d["restart_loop"], d["root_cause"], d["remediation"]["path"]) == (
        expect["restart_loop"],
        expect["root_cause"],
        expect["remediation_path"],
    )
    (cited,) = [f for f in d["evidence"] if f["message"].startswith(FAILED)]
    assert cited["step"] == 1 and cited["source"] == "file:jobs.json"
    assert "first failed job: llama-ft-node-0" in cited["message"]
    assert any(m.startswith(FAILED) for m in d["steps"][0]["findings"])
    # Its queries are the JobSet's.
    texts = "\n".join(q["text"] for q in d["steps"][0]["queries"])
    assert 'kube_jobset_restarts{jobset_name="llama-ft"' in texts


def test_markdown_names_the_trainjob_and_its_jobset(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, [*args(kind=True), "--telemetry", str(SCENARIO), "--format", "markdown"]
    )
    assert code == 0
    assert "- **Workload:** TrainJob a3-ft-usc1/ml/llama-ft (JobSet ml/llama-ft)" in out


def test_each_object_alone_detects_the_trainjob(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    only_jobsets = copy_without(tmp_path, "jobs.json")  # the JobSet's ownerReference
    code, out, _ = run(capsys, [*args(), "--telemetry", str(only_jobsets), "--format", "json"])
    assert code == 0 and json.loads(out)["context"]["workload_kind"] == "trainjob"
    shutil.rmtree(only_jobsets)
    only_jobs = copy_without(tmp_path, "jobsets.json")  # the TrainJob object
    code, out, _ = run(capsys, [*args(), "--telemetry", str(only_jobs), "--format", "json"])
    assert code == 0 and json.loads(out)["context"]["workload_kind"] == "trainjob"


def test_without_either_object_it_is_a_jobset_unless_the_flag_says_trainjob(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bare = copy_without(tmp_path, "jobs.json", "jobsets.json")
    code, out, _ = run(capsys, [*args(), "--telemetry", str(bare), "--format", "json"])
    assert code == 0
    assert json.loads(out)["context"]["workload_kind"] == "jobset"
    code, out, _ = run(capsys, [*args(kind=True), "--telemetry", str(bare)])
    assert code == 0
    assert "TrainJob a3-ft-usc1/ml/llama-ft (JobSet ml/llama-ft)" in out
    assert "no TrainJob object read" in out
    assert "is Failed" not in out  # no TrainJob object, no claim about its conditions


def test_asked_as_its_jobset_it_is_diagnosed_as_the_jobset(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [*args(), "--workload-kind", "jobset", "--telemetry", str(SCENARIO), "--format", "json"]
    code, out, _ = run(capsys, argv)
    d = json.loads(out)
    assert code == 0 and d["context"]["workload_kind"] == "jobset"
    assert d["root_cause"] == SPEC["expect"]["root_cause"]
    assert not any("TrainJob" in f["message"] for f in d["evidence"])


def test_the_api_kind_spelling_is_the_kind(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        *args(),
        "--workload-kind",
        "TrainJob",
        "--telemetry",
        str(SCENARIO),
        "--format",
        "json",
    ]
    code, out, _ = run(capsys, argv)
    assert code == 0 and json.loads(out)["context"]["workload_kind"] == "trainjob"


def test_an_unknown_kind_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["diagnose", *args(), "--workload-kind", "trainjobs", "--telemetry", str(SCENARIO)])
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith(
        "loopbreaker: error: argument --workload-kind: invalid choice: 'trainjobs'"
    )
    assert "'trainjob'" in last


def test_another_kind_than_the_evidence_shows_exits_2_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(
        capsys, [*args(), "--workload-kind", "tfjob", "--telemetry", str(SCENARIO)]
    )
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "loopbreaker: error: no TFJob llama-ft in cluster a3-ft-usc1; seen: TrainJob ml/llama-ft"
    ]


def _items(name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads((SCENARIO / name).read_text())["items"]
    return items


def test_live_kubernetes_detects_the_trainjob_from_its_jobset(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Nodes, pods and JobSets from the API server instead of the files: the JobSet's
    ownerReference names the TrainJob, and the verdict is the offline one."""
    files = copy_without(tmp_path, "jobs.json", "jobsets.json", "nodes.json", "pods.json")
    with KubernetesServer(_items("nodes.json"), _items("pods.json"), token="t") as kube:
        kube.jobsets = _items("jobsets.json")
        config = write_kubeconfig(tmp_path / "kubeconfig", kube.url, token="t")
        argv = [*args(), "--telemetry", str(files), "--kubeconfig", str(config)]
        code, out, _ = run(capsys, [*argv, "--format", "json"])
        paths = {r.path for r in kube.requests}
    assert code == 0
    live = json.loads(out)
    assert "/apis/jobset.x-k8s.io/v1alpha2/jobsets" in paths or any(
        p.endswith("/jobsets") for p in paths
    )
    assert live["context"]["workload_kind"] == "trainjob"
    assert live["context"]["jobset"] == "llama-ft"
    code, offline_out, _ = run(capsys, [*args(), "--telemetry", str(SCENARIO), "--format", "json"])
    offline = json.loads(offline_out)
    for key in ("restart_loop", "root_cause", "restart_increase"):
        assert live[key] == offline[key], key
    assert [h["host"] for h in live["suspect_hosts"]] == [
        h["host"] for h in offline["suspect_hosts"]
    ]
