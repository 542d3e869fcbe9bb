"""The discovery-document contract (compute.v1, chat.v1): what it reports and what it lets
through, on hand-made requests and on those the real client libraries send."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fakeservers import ChatServer, ComputeOpsServer, ComputeServer, Request, Response
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1 as gce

from contracts.discovery import Violation, chat_v1, compute_v1
from contracts.schemas import description_flags

PROJECT, ZONE, VM = "customer-ai-project-123", "us-east5-a", "gke-a3-pool-7f2c-x1"
INSTANCE = f"/compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/{VM}"
REPORT = f"{INSTANCE}/reportHostAsFaulty"
REQUEST_ID = "0f8fad5b-d9cb-469f-a165-70867728950e"


def request(method: str, path: str, body: Any = None, **query: str) -> Request:
    raw = b"" if body is None else json.dumps(body).encode()
    return Request(method, path, {k: [v] for k, v in query.items()}, {}, raw)


def messages(found: list[Violation]) -> list[str]:
    return [f"{v.where}: {v.message}" for v in found]


def report(**body: Any) -> list[Violation]:
    return compute_v1().check_request(request("POST", REPORT, body, requestId=REQUEST_ID))


# --- the description parse ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("description", "enum", "expected"),
    [
        (
            "The disruption schedule for the VM. Required field, only allows IMMEDIATE.",
            ("DISRUPTION_SCHEDULE_UNSPECIFIED", "FUTURE", "IMMEDIATE"),
            (True, False, False, frozenset({"IMMEDIATE"})),
        ),
        ("Required. The title of the card header.", (), (True, False, False, None)),
        ("[Required] List of nodes affected by the call.", (), (True, False, False, None)),
        ("Key. Required if the source image is protected.", (), (False, False, False, None)),
        ("Optional. Required when creating a space.", (), (False, False, False, None)),
        ("Output only. [Output Only] Type of the resource.", (), (False, True, False, None)),
        ("[Output Only] Server-defined URL for the resource.", (), (False, True, False, None)),
        (
            "Optional. The type of space. Output only for other usage.",
            (),
            (False, False, False, None),
        ),
        ("Input only. Parameters that a Chat app can use.", (), (False, False, True, None)),
        # "only allows" followed by prose, or by a word that is no value of the enum.
        ("If false, only allows access from the local region.", (), (False, False, False, None)),
        ("Only allows FOO here.", ("BAR",), (False, False, False, None)),
    ],
)
def test_description_flags(description: str, enum: tuple[str, ...], expected: tuple) -> None:  # type: ignore[type-arg]
    flags = description_flags(description, enum)
    assert (flags.required, flags.output_only, flags.input_only, flags.only) == expected


# --- requests -----------------------------------------------------------------------------


def test_a_valid_report_passes() -> None:
    assert report(disruptionSchedule="IMMEDIATE", faultReasons=[{"behavior": "PERFORMANCE"}]) == []


def test_future_is_refused_by_the_description_though_the_enum_lists_it() -> None:
    found = report(disruptionSchedule="FUTURE", faultReasons=[{"behavior": "PERFORMANCE"}])
    assert messages(found) == [
        "body.disruptionSchedule: 'FUTURE' is refused: the description says only "
        "['IMMEDIATE'] ('Required field, only allows IMMEDIATE.')"
    ]
    # Cited: the document, the pointer to the field, the library version.
    assert found[0].source.startswith(
        "compute.v1.json#/schemas/InstancesReportHostAsFaultyRequest/properties/"
        "disruptionSchedule (revision "
    )
    assert "google-api-python-client 2." in found[0].source


def test_a_missing_required_field_is_reported() -> None:
    found = report(faultReasons=[{"behavior": "PERFORMANCE"}])
    assert messages(found) == ["body.disruptionSchedule: missing: the description says Required"]


def test_an_unknown_body_field_and_a_wrong_enum_are_reported() -> None:
    found = report(
        disruptionSchedule="IMMEDIATE",
        faultReasons=[{"behavior": "GPU_ON_FIRE", "reason": "x"}],
        urgent=True,
    )
    assert sorted(messages(found)) == [
        "body.faultReasons[0].behavior: 'GPU_ON_FIRE' is not one of ['BEHAVIOR_UNSPECIFIED', "
        "'CHIP_ERROR', 'PERFORMANCE', 'SILENT_DATA_CORRUPTION', 'UNRECOVERABLE_GPU_ERROR']",
        "body.faultReasons[0].reason: unknown field 'reason'",
        "body.urgent: unknown field 'urgent'",
    ]


def test_types_are_checked() -> None:
    found = report(disruptionSchedule="IMMEDIATE", faultReasons={"behavior": "PERFORMANCE"})
    assert messages(found) == ["body.faultReasons: dict where an array is"]


def test_query_and_path_parameters() -> None:
    contract = compute_v1()
    assert contract.check_request(request("GET", INSTANCE)) == []
    assert contract.check_request(request("GET", INSTANCE, prettyPrint="false", alt="json")) == []
    # "$alt" is a system parameter's URL alias; its options follow a semicolon.
    assert (
        contract.check_request(request("GET", INSTANCE, **{"$alt": "json;enum-encoding=int"})) == []
    )
    found = contract.check_request(request("GET", INSTANCE, force="true", prettyPrint="yes"))
    assert sorted(messages(found)) == [
        "query.force: not a parameter of this method nor a standard parameter",
        "query.prettyPrint: 'yes' is not a boolean",
    ]
    bad_zone = INSTANCE.replace(ZONE, "US_EAST5")
    assert [v.where for v in contract.check_request(request("GET", bad_zone))] == ["path.zone"]
    # requestId is declared by delete, not by get.
    found = contract.check_request(request("GET", INSTANCE, requestId=REQUEST_ID))
    assert [v.where for v in found] == ["query.requestId"]


def test_a_request_id_must_be_a_uuid_as_the_description_says() -> None:
    contract = compute_v1()
    assert contract.check_request(request("DELETE", INSTANCE, requestId=REQUEST_ID)) == []
    zero = "00000000-0000-0000-0000-000000000000"
    found = contract.check_request(request("DELETE", INSTANCE, requestId="r-1"))
    found += contract.check_request(request("DELETE", INSTANCE, requestId=zero))
    assert messages(found) == [
        "query.requestId: 'r-1' is not a valid UUID, which the description requires",
        "query.requestId: the zero UUID, which the description says is not supported",
    ]


def test_an_unknown_method_and_a_body_where_none_is_taken() -> None:
    contract = compute_v1()
    found = contract.check_request(request("POST", f"{INSTANCE}/explode"))
    assert [v.message for v in found] == [
        "no method of the discovery document has this HTTP method and path"
    ]
    found = contract.check_request(request("DELETE", INSTANCE, {"force": True}))
    assert messages(found) == ["body: a body sent to a method that takes none"]


def test_chat_output_only_field_and_field_mask() -> None:
    contract = chat_v1()
    path = "/v1/spaces/AAAAloopbrk/messages"
    assert contract.check_request(request("POST", path, {"text": "hi"}, messageId="client-a")) == []
    found = contract.check_request(request("POST", path, {"text": "hi", "formattedText": "*hi*"}))
    assert messages(found) == ["body.formattedText: an Output Only field sent in a request"]
    # The webhook URL's token is documented by Chat's webhook guide, not the document.
    assert contract.check_request(request("POST", path, {"text": "hi"}, key="k", token="t")) == []
    patch = f"{path}/m1"
    ok = request("PATCH", patch, {"text": "x"}, updateMask="text,cards_v2")
    assert contract.check_request(ok) == []
    found = contract.check_request(request("PATCH", patch, {"text": "x"}, updateMask="text,colour"))
    assert messages(found) == [
        "query.updateMask: field mask path 'colour' names no field of Message"
    ]
    found = contract.check_request(
        request("POST", path, {"text": "x"}, messageReplyOption="ALWAYS")
    )
    assert [v.where for v in found] == ["query.messageReplyOption"]


# --- responses ----------------------------------------------------------------------------


def test_responses_unknown_field_int64_and_null() -> None:
    contract = compute_v1()
    get = request("GET", INSTANCE)
    good = {"kind": "compute#instance", "id": "123", "name": VM, "status": "RUNNING"}
    assert contract.check_response(get, Response.json(good)) == []
    bad = {**good, "id": 123, "host": "h1", "status": "ON_FIRE", "description": None}
    assert sorted(messages(contract.check_response(get, Response.json(bad)))) == [
        "body.description: null: a Google API omits unset fields (proto3 JSON)",
        "body.host: unknown field 'host'",
        "body.id: uint64 123 as a number: Google prints it as a string",
        "body.status: 'ON_FIRE' is not one of ['DEPROVISIONING', 'PENDING', 'PENDING_STOP', "
        "'PROVISIONING', 'REPAIRING', 'RUNNING', 'STAGING', 'STOPPED', 'STOPPING', "
        "'SUSPENDED', 'SUSPENDING', 'TERMINATED']",
    ]


def test_error_bodies_are_checked_loosely() -> None:
    contract = compute_v1()
    get = request("GET", INSTANCE)
    error = {"error": {"code": 404, "message": "not found", "status": "NOT_FOUND", "errors": []}}
    assert contract.check_response(get, Response.json(error, 404)) == []
    wrong = {"error": {"code": 400, "status": "MISSING", "hint": "x"}}
    assert sorted(messages(contract.check_response(get, Response.json(wrong, 404)))) == [
        "body.error.code: 400, not the HTTP status 404",
        "body.error.hint: not a field of Google's error",
        "body.error.message: missing or not a string",
        "body.error.status: 'MISSING' is not a google.rpc.Code",
    ]


class _ChattyCompute(ComputeServer):
    """A fake that answers a field Compute does not have."""

    def route(self, request: Request) -> Response:
        response = super().route(request)
        body = json.loads(response.body)
        body["gpuTemperature"] = 93
        return Response.json(body, response.status)


def test_a_fake_answering_an_unknown_field_is_caught_through_the_real_client() -> None:
    with _ChattyCompute({(PROJECT, ZONE, VM): "host-a"}) as server:
        client = instances(server.url)
        assert client.get(project=PROJECT, zone=ZONE, instance=VM).name == VM
        found = server.take_violations()
    assert messages(found) == ["body.gpuTemperature: unknown field 'gpuTemperature'"]
    assert found[0].direction == "response" and found[0].method == "compute.instances.get"


# --- what the real client libraries send ----------------------------------------------------


def instances(url: str) -> gce.InstancesClient:
    return gce.InstancesClient(
        transport="rest", client_options={"api_endpoint": url}, credentials=AnonymousCredentials()
    )


@pytest.fixture
def compute() -> Iterator[ComputeOpsServer]:
    record = {"scheduling": {"provisioningModel": "RESERVATION_BOUND"}, "physicalHost": "/a/b/c"}
    with ComputeOpsServer({(PROJECT, ZONE, VM): record}) as server:
        server.running_polls = 1
        yield server


def test_google_cloud_compute_requests_and_the_fake_answers_pass(compute: ComputeOpsServer) -> None:
    client = instances(compute.url)
    operations = gce.ZoneOperationsClient(
        transport="rest",
        client_options={"api_endpoint": compute.url},
        credentials=AnonymousCredentials(),
    )
    client.get(project=PROJECT, zone=ZONE, instance=VM)
    body = gce.InstancesReportHostAsFaultyRequest(
        disruption_schedule="IMMEDIATE",
        fault_reasons=[
            gce.InstancesReportHostAsFaultyRequestFaultReason(
                behavior="UNRECOVERABLE_GPU_ERROR", description="Xid 79"
            )
        ],
    )
    op = client.report_host_as_faulty_unary(
        request=gce.ReportHostAsFaultyInstanceRequest(
            project=PROJECT,
            zone=ZONE,
            instance=VM,
            request_id=REQUEST_ID,
            instances_report_host_as_faulty_request_resource=body,
        )
    )
    operations.wait(project=PROJECT, zone=ZONE, operation=op.name)
    operations.get(project=PROJECT, zone=ZONE, operation=op.name)
    client.delete_unary(
        request=gce.DeleteInstanceRequest(
            project=PROJECT, zone=ZONE, instance=VM, request_id=REQUEST_ID.replace("0f", "1e")
        )
    )
    assert len(compute.requests) == 5
    assert compute.take_violations() == []


def test_the_chat_webhook_and_api_requests_pass() -> None:
    import requests

    with ChatServer(bearer="t0k") as chat:
        session = requests.Session()
        card = {"cardId": "incident", "card": {"header": {"title": "Restart loop"}}}
        url = (
            chat.webhook_url()
            + "&threadKey=inc-1&messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"
        )
        session.post(url, json={"text": "hi", "cardsV2": [card]}, timeout=5)
        api = f"{chat.url}/v1/spaces/AAAAloopbrk/messages"
        auth = {"Authorization": "Bearer t0k"}
        created = session.post(
            f"{api}?messageId=client-inc-1", json={"text": "x"}, headers=auth, timeout=5
        ).json()
        session.patch(
            f"{chat.url}/v1/{created['name']}?updateMask=text",
            json={"text": "y"},
            headers=auth,
            timeout=5,
        )
        assert [r.method for r in chat.requests] == ["POST", "POST", "PATCH"]
        assert chat.take_violations() == []
