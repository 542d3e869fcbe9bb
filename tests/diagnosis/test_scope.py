"""A verdict rests only on evidence of its context; no evidence, no verdict.

Scenarios are the bundled examples, copied and rewritten in the documented offline
format: a second cluster, namespace or kind beside the real failure.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopbreaker.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "telemetry"


def spec_of(name: str) -> dict[str, Any]:
    spec: dict[str, Any] = json.loads((EXAMPLES / name / "scenario.json").read_text())
    return spec


def args_of(context: dict[str, Any], **override: str | None) -> list[str]:
    merged = {**context, **override}
    out: list[str] = []
    for key, value in merged.items():
        if value:
            out += [f"--{key.replace('_', '-')}", value]
    return out


def diagnose(
    capsys: pytest.CaptureFixture[str], directory: Path, argv: list[str]
) -> tuple[int, str, str]:
    code = main(["diagnose", *argv, "--telemetry", str(directory), "--format", "json"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def load(path: Path) -> Any:
    return json.loads(path.read_text())


def dump(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value))


def metrics_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line and line != "# EOF"]


def write_metrics(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join([*lines, "# EOF"]) + "\n")


# --- typos ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"cluster": "tpu-cluster-prd"}, "no cluster tpu-cluster-prd in the evidence; seen: "),
        (
            {"workload": "llama3-70b-trainin"},
            "no workload llama3-70b-trainin in cluster tpu-cluster-prod in namespace default; "
            "seen: JobSet default/llama3-70b-training",
        ),
    ],
)
def test_a_typo_gets_no_verdict_and_names_what_was_seen(
    capsys: pytest.CaptureFixture[str], override: dict[str, str], expected: str
) -> None:
    spec = spec_of("faulty-host")
    code, out, err = diagnose(
        capsys, EXAMPLES / "faulty-host", args_of(spec["context"], **override)
    )
    assert code == 2
    assert out == ""
    assert expected in err
    assert err.count("\n") == 1


def test_an_issue_time_hours_before_the_data_gets_no_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = spec_of("faulty-host")
    argv = args_of(spec["context"], issue_time="2026-05-20T02:00:00Z")
    code, out, err = diagnose(capsys, EXAMPLES / "faulty-host", argv)
    assert (code, out) == (2, "")
    assert "no evidence inside the window 2026-05-20T01:30:00Z to 2026-05-20T02:30:00Z" in err
    assert "Traceback" not in err


def test_no_source_at_all_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["diagnose", "--cluster", "c", "--workload", "w", "--issue-time", "2026-05-20T08:00:00Z"]
    )
    captured = capsys.readouterr()
    assert (code, captured.out) == (2, "")
    assert "no evidence source" in captured.err


# --- two clusters in one directory -------------------------------------------------------


def two_clusters(tmp_path: Path) -> Path:
    """faulty-host as is, plus tpu-cluster-stg: the same JobSet name, healthy nodes of its
    own, and a flat restart counter."""
    src, out = EXAMPLES / "faulty-host", tmp_path / "two-clusters"
    shutil.copytree(src, out)
    lines = metrics_lines(src / "metrics.om")
    twin = []
    for line in lines:
        if line.startswith("kube_jobset_restarts{"):
            line = line.replace('cluster="tpu-cluster-prod"', 'cluster="tpu-cluster-stg"')
            twin.append(re.sub(r"} \d+(\.\d+)? ", "} 6 ", line))
    write_metrics(out / "metrics.om", lines + twin)
    nodes = load(src / "nodes.json")
    stg = copy.deepcopy(nodes["items"])
    for node in stg:
        node["metadata"]["name"] = node["metadata"]["name"].replace(
            "tpu-cluster-prod", "tpu-cluster-stg"
        )
        for cond in node.get("status", {}).get("conditions", []):
            if cond.get("type") == "Ready":
                cond["status"] = "True"
    nodes["items"] += stg
    dump(out / "nodes.json", nodes)
    return out


def test_the_failing_cluster_is_diagnosed_with_its_own_nodes_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = spec_of("faulty-host")
    code, out, _ = diagnose(capsys, two_clusters(tmp_path), args_of(spec["context"]))
    assert code == 0
    result = json.loads(out)
    assert result["root_cause"] == "faulty_host"
    assert result["suspect_hosts"][0]["host"] == spec["expect"]["suspect_hosts"][0]["host"]
    assert "tpu-cluster-stg" not in out


def test_the_healthy_cluster_is_not_blamed_for_the_other_ones_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = spec_of("faulty-host")
    argv = args_of(spec["context"], cluster="tpu-cluster-stg")
    code, out, _ = diagnose(capsys, two_clusters(tmp_path), argv)
    assert code == 0
    result = json.loads(out)
    assert result["root_cause"] == "no_restart_loop"
    assert "tpu-cluster-prod" not in out
    assert result["suspect_hosts"] == []


# --- one name in two namespaces ------------------------------------------------------------


def two_namespaces(tmp_path: Path) -> Path:
    """capacity's unschedulable JobSet moved to nlp-dev, and a running JobSet of the same
    name in ml, with the same restart counter."""
    src, out = EXAMPLES / "capacity", tmp_path / "two-namespaces"
    out.mkdir()
    text = {
        name: (src / name)
        .read_text()
        .replace('"namespace": "default"', '"namespace": "nlp-dev"')
        .replace('"namespace_name": "default"', '"namespace_name": "nlp-dev"')
        .replace('namespace="default"', 'namespace="nlp-dev"')
        .replace('namespace_name="default"', 'namespace_name="nlp-dev"')
        for name in ("logs.json", "pods.json", "metrics.om", "nodes.json")
    }
    for name, body in text.items():
        (out / name).write_text(body)
    lines = metrics_lines(out / "metrics.om")
    ml = [
        line.replace('namespace="nlp-dev"', 'namespace="ml"')
        for line in lines
        if line.startswith("kube_jobset_restarts{")
    ]
    write_metrics(out / "metrics.om", lines + ml)
    pods = load(out / "pods.json")
    running = copy.deepcopy(pods["items"][0])
    running["metadata"]["namespace"] = "ml"
    running["metadata"]["name"] = running["metadata"]["name"][:-5] + "mlrun"
    running["status"] = {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
    }
    running["spec"]["nodeName"] = load(out / "nodes.json")["items"][0]["metadata"]["name"]
    pods["items"].append(running)
    dump(out / "pods.json", pods)
    return out


def test_a_name_in_two_namespaces_needs_the_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = spec_of("capacity")
    code, out, err = diagnose(
        capsys, two_namespaces(tmp_path), args_of(spec["context"], namespace=None)
    )
    assert (code, out) == (2, "")
    assert "exists in namespaces ml, nlp-dev; pass --namespace" in err


def test_another_namespaces_pending_pods_do_not_make_a_capacity_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = spec_of("capacity")
    directory = two_namespaces(tmp_path)
    code, out, _ = diagnose(capsys, directory, args_of(spec["context"], namespace="ml"))
    assert code == 0
    result = json.loads(out)
    assert result["root_cause"] != "capacity"
    assert "nlp-dev" not in out
    step4 = [f["message"] for f in result["evidence"] if f["step"] == 4]
    assert any("Every pod of the workload was scheduled (1 pod(s) seen)" in m for m in step4)
    # And the failing namespace is still diagnosed as it was.
    code, out, _ = diagnose(capsys, directory, args_of(spec["context"], namespace="nlp-dev"))
    assert json.loads(out)["root_cause"] == "capacity"


def test_a_tfjobs_restart_events_of_another_namespace_are_not_ours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = spec_of("tfjob-faulty-host")
    src, out = EXAMPLES / "tfjob-faulty-host", tmp_path / "tfjob"
    shutil.copytree(src, out)
    lines = metrics_lines(src / "metrics.om")
    flat = [
        re.sub(
            r"} \d+(\.\d+)? ",
            "} 0 ",
            line.replace('job_namespace="ml-jobs"', 'job_namespace="ml-staging"'),
        )
        for line in lines
        if line.startswith("training_operator_jobs_restarted_total{")
    ]
    write_metrics(out / "metrics.om", lines + flat)
    pods = load(src / "pods.json")
    staged = copy.deepcopy(pods["items"][0])
    staged["metadata"]["namespace"] = "ml-staging"
    pods["items"].append(staged)
    dump(out / "pods.json", pods)
    argv = args_of(spec["context"], namespace="ml-staging")
    code, stdout, _ = diagnose(capsys, out, argv)
    assert code == 0
    result = json.loads(stdout)
    assert result["restart_loop"] is not True
    assert result["suspect_hosts"] == []
    assert "ml-jobs" not in stdout


# --- the kind ----------------------------------------------------------------------------


def test_a_pytorchjob_without_the_flag_is_detected(capsys: pytest.CaptureFixture[str]) -> None:
    spec = spec_of("pytorchjob-nccl-timeout")
    argv = args_of(spec["context"], workload_kind=None)
    code, out, _ = diagnose(capsys, EXAMPLES / "pytorchjob-nccl-timeout", argv)
    assert code == 0
    result = json.loads(out)
    assert result["context"]["workload_kind"] == "pytorchjob"
    assert result["root_cause"] == spec["expect"]["root_cause"]
    main(["diagnose", *argv, "--telemetry", str(EXAMPLES / "pytorchjob-nccl-timeout")])
    assert "(workload kind PyTorchJob detected from the evidence)" in capsys.readouterr().out


def test_two_kinds_of_one_name_need_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = spec_of("tfjob-faulty-host")
    out = tmp_path / "kinds"
    shutil.copytree(EXAMPLES / "tfjob-faulty-host", out)
    lines = metrics_lines(out / "metrics.om")
    name, ns, cluster = (spec["context"][k] for k in ("workload", "namespace", "cluster"))
    labels = f'cluster="{cluster}",namespace="{ns}",jobset_name="{name}"'
    lines.append(f"kube_jobset_restarts{{{labels}}} 1 1791288600")
    write_metrics(out / "metrics.om", lines)
    code, stdout, err = diagnose(capsys, out, args_of(spec["context"], workload_kind=None))
    assert (code, stdout) == (2, "")
    assert "JobSet and TFJob" in err and "--workload-kind" in err


# --- nothing the diagnosis says is out of context -----------------------------------------


def node_names(directory: Path) -> set[str]:
    return {n["metadata"]["name"] for n in load(directory / "nodes.json")["items"]}


@pytest.mark.parametrize("name", sorted(p.parent.name for p in EXAMPLES.glob("*/scenario.json")))
def test_every_bundled_scenario_still_gets_its_verdict(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = spec_of(name)
    code, out, _ = diagnose(capsys, EXAMPLES / name, args_of(spec["context"]))
    assert code == 0
    assert json.loads(out)["root_cause"] == spec["expect"]["root_cause"]


FILE_SHAPES = st.sampled_from(
    ["", "[]", "{}", "[{}]", "not json", '[{"timestamp": "x"}]', "\x00\x01", "[" * 50]
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    example=st.sampled_from(sorted(p.parent.name for p in EXAMPLES.glob("*/scenario.json"))),
    cluster=st.one_of(st.none(), st.text(min_size=1, max_size=20)),
    workload=st.one_of(st.none(), st.text(min_size=1, max_size=30)),
    namespace=st.one_of(st.none(), st.text(min_size=1, max_size=12)),
    kind=st.sampled_from([None, "jobset", "tfjob", "pytorchjob"]),
    shift_minutes=st.integers(min_value=-60 * 24 * 30, max_value=60 * 24 * 30),
    broken=st.one_of(
        st.none(),
        st.tuples(
            st.sampled_from(["logs.json", "metrics.om", "nodes.json", "pods.json", "extra.jsonl"]),
            FILE_SHAPES,
        ),
    ),
)
def test_no_context_time_or_file_shape_makes_diagnose_fail_unexpectedly(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    example: str,
    cluster: str | None,
    workload: str | None,
    namespace: str | None,
    kind: str | None,
    shift_minutes: int,
    broken: tuple[str, str] | None,
) -> None:
    from datetime import timedelta

    from loopbreaker.timeutil import format_rfc3339, parse_rfc3339

    spec = spec_of(example)
    directory = tmp_path_factory.mktemp("t")
    shutil.copytree(EXAMPLES / example, directory, dirs_exist_ok=True)
    if broken:
        (directory / broken[0]).write_text(broken[1], errors="surrogateescape")
    moment = parse_rfc3339(spec["context"]["issue_time"]) + timedelta(minutes=shift_minutes)
    context = {
        **spec["context"],
        "cluster": cluster or spec["context"]["cluster"],
        "workload": workload or spec["context"]["workload"],
        "namespace": namespace if namespace is not None else spec["context"].get("namespace"),
        "workload_kind": kind,
        "issue_time": format_rfc3339(moment),
    }
    argv = [a.replace("\x00", "") for a in args_of(context)]
    code = main(["diagnose", *argv, "--telemetry", str(directory), "--format", "json"])
    captured = capsys.readouterr()
    # 0: a diagnosis; 2: a clear refusal. 1 would be an unexpected error.
    assert code in (0, 2), captured.err
    assert "Traceback" not in captured.err
    if code == 2:
        assert captured.out == "" and captured.err.startswith(("loopbreaker: error:", "usage:"))
    else:
        result = json.loads(captured.out)
        others = (
            node_names(EXAMPLES / example)
            if context["cluster"] != spec["context"]["cluster"]
            else set()
        )
        assert not any(n in captured.out for n in others)
        assert result["context"]["cluster"] == context["cluster"]


# --- issue 20: the new kinds of evidence are scoped the same way ----------------------------


def test_oom_kills_of_another_cluster_or_namespace_do_not_make_unknown_an_oom(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``unknown`` plus kube-state-metrics OOMKilled series and a kernel oom-kill line of
    the same pod names, in another cluster and in another namespace."""
    src, out = EXAMPLES / "unknown", tmp_path / "unknown"
    shutil.copytree(src, out)
    spec = spec_of("unknown")
    ctx = spec["context"]
    pod = next(p for p in load(src / "pods.json")["items"])["metadata"]["name"]
    stamp = int(datetime.fromisoformat(ctx["issue_time"].replace("Z", "+00:00")).timestamp())
    lines = metrics_lines(src / "metrics.om")
    for cluster, namespace in ((ctx["cluster"], "other-team"), ("l4-prod-cluster", "default")):
        labels = (
            f'cluster="{cluster}",namespace="{namespace}",pod="{pod}",uid="u-{cluster}",'
            'container="trainer",reason="OOMKilled"'
        )
        lines += [
            f"kube_pod_container_status_terminated_reason{{{labels}}} 1 {stamp + 60 * m}"
            for m in range(-5, 3)
        ]
    write_metrics(out / "metrics.om", lines)
    logs = load(src / "logs.json")
    kernel = copy.deepcopy(next(e for e in logs if e["resource"]["type"] == "k8s_node"))
    kernel["resource"]["labels"]["cluster_name"] = "l4-prod-cluster"
    kernel["insertId"] = "oom-elsewhere"
    kernel.pop("jsonPayload", None)
    kernel["textPayload"] = (
        "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/kubepods/podu-l4,task=python3,pid=1"
    )
    dump(out / "logs.json", [kernel, *logs])
    code, text, _ = diagnose(capsys, out, args_of(ctx))
    assert code == 0
    result = json.loads(text)
    assert result["root_cause"] == "unknown"
    assert not any("OOM" in f["message"] and f["supports"] for f in result["evidence"])
    assert "l4-prod-cluster" not in text and "other-team" not in text


