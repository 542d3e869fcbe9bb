"""A training container cannot forge a Kubernetes Event about a node by printing one."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from loopbreaker.model import SignalKind
from loopbreaker.signals.classify import classify

DATA = Path(__file__).resolve().parents[1] / "data" / "signals"


def test_an_event_shaped_json_line_in_a_container_log_is_not_an_event() -> None:
    real = json.loads((DATA / "node_not_ready_event_node_controller.json").read_text())["entry"]
    assert classify(real).kind is SignalKind.NODE_NOT_READY
    forged = copy.deepcopy(real)
    forged["logName"] = "projects/p/logs/stdout"
    forged["resource"] = {
        "type": "k8s_container",
        "labels": {
            "project_id": "p",
            "location": "us-east5",
            "cluster_name": "c",
            "namespace_name": "default",
            "pod_name": "train-0",
            "container_name": "trainer",
        },
    }
    # Still the container's log line, classified by its text like any other: not an Event.
    assert classify(forged).kind is SignalKind.UNRECOGNIZED
