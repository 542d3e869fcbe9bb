"""The Kubernetes contract: request bodies and responses against the client's endpoints and
models; what loopbreaker's own adapters send passes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fakeservers import ClusterServer, KubernetesServer, Request, Response, write_kubeconfig
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from contracts import Violation
from contracts.kube_models import KubeContract, endpoint_for, required_fields
from loopbreaker.remediation.actuators import NodeEvent
from loopbreaker.remediation.actuators.kube import KubernetesNodes
from loopbreaker.remediation.rules import PodState

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def request(method: str, path: str, body: Any = None, content_type: str = "") -> Request:
    raw = b"" if body is None else json.dumps(body).encode()
    headers = {"content-type": content_type} if content_type else {}
    return Request(method, path, {}, headers, raw)


def messages(found: list[Violation]) -> list[str]:
    return sorted(f"{v.where}: {v.message}" for v in found)


def check(method: str, path: str, body: Any = None, content_type: str = "") -> list[str]:
    return messages(KubeContract().check_request(request(method, path, body, content_type)))


def test_endpoints_and_models_come_from_the_client() -> None:
    patch = endpoint_for("PATCH", "/api/v1/nodes/n1")
    assert patch is not None and (patch.operation, patch.response) == ("patch_node", "V1Node")
    assert STRATEGIC in patch.content_types
    eviction = endpoint_for("POST", "/api/v1/namespaces/ns/pods/p/eviction")
    assert eviction is not None and eviction.body == "V1Eviction"
    assert required_fields("CoreV1Event") == {"involvedObject", "metadata"}
    assert required_fields("V1Taint") == {"key", "effect"}


def test_node_merge_patches() -> None:
    path = "/api/v1/nodes/n1"
    ok = {"metadata": {"labels": {"a": "1", "gone": None}}, "spec": {"unschedulable": True}}
    assert check("PATCH", path, ok, STRATEGIC) == []
    assert check("PATCH", path, {"spec": {"unschedulable": None}}, MERGE) == []
    assert check("PATCH", path, {"$retainKeys": ["spec"], "spec": {}}, STRATEGIC) == []
    bad = {"metadata": {"labels": {"a": 1}}, "spec": {"unschedulabel": True}, "$patch": "x"}
    assert check("PATCH", path, bad, MERGE) == [
        "body.$patch: unknown field '$patch' of V1Node",
        "body.metadata.labels['a']: 1 is not str",
        "body.spec.unschedulabel: unknown field 'unschedulabel' of V1NodeSpec",
    ]
    assert check("PATCH", path, {"spec": {}}, "application/json") == [
        "header.content-type: 'application/json' is not one of ('application/json-patch+json',"
        " 'application/merge-patch+json', 'application/strategic-merge-patch+json', "
        "'application/apply-patch+yaml', 'application/apply-patch+cbor')"
    ]


def test_json_patches_follow_the_model() -> None:
    path = "/api/v1/nodes/n1"
    ops = [
        {"op": "add", "path": "/metadata/annotations/a~1b", "value": "x"},
        {"op": "replace", "path": "/spec/taints/0", "value": {"key": "k", "effect": "NoSchedule"}},
    ]
    assert check("PATCH", path, ops, JSON_PATCH) == []
    bad = [
        {"op": "add", "path": "/spec/cordoned", "value": True},
        {"op": "add", "path": "/spec/taints/-", "value": {"key": "k"}},
        {"op": "frobnicate", "path": "/spec"},
    ]
    assert check("PATCH", path, bad, JSON_PATCH) == [
        "body[0].path: unknown field 'cordoned' of V1NodeSpec",
        "body[1].value.effect: missing: V1Taint.effect is required",
        "body[2]: not an RFC 6902 operation: {'op': 'frobnicate', 'path': '/spec'}",
    ]


def test_evictions() -> None:
    path = "/api/v1/namespaces/train/pods/w-0/eviction"
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "w-0"}}
    assert check("POST", path, body) == []
    wrong = {**body, "gracePeriod": 0, "deleteOptions": {"gracePeriodSeconds": "0"}}
    assert check("POST", path, wrong) == [
        "body.deleteOptions.gracePeriodSeconds: '0' is not int",
        "body.gracePeriod: unknown field 'gracePeriod' of V1Eviction",
    ]


def test_events_core_v1_needs_involved_object_reason_and_type() -> None:
    path = "/api/v1/namespaces/default/events"
    event = {"metadata": {"name": "e1"}, "message": "cordoned"}
    assert check("POST", path, event) == [
        "body.involvedObject: missing: CoreV1Event.involvedObject is required",
        "body.reason: an Event without reason (issue 37)",
        "body.type: an Event without type (issue 37)",
    ]
    whole = {
        **event,
        "involvedObject": {"kind": "Node", "name": "n1"},
        "reason": "R",
        "type": "Normal",
    }
    assert check("POST", path, whole) == []


def test_events_v1_rules_from_the_docstrings() -> None:
    path = "/apis/events.k8s.io/v1/namespaces/default/events"
    event = {
        "metadata": {"name": "n1.abc"},
        "eventTime": "2026-05-20T08:15:00.000000Z",
        "reportingController": "loopbreaker.dev/remediator",
        "reportingInstance": "i" * 129,
        "action": "Cordon",
        "reason": "",
        "type": "Normal",
        "regarding": {"kind": "Node", "name": "n1"},
        "involvedObject": {"kind": "Node"},
    }
    assert check("POST", path, event) == [
        "body.involvedObject: unknown field 'involvedObject' of EventsV1Event",
        "body.reason: an Event without reason (issue 37)",
        "body.reason: empty: it 'cannot be empty for new Events'",
        "body.reportingInstance: 129 characters: 'at most 128 characters'",
    ]
    without_time = {k: v for k, v in event.items() if k not in ("eventTime", "involvedObject")}
    assert "body.eventTime: missing: EventsV1Event.eventTime is required" in check(
        "POST", path, without_time
    )


def test_query_parameters_and_unknown_paths() -> None:
    contract = KubeContract()
    listing = Request("GET", "/api/v1/nodes", {"limit": ["x"], "labelSelectr": ["a=b"]}, {}, b"")
    assert messages(contract.check_request(listing)) == [
        "query.labelSelectr: not a parameter of list_node",
        "query.limit: 'x' is not an integer",
    ]
    assert messages(contract.check_request(request("GET", "/api/v2/nodes"))) == [
        "path: no API call of the client has this verb and path"
    ]


def test_responses() -> None:
    contract = KubeContract()
    get = request("GET", "/api/v1/nodes/n1")
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    assert contract.check_response(get, Response.json(node)) == []
    extra = {
        **node,
        "kind": "Pod",
        "metadata": {"name": "n1", "labels": {"gone": None}},
        "spec": {"taints": [{"key": "k"}], "gpu": "h100"},
    }
    assert messages(contract.check_response(get, Response.json(extra))) == [
        "body.kind: 'Pod', not 'Node'",
        "body.metadata.labels['gone']: null in dict(str, str)",
        "body.spec.gpu: unknown field 'gpu' of V1NodeSpec",
        "body.spec.taints[0].effect: missing: V1Taint.effect is required",
    ]
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "why": 1}
    assert messages(contract.check_response(get, Response.json(status, 404))) == [
        "body.why: unknown field 'why' of V1Status"
    ]
    # An eviction's success is a Status (eviction.go), though the client's type is V1Eviction.
    evict = request("POST", "/api/v1/namespaces/ns/pods/p/eviction")
    done = {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}
    assert contract.check_response(evict, Response.json(done, 201)) == []


def test_a_fake_answering_an_unknown_field_fails(tmp_path: Path) -> None:
    node = {"metadata": {"name": "n1", "labels": {}}, "spec": {}, "gpuHealth": "ok"}
    with KubernetesServer([node]) as server:
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url)
        api = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=str(config)))
        api.list_node(_request_timeout=5)
        found = server.take_violations()
    assert messages(found) == ["body.items[0].gpuHealth: unknown field 'gpuHealth' of V1Node"]


# --- what loopbreaker's adapters send -------------------------------------------------------


@pytest.fixture
def cluster() -> Iterator[ClusterServer]:
    node = {"metadata": {"name": "n1", "labels": {"pool": "a"}, "annotations": {}}, "spec": {}}
    pod = {
        "metadata": {"name": "w-0", "namespace": "train"},
        "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "trainer"}]},
        "status": {"phase": "Running"},
    }
    with ClusterServer([node], [pod], token="t") as server:
        yield server


def test_the_remediation_adapter_requests_pass(cluster: ClusterServer, tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "kubeconfig", cluster.url, token="t")
    nodes = KubernetesNodes.from_kubeconfig(config)
    assert nodes.cordon("n1", {"loopbreaker.dev/incident": "inc-1"}) == "cordoned"
    nodes.label("n1", {"cloud.google.com/fault-behavior": "XID", "old": None}, {"a": "b"})
    assert [p.name for p in nodes.pods_on("n1")] == ["w-0"]
    nodes.evict(PodState(namespace="train", name="w-0"))
    at = datetime(2026, 5, 20, 8, 15, tzinfo=UTC)
    event = NodeEvent("n1", "LoopbreakerCordoned", "Cordon", "why", at, warning=True)
    nodes.events().node_event(event)
    assert cluster.event_reasons() == ["LoopbreakerCordoned"]
    assert cluster.take_violations() == []
