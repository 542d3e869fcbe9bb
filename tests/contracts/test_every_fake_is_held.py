"""The fakes answer as their contracts say, and what a fake records is handed to the run."""

from __future__ import annotations

import pytest
import requests
from fakeservers import ChatServer, ComputeOpsServer, ComputeServer, Fault
from fakeservers.base import take_violations
from google.api_core import exceptions as gexc
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1 as gce

pytest_plugins = ["pytester"]

PROJECT, ZONE, VM = "customer-ai-project-123", "us-east5-a", "gke-a3-pool-7f2c-x1"
REQUEST_ID = "0f8fad5b-d9cb-469f-a165-70867728950e"
RESERVED = {"scheduling": {"provisioningModel": "RESERVATION_BOUND"}}


def instances(url: str) -> gce.InstancesClient:
    return gce.InstancesClient(
        transport="rest", client_options={"api_endpoint": url}, credentials=AnonymousCredentials()
    )


def report(client: gce.InstancesClient, **body: object) -> object:
    resource = gce.InstancesReportHostAsFaultyRequest(**body)  # type: ignore[arg-type]
    return client.report_host_as_faulty_unary(
        request=gce.ReportHostAsFaultyInstanceRequest(
            project=PROJECT,
            zone=ZONE,
            instance=VM,
            request_id=REQUEST_ID,
            instances_report_host_as_faulty_request_resource=resource,
        ),
        timeout=5,
    )


def test_compute_refuses_what_the_description_refuses_with_a_google_error() -> None:
    with ComputeOpsServer({(PROJECT, ZONE, VM): RESERVED}) as server:
        client = instances(server.url)
        with pytest.raises(gexc.BadRequest, match="Only IMMEDIATE is allowed"):
            report(client, disruption_schedule="FUTURE")
        with pytest.raises(gexc.BadRequest, match="Required field 'resource.disruptionSchedule'"):
            report(client)
        path = f"/compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/{VM}/reportHostAsFaulty"
        raw = requests.post(server.url + path, json={"disruptionSchedule": "FUTURE"}, timeout=5)
        assert server.fault_reports == []
        # The requests break the contract (sent on purpose here); the 400 answers keep it.
        found = server.take_violations()
    assert [(v.direction, v.where) for v in found] == [("request", "body.disruptionSchedule")] * 3
    assert raw.status_code == 400
    assert raw.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_compute_refuses_a_request_id_that_is_not_a_uuid() -> None:
    with ComputeOpsServer({(PROJECT, ZONE, VM): RESERVED}) as server:
        delete = gce.DeleteInstanceRequest(
            project=PROJECT, zone=ZONE, instance=VM, request_id="r-1"
        )
        with pytest.raises(gexc.BadRequest, match="must be a valid UUID"):
            instances(server.url).delete_unary(request=delete, timeout=5)
        assert server.deletes == []
        assert [v.where for v in server.take_violations()] == ["query.requestId"]


def test_every_instance_answers_scheduling_and_reservation_affinity() -> None:
    a3 = {"machineType": f"zones/{ZONE}/machineTypes/a3-highgpu-8g", **RESERVED}
    with (
        ComputeOpsServer({(PROJECT, ZONE, VM): a3, (PROJECT, ZONE, "plain"): {}}) as ops,
        ComputeServer({(PROJECT, ZONE, VM): "/b/s/h"}) as reader,
    ):
        gpu = instances(ops.url).get(project=PROJECT, zone=ZONE, instance=VM)
        plain = instances(ops.url).get(project=PROJECT, zone=ZONE, instance="plain")
        read = instances(reader.url).get(project=PROJECT, zone=ZONE, instance=VM)
    assert gpu.scheduling.provisioning_model == "RESERVATION_BOUND"
    assert gpu.scheduling.on_host_maintenance == "TERMINATE"
    assert plain.scheduling.provisioning_model == "STANDARD"
    assert plain.scheduling.on_host_maintenance == "MIGRATE"
    for vm in (gpu, plain, read):
        assert vm.scheduling.automatic_restart is True
        assert vm.reservation_affinity.consume_reservation_type == "ANY_RESERVATION" or vm is gpu


def test_chat_reply_or_fail_with_a_new_thread_key_starts_a_thread() -> None:
    """chat.v1.json, REPLY_MESSAGE_OR_FAIL: "If a new thread_key is used, a new thread is
    created"; a thread name that does not exist is NOT_FOUND."""
    with ChatServer() as chat:
        url = chat.webhook_url() + "&messageReplyOption=REPLY_MESSAGE_OR_FAIL"
        first = requests.post(url + "&threadKey=inc-1", json={"text": "a"}, timeout=5)
        again = requests.post(url + "&threadKey=inc-1", json={"text": "b"}, timeout=5)
        assert first.status_code == again.status_code == 200
        assert first.json()["thread"] == again.json()["thread"]
        lost = {"text": "c", "thread": {"name": "spaces/AAAAloopbrk/threads/gone"}}
        assert requests.post(url, json=lost, timeout=5).status_code == 404
        assert chat.take_violations() == []


def test_violations_are_taken_once_and_a_malformed_fault_is_exempt() -> None:
    with ComputeServer({(PROJECT, ZONE, VM): None}) as server:
        path = f"{server.url}/compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/{VM}"
        requests.get(path, params={"colour": "red"}, timeout=5)
        server.inject(Fault.MALFORMED)
        requests.get(path, timeout=5)
        found = take_violations()
        assert [(type(s).__name__, v.where) for s, v in found] == [
            ("ComputeServer", "query.colour")
        ]
        assert take_violations() == [] and len(server.contract_violations) == 1


def test_the_plugin_fails_the_test_whose_fake_saw_the_violation(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["contracts.plugin"]')
    pytester.makepyfile(
        """
        import requests
        from fakeservers import ComputeServer

        def test_clean():
            with ComputeServer({("p", "z1", "vm"): None}) as server:
                requests.get(server.url + "/compute/v1/projects/p/zones/z1/instances/vm")

        def test_sends_an_unknown_parameter():
            with ComputeServer({("p", "z1", "vm"): None}) as server:
                requests.get(server.url + "/compute/v1/projects/p/zones/z1/instances/vm?x=1")
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_sends_an_unknown_parameter*",
            "*ComputeServer: compute.v1 compute.instances.get request query.x: not a parameter*",
        ]
    )
