"""GKE's node health prediction label: read from nodes, shown as supporting evidence only.

The label and its values are GKE's ("Enable node health prediction in a GKE cluster",
https://docs.cloud.google.com/ai-hypercomputer/docs/workloads/enable-node-health-prediction):
``true`` healthy, ``false`` likely to degrade within five hours.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from builders import WORKLOAD, ctx, evidence, node, not_ready, signal
from fakes import RecordingSleep
from fakeservers import KubernetesServer, write_kubeconfig

from loopbreaker.diagnosis import ticket
from loopbreaker.diagnosis.engine import diagnose
from loopbreaker.diagnosis.kube_objects import node_info
from loopbreaker.diagnosis.readers.kube import KubernetesReader
from loopbreaker.diagnosis.readers.retry import RetryPolicy
from loopbreaker.model import (
    Diagnosis,
    NodeInfo,
    PodInfo,
    RemediationPath,
    RootCause,
    Signal,
    SignalKind,
)

LABEL = "gke.google.com/recommended-to-run-large-training-workload"
HOST_A = "b7a3c1e2f4d5a6b7c8d9e0f1a2b3c4d5"
HOST_B = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
NODE_1 = "gke-tpu-cluster-prod-a3-pool-3cb4b4b1-k2w8"
NODE_2 = "gke-tpu-cluster-prod-a3-pool-3cb4b4b1-f5n1"


@pytest.mark.parametrize(
    ("labels", "value"),
    [({LABEL: "true"}, True), ({LABEL: "false"}, False), ({LABEL: "maybe"}, None), ({}, None)],
)
def test_the_label_is_read_from_a_node_object(labels: dict[str, str], value: bool | None) -> None:
    info = node_info({"metadata": {"name": NODE_1, "labels": labels}})
    assert info is not None and info.recommended_for_training is value


def test_the_live_node_reader_reads_the_label(tmp_path: Path) -> None:
    nodes = [
        {"metadata": {"name": n, "labels": labels}}
        for n, labels in (("n1", {LABEL: "false"}), ("n2", {LABEL: "true"}), ("n3", {}))
    ]
    with KubernetesServer(nodes, [], token="t") as server:
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url, token="t")
        reader = KubernetesReader.from_kubeconfig(
            config, timeout=0.4, retry=RetryPolicy(attempts=1, sleep=RecordingSleep())
        )
        read = reader.nodes()
    assert [(n.name, n.recommended_for_training) for n in read] == [
        ("n1", False),
        ("n2", True),
        ("n3", None),
    ]


def _predicted(name: str, host: str, value: bool | None) -> NodeInfo:
    return replace(node(name, host, pool="a3-pool"), recommended_for_training=value)


def _pods() -> tuple[PodInfo, ...]:
    return tuple(
        PodInfo(f"{WORKLOAD}-workers-0-{i}-abcde", "default", "Running", n, WORKLOAD)
        for i, n in enumerate((NODE_1, NODE_2))
    )


def _failures(node_name: str) -> list[Signal]:
    return [
        signal(SignalKind.HARDWARE_FAILURE, m, node=node_name, reason="Xid 48 (hardware: DBE)")
        for m in (-14, 1)
    ]


def test_a_node_predicted_unhealthy_with_no_failure_stays_without_a_verdict() -> None:
    def run(value: bool | None) -> Diagnosis:
        nodes = (_predicted(NODE_1, HOST_A, value), _predicted(NODE_2, HOST_B, True))
        return diagnose(ctx(), evidence(nodes=nodes, pods=_pods()))

    plain, flagged = run(None), run(False)
    assert flagged.root_cause is plain.root_cause is RootCause.UNKNOWN
    assert flagged.remediation.path is plain.remediation.path
    assert flagged.suspect_hosts == () and flagged.ticket_draft is None
    [hint] = [f for f in flagged.evidence if LABEL in f.message]
    assert NODE_1 in hint.message and "none of them failed" in hint.message
    assert hint.supports is False and hint.cause is None
    assert not [f for f in plain.evidence if LABEL in f.message]


def test_a_faulty_host_gains_a_supporting_finding_and_the_ticket_names_the_label() -> None:
    def run(value: bool | None) -> Diagnosis:
        return diagnose(
            ctx(),
            evidence(
                node_conditions=not_ready(NODE_1, [(-14, -10), (1, 5)], pool="a3-pool"),
                signals=_failures(NODE_1),
                nodes=(_predicted(NODE_1, HOST_A, value), _predicted(NODE_2, HOST_B, True)),
                pods=_pods(),
            ),
        )

    plain, flagged = run(None), run(False)
    assert flagged.root_cause is plain.root_cause is RootCause.FAULTY_HOST
    assert flagged.remediation.path is RemediationPath.ISOLATE_HOST
    assert flagged.suspect_hosts[0].health_prediction == ((NODE_1, "false"),)
    assert plain.suspect_hosts[0].health_prediction == ()
    [hint] = [f for f in flagged.evidence if LABEL in f.message]
    assert hint.supports and hint.cause is RootCause.FAULTY_HOST
    assert "is false on node" in hint.message and HOST_A in hint.message
    assert "Xid 48" in hint.message  # the GPU fault it stands beside
    assert flagged.ticket_draft is not None and plain.ticket_draft is not None
    assert f"{LABEL}; false" in flagged.ticket_draft.summary
    assert f"{NODE_1}=false" in flagged.ticket_draft.summary
    assert LABEL not in plain.ticket_draft.summary
    assert f"{NODE_1}=false" in ticket.to_markdown(flagged.ticket_draft)
    assert flagged.suspect_hosts[0].to_dict()["health_prediction"] == {NODE_1: "false"}


def test_a_healthy_prediction_does_not_hide_the_failures() -> None:
    d = diagnose(
        ctx(),
        evidence(
            node_conditions=not_ready(NODE_1, [(-14, -10), (1, 5)], pool="a3-pool"),
            signals=_failures(NODE_1),
            nodes=(_predicted(NODE_1, HOST_A, True),),
            pods=_pods(),
        ),
    )
    assert d.root_cause is RootCause.FAULTY_HOST
    [hint] = [f for f in d.evidence if LABEL in f.message]
    assert "is true" in hint.message and "count regardless" in hint.message
    assert hint.supports is False
