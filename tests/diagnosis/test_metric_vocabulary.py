"""The two metric vocabularies become one form, and a missing exporter is said, not zero."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from loopbreaker.diagnosis import metric_vocabulary as mv
from loopbreaker.diagnosis.queries.kube_prometheus_stack import translate
from loopbreaker.diagnosis.telemetry import load_directory
from loopbreaker.model import EvidenceKind, Sample, Series

AT = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)


def test_kube_state_metrics_node_conditions_read_as_gke_labels() -> None:
    # kube-state-metrics v2.13.0: kube_node_status_condition{node, condition, status}.
    series = Series(
        "kube_node_status_condition",
        {"node": "gke-a-1", "condition": "Ready", "status": "unknown", "cluster": "c"},
        (Sample(AT, 1.0),),
    )
    out = mv.canonical(series)
    assert out.labels["node_name"] == "gke-a-1"
    assert out.labels["status"] == "Unknown"
    assert out.labels["cluster_name"] == "c"
    assert out.samples == series.samples


def test_gke_series_are_left_as_they_are() -> None:
    series = Series(
        "kubernetes_io:node_status_condition",
        {"node_name": "n", "status": "True", "cluster_name": "c"},
        (),
    )
    assert mv.canonical(series) is series


def test_unschedulable_pods_read_as_gke_labels() -> None:
    series = Series(
        "kube_pod_status_unschedulable", {"namespace": "ml", "pod": "w-0", "uid": "u"}, ()
    )
    out = mv.canonical(series)
    assert (out.labels["namespace_name"], out.labels["pod_name"]) == ("ml", "w-0")


def test_the_gke_name_wins_only_where_the_server_has_it() -> None:
    both = {"kubernetes_io:node_status_condition", "kube_node_status_condition"}
    reading, present = mv.choose(EvidenceKind.NODE_CONDITIONS, both) or (None, False)
    assert reading is not None and reading.vocabulary is mv.Vocabulary.MANAGED and present
    ksm = {"kube_node_status_condition", "kube_pod_status_phase"}
    reading, present = mv.choose(EvidenceKind.NODE_CONDITIONS, ksm) or (None, False)
    assert reading is not None and reading.vocabulary is mv.Vocabulary.KUBE_PROMETHEUS_STACK
    # Scraped, but no pod was ever unschedulable: the exporter's absence of series counts.
    reading, present = mv.choose(EvidenceKind.UNSCHEDULABLE, ksm) or (None, True)
    assert reading is not None and not present
    # No GKE system metric at all: interruptions cannot be shown.
    assert mv.choose(EvidenceKind.INTERRUPTIONS, ksm) is None


def test_a_kube_prometheus_stack_metrics_file_cannot_show_interruptions(tmp_path: Path) -> None:
    (tmp_path / "metrics.om").write_text(
        "# TYPE kube_node_status_condition gauge\n"
        'kube_node_status_condition{node="n1",condition="Ready",status="false"} 1 1779264000\n'
        "# EOF\n"
    )
    evidence = load_directory(tmp_path)
    interruptions = evidence.sources[EvidenceKind.INTERRUPTIONS]
    assert not interruptions.available
    assert "kubernetes_io:node_pool_interruption_count" in (interruptions.reason or "")
    assert evidence.sources[EvidenceKind.NODE_CONDITIONS].available
    (series,) = evidence.node_conditions or ()
    assert series.labels["node_name"] == "n1" and series.labels["status"] == "False"


def test_translation_of_the_published_readiness_query() -> None:
    text = (
        "max by (node_name, node_pool_name, status) (\n"
        '  max_over_time(kubernetes_io:node_status_condition{cluster_name="{cluster_name}", '
        'condition="Ready", status=~"False|Unknown"}[60m])\n)'
    )
    assert translate(text) == (
        "max by (node, status) (\n"
        '  max_over_time(kube_node_status_condition{condition="Ready", '
        'status=~"false|unknown"}[60m])\n)'
    )
    assert translate('kubernetes_io:node_pool_interruption_count{cluster_name="x"}') is None