def test_scope_keeps_a_preemptor_of_another_namespace_and_nothing_else() -> None:
    from loopbreaker.diagnosis.scope import scope
    from loopbreaker.model import (
        Context,
        Evidence,
        PodInfo,
        Sample,
        Series,
        Signal,
        SignalKind,
    )
    from loopbreaker.timeutil import parse_rfc3339

    t = parse_rfc3339("2026-04-21T15:05:00Z")
    ctx = Context("c", "train", t, namespace="research")

    def info(namespace: str, pod: str, uid: str, cluster: str = "c") -> Series:
        labels = {"cluster": cluster, "namespace": namespace, "pod": pod, "uid": uid}
        return Series("kube_pod_info", {**labels, "priority_class": "x"}, (Sample(t, 1.0),))

    preempted = Signal(
        SignalKind.PRIORITY_PREEMPTED,
        t,
        cluster="c",
        namespace="research",
        pod="train-w-0-0-abcde",
        related_pod="serving/ranker-1",
        related_uid="uid-ranker-1",
    )
    ev = Evidence(
        signals=(preempted,),
        pods=(
            PodInfo("ranker-1", "serving", uid="uid-ranker-1"),
            PodInfo("ranker-2", "serving", uid="uid-ranker-2"),
            PodInfo("train-w-0-0-abcde", "research", workload="train"),
        ),
        pod_info=(
            info("serving", "ranker-1", "uid-ranker-1"),
            info("serving", "ranker-2", "uid-ranker-2"),
            info("serving", "ranker-1", "uid-ranker-1", cluster="other"),
            info("research", "train-w-0-0-abcde", "uid-train"),
        ),
        pod_reasons=(
            Series("kube_pod_status_reason", {"cluster": "c", "namespace": "serving"}, ()),
            Series("kube_pod_status_reason", {"cluster": "c", "namespace": "research"}, ()),
        ),
        memory=(
            Series("container_memory_working_set_bytes", {"cluster": "other"}, ()),
            Series("container_memory_working_set_bytes", {"cluster": "c"}, ()),
        ),
    )
    scoped = scope(ctx, ev)
    assert {p.name for p in scoped.pods or ()} == {"ranker-1", "train-w-0-0-abcde"}
    assert {(s.labels["cluster"], s.labels["pod"]) for s in scoped.pod_info or ()} == {
        ("c", "ranker-1"),
        ("c", "train-w-0-0-abcde"),
    }
    assert [s.labels["namespace"] for s in scoped.pod_reasons or ()] == ["research"]
    assert [s.labels["cluster"] for s in scoped.memory or ()] == ["c"]
    # Without the Preempted Event, the other namespace is out of scope again.
    quiet = scope(ctx, Evidence(signals=(), pods=ev.pods, pod_info=ev.pod_info))
    assert {p.name for p in quiet.pods or ()} == {"train-w-0-0-abcde"}
    assert {s.labels["pod"] for s in quiet.pod_info or ()} == {"train-w-0-0-abcde"}
