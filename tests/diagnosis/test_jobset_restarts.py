"""Step 1 counts JobSet restarts from the gauge, the JobSet object, the pods' restart-attempt
labels and the controller's Events (issue 28), offline and through the live reader."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fakeservers import Fault, KubernetesServer, write_kubeconfig

from loopbreaker.cli.main import main
from loopbreaker.diagnosis.jobsets import jobset_info, log_label, metric_label
from loopbreaker.diagnosis.readers.kube import KubernetesReader
from loopbreaker.diagnosis.steps.jobset_restarts import attempt_count, gauge_count
from loopbreaker.diagnosis.telemetry import load_directory
from loopbreaker.errors import SourceUnavailable
from loopbreaker.model import EvidenceKind, Sample, Series
from loopbreaker.model.evidence import RestartAttemptSeen

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "telemetry"
RESTART_JOB = EXAMPLES / "jobset-restartjob-gauge-flat"
RECREATED = EXAMPLES / "jobset-recreated-after-ttl"
T = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)
START, END = T - timedelta(minutes=30), T + timedelta(minutes=30)


def at(minutes: float) -> datetime:
    return T + timedelta(minutes=minutes)


def context_args(scenario: Path) -> list[str]:
    spec = json.loads((scenario / "scenario.json").read_text())
    return [a for k, v in spec["context"].items() for a in (f"--{k.replace('_', '-')}", v)]


def diagnose(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    assert main(["diagnose", *argv, "--format", "json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def step1(out: dict[str, Any]) -> list[str]:
    findings: list[str] = out["steps"][0]["findings"]
    return findings


def copy_without(scenario: Path, tmp_path: Path, *names: str) -> Path:
    target = tmp_path / scenario.name
    target.mkdir()
    for path in scenario.iterdir():
        if path.name not in names:
            shutil.copy(path, target / path.name)
    return target


# --- the JobSet object ---------------------------------------------------------------------

# Shapes of kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go at v0.12.0.
V012 = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {
        "name": "js",
        "namespace": "ml",
        "uid": "u-2",
        "creationTimestamp": "2026-05-20T07:40:00Z",
        "ownerReferences": [
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "name": "js",
                "controller": True,
                "uid": "t",
            }
        ],
    },
    "status": {
        "restarts": 2,
        "restartsCountTowardsMax": 1,
        "currentInPlaceRestartAttempt": 4,
        "replicatedJobsStatus": [
            {"name": "a", "ready": 1, "jobRestarts": [0, 3]},
            {"name": "b", "ready": 1, "jobRestarts": [1]},
        ],
        "conditions": [
            {
                "type": "RestartingJobSet",
                "status": "True",
                "reason": "FailurePolicy_r",
                "lastTransitionTime": "2026-05-20T07:58:00Z",
            },
            {
                "type": "Failed",
                "status": "True",
                "reason": "ReachedMaxRestarts",
                "lastTransitionTime": "2026-05-20T08:10:00Z",
            },
        ],
    },
}


def test_jobset_status_fields_of_v0_12() -> None:
    info = jobset_info(V012)
    assert info is not None
    assert (info.name, info.namespace, info.uid) == ("js", "ml", "u-2")
    assert info.created_at == at(-20)
    assert (info.restarts, info.restarts_count_towards_max) == (2, 1)
    assert info.job_restarts == 4  # 0 + 3 + 1 over the replicated jobs
    assert info.in_place_restarts == 4
    assert info.restarting_since == at(-2)
    assert (info.failed_reason, info.failed_at) == ("ReachedMaxRestarts", at(10))
    assert (info.owner_kind, info.owner_name) == ("TrainJob", "js")


def test_older_jobsets_omit_counters_they_do_not_have() -> None:
    # v0.5: restarts is omitempty, no restartsCountTowardsMax and no jobRestarts.
    old = {"kind": "JobSet", "metadata": {"name": "js"}, "status": {"replicatedJobsStatus": []}}
    info = jobset_info(old)
    assert info is not None
    assert info.restarts == 0
    assert info.restarts_count_towards_max is None and info.job_restarts is None
    assert jobset_info({"kind": "TFJob", "metadata": {"name": "x"}}) is None


def test_label_keys_as_gke_logs_and_kube_state_metrics_write_them() -> None:
    assert log_label("jobset.sigs.k8s.io/restart-attempt") == (
        "k8s-pod/jobset_sigs_k8s_io/restart-attempt"
    )
    assert metric_label("jobset.sigs.k8s.io/restart-attempt") == (
        "label_jobset_sigs_k8s_io_restart_attempt"
    )


# --- counting rules --------------------------------------------------------------------------


def gauge(*points: tuple[float, float], **labels: str) -> Series:
    return Series(
        "kube_jobset_restarts",
        {"jobset_name": "js", **labels},
        tuple(Sample(at(m), v) for m, v in points),
    )


def test_gauge_rises_count_and_a_fall_is_a_recreated_jobset() -> None:
    assert gauge_count([gauge((-40, 3), (-10, 4), (5, 5))], START, END) == (2.0, 5.0, 0)
    # 2 -> 0: a new JobSet of the name, one restart of the loop; the count carries over.
    inc, total, recreated = gauge_count([gauge((-40, 2), (-10, 0), (5, 1))], START, END)
    assert (inc, total, recreated) == (2.0, 4.0, 1)
    # The same fall before the window is history, not a restart inside it.
    assert gauge_count([gauge((-50, 2), (-40, 0), (5, 0))], START, END) == (0.0, 3.0, 0)


def test_gauge_series_of_two_uids_follow_each_other() -> None:
    old = gauge((-60, 1), (-20, 1), uid="a")
    new = gauge((-15, 0), (20, 0), uid="b")
    assert gauge_count([new, old], START, END) == (1.0, 2.0, 1)
    # Two scrapes of one JobSet (same values, no uid) are one timeline, not a recreation.
    twice = [gauge((-40, 1), (10, 2), instance="x"), gauge((-40, 1), (10, 2), instance="y")]
    assert gauge_count(twice, START, END) == (1.0, 2.0, 0)


def seen(
    m: float, attempt: int, uid: str | None = "u", job: str | None = None
) -> RestartAttemptSeen:
    return RestartAttemptSeen("js", "ml", at(m), attempt, uid, job)


def test_a_label_change_counts_only_between_sightings_inside_the_window() -> None:
    # 3 seen before the window, 4 first seen inside it: the restart may be before it.
    inc, total, recreated, values = attempt_count(
        [seen(-40, 3), seen(-20, 4), seen(-5, 5), seen(10, 6)], START, END
    )
    assert (inc, total, recreated) == (2.0, 6.0, 0)
    assert values == "restart-attempt 3/4/5/6"


def test_per_job_attempts_and_a_new_uid_count() -> None:
    per_job = [seen(-40, 0, job="w-2"), seen(-20, 1, job="w-2"), seen(5, 2, job="w-2")]
    assert attempt_count(per_job, START, END)[:3] == (1.0, 2.0, 0)
    recreated = [seen(-40, 1, "old"), seen(-25, 1, "old"), seen(-20, 0, "new")]
    assert attempt_count(recreated, START, END)[:3] == (1.0, 2.0, 1)


# --- the scenarios ---------------------------------------------------------------------------


def test_restart_job_with_the_gauge_flat_is_a_loop(capsys: pytest.CaptureFixture[str]) -> None:
    out = diagnose(capsys, [*context_args(RESTART_JOB), "--telemetry", str(RESTART_JOB)])
    assert out["restart_loop"] is True
    assert (out["restart_increase"], out["restart_total"]) == (2, 3)
    findings = step1(out)
    assert findings[0].startswith("restart Events counted 2 restart(s) of olmo-13b-pretrain")
    assert "restart-attempt label agrees: 2 restart(s)." in findings
    gauge_line = next(f for f in findings if f.startswith("kube_jobset_restarts differs"))
    assert "RestartJob actions" in gauge_line
    assert any("jobRestarts 3" in f for f in findings)
    assert out["root_cause"] == "out_of_memory"


def test_without_events_the_flat_gauge_does_not_deny_per_job_restarts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """No logs: the labels of the pods alive now place nothing, the gauge cannot see
    RestartJob, and jobsets.json says there were three: step 1 claims no absence."""
    directory = copy_without(RESTART_JOB, tmp_path, "logs.json")
    out = diagnose(capsys, [*context_args(RESTART_JOB), "--telemetry", str(directory)])
    assert out["restart_loop"] is None
    findings = step1(out)
    assert any("3 per-Job or in-place restart(s)" in f for f in findings)
    assert any(f.startswith("Restart sources not read") and "restart Events" in f for f in findings)
    assert out["root_cause"] != "no_restart_loop"


def test_a_jobset_recreated_after_its_ttl_continues_the_loop(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = diagnose(capsys, [*context_args(RECREATED), "--telemetry", str(RECREATED)])
    assert out["restart_loop"] is True
    # One recreation inside the window; lifetime: the old JobSet's 1, the recreation, 0.
    assert (out["restart_increase"], out["restart_total"]) == (1, 2)
    assert "a new JobSet of the same name" in step1(out)[0]
    assert "JobSet status, restart-attempt label agree: 1 restart(s)." in step1(out)
    assert out["root_cause"] == "application"


def test_recreated_jobset_without_the_gauge_from_its_object_and_labels(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    directory = copy_without(RECREATED, tmp_path, "metrics.om")
    out = diagnose(capsys, [*context_args(RECREATED), "--telemetry", str(directory)])
    assert out["restart_loop"] is True and out["restart_increase"] == 1
    assert step1(out)[0].startswith("JobSet status counted 1 restart(s)")
    assert "recreated inside the window" in step1(out)[0]
    assert out["steps"][0]["status"] != "unavailable"
    assert any("JobSet status only" in m for m in out["missing_evidence"])


def test_kube_pod_labels_restart_attempts_count(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """kube-state-metrics with the JobSet labels allow-listed, and a flat gauge."""
    base = int(T.timestamp())
    lines = []
    for m in range(-60, 31, 5):
        lines.append(f'kube_jobset_restarts{{jobset_name="js",namespace="ml"}} 0 {base + m * 60}')
        attempt = 0 if m < -10 else 1 if m < 10 else 2
        lines.append(
            'kube_pod_labels{namespace="ml",pod="js-w-0-0-abcde",'
            'label_jobset_sigs_k8s_io_jobset_name="js",'
            f'label_jobset_sigs_k8s_io_restart_attempt="{attempt}"}} 1 {base + m * 60}'
        )
    (tmp_path / "metrics.om").write_text("\n".join(lines) + "\n# EOF\n")
    argv = [
        "--cluster",
        "c",
        "--namespace",
        "ml",
        "--workload",
        "js",
        "--issue-time",
        "2026-05-20T08:00:00Z",
        "--telemetry",
        str(tmp_path),
    ]
    out = diagnose(capsys, argv)
    assert out["restart_loop"] is True and out["restart_increase"] == 2
    assert "on kube_pod_labels" in step1(out)[0]


def test_kubeflow_hint_names_the_series_the_source_had(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    base = int(T.timestamp())
    (tmp_path / "metrics.om").write_text(
        "".join(
            f'training_operator_jobs_restarted_total{{job_namespace="other",namespace="kubeflow",'
            f'framework="pytorch"}} 3 {base + m * 60}\n'
            for m in range(-40, 31, 10)
        )
        + "# EOF\n"
    )
    argv = [
        "--cluster",
        "c",
        "--namespace",
        "ml",
        "--workload",
        "bert",
        "--workload-kind",
        "pytorchjob",
        "--issue-time",
        "2026-05-20T08:00:00Z",
        "--telemetry",
        str(tmp_path),
    ]
    out = diagnose(capsys, argv)
    hint = next(f for f in step1(out) if f.startswith("No data"))
    assert "job_namespace=other" in hint and "namespace=kubeflow" in hint
    assert "/metrics endpoint scraped" not in hint


def test_kubeflow_hint_says_the_counter_is_absent(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    base = int(T.timestamp())
    (tmp_path / "metrics.om").write_text(
        f'kube_jobset_restarts{{jobset_name="x",namespace="ml"}} 0 {base}\n# EOF\n'
    )
    argv = [
        "--cluster",
        "c",
        "--namespace",
        "ml",
        "--workload",
        "bert",
        "--workload-kind",
        "tfjob",
        "--issue-time",
        "2026-05-20T08:00:00Z",
        "--telemetry",
        str(tmp_path),
    ]
    hint = next(f for f in step1(diagnose(capsys, argv)) if f.startswith("No data"))
    assert "gave no training_operator_jobs_restarted_total series" in hint
    assert "kube_jobset_restarts{namespace=ml, jobset_name=x}" in hint


def test_jobsets_json_that_is_not_json_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "jobsets.json").write_text("{not json")
    argv = [
        "diagnose",
        "--cluster",
        "c",
        "--workload",
        "js",
        "--issue-time",
        "2026-05-20T08:00:00Z",
        "--telemetry",
        str(tmp_path),
    ]
    assert main(argv) == 2
    assert "jobsets.json" in capsys.readouterr().err


# --- the live reader -------------------------------------------------------------------------


def served_jobsets() -> list[dict[str, Any]]:
    objects = json.loads((RECREATED / "jobsets.json").read_text())["items"]
    other = json.loads(json.dumps(objects[0]))
    other["metadata"]["namespace"] = "elsewhere"
    return [*objects, other]


def kube_reader(server: KubernetesServer, tmp_path: Path, **kw: Any) -> KubernetesReader:
    config = write_kubeconfig(tmp_path / "kubeconfig", server.url, token="t")
    return KubernetesReader.from_kubeconfig(config, timeout=2, **kw)


def test_live_reader_lists_jobsets_of_the_namespace_in_pages(tmp_path: Path) -> None:
    with KubernetesServer([], [], token="t") as kube:
        kube.jobsets = served_jobsets() * 2
        found = kube_reader(kube, tmp_path, page_limit=1).jobsets("finetune")
        assert found is not None and [j.namespace for j in found] == ["finetune", "finetune"]
        assert found[0].created_at is not None and found[0].restarts == 0
        paths = {r.path for r in kube.requests}
        assert paths == {"/apis/jobset.x-k8s.io/v1alpha2/namespaces/finetune/jobsets"}
        assert [r.param("continue") for r in kube.requests] == [None, "1"]
        everywhere = kube_reader(kube, tmp_path).jobsets(None)
        assert everywhere is not None and len(everywhere) == 4
        assert kube.requests[-1].path == "/apis/jobset.x-k8s.io/v1alpha2/jobsets"


def test_live_reader_without_the_jobset_crd_and_without_rights(tmp_path: Path) -> None:
    with KubernetesServer([], [], token="t") as kube:
        assert kube_reader(kube, tmp_path).jobsets("ml") is None  # 404: not served
        kube.jobsets = []
        kube.inject(Fault.FORBIDDEN, times=1)
        with pytest.raises(SourceUnavailable, match="HTTP 403 listing jobsets in ml"):
            kube_reader(kube, tmp_path).jobsets("ml")


def test_gather_reads_jobsets_where_it_reads_pods(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Everything but jobsets.json from files; the JobSet from the live API counts the same."""
    directory = copy_without(RECREATED, tmp_path, "jobsets.json", "pods.json", "metrics.om")
    pods = json.loads((RECREATED / "pods.json").read_text())["items"]
    spec = json.loads((RECREATED / "scenario.json").read_text())["context"]
    with KubernetesServer([], pods, token="t") as kube:
        kube.jobsets = served_jobsets()
        argv = [
            *context_args(RECREATED),
            "--telemetry",
            str(directory),
            "--kubeconfig",
            str(write_kubeconfig(tmp_path / "kc", kube.url, token="t")),
            "--offline",
        ]
        out = diagnose(capsys, argv)
    assert out["restart_loop"] is True and out["restart_increase"] == 1
    first = step1(out)[0]
    assert first.startswith("JobSet status counted 1 restart(s)")
    assert spec["workload"] in first


def test_load_directory_keeps_log_attempts_and_jobsets() -> None:
    ev = load_directory(RECREATED)
    assert ev.jobsets is not None and len(ev.jobsets) == 1
    assert ev.sources[EvidenceKind.JOBSETS].source == "file:jobsets.json"
    uids = {a.jobset_uid for a in ev.log_restart_attempts or ()}
    assert len(uids) == 2  # the first JobSet and the one recreated under its name
