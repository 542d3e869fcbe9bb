"""`loopbreaker diagnose` and `loopbreaker queries` as a user runs them."""

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
SCENARIOS = sorted((ROOT / "examples" / "telemetry").glob("*/scenario.json"))
CLI = Path(sys.executable).with_name("loopbreaker")


def context_args(spec: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for key, value in spec["context"].items():
        if value:
            args += [f"--{key.replace('_', '-')}", value]
    return args


def minimal_args(telemetry: Path) -> list[str]:
    """diagnose with the three required flags on a telemetry directory, as JSON."""
    return [
        "diagnose",
        "--cluster",
        "c",
        "--workload",
        "w",
        "--issue-time",
        "2026-05-20T08:00:00Z",
        "--telemetry",
        str(telemetry),
        "--format",
        "json",
    ]


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    assert main(argv) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_bundled_scenarios_cover_every_root_cause() -> None:
    causes = {json.loads(p.read_text())["expect"]["root_cause"] for p in SCENARIOS}
    assert causes >= {
        "spot_preemption",
        "faulty_host",
        "host_error",
        "maintenance",
        "capacity",
        "application",
        "no_restart_loop",
    }


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[p.parent.name for p in SCENARIOS])
def test_scenario_verdict(scenario: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = json.loads(scenario.read_text())
    out = run_json(
        capsys,
        ["diagnose", *context_args(spec), "--telemetry", str(scenario.parent), "--format", "json"],
    )
    expect = spec["expect"]
    assert out["restart_loop"] == expect["restart_loop"]
    assert out["root_cause"] == expect["root_cause"]
    assert out["remediation"]["path"] == expect["remediation_path"]
    got_hosts = [
        {"host": h["host"], "nodes": sorted(h["nodes"]), "failures": h["failures"]}
        for h in out["suspect_hosts"]
    ]
    want_hosts = [
        {"host": h["host"], "nodes": sorted(h["nodes"]), "failures": h["failures"]}
        for h in expect["suspect_hosts"]
    ]
    assert got_hosts == want_hosts
    assert (out["ticket_draft"] is not None) == (expect["remediation_path"] == "isolate_host")
    statuses = [s["status"] for s in out["steps"]]
    # Evidence the scenario's source cannot hold (kube-prometheus-stack: no interruptions).
    unavailable = expect.get("unavailable", [])
    assert [m.split(":")[0] for m in out["missing_evidence"]] == unavailable
    if expect["restart_loop"]:
        step2 = "partial" if "interruptions" in unavailable else "done"
        assert statuses == ["done", step2, "done", "done"]
    else:
        assert statuses == ["done", "skipped", "skipped", "skipped"]


def test_kubeflow_scenarios_name_their_workload_kind() -> None:
    kinds = {
        p.parent.name: json.loads(p.read_text())["context"].get("workload_kind", "jobset")
        for p in SCENARIOS
    }
    assert kinds["tfjob-faulty-host"] == "tfjob"
    assert kinds["pytorchjob-nccl-timeout"] == "pytorchjob"
    assert kinds["trainjob-faulty-host"] == "trainjob"
    assert set(kinds.values()) == {"jobset", "tfjob", "pytorchjob", "trainjob"}


def _scenario(name: str) -> tuple[dict[str, Any], Path]:
    directory = ROOT / "examples" / "telemetry" / name
    spec: dict[str, Any] = json.loads((directory / "scenario.json").read_text())
    return spec, directory


@pytest.mark.parametrize(
    ("name", "counter_rise", "restarts"),
    [("tfjob-faulty-host", 2, 2), ("pytorchjob-nccl-timeout", 6, 3)],
)
def test_kubeflow_restarts_are_the_jobs_own_events(
    name: str, counter_rise: int, restarts: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """The namespace counter names no job; the job's <Kind>Restarting events count."""
    spec, directory = _scenario(name)
    out = run_json(
        capsys, ["diagnose", *context_args(spec), "--telemetry", str(directory), "--format", "json"]
    )
    assert out["restart_loop"] is True
    assert out["restart_increase"] == restarts
    step1 = [f["message"] for f in out["evidence"] if f["step"] == 1]
    assert any(
        "training_operator_jobs_restarted_total" in m and f"rose by {counter_rise} " in m
        for m in step1
    ), step1
    assert any(f"{restarts} restart(s) of " in m for m in step1), step1
    queries = "\n".join(q["text"] for q in out["steps"][0]["queries"])
    assert "kube_jobset_restarts" not in queries
    assert f'job_namespace="{spec["context"]["namespace"]}"' in queries


def test_pytorchjob_coordinator_is_the_master_not_worker_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec, directory = _scenario("pytorchjob-nccl-timeout")
    out = run_json(
        capsys, ["diagnose", *context_args(spec), "--telemetry", str(directory), "--format", "json"]
    )
    step4 = [f for f in out["evidence"] if f["step"] == 4 and f["cause"] == "application"]
    coordinator = [f["message"] for f in step4 if f["message"].startswith("The coordinator")]
    assert len(coordinator) == 1 and "bert-ddp-master-0" in coordinator[0]
    assert any("bert-ddp-worker-0" in f["message"] for f in step4 if f not in coordinator)


def test_a_tfjob_asked_for_as_a_jobset_gets_no_verdict_and_names_what_was_seen(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec, directory = _scenario("tfjob-faulty-host")
    as_jobset = {**spec, "context": {**spec["context"], "workload_kind": "jobset"}}
    args = ["diagnose", *context_args(as_jobset), "--telemetry", str(directory)]
    assert main([*args, "--format", "json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    name = spec["context"]["workload"]
    assert f"no JobSet {name} in cluster {spec['context']['cluster']}" in captured.err
    assert f"seen: TFJob {spec['context']['namespace']}/{name}" in captured.err


def test_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    scenario = next(p for p in SCENARIOS if "faulty" in p.parent.name)
    spec = json.loads(scenario.read_text())
    out = run_json(
        capsys,
        ["diagnose", *context_args(spec), "--telemetry", str(scenario.parent), "--format", "json"],
    )
    assert set(out) >= {
        "context",
        "restart_loop",
        "root_cause",
        "remediation",
        "suspect_hosts",
        "steps",
        "evidence",
        "ticket_draft",
    }
    assert set(out["context"]) >= {"start_time", "end_time"}
    assert set(out["remediation"]) >= {"path", "risk", "requires_approval", "actions"}
    assert out["remediation"]["requires_approval"] is True
    for step in out["steps"]:
        assert set(step) >= {"number", "title", "status", "findings", "queries"}
        for query in step["queries"]:
            assert query["language"] in ("promql", "lql", "mql")
            assert query["text"]
    ticket = out["ticket_draft"]
    assert ticket["physical_host"] == out["suspect_hosts"][0]["host"]
    assert ticket["excerpts"] and all(len(e) <= 300 for e in ticket["excerpts"])


def test_window_is_issue_time_plus_minus_thirty_minutes(capsys: pytest.CaptureFixture[str]) -> None:
    directory = ROOT / "examples" / "telemetry" / "faulty-host"
    spec = json.loads((directory / "scenario.json").read_text())
    args = [*context_args(spec), "--issue-time", "2026-05-20T10:15:00+02:00"]
    out = run_json(capsys, ["diagnose", *args, "--telemetry", str(directory), "--format", "json"])
    assert out["context"]["start_time"] == "2026-05-20T07:45:00Z"
    assert out["context"]["end_time"] == "2026-05-20T08:45:00Z"


def test_missing_flags_are_all_named_and_nothing_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--project", "p", "--format", "json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "--cluster" in captured.err
    assert "--workload" in captured.err
    assert "--issue-time" in captured.err
    assert captured.err.count("\n") == 1


@pytest.mark.parametrize(
    "when", ["10 minutes ago", "now", "yesterday", "2026-05-20 08:00", "2026-05-20T08:00:00+0530"]
)
def test_relative_or_vague_time_is_refused(when: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--cluster", "c", "--workload", "w", "--issue-time", when]) == 2
    err = capsys.readouterr().err
    assert "--issue-time" in err
    assert "RFC 3339" in err


def test_missing_files_make_steps_unavailable_but_diagnosis_continues(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = next(p for p in SCENARIOS if "preemption" in p.parent.name)
    spec = json.loads(scenario.read_text())
    shutil.copy(scenario.parent / "logs.json", tmp_path / "logs.json")
    out = run_json(
        capsys, ["diagnose", *context_args(spec), "--telemetry", str(tmp_path), "--format", "json"]
    )
    step1 = out["steps"][0]
    # The logs could show restart Events, the gauge is missing: read in part.
    assert step1["status"] == "partial"
    assert step1["sources"] == ["file:logs.json"]
    assert "metrics.om not found" in step1["reason"]
    assert any("kube_jobset_restarts" in q["text"] for q in step1["queries"])
    assert out["root_cause"] == "spot_preemption"  # from the log signals alone
    assert out["partial"] is True


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ({"metrics.om": 'kube_jobset_restarts{jobset_name="w"} 1\n# EOF\n'}, "metrics.om line 1"),
        ({"metrics.om": 'kube_jobset_restarts{jobset_name="w"} 1 1716190000\n'}, "# EOF"),
        ({"metrics.om": "kube_jobset_restarts{jobset_name=w} 1 1716190000\n# EOF\n"}, "labels"),
        ({"logs.json": '[{"insertId": "a",'}, "logs.json[0]: not valid JSON"),
        ({"metrics.om": 'kube_jobset_restarts{jobset_name="w"} 1 1e20\n# EOF\n'}, "out of range"),
        ({"pods.json": '"hello"'}, "pods.json: expected the output of 'kubectl get pods"),
        ({"nodes.json": "{oops"}, "nodes.json: invalid JSON"),
    ],
)
def test_unreadable_telemetry_file_is_bad_input(
    files: dict[str, str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    code = main(minimal_args(tmp_path))
    assert code == 2
    assert words in capsys.readouterr().err


def test_bad_log_entries_are_skipped_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, directory = _scenario("faulty-host")
    shutil.copytree(directory, tmp_path / "t")
    (tmp_path / "t" / "extra.jsonl").write_text('{"nope": 1}\nnot json\n')
    args = ["diagnose", *context_args(spec), "--telemetry", str(tmp_path / "t")]
    out = run_json(capsys, [*args, "--format", "json"])
    assert any("2 log entr" in f["message"] for f in out["evidence"])
    assert out["root_cause"] == spec["expect"]["root_cause"]


def test_log_files_with_only_unreadable_entries_give_no_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "extra.jsonl").write_text('{"nope": 1}\nnot json\n')
    assert main(minimal_args(tmp_path)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no source yielded any data" in captured.err


def test_telemetry_dir_must_exist(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(minimal_args(Path("/nonexistent/dir")))
    assert code == 2
    assert "/nonexistent/dir" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_human_formats_lead_with_the_verdict(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = next(p for p in SCENARIOS if "faulty" in p.parent.name)
    spec = json.loads(scenario.read_text())
    assert (
        main(
            ["diagnose", *context_args(spec), "--telemetry", str(scenario.parent), "--format", fmt]
        )
        == 0
    )
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert "faulty_host" in first
    assert "Step 4" in out
    if fmt == "markdown":
        assert "Physical host ID" in out


def test_queries_command_fills_known_values_and_keeps_placeholders(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        main(
            [
                "queries",
                "--cluster",
                "prod",
                "--issue-time",
                "2026-05-20T08:00:00Z",
                "--format",
                "json",
            ]
        )
        == 0
    )
    queries = json.loads(capsys.readouterr().out)
    texts = "\n".join(q["text"] for q in queries)
    assert 'cluster="prod"' in texts
    assert "{workload_name}" in texts
    assert '"2026-05-20T07:30:00Z"' in texts
    assert all(not q["deprecated"] for q in queries)
    assert {q["language"] for q in queries} == {"promql", "lql"}


@pytest.mark.parametrize(
    ("kind", "api", "framework"),
    [("tfjob", "TFJob", "tensorflow"), ("pytorchjob", "PyTorchJob", "pytorch")],
)
def test_queries_for_a_kubeflow_job_read_the_operator_and_its_replicas(
    capsys: pytest.CaptureFixture[str], kind: str, api: str, framework: str
) -> None:
    argv = ["queries", "--cluster", "c", "--namespace", "ml", "--workload", "resnet"]
    assert main([*argv, "--workload-kind", kind, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    queries = {q["id"]: q for q in listed if q["vocabulary"] != "kube-prometheus-stack"}
    kps = {q["id"]: q for q in listed if q["vocabulary"] == "kube-prometheus-stack"}
    assert queries["restarts"]["text"] == (
        "training_operator_jobs_restarted_total"
        f'{{cluster="c", job_namespace="ml", framework="{framework}"}}'
    )
    # One Prometheus per cluster: no cluster label; the job's namespace is job_namespace.
    assert kps["restarts"]["text"] == (
        f'training_operator_jobs_restarted_total{{job_namespace="ml", framework="{framework}"}}'
    )
    assert f'jsonPayload.involvedObject.kind="{api}"' in queries["restart_events"]["text"]
    assert f'"{api}Restarting" OR "JobRestarting"' in queries["restart_events"]["text"]
    assert "training_kubeflow_org/job-name" in queries["coordinator_logs"]["text"]
    assert not any("jobset" in q["text"] for q in queries.values())
    assert "restarts_changes" not in queries  # a JobSet-only query
    assert main([*argv, "--format", "json"]) == 0
    jobset = {
        q["id"]: q
        for q in json.loads(capsys.readouterr().out)
        if q["vocabulary"] != "kube-prometheus-stack"
    }
    assert jobset["restarts"]["text"].startswith("kube_jobset_restarts{")
    assert "restart_events" not in jobset


def test_an_unknown_workload_kind_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["queries", "--workload-kind", "mpijob"])
    assert exc.value.code == 2
    assert "--workload-kind" in capsys.readouterr().err


def test_queries_can_include_deprecated_mql(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["queries", "--include-deprecated"]) == 0
    out = capsys.readouterr().out
    assert "deprecated MQL" in out
    assert "fetch k8s_node" in out


def test_console_script_is_installed() -> None:
    result = subprocess.run([str(CLI), "diagnose"], capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "--cluster, --workload, --issue-time" in result.stderr


def _copy_scenario(name: str, dest: Path) -> dict[str, Any]:
    source = ROOT / "examples" / "telemetry" / name
    shutil.copytree(source, dest, dirs_exist_ok=True)
    spec: dict[str, Any] = json.loads((source / "scenario.json").read_text())
    return spec


def test_the_same_entry_in_two_files_counts_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _copy_scenario("maintenance", tmp_path)
    (tmp_path / "metrics.om").unlink()
    entries = json.loads((tmp_path / "logs.json").read_text())
    sink = tmp_path / "sink" / "2026" / "06" / "08"
    sink.mkdir(parents=True)
    # Cloud Storage sink layout: newline-delimited LogEntries in *.json objects.
    (sink / "03:00:00_03:59:59_S0.json").write_text("\n".join(json.dumps(e) for e in entries))
    args = ["diagnose", *context_args(spec), "--telemetry", str(tmp_path), "--format", "json"]
    twice = run_json(capsys, args)
    (tmp_path / "logs.json").unlink()
    once = run_json(capsys, args)
    assert twice["root_cause"] == once["root_cause"] == "maintenance"

    def facts(out: dict[str, Any]) -> list[tuple[str, str]]:
        return [(f["message"], f["cause"]) for f in out["evidence"]]

    assert facts(twice) == facts(once)
    assert "sink/2026/06/08/03:00:00_03:59:59_S0.json" in once["steps"][1]["sources"][0]


def test_pending_pods_of_a_sibling_jobset_are_not_ours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _copy_scenario("unknown", tmp_path)
    workload = spec["context"]["workload"]
    pods = json.loads((tmp_path / "pods.json").read_text())
    sibling = json.loads(json.dumps(pods["items"][0]))
    sibling["metadata"]["name"] = f"{workload}-eval-workers-0-0-q1w2e"
    sibling["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] = f"{workload}-eval"
    sibling["spec"].pop("nodeName", None)
    sibling["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
            }
        ],
    }
    pods["items"].append(sibling)
    (tmp_path / "pods.json").write_text(json.dumps(pods))
    out = run_json(
        capsys, ["diagnose", *context_args(spec), "--telemetry", str(tmp_path), "--format", "json"]
    )
    assert out["root_cause"] == "unknown"
    # The same pod labelled as ours is capacity.
    sibling["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] = workload
    (tmp_path / "pods.json").write_text(json.dumps(pods))
    out = run_json(
        capsys, ["diagnose", *context_args(spec), "--telemetry", str(tmp_path), "--format", "json"]
    )
    assert out["root_cause"] == "capacity"


def test_an_empty_directory_gives_no_verdict_and_names_every_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(minimal_args(tmp_path)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    for name in ("logs.json", "metrics.om", "nodes.json", "pods.json"):
        assert f"{name} not found" in captured.err or f"no {name}" in captured.err
    assert captured.err.count("\n") == 1


def test_output_into_a_closed_pipe_is_quiet() -> None:
    result = subprocess.run(
        f"{CLI} queries --include-deprecated --format json | head -c 10",
        shell=True,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "Traceback" not in result.stderr


def _tfjob(name: str, restarting_at: str | None) -> dict[str, Any]:
    conditions = [
        {
            "type": "Created",
            "status": "True",
            "reason": "TFJobCreated",
            "lastTransitionTime": "2026-10-06T11:02:03Z",
        },
        {
            "type": "Running",
            "status": "False",
            "reason": "TFJobRunning",
            "lastTransitionTime": "2026-10-06T13:54:21Z",
        },
    ]
    if restarting_at:
        conditions.append(
            {
                "type": "Restarting",
                "status": "True",
                "reason": "TFJobRestarting",
                "message": f"TFJob ml-jobs/{name} is restarting because 1 Worker replica failed.",
                "lastTransitionTime": restarting_at,
            }
        )
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": "ml-jobs"},
        "status": {"conditions": conditions},
    }


def test_a_jobs_restarting_condition_is_a_restart_and_one_with_its_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """jobs.json (kubectl get tfjobs,pytorchjobs -A -o json): the Restarting condition of
    the last restart; with the Event of that restart it is still one restart."""
    spec, directory = _scenario("tfjob-faulty-host")
    copy = tmp_path / "telemetry"
    shutil.copytree(directory, copy)
    jobs = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            _tfjob("resnet50-ps", "2026-10-06T13:54:20Z"),
            _tfjob("wide-deep-ctr", None),
        ],
    }
    (copy / "jobs.json").write_text(json.dumps(jobs))
    args = ["diagnose", *context_args(spec), "--telemetry", str(copy), "--format", "json"]
    assert run_json(capsys, args)["restart_increase"] == 2  # as without jobs.json
    # Without the logs, the condition alone says the job restarts.
    (copy / "logs.json").unlink()
    out = run_json(capsys, args)
    assert out["restart_loop"] is True and out["restart_increase"] == 1
    assert any("TFJobRestarting" in f["message"] for f in out["evidence"] if f["step"] == 1)
