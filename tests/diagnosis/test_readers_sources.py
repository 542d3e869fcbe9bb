"""diagnosis.readers.sources: which source wins per kind of evidence, and degradation."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeClusterReader, FakeHostLookup, FakeLogReader, FakeMetricsReader
from fakeservers import Fault, KubernetesServer, ManagedPrometheusProxy, write_kubeconfig

from loopbreaker.cli.main import main
from loopbreaker.diagnosis.evidence import QueryBudget
from loopbreaker.diagnosis.readers import LogReadResult, QueryRejected, SourceUnreachable
from loopbreaker.diagnosis.readers.sources import (
    METRIC_KINDS,
    Mode,
    Origin,
    Readers,
    SourceOptions,
    gather,
    plan,
    resolve_hosts,
)
from loopbreaker.diagnosis.telemetry import load_directory
from loopbreaker.errors import ConfigError, SourceUnavailable
from loopbreaker.model import (
    Context,
    EvidenceKind,
    NodeInfo,
    PodInfo,
    Sample,
    Series,
    Signal,
    SignalKind,
)

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "examples" / "telemetry" / "faulty-host"
SPEC = json.loads((SCENARIO / "scenario.json").read_text())
T0 = datetime(2026, 5, 20, 8, 15, tzinfo=UTC)
CTX = Context("c", "w", T0, project="p", location="l", namespace="ns")
NO_PROJECT = Context("c", "w", T0)
RESTARTS = Series("kube_jobset_restarts", {"jobset_name": "w"}, (Sample(T0, 3.0),))


def copy_scenario(tmp_path: Path, *keep: str) -> Path:
    for name in keep:
        shutil.copy(SCENARIO / name, tmp_path / name)
    return tmp_path


# --- plan ------------------------------------------------------------------------------


def test_plan_explicit_wins_over_files(tmp_path: Path) -> None:
    files = load_directory(copy_scenario(tmp_path, "metrics.om", "logs.json", "nodes.json"))
    origins = plan(
        CTX,
        SourceOptions(prometheus_url="http://x", live_logs=Mode.ON, kubeconfig=Path("kc")),
        files,
    )
    assert {origins[k] for k in METRIC_KINDS} == {Origin.PROMETHEUS}
    assert origins[EvidenceKind.LOGS] is Origin.CLOUD_LOGGING
    assert origins[EvidenceKind.NODES] is Origin.KUBECONFIG


def test_plan_files_over_live_default(tmp_path: Path) -> None:
    files = load_directory(copy_scenario(tmp_path, "metrics.om", "logs.json", "nodes.json"))
    origins = plan(CTX, SourceOptions(), files)
    assert {origins[k] for k in METRIC_KINDS if k is not EvidenceKind.GPU_XIDS} == {Origin.FILE}
    # A metrics.om without DCGM's series: no GPU series, and no live query for them.
    assert origins[EvidenceKind.GPU_XIDS] is Origin.NONE
    assert origins[EvidenceKind.LOGS] is Origin.FILE
    assert origins[EvidenceKind.NODES] is Origin.FILE
    assert origins[EvidenceKind.PODS] is Origin.GKE  # pods.json missing: live default


def test_plan_live_defaults_need_context() -> None:
    origins = plan(NO_PROJECT, SourceOptions(), None)
    assert set(origins.values()) == {Origin.NONE}
    assert plan(CTX, SourceOptions().offline(), None)[EvidenceKind.LOGS] is Origin.NONE
    with pytest.raises(ConfigError, match="--project"):
        plan(NO_PROJECT, SourceOptions(live_logs=Mode.ON), None)
    with pytest.raises(ConfigError, match="--location"):
        plan(Context("c", "w", T0, project="p"), SourceOptions(live_kube=Mode.ON), None)


# --- gather with fakes -----------------------------------------------------------------


def test_everything_live() -> None:
    signal = Signal(SignalKind.NCCL_TIMEOUT, T0, node="n1")
    readers = Readers(
        metrics=FakeMetricsReader({"kube_jobset_restarts": (RESTARTS,)}),
        logs=FakeLogReader(LogReadResult((signal,), 1)),
        cluster=FakeClusterReader((NodeInfo("n1"),), (PodInfo("w-0", node="n1"),)),
        host_lookups=[FakeHostLookup({"n1": "host-1"})],
    )
    evidence = gather(CTX, SourceOptions(prometheus_url="http://prom"), readers=readers)
    assert evidence.restarts == (RESTARTS,)
    assert evidence.interruptions == ()
    assert evidence.signals == (signal,)
    assert evidence.nodes == (NodeInfo("n1", physical_host="host-1"),)
    assert evidence.pods == (PodInfo("w-0", node="n1"),)
    assert all(s.available for s in evidence.sources.values())
    assert evidence.sources[EvidenceKind.RESTARTS].source == "fake-prometheus"
    assert evidence.sources[EvidenceKind.NODES].reason == "1 host(s) from fake-hosts"
    assert readers.cluster.calls == ["nodes", "pods:ns"]  # type: ignore[union-attr]


def test_unreachable_metrics_source_is_asked_once() -> None:
    metrics = FakeMetricsReader(fail=[SourceUnreachable("gmp", "HTTP 403 permission denied")])
    evidence = gather(CTX, SourceOptions(prometheus_url="http://p"), readers=_quiet(metrics))
    assert len(metrics.selectors) == 1
    for kind in METRIC_KINDS:
        if kind is EvidenceKind.GPU_XIDS:
            # Optional: the other kinds say the source failed; DCGM's absence is no gap.
            assert kind not in evidence.sources
            continue
        status = evidence.sources[kind]
        assert not status.available and status.reason == "HTTP 403 permission denied"
        assert getattr(evidence, kind.value) is None  # unavailable, not empty


def test_one_rejected_query_fails_only_its_kind() -> None:
    metrics = FakeMetricsReader(
        {"kube_jobset_restarts": (RESTARTS,)},
        fail=[QueryRejected("p", "HTTP 400 query rejected: bad", 400)],
    )
    evidence = gather(CTX, SourceOptions(prometheus_url="http://p"), readers=_quiet(metrics))
    assert len(metrics.selectors) == len(METRIC_KINDS) == 9  # DCGM's GPU Xids the 9th
    assert not evidence.sources[EvidenceKind.RESTARTS].available
    assert evidence.sources[EvidenceKind.INTERRUPTIONS].available


def test_live_fallback_failure_keeps_the_file_reason(tmp_path: Path) -> None:
    copy_scenario(tmp_path, "logs.json")
    logs = FakeLogReader()
    metrics = FakeMetricsReader(fail=[SourceUnreachable("gmp", "no ADC")])
    evidence = gather(
        CTX,
        SourceOptions(telemetry_dir=tmp_path),
        readers=Readers(metrics=metrics, logs=logs, cluster=FakeClusterReader()),
    )
    assert logs.contexts == []  # logs.json present: no live read
    assert evidence.signals  # from the file
    status = evidence.sources[EvidenceKind.RESTARTS]
    assert not status.available
    assert status.reason == "no ADC (and file:metrics.om: metrics.om not found)"


def test_partial_logs_are_noted() -> None:
    result = LogReadResult((), 10, failures=(("worker_logs", "HTTP 500"),), truncated=True)
    evidence = gather(
        CTX,
        SourceOptions().offline() if False else SourceOptions(live_logs=Mode.ON),
        readers=_quiet(FakeMetricsReader(), logs=FakeLogReader(result)),
    )
    status = evidence.sources[EvidenceKind.LOGS]
    assert status.available
    assert (
        status.reason == "partial: worker_logs: HTTP 500; entry cap reached; later entries not read"
    )


def test_failed_logs_and_nodes_degrade() -> None:
    readers = Readers(
        metrics=FakeMetricsReader(),
        logs=FakeLogReader(fail=SourceUnavailable("cloud-logging", "HTTP 403 denied")),
        cluster=FakeClusterReader(fail={"nodes": SourceUnreachable("k8s", "HTTP 401")}),
        host_lookups=[],
    )
    evidence = gather(CTX, SourceOptions(), readers=readers)
    assert evidence.sources[EvidenceKind.LOGS].reason == "HTTP 403 denied"
    assert evidence.signals is None
    assert evidence.sources[EvidenceKind.PODS].reason == "HTTP 401"
    assert readers.cluster.calls == ["nodes"]  # type: ignore[union-attr]


def test_budget_limits_live_queries() -> None:
    budget = QueryBudget(2)
    metrics = FakeMetricsReader()
    evidence = gather(
        CTX, SourceOptions(prometheus_url="http://p"), readers=_quiet(metrics), budget=budget
    )
    assert len(metrics.selectors) == 2
    assert evidence.sources[EvidenceKind.UNSCHEDULABLE].reason == "query budget exhausted"


def test_files_only_never_builds_a_live_reader(tmp_path: Path) -> None:
    directory = copy_scenario(tmp_path, "metrics.om", "logs.json", "nodes.json", "pods.json")
    evidence = gather(CTX, SourceOptions(telemetry_dir=directory), readers=Readers())
    assert {s.source.split(":")[0] for s in evidence.sources.values()} == {"file"}


def test_resolve_hosts_order_and_priority() -> None:
    nodes = [NodeInfo("a", physical_host="label-host"), NodeInfo("b"), NodeInfo("c", ready=False)]
    compute = FakeHostLookup({"c": "compute-host"}, failure="HTTP 403")
    monitoring = FakeHostLookup({"b": "mon-host", "c": "mon-host-2"})
    resolved, note = resolve_hosts(
        nodes, [compute, monitoring], priority=lambda n: n.ready is False
    )
    assert [n.physical_host for n in resolved] == ["label-host", "mon-host", "compute-host"]
    assert compute.asked == [["c", "b"]]  # not-ready node first; labelled node never asked
    assert monitoring.asked == [["b"]]
    assert note == "1 host(s) from fake-hosts (stopped: HTTP 403); 1 host(s) from fake-hosts"


def _quiet(metrics: FakeMetricsReader, logs: FakeLogReader | None = None) -> Readers:
    return Readers(
        metrics=metrics, logs=logs or FakeLogReader(), cluster=FakeClusterReader(), host_lookups=[]
    )


# --- through the CLI against fake servers --------------------------------------------------


def context_args(spec: dict[str, Any]) -> list[str]:
    return [
        arg
        for key, value in spec["context"].items()
        if value
        for arg in (f"--{key.replace('_', '-')}", value)
    ]


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    assert main(argv) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_prometheus_403_gives_a_partial_diagnosis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = copy_scenario(tmp_path, "logs.json", "nodes.json", "pods.json")
    with ManagedPrometheusProxy(project="P") as gmp:
        gmp.inject(Fault.FORBIDDEN, times=100)
        out = run_json(
            capsys,
            [
                "diagnose",
                *context_args(SPEC),
                "--telemetry",
                str(directory),
                "--prometheus-url",
                gmp.prefix(),
                "--format",
                "json",
            ],
        )
        assert len(gmp.requests) == 1  # no retry of the 403, not even for other metrics
    assert out["partial"] is True
    assert any("restarts: HTTP 403 permission denied" in m for m in out["missing_evidence"])
    # Without the metric, step 1 rests on what the logs and pods show: partial.
    assert out["steps"][0]["status"] == "partial"
    assert "HTTP 403" in out["steps"][0]["reason"]
    # The logs still carry the host failures: the diagnosis goes on from them.
    assert out["root_cause"] == SPEC["expect"]["root_cause"]


@pytest.mark.parametrize(
    ("fault", "extra", "reason"),
    [
        (Fault.TIMEOUT, ["--source-timeout", "0.3"], "timed out"),
        (Fault.UNAVAILABLE, [], "HTTP 503 after 3 attempts"),
    ],
)
def test_a_timing_out_or_failing_prometheus_is_asked_once_per_run(
    fault: Fault,
    extra: list[str],
    reason: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    directory = copy_scenario(tmp_path, "logs.json", "nodes.json", "pods.json")
    with ManagedPrometheusProxy(project="P") as gmp:
        gmp.slow_seconds = 1.0
        gmp.inject(fault, times=100)
        out = run_json(
            capsys,
            [
                "diagnose",
                *context_args(SPEC),
                "--telemetry",
                str(directory),
                "--prometheus-url",
                gmp.prefix(),
                *extra,
                "--format",
                "json",
            ],
        )
        # One query (with its bounded retries), then the source is not asked again.
        assert len(gmp.requests) == (1 if fault is Fault.TIMEOUT else 3)
    assert out["partial"] is True
    assert all(
        any(m.startswith(f"{kind}: ") and reason in m for m in out["missing_evidence"])
        for kind in ("restarts", "interruptions", "node_conditions", "pod_phases")
    )


def test_kubernetes_403_gives_a_partial_diagnosis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = copy_scenario(tmp_path, "logs.json", "metrics.om")
    with KubernetesServer() as kube:
        kube.inject(Fault.FORBIDDEN, times=100)
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube.url, token="t")
        out = run_json(
            capsys,
            [
                "diagnose",
                *context_args(SPEC),
                "--telemetry",
                str(directory),
                "--kubeconfig",
                str(kubeconfig),
                "--format",
                "json",
            ],
        )
        assert len(kube.requests) == 1
    assert out["partial"] is True
    missing = " ".join(out["missing_evidence"])
    assert "nodes: HTTP 403 listing nodes" in missing
    assert "pods: HTTP 403 listing nodes" in missing


def test_missing_kubeconfig_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["diagnose", *context_args(SPEC), "--kubeconfig", str(tmp_path / "nope")]
    assert main([*argv, "--offline"]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--prometheus-url", "not-a-url"], "not an http(s) URL"),
        (["--prometheus-url", "http://"], "not an http(s) URL"),
        (["--prometheus-url", "http://127.0.0.1:99999"], "Port out of range"),
        (["--prometheus-url", "http://127.0.0.1:9090?x=1"], "query or fragment"),
        (["--source-timeout", "nan"], "positive number of seconds"),
        (["--source-timeout", "inf"], "positive number of seconds"),
        (["--kubeconfig", "BAD_YAML"], "kubeconfig"),
    ],
)
def test_bad_live_flags_are_bad_input(
    flags: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "kubeconfig.yaml"
    bad.write_text("not: [valid\n")
    flags = [str(bad) if f == "BAD_YAML" else f for f in flags]
    try:
        code = main(["diagnose", *context_args(SPEC), "--offline", *flags])
    except SystemExit as exc:  # argparse refuses the flag itself
        code = exc.code  # type: ignore[assignment]
    assert code == 2
    err = capsys.readouterr().err
    assert words in err
    assert "Traceback" not in err


def test_telemetry_lines_that_are_not_json_are_listed_with_the_reader_s_reason(
    tmp_path: Path,
) -> None:
    entry = {
        "logName": "projects/p/logs/stdout",
        "resource": {"type": "k8s_container", "labels": {"cluster_name": "c"}},
        "timestamp": "2026-05-20T08:00:00Z",
        "textPayload": "step 1",
    }
    (tmp_path / "logs.jsonl").write_text(
        json.dumps(entry) + "\nnot json\n" + '{"x": NaN}\n' + json.dumps(entry) + "\n"
    )
    files = load_directory(tmp_path)
    assert files.rejected_entries == (
        ("logs.jsonl:2", "not JSON: Expecting value (line 1 column 1)"),
        ("logs.jsonl:3", "NaN, which is not JSON"),
    )
