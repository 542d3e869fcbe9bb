"""Pod and node objects as ``kubectl get -o json`` prints them: what issue 20 reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopbreaker.diagnosis.kube_objects import node_info, parse_quantity, pod_info
from loopbreaker.diagnosis.telemetry import load_pods
from loopbreaker.timeutil import parse_rfc3339

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "telemetry"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("72Gi", 72 * 2**30),
        ("32876680Ki", 32876680 * 1024),
        ("512M", 512e6),
        ("1.5Gi", 1.5 * 2**30),
        ("1e9", 1e9),
        ("250m", 0.25),
        (1024, 1024.0),
        ("", None),
        ("lots", None),
        (None, None),
        (True, None),
    ],
)
def test_resource_quantities(text: object, value: float | None) -> None:
    assert parse_quantity(text) == value


def test_a_pod_with_a_killed_container_a_limit_and_a_priority() -> None:
    pod = pod_info(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
            "spec": {
                "priorityClassName": "offline-low",
                "priority": 1000,
                "nodeName": "n1",
                "containers": [
                    {
                        "name": "trainer",
                        "image": "img:1",
                        "resources": {"limits": {"memory": "64Gi"}},
                    },
                    {"name": "sidecar", "image": "side:2"},
                ],
            },
            "status": {
                "phase": "Running",
                "reason": "Evicted",
                "message": "The node was low on resource: memory. ",
                "conditions": [
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "TerminationByKubelet",
                        "lastTransitionTime": "2026-05-20T08:10:00Z",
                    },
                    {
                        "type": "PodScheduled",
                        "status": "True",
                        "lastTransitionTime": "2026-05-20T08:00:00Z",
                    },
                ],
                "containerStatuses": [
                    {
                        "name": "trainer",
                        "lastState": {
                            "terminated": {
                                "reason": "OOMKilled",
                                "exitCode": 137,
                                "finishedAt": "2026-05-20T08:09:00Z",
                            }
                        },
                        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                    },
                    {"name": "sidecar", "state": {"running": {}}},
                ],
            },
        }
    )
    assert pod is not None
    assert (pod.uid, pod.priority_class, pod.priority) == ("u-1", "offline-low", 1000)
    assert (pod.status_reason, pod.disruption_reason) == ("Evicted", "TerminationByKubelet")
    assert pod.disruption_at == parse_rfc3339("2026-05-20T08:10:00Z")
    assert pod.scheduled_at == parse_rfc3339("2026-05-20T08:00:00Z")
    trainer, sidecar = pod.containers
    assert trainer.memory_limit == 64 * 2**30 and sidecar.memory_limit is None
    assert trainer.last_terminated is not None
    assert (trainer.last_terminated.reason, trainer.last_terminated.exit_code) == ("OOMKilled", 137)
    assert trainer.terminated is None and trainer.waiting_reason == "CrashLoopBackOff"


def test_malformed_status_fields_are_ignored_not_fatal() -> None:
    pod = pod_info(
        {
            "metadata": {"name": "p"},
            "spec": {"priority": "high", "containers": [{"name": 3}, "x", {"name": "c"}]},
            "status": {
                "containerStatuses": [{"name": "c", "lastState": {"terminated": "yes"}}],
                "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": 5}],
            },
        }
    )
    assert pod is not None and pod.priority is None and pod.scheduled_at is None
    assert [c.name for c in pod.containers] == ["c"]
    assert pod.containers[0].last_terminated is None


def test_node_pressure_conditions() -> None:
    node = node_info(
        {
            "metadata": {"name": "n1"},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {
                        "type": "MemoryPressure",
                        "status": "True",
                        "reason": "KubeletHasInsufficientMemory",
                        "lastTransitionTime": "2026-05-20T08:05:00Z",
                    },
                    {
                        "type": "DiskPressure",
                        "status": "False",
                        "reason": "KubeletHasNoDiskPressure",
                    },
                ]
            },
        }
    )
    assert node is not None
    assert [(c.type, c.status) for c in node.pressure] == [
        ("MemoryPressure", True),
        ("DiskPressure", False),
    ]
    assert node.pressure[0].since == parse_rfc3339("2026-05-20T08:05:00Z")


def test_the_image_pull_scenario_pods_json_is_read_as_waiting_and_scheduled() -> None:
    pods = load_pods(EXAMPLES / "jobset-image-pull" / "pods.json")
    waiting = [p for p in pods if p.containers and p.containers[0].waiting_reason]
    assert len(waiting) == 1
    (pod,) = waiting
    assert pod.phase == "Pending" and pod.node and not pod.unschedulable
    assert pod.containers[0].waiting_reason == "ImagePullBackOff"
    items = json.loads((EXAMPLES / "jobset-image-pull" / "pods.json").read_text())["items"]
    assert len(items) == len(pods)
