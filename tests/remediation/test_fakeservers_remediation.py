"""The remediation fakes (cluster, Compute operations, Cloud Support) through the real clients.

Each test drives a fake with the library an executor would use, so the paths, verbs, query
parameters, bodies and error mapping are the libraries' own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeservers import ClusterServer, ComputeOpsServer, Fault, SupportServer, write_kubeconfig
from google.api_core import exceptions as gexc
from google.api_core.future import polling
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

TOKEN = "remediator-token"
#: Compute's requestId "must be a valid UUID" (compute.v1.json).
R1 = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
R2 = "9b2f4c1e-3d6a-4f8b-a1c5-2e7d9f0b6a34"
F1 = "c56a4180-65aa-42ec-a945-5fd21dec0538"

# --- Kubernetes ----------------------------------------------------------------------------


def node(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"pool": "a", **labels}, "annotations": {}},
        "spec": {"providerID": f"gce://proj/z1/{name}"},
    }


def pod(name: str, namespace: str, node_name: str, phase: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "w"}},
        # The client validates on deserialising: a pod without containers would not load.
        "spec": {"nodeName": node_name, "containers": [{"name": "main", "image": "trainer"}]},
        "status": {"phase": phase},
    }


@pytest.fixture
def cluster() -> Iterator[ClusterServer]:
    nodes = [node("n1", host="h1"), node("n2", host="h2")]
    pods = [
        pod("w-0", "train", "n1"),
        pod("w-1", "train", "n2"),
        pod("done-0", "train", "n1", "Succeeded"),
        pod("ds-0", "kube-system", "n1"),
    ]
    with ClusterServer(nodes, pods, token=TOKEN) as server:
        yield server


@pytest.fixture
def core(cluster: ClusterServer, tmp_path: Path) -> k8s.CoreV1Api:
    config = write_kubeconfig(tmp_path / "kubeconfig", cluster.url, token=TOKEN)
    return k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=str(config)))


def test_cordon_with_a_strategic_merge_patch(cluster: ClusterServer, core: k8s.CoreV1Api) -> None:
    patch = {
        "spec": {"unschedulable": True},
        "metadata": {"annotations": {"loopbreaker/cordoned": "inc-1"}, "labels": {"bad": "1"}},
    }
    result = core.patch_node("n1", patch, _request_timeout=2)
    assert result.spec.unschedulable is True
    assert result.metadata.annotations == {"loopbreaker/cordoned": "inc-1"}
    assert result.metadata.labels == {"pool": "a", "host": "h1", "bad": "1"}
    # The client picks strategic merge for a dict body (a list would be a JSON patch).
    assert cluster.patches == [("n1", "application/strategic-merge-patch+json", patch)]
    assert cluster.mutations == [("PATCH", "/api/v1/nodes/n1")]
    assert cluster.requests[-1].headers["authorization"] == f"Bearer {TOKEN}"
    # The state persists: a later GET and a list by label see the cordon.
    assert core.read_node("n1").spec.unschedulable is True
    listed = core.list_node(label_selector="bad=1,pool=a")
    assert [n.metadata.name for n in listed.items] == ["n1"]
    assert core.list_node(label_selector="bad!=1").items[0].metadata.name == "n2"
    assert [n.metadata.name for n in core.list_node(label_selector="!bad").items] == ["n2"]


def test_merge_and_json_patches_and_uncordon(cluster: ClusterServer, core: k8s.CoreV1Api) -> None:
    core.api_client.call_api(
        "/api/v1/nodes/{name}",
        "PATCH",
        path_params={"name": "n2"},
        header_params={"Content-Type": "application/merge-patch+json"},
        body={"spec": {"unschedulable": True}},
        auth_settings=["BearerToken"],
        response_type="V1Node",
        _return_http_data_only=True,
    )
    core.patch_node("n2", [{"op": "add", "path": "/metadata/annotations/a~1b", "value": "x"}])
    assert cluster.node("n2")["metadata"]["annotations"] == {"a/b": "x"}  # type: ignore[index]
    # A null in a merge patch removes the key: uncordon.
    core.patch_node("n2", {"spec": {"unschedulable": None}})
    assert "unschedulable" not in cluster.node("n2")["spec"]  # type: ignore[index]
    assert [p[1] for p in cluster.patches] == [
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
    ]


def test_node_errors_are_api_exceptions(cluster: ClusterServer, core: k8s.CoreV1Api) -> None:
    with pytest.raises(ApiException) as missing:
        core.read_node("nope")
    assert missing.value.status == 404 and '"reason":"NotFound"' in missing.value.body.replace(
        " ", ""
    )
    with pytest.raises(ApiException) as patch_missing:
        core.patch_node("nope", {"spec": {"unschedulable": True}})
    assert patch_missing.value.status == 404 and cluster.patches == []


def test_pods_on_a_node_by_field_selector(cluster: ClusterServer, core: k8s.CoreV1Api) -> None:
    on_n1 = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")
    assert sorted(p.metadata.name for p in on_n1.items) == ["done-0", "ds-0", "w-0"]
    assert cluster.requests[-1].param("fieldSelector") == "spec.nodeName=n1"
    running = core.list_pod_for_all_namespaces(
        field_selector="spec.nodeName==n1,status.phase!=Succeeded,metadata.namespace!=kube-system"
    )
    assert [p.metadata.name for p in running.items] == ["w-0"]
    scoped = core.list_namespaced_pod("train", field_selector="spec.nodeName=n2")
    assert [p.metadata.name for p in scoped.items] == ["w-1"]
    assert core.read_namespaced_pod("w-0", "train").spec.node_name == "n1"
    with pytest.raises(ApiException) as bad:
        core.list_pod_for_all_namespaces(field_selector="spec.nodeNam=n1")
    assert bad.value.status == 400 and "field label not supported" in bad.value.body


def eviction(name: str, namespace: str = "train") -> k8s.V1Eviction:
    return k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=name, namespace=namespace))


def test_eviction_succeeds_and_removes_the_pod(cluster: ClusterServer, core: k8s.CoreV1Api) -> None:
    core.create_namespaced_pod_eviction("w-0", "train", eviction("w-0"))
    request = cluster.requests[-1]
    assert (request.method, request.path) == ("POST", "/api/v1/namespaces/train/pods/w-0/eviction")
    assert request.json()["metadata"] == {"name": "w-0", "namespace": "train"}
    assert cluster.evictions == [("train", "w-0", 201)]
    assert cluster.pod("train", "w-0") is None
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_pod("w-0", "train")
    assert gone.value.status == 404
    with pytest.raises(ApiException) as again:
        core.create_namespaced_pod_eviction("w-0", "train", eviction("w-0"))
    assert again.value.status == 404


def test_scripted_pdb_refusals_then_success(cluster: ClusterServer, core: k8s.CoreV1Api) -> None:
    cluster.eviction_script[("train", "w-1")] = [429, 500, 201]
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction("w-1", "train", eviction("w-1"))
    assert refused.value.status == 429
    assert refused.value.headers["Retry-After"] == "10"
    assert "would violate the pod's disruption budget" in refused.value.body
    assert '"reason": "TooManyRequests"' in refused.value.body
    assert cluster.pod("train", "w-1") is not None
    with pytest.raises(ApiException) as internal:
        core.create_namespaced_pod_eviction("w-1", "train", eviction("w-1"))
    assert internal.value.status == 500 and "InternalError" in internal.value.body
    core.create_namespaced_pod_eviction("w-1", "train", eviction("w-1"))
    assert cluster.pod("train", "w-1") is None
    assert [e[2] for e in cluster.evictions] == [429, 500, 201]
    assert cluster.mutations == [("POST", "/api/v1/namespaces/train/pods/w-1/eviction")] * 3


def test_pdb_refusal_without_retry_after(cluster: ClusterServer, core: k8s.CoreV1Api) -> None:
    cluster.eviction_script[("train", "w-1")] = [429]
    cluster.eviction_retry_after = 0
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction("w-1", "train", eviction("w-1"))
    assert refused.value.status == 429 and "Retry-After" not in refused.value.headers


def test_eviction_name_must_match_the_url(cluster: ClusterServer, core: k8s.CoreV1Api) -> None:
    with pytest.raises(ApiException) as bad:
        core.create_namespaced_pod_eviction("w-0", "train", eviction("w-1"))
    assert bad.value.status == 400
    assert cluster.pod("train", "w-0") is not None and cluster.evictions == []


def test_delete_pod(cluster: ClusterServer, core: k8s.CoreV1Api) -> None:
    deleted = core.delete_namespaced_pod("ds-0", "kube-system", grace_period_seconds=0)
    assert deleted.metadata.name == "ds-0"
    assert cluster.deleted_pods == [("kube-system", "ds-0")]
    assert cluster.requests[-1].param("gracePeriodSeconds") == "0"
    assert cluster.mutations == [("DELETE", "/api/v1/namespaces/kube-system/pods/ds-0")]
    with pytest.raises(ApiException) as missing:
        core.delete_namespaced_pod("ds-0", "kube-system")
    assert missing.value.status == 404


def test_token_is_still_checked_on_writes(cluster: ClusterServer, tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "kc", cluster.url, token="wrong")
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=str(config)))
    with pytest.raises(ApiException) as denied:
        api.patch_node("n1", {"spec": {"unschedulable": True}})
    assert denied.value.status == 401 and cluster.patches == []


def test_injected_faults_apply_to_writes(cluster: ClusterServer, core: k8s.CoreV1Api) -> None:
    cluster.inject(Fault.SERVER_ERROR, path="/eviction")
    with pytest.raises(ApiException) as failed:
        core.create_namespaced_pod_eviction("w-0", "train", eviction("w-0"))
    assert failed.value.status == 500 and cluster.pod("train", "w-0") is not None
    core.create_namespaced_pod_eviction("w-0", "train", eviction("w-0"))
    assert cluster.pod("train", "w-0") is None


# --- Compute Engine ------------------------------------------------------------------------

KEY = ("proj", "z1", "gke-n1")
#: A short polling schedule for ExtendedOperation.result (the default starts at 1 s).
FAST_POLLING = polling.DEFAULT_POLLING.with_delay(initial=0.01, maximum=0.02).with_timeout(5)


@pytest.fixture
def compute() -> Iterator[ComputeOpsServer]:
    instances = {
        KEY: {
            "id": "111",
            "physicalHost": "/blk/sb/host-a",
            "scheduling": {"provisioningModel": "RESERVATION_BOUND"},
        },
        ("proj", "z1", "gke-n2"): {"id": "222"},
    }
    with ComputeOpsServer(instances) as server:
        yield server


def clients(server: ComputeOpsServer) -> tuple[Any, Any]:
    options = {"api_endpoint": server.url}
    credentials = AnonymousCredentials()
    instances = compute_v1.InstancesClient(
        transport="rest", client_options=options, credentials=credentials
    )
    operations = compute_v1.ZoneOperationsClient(
        transport="rest", client_options=options, credentials=credentials
    )
    return instances, operations


def delete_request(name: str = "gke-n1", request_id: str = R1) -> Any:
    # request_id is not a flattened keyword of delete(): it goes in the request object.
    return compute_v1.DeleteInstanceRequest(
        project="proj", zone="z1", instance=name, request_id=request_id
    )


def test_get_instance_id_and_host(compute: ComputeOpsServer) -> None:
    instances, _ = clients(compute)
    vm = instances.get(project="proj", zone="z1", instance="gke-n1", timeout=2)
    assert vm.id == 111 and vm.resource_status.physical_host == "/blk/sb/host-a"
    assert vm.status == "RUNNING"
    with pytest.raises(gexc.NotFound):
        instances.get(project="proj", zone="z1", instance="nope", timeout=2)


def test_delete_done_at_once(compute: ComputeOpsServer) -> None:
    instances, _ = clients(compute)
    op = instances.delete(request=delete_request(), timeout=2)
    request = compute.requests[-1]
    assert (request.method, request.path) == (
        "DELETE",
        "/compute/v1/projects/proj/zones/z1/instances/gke-n1",
    )
    assert request.param("requestId") == R1
    assert op.done() and op.result(timeout=2) is None  # DONE in the reply: no poll sent
    assert op.operation_type == "delete" and op.target_id == 111
    assert op.target_link.endswith("/projects/proj/zones/z1/instances/gke-n1")
    assert compute.deletes == [("proj", "z1", "gke-n1", R1)]
    assert compute.deleted == [("proj", "z1", "gke-n1", "111")]
    assert len(compute.requests) == 1
    with pytest.raises(gexc.NotFound):
        instances.get(project="proj", zone="z1", instance="gke-n1")


def test_same_request_id_deletes_once_even_after_recreation(compute: ComputeOpsServer) -> None:
    instances, _ = clients(compute)
    first = instances.delete(request=delete_request(), timeout=2)
    new_id = compute.recreate("proj", "z1", "gke-n1", "333")
    second = instances.delete(request=delete_request(), timeout=2)
    assert second.name == first.name and second.target_id == 111
    assert compute.deletes == [("proj", "z1", "gke-n1", R1)]
    vm = instances.get(project="proj", zone="z1", instance="gke-n1")
    assert vm.id == int(new_id) == 333  # the new VM survives the replayed request
    # A new request id targets the new VM.
    third = instances.delete(request=delete_request(request_id=R2), timeout=2)
    assert third.target_id == 333 and third.name != first.name


def test_running_operation_waited_with_zone_operations(compute: ComputeOpsServer) -> None:
    compute.running_polls = 2
    instances, operations = clients(compute)
    op = instances.delete(request=delete_request(), timeout=2)
    assert op.status == compute_v1.Operation.Status.RUNNING
    assert instances.get(project="proj", zone="z1", instance="gke-n1").status == "STOPPING"
    waited = operations.wait(project="proj", zone="z1", operation=op.name, timeout=2)
    assert waited.status == compute_v1.Operation.Status.RUNNING
    got = operations.get(project="proj", zone="z1", operation=op.name, timeout=2)
    assert got.status == compute_v1.Operation.Status.DONE and not got.error.errors
    assert [(r.method, r.path.rsplit("/", 2)[-2:]) for r in compute.requests[1:]] == [
        ("GET", ["instances", "gke-n1"]),
        ("POST", [op.name, "wait"]),
        ("GET", ["operations", op.name]),
    ]
    assert compute.deleted == [("proj", "z1", "gke-n1", "111")]


def test_extended_operation_polls_the_default_endpoint(compute: ComputeOpsServer) -> None:
    """Gotcha: ``delete().result()`` polls through a ZoneOperationsClient the transport builds
    WITHOUT the client's api_endpoint, i.e. https://compute.googleapis.com. Against a fake
    (or a private endpoint) a RUNNING operation must be waited with our own ZoneOperationsClient,
    or that inner client must be replaced, as done here."""
    instances, operations = clients(compute)
    inner = instances._transport._zone_operations_client
    assert inner._transport._host == "https://compute.googleapis.com"
    instances._transport._extended_operations_services["zone_operations"] = operations
    compute.running_polls = 2
    op = instances.delete(request=delete_request(), timeout=2)
    assert not op.done()
    assert op.result(polling=FAST_POLLING) is None
    assert [r.path.split("/")[-2] for r in compute.requests[1:]] == ["operations"] * 2
    assert compute.deleted == [("proj", "z1", "gke-n1", "111")]


def test_operation_error_surfaces(compute: ComputeOpsServer) -> None:
    compute.operation_errors["gke-n1"] = {
        "code": "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE",
        "message": "The instance is in use by an instance group.",
    }
    instances, operations = clients(compute)
    op = instances.delete(request=delete_request(), timeout=2)
    with pytest.raises(gexc.BadRequest, match="BAD REQUEST") as failed:
        op.result(timeout=2)
    assert failed.value.errors[0].code == "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"
    polled = operations.get(project="proj", zone="z1", operation=op.name)
    assert polled.error.errors[0].message == "The instance is in use by an instance group."
    assert polled.http_error_status_code == 400
    assert compute.deleted == [] and instances.get(project="proj", zone="z1", instance="gke-n1")


def test_operation_error_after_running(compute: ComputeOpsServer) -> None:
    compute.running_polls = 1
    compute.operation_errors[("gke-n1", "delete")] = {"code": "INTERNAL", "message": "boom"}
    instances, operations = clients(compute)
    op = instances.delete(request=delete_request(), timeout=2)
    assert not op.error.errors
    waited = operations.wait(project="proj", zone="z1", operation=op.name)
    assert waited.status == compute_v1.Operation.Status.DONE
    assert waited.error.errors[0].code == "INTERNAL"
    vm = instances.get(project="proj", zone="z1", instance="gke-n1")
    assert vm.status == "RUNNING"


def test_report_host_as_faulty(compute: ComputeOpsServer) -> None:
    instances, operations = clients(compute)
    body = compute_v1.InstancesReportHostAsFaultyRequest(
        disruption_schedule="IMMEDIATE",
        fault_reasons=[
            compute_v1.InstancesReportHostAsFaultyRequestFaultReason(
                behavior="PERFORMANCE", description="XID 79 on host-a"
            )
        ],
    )
    request = compute_v1.ReportHostAsFaultyInstanceRequest(
        project="proj",
        zone="z1",
        instance="gke-n1",
        request_id=F1,
        instances_report_host_as_faulty_request_resource=body,
    )
    op = instances.report_host_as_faulty(request=request, timeout=2)
    sent = compute.requests[-1]
    assert (sent.method, sent.path) == (
        "POST",
        "/compute/v1/projects/proj/zones/z1/instances/gke-n1/reportHostAsFaulty",
    )
    assert sent.param("requestId") == F1
    assert sent.json() == {
        "disruptionSchedule": "IMMEDIATE",
        "faultReasons": [{"behavior": "PERFORMANCE", "description": "XID 79 on host-a"}],
    }
    assert op.operation_type == "reportHostAsFaulty" and op.result(timeout=2) is None
    again = instances.report_host_as_faulty(request=request, timeout=2)
    assert again.name == op.name and len(compute.fault_reports) == 1
    assert operations.get(project="proj", zone="z1", operation=op.name).target_id == 111
    assert instances.get(project="proj", zone="z1", instance="gke-n1").id == 111  # not deleted


def test_a_vm_not_from_a_reservation_cannot_be_reported(compute: ComputeOpsServer) -> None:
    """ "Troubleshoot the faulty host API": INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED."""
    from google.api_core import exceptions as gexc

    instances, _ = clients(compute)
    request = compute_v1.ReportHostAsFaultyInstanceRequest(
        project="proj",
        zone="z1",
        instance="gke-n2",  # no scheduling: Compute's default provisioning model, STANDARD
        instances_report_host_as_faulty_request_resource=compute_v1.InstancesReportHostAsFaultyRequest(
            disruption_schedule="IMMEDIATE"
        ),
    )
    with pytest.raises(gexc.BadRequest, match="INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED"):
        instances.report_host_as_faulty(request=request, timeout=2)
    assert compute.fault_reports == []


def test_unknown_operation_and_instance(compute: ComputeOpsServer) -> None:
    instances, operations = clients(compute)
    with pytest.raises(gexc.NotFound):
        operations.get(project="proj", zone="z1", operation="operation-missing")
    with pytest.raises(gexc.NotFound):
        instances.delete(request=delete_request("nope"), timeout=2)
    assert compute.deletes == []


# --- Cloud Support -------------------------------------------------------------------------


@pytest.fixture
def support() -> Iterator[SupportServer]:
    with SupportServer() as server:
        yield server


def case_client(server: SupportServer) -> Any:
    from google.cloud import support_v2

    return support_v2.CaseServiceClient(
        transport="rest",
        client_options={"api_endpoint": server.url},
        credentials=AnonymousCredentials(),
    )


def test_search_classifications_then_create_case(support: SupportServer) -> None:
    from google.cloud import support_v2

    cases = case_client(support)
    found = list(
        cases.search_case_classifications(
            request={"query": 'display_name:"*Compute Engine > Instance*"'}, timeout=2
        )
    )
    assert [c.display_name for c in found] == ["Compute > Compute Engine > Instance"]
    sent = support.requests[-1]
    assert (sent.method, sent.path) == ("GET", "/v2/caseClassifications:search")
    assert sent.param("query") == 'display_name:"*Compute Engine > Instance*"'

    case = cases.create_case(
        parent="projects/proj",
        case=support_v2.Case(
            display_name="Faulty host /blk/sb/host-a",
            description="XID 79 on gke-n1",
            classification=support_v2.CaseClassification(id=found[0].id),
            priority=support_v2.Case.Priority.P2,
        ),
        timeout=2,
    )
    sent = support.requests[-1]
    assert (sent.method, sent.path) == ("POST", "/v2/projects/proj/cases")
    assert sent.json()["priority"] == 3  # enum-encoding=int: enums travel as numbers
    assert case.name == "projects/proj/cases/50000001"
    assert case.state == support_v2.Case.State.NEW
    assert case.priority == support_v2.Case.Priority.P2
    assert case.create_time.isoformat().startswith("2026-05-20T15:15:00")
    assert case.classification.display_name == "Compute > Compute Engine > Instance"
    assert support.cases[case.name]["state"] == "NEW"
    assert support.cases[case.name]["priority"] == "P2"
    assert cases.get_case(name=case.name).display_name == "Faulty host /blk/sb/host-a"
    org = cases.create_case(
        parent="organizations/42",
        case=support_v2.Case(
            display_name="x", classification=support_v2.CaseClassification(id=found[0].id)
        ),
    )
    assert org.name.startswith("organizations/42/cases/")
    assert [c.name for c in cases.list_cases(parent="projects/proj")] == [case.name]


def test_case_needs_a_known_classification(support: SupportServer) -> None:
    from google.cloud import support_v2

    cases = case_client(support)
    with pytest.raises(gexc.BadRequest, match="classification"):
        cases.create_case(
            parent="projects/proj",
            case=support_v2.Case(
                display_name="x", classification=support_v2.CaseClassification(id="made-up")
            ),
        )
    assert support.cases == {}
    support.inject(Fault.FORBIDDEN, path="/cases")
    with pytest.raises(gexc.Forbidden):
        cases.create_case(parent="projects/proj", case=support_v2.Case(display_name="x"))
