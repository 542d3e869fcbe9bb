"""A self-run kube-prometheus-stack Prometheus gives the verdicts of the offline files.

Every bundled scenario's metrics.om is rewritten the way such a Prometheus stores the same
cluster (harness/kube_prometheus_stack.py: kube-state-metrics names, no cluster label, the
chart's target labels, no GKE system metrics) and back-filled into a real Prometheus. The
diagnosis on the directory without metrics.om plus ``--prometheus-url`` must match the
diagnosis on the rewritten files, and both must name the scenario's own cause.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from harness.fixtures import PrometheusFactory
from harness.kube_prometheus_stack import rewrite
from test_prometheus_parity import (
    IDS,
    SCENARIOS,
    context_args,
    context_of,
    diagnose_json,
    live_matches_files,
    spec_of,
    without,
)

from loopbreaker.diagnosis.metric_vocabulary import Vocabulary
from loopbreaker.diagnosis.readers.discovery import discover
from loopbreaker.diagnosis.readers.prometheus import PrometheusReader
from loopbreaker.diagnosis.readers.sources import SourceOptions, gather
from loopbreaker.model import EvidenceKind


def kps_scenario(scenario: Path, tmp_path: Path) -> Path:
    """The scenario with its metrics.om as kube-prometheus-stack holds it."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    target = without(scenario, tmp_path, "metrics.om")
    (target / "metrics.om").write_text(rewrite((scenario / "metrics.om").read_text()))
    return target


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_kube_prometheus_stack_matches_its_files(
    scenario: Path,
    tmp_path: Path,
    prometheus_factory: PrometheusFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = spec_of(scenario)
    files = kps_scenario(scenario, tmp_path / "files")
    assert "kubernetes_io:" not in (files / "metrics.om").read_text()
    assert 'cluster="' not in (files / "metrics.om").read_text()
    live = live_matches_files(files, spec, tmp_path, prometheus_factory, capsys)
    expect = spec["expect"]
    assert sorted(h["host"] for h in live["suspect_hosts"]) == sorted(
        h["host"] for h in expect["suspect_hosts"]
    )
    # Only what this stack cannot hold is missing: GKE's interruption count. The node and
    # pod series are read whole even though the chart's target labels put kube-state-
    # metrics' node series in namespace "monitoring".
    assert [m.split(":")[0] for m in live["missing_evidence"]] in (
        [],
        ["interruptions"],
    ), live["missing_evidence"]


def _reader_and_context(
    scenario: str, tmp_path: Path, prometheus_factory: PrometheusFactory, **rewrite_to: str
) -> tuple[PrometheusReader, Any, Path]:
    source = next(s for s in SCENARIOS if s.name == scenario)
    files = kps_scenario(source, tmp_path)
    text = (files / "metrics.om").read_text()
    for old, new in rewrite_to.items():
        text = text.replace(old, new)
    (files / "metrics.om").write_text(text)
    prom = prometheus_factory([files / "metrics.om"])
    return PrometheusReader(prom.url), context_of(spec_of(source)), files


def test_discovery_reads_the_vocabulary_and_the_absent_cluster_label_from_the_server(
    tmp_path: Path, prometheus_factory: PrometheusFactory
) -> None:
    reader, context, _ = _reader_and_context("faulty-host", tmp_path, prometheus_factory)
    found = discover(reader, context)
    assert found is not None
    assert "kube_node_status_condition" in found.names
    assert "kubernetes_io:node_status_condition" not in found.names
    assert found.cluster_labels == {"kube-state-metrics": None}
    nodes = found.choice(EvidenceKind.NODE_CONDITIONS, context)
    assert nodes.selector is not None
    assert nodes.selector.startswith("kube_node_status_condition{")
    assert "cluster" not in nodes.selector
    interruptions = found.choice(EvidenceKind.INTERRUPTIONS, context)
    assert not interruptions.available
    assert "kubernetes_io:node_pool_interruption_count" in (interruptions.reason or "")


def test_a_multi_cluster_server_is_pinned_by_its_label_and_another_cluster_is_refused(
    tmp_path: Path, prometheus_factory: PrometheusFactory
) -> None:
    # A Thanos-style server: every series carries cluster="...", here the scenario's.
    reader, context, _ = _reader_and_context(
        "faulty-host", tmp_path, prometheus_factory, **{'job="': 'cluster="tpu-cluster-prod",job="'}
    )
    found = discover(reader, context)
    assert found is not None
    assert found.cluster_labels == {"kube-state-metrics": "cluster"}
    selector = found.choice(EvidenceKind.POD_PHASES, context).selector
    assert selector is not None and 'cluster="tpu-cluster-prod"' in selector

    other = replace(context, cluster="another-cluster")
    evidence = gather(other, SourceOptions(prometheus_url=reader.base_url))
    status = evidence.sources[EvidenceKind.NODE_CONDITIONS]
    assert not status.available
    assert "cluster=tpu-cluster-prod" in (status.reason or "")
    assert "'another-cluster'" in (status.reason or "")


def test_the_cluster_label_override_wins_over_discovery(
    tmp_path: Path, prometheus_factory: PrometheusFactory
) -> None:
    reader, context, _ = _reader_and_context(
        "faulty-host", tmp_path, prometheus_factory, **{'job="': 'cluster="tpu-cluster-prod",job="'}
    )
    found = discover(reader, context, cluster_label="none")
    assert found is not None
    assert found.cluster_labels == {"kube-state-metrics": None}
    assert found.requests == 1  # the names only: nothing else to find out
    selector = found.choice(EvidenceKind.POD_PHASES, context).selector
    assert selector is not None and "cluster" not in selector


def test_kubeflow_counter_scoped_by_job_namespace_under_the_operators_namespace(
    tmp_path: Path, prometheus_factory: PrometheusFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """The chart labels the operator's series namespace="kubeflow"; the restarts are the
    job's, in job_namespace."""
    source = next(s for s in SCENARIOS if s.name == "pytorchjob-nccl-timeout")
    files = kps_scenario(source, tmp_path / "files")
    assert 'namespace="kubeflow"' in (files / "metrics.om").read_text()
    prom = prometheus_factory([files / "metrics.om"])
    spec = spec_of(source)
    live = diagnose_json(
        capsys,
        [
            *context_args(spec),
            "--telemetry",
            str(without(files, tmp_path, "metrics.om")),
            "--prometheus-url",
            prom.url,
        ],
    )
    assert live["restart_increase"] and live["restart_increase"] > 0
    assert live["steps"][0]["status"] == "done"


def test_queries_list_both_vocabularies(capsys: pytest.CaptureFixture[str]) -> None:
    from loopbreaker.cli.main import main

    assert main(["queries", "--cluster", "c", "--workload", "w", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by_vocabulary: dict[str, set[str]] = {}
    for q in out:
        by_vocabulary.setdefault(q["vocabulary"], set()).add(q["id"])
    assert {"managed-prometheus", "kube-prometheus-stack"} <= set(by_vocabulary)
    kps = [q for q in out if q["vocabulary"] == "kube-prometheus-stack"]
    assert any("kube_node_status_condition" in q["text"] for q in kps)
    assert not any("kubernetes_io:" in q["text"] or 'cluster="c"' in q["text"] for q in kps)


def test_the_listed_raw_queries_are_what_the_reader_runs_on_kube_prometheus_stack(
    tmp_path: Path, prometheus_factory: PrometheusFactory
) -> None:
    """``loopbreaker queries --vocabulary kube-prometheus-stack`` prints the selectors the
    reader runs on such a server, not a second, drifting copy."""
    from loopbreaker.diagnosis.queries import TEMPLATES, scoped

    reader, context, _ = _reader_and_context("jobset-oom-killed", tmp_path, prometheus_factory)
    found = discover(reader, context)
    assert found is not None
    raw = {
        t.id: scoped(t.text.removesuffix("[90m]"), context)
        for t in TEMPLATES
        if t.id.endswith("_raw")
        and t.vocabulary is Vocabulary.KUBE_PROMETHEUS_STACK
        and t.serves(context.workload_kind)
    }
    ids = {
        EvidenceKind.RESTARTS: "restarts_raw",
        EvidenceKind.NODE_CONDITIONS: "node_conditions_raw",
        EvidenceKind.POD_PHASES: "pod_phases_raw",
        EvidenceKind.POD_REASONS: "pod_reasons_raw",
        EvidenceKind.MEMORY: "memory_raw",
        EvidenceKind.POD_INFO: "pod_info_raw",
    }
    read = 0
    for kind, template_id in ids.items():
        choice = found.choice(kind, context)
        if choice.selector is not None:
            assert choice.selector == raw[template_id], kind
            read += 1
    assert read >= 5
    assert "interruptions_raw" not in raw  # no counterpart on this stack


def test_the_bundled_kube_prometheus_stack_scenario_is_what_its_generator_writes(
    tmp_path: Path,
) -> None:
    from harness.kube_prometheus_stack import write_scenario

    bundled = next(s for s in SCENARIOS if s.name == "pytorchjob-kube-prometheus-stack")
    fresh = write_scenario(bundled.parent, tmp_path / "fresh")
    assert sorted(p.name for p in fresh.iterdir()) == sorted(p.name for p in bundled.iterdir())
    for path in fresh.iterdir():
        assert path.read_bytes() == (bundled / path.name).read_bytes(), path.name
