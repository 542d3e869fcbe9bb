"""GPU and TPU health lines beyond the Xid (issue 38): read from the catalog's own cited
examples, classified as GKE exports them, then diagnosed. A host-class line on a node counts
toward its host; an application-class or evidence-only line never leads to a repair."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from builders import CLUSTER, WORKLOAD, at, ctx, evidence, node

from loopbreaker.diagnosis.engine import diagnose
from loopbreaker.model import PodInfo, RemediationPath, RootCause, Signal, SignalKind
from loopbreaker.signals import catalog
from loopbreaker.signals.classify import classify

PROJECT = "proj"
NODE_1 = "gke-tpu-cluster-prod-a3-pool-3cb4b4b1-k2w8"
NODE_2 = "gke-tpu-cluster-prod-a3-pool-3cb4b4b1-f5n1"
HOST_A = "b7a3c1e2f4d5a6b7c8d9e0f1a2b3c4d5"
HOST_B = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
POD = f"{WORKLOAD}-workers-0-0-abcde"
SIGNATURES = {s.id: s for s in catalog.load().signatures}


def example(sig_id: str, n: int = 0) -> str:
    return SIGNATURES[sig_id].examples[n].text


def node_line(text: str) -> dict[str, Any]:
    """A node journal line as the GKE log sink exports it."""
    return {
        "logName": f"projects/{PROJECT}/logs/kubelet",
        "resource": {
            "type": "k8s_node",
            "labels": {"project_id": PROJECT, "cluster_name": CLUSTER, "node_name": NODE_1},
        },
        "textPayload": text,
        "timestamp": "2026-05-20T08:15:00Z",
    }


def container_line(text: str) -> dict[str, Any]:
    """A training container's stderr line on NODE_1."""
    return {
        "logName": f"projects/{PROJECT}/logs/stderr",
        "resource": {
            "type": "k8s_container",
            "labels": {
                "project_id": PROJECT,
                "cluster_name": CLUSTER,
                "namespace_name": "default",
                "pod_name": POD,
                "container_name": "trainer",
            },
        },
        "labels": {
            "k8s-pod/jobset_sigs_k8s_io/jobset-name": WORKLOAD,
            "compute.googleapis.com/resource_name": NODE_1,
        },
        "textPayload": text,
        "timestamp": "2026-05-20T08:15:00Z",
    }


def twice(entry: dict[str, Any]) -> list[Signal]:
    """The same line classified, seen 15 minutes apart (two failures of one node)."""
    signal = classify(entry)
    assert signal.node == NODE_1, signal
    return [replace(signal, timestamp=at(minute)) for minute in (-14, 1)]


def run(signals: list[Signal]) -> Any:
    pods = tuple(
        PodInfo(f"{WORKLOAD}-workers-0-{i}-abcde", "default", "Running", n, WORKLOAD)
        for i, n in enumerate((NODE_1, NODE_2))
    )
    nodes = (node(NODE_1, HOST_A, pool="a3-pool"), node(NODE_2, HOST_B, pool="a3-pool"))
    return diagnose(ctx(), evidence(signals=signals, nodes=nodes, pods=pods))


HOST_CLASS = [
    ("nvidia.gpu_fallen_off_bus", 0, True),
    ("nvidia.assert_gpu_lost", 0, True),
    ("nvidia.nvswitch_fatal_sxid", 0, True),
    ("node_problem_detector.edac_uncorrectable", 0, False),
    ("node_problem_detector.kernel_fault_arm", 0, False),
]


@pytest.mark.parametrize(("sig_id", "n", "gpu"), HOST_CLASS)
def test_a_host_class_line_on_a_node_counts_toward_its_host(sig_id: str, n: int, gpu: bool) -> None:
    signals = twice(node_line(example(sig_id, n)))
    assert signals[0].kind in (SignalKind.HARDWARE_FAILURE, SignalKind.KERNEL_BUG)
    d = run(signals)
    assert d.root_cause is RootCause.FAULTY_HOST, d.summary
    assert d.remediation.path is RemediationPath.ISOLATE_HOST
    [suspect] = d.suspect_hosts
    assert suspect.host == HOST_A and suspect.failures == 2
    assert (suspect.fault_reason == "UNRECOVERABLE_GPU_ERROR") is gpu


# Lines an application, a driver or the workload's own setup causes: each is classified as
# the class its source gives it and leads to no repair of the host, however often it is seen.
NOT_THE_HOST = [
    ("nvidia.device_plugin_xid_unhealthy", 0, SignalKind.GPU_APPLICATION_ERROR, node_line),
    ("nvidia.dcgm_detected_xid", 0, SignalKind.GPU_ERROR, node_line),
    ("nvidia.nvswitch_nonfatal_sxid", 0, SignalKind.GPU_ERROR, node_line),
    ("nvidia.assert_reset_required", 0, SignalKind.GPU_ERROR, node_line),
    ("nvidia.rm_init_adapter_failed", 0, SignalKind.GPU_ERROR, node_line),
    ("nvidia.probe_failed", 0, SignalKind.GPU_ERROR, node_line),
    ("nvidia.gsp_rpc_failure", 1, SignalKind.GPU_ERROR, node_line),
    ("nvidia.nvml_device_handle_unknown_error", 0, SignalKind.GPU_ERROR, node_line),
    ("xla_tpu.tpu_bad_hardware_status", 0, SignalKind.TPU_RUNTIME_ERROR, container_line),
    ("xla_tpu.tpu_in_use", 0, SignalKind.TPU_RUNTIME_ERROR, container_line),
    ("xla_tpu.slice_builder_addresses_invalid", 0, SignalKind.TPU_RUNTIME_ERROR, container_line),
    ("xla_tpu.tpu_initialization_failed", 0, SignalKind.TPU_RUNTIME_ERROR, container_line),
    ("xla_tpu.tpu_execute_slow", 0, SignalKind.TPU_RUNTIME_ERROR, container_line),
    ("xla_tpu.tpu_program_fatal", 4, SignalKind.TPU_RUNTIME_ERROR, container_line),
    ("tensorflow.tpu_worker_socket_closed", 0, SignalKind.CONNECTION_RESET, container_line),
]


@pytest.mark.parametrize(
    ("sig_id", "n", "kind", "entry"), NOT_THE_HOST, ids=[c[0] for c in NOT_THE_HOST]
)
def test_an_application_or_setup_line_never_leads_to_a_repair(
    sig_id: str, n: int, kind: SignalKind, entry: Any
) -> None:
    signals = twice(entry(example(sig_id, n)))
    assert signals[0].kind is kind and signals[0].signature == sig_id
    d = run(signals)
    assert d.root_cause is not RootCause.FAULTY_HOST, d.summary
    assert d.remediation.path not in (RemediationPath.ISOLATE_HOST, RemediationPath.WATCH_HOST)
    assert d.suspect_hosts == ()
    # The same two sightings as a hardware fault would convict the host: the scenario can.
    control = run([replace(s, kind=SignalKind.HARDWARE_FAILURE) for s in signals])
    assert control.root_cause is RootCause.FAULTY_HOST, control.summary
