"""A stateful fake of Compute Engine v1 instances with zonal operations (delete, faulty host).

Routes, as ``google-cloud-compute``'s REST transport sends them:

* ``GET    /compute/v1/projects/{p}/zones/{z}/instances/{name}``
* ``DELETE /compute/v1/projects/{p}/zones/{z}/instances/{name}?requestId=R``
* ``POST   /compute/v1/projects/{p}/zones/{z}/instances/{name}/reportHostAsFaulty?requestId=R``
* ``GET    /compute/v1/projects/{p}/zones/{z}/operations/{op}``
* ``POST   /compute/v1/projects/{p}/zones/{z}/operations/{op}/wait``

A ``requestId`` seen before (per project) answers with the operation it created, in its
current state, and changes nothing. An operation remembers the instance id it targets: it only
deletes that VM, never one recreated under the same name (:meth:`ComputeOpsServer.recreate`).

Knobs: ``running_polls`` (operations answer RUNNING to that many get/wait calls before DONE;
``running_polls_for[instance]`` per instance) and ``operation_errors[instance]`` or
``operation_errors[(instance, operationType)]`` = ``{"code", "message"}`` (optionally
``httpErrorStatusCode``/``httpErrorMessage``; 400 "BAD REQUEST" otherwise) for operations that
finish DONE with an ``error``; a failed delete leaves the instance in place.
"""

from __future__ import annotations

import copy
import functools
import itertools
import re
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contracts.discovery import compute_v1, document
from contracts.schemas import flags_of

from .base import Request, Response
from .google import GoogleApiServer, compute_defaults

BASE = "https://www.googleapis.com/compute/v1"

Key = tuple[str, str, str]


@dataclass
class _Operation:
    body: dict[str, Any]
    key: Key
    target_id: str
    polls_left: int
    error: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ComputeOpsServer(GoogleApiServer):
    """Instances keyed by (project, zone, name) that delete and report faulty hosts."""

    contract = compute_v1()

    _PREFIX = r"^/compute/v1/projects/([^/]+)/zones/([^/]+)"
    _INSTANCE = re.compile(_PREFIX + r"/instances/([^/]+)$")
    _FAULTY = re.compile(_PREFIX + r"/instances/([^/]+)/reportHostAsFaulty$")
    _OPERATION = re.compile(_PREFIX + r"/operations/([^/]+?)(/wait)?$")

    def __init__(self, instances: Mapping[Key, Mapping[str, Any]] | None = None) -> None:
        super().__init__()
        self._ids = itertools.count(4_000_000_000_000_000_001)
        self._op_numbers = itertools.count(1)
        #: (project, zone, name) -> {"id", "physicalHost"?, "status"?, other Instance fields}.
        self.instances: dict[Key, dict[str, Any]] = {}
        for key, spec in (instances or {}).items():
            record = dict(spec)
            record["id"] = str(record.get("id") or next(self._ids))
            self.instances[key] = record
        self.running_polls = 0
        self.running_polls_for: dict[str, int] = {}
        self.operation_errors: dict[str | tuple[str, str], dict[str, Any]] = {}
        #: (project, zone, name, requestId) per delete that created an operation.
        self.deletes: list[tuple[str, str, str, str | None]] = []
        #: (project, zone, name, requestId, request body) per accepted report.
        self.fault_reports: list[tuple[str, str, str, str | None, Any]] = []
        #: (project, zone, name, id) per VM actually removed (its delete operation finished).
        self.deleted: list[tuple[str, str, str, str]] = []
        self.operations: dict[tuple[str, str, str], _Operation] = {}
        self._by_request_id: dict[tuple[str, str], _Operation] = {}
        self._state = threading.RLock()

    # --- test helpers -----------------------------------------------------------------

    def recreate(self, project: str, zone: str, name: str, new_id: str | None = None) -> str:
        """A VM under the same name with a new id (GKE re-creating a node); returns the id."""
        with self._state:
            old = self.instances.get((project, zone, name), {})
            record = {k: v for k, v in old.items() if k != "status"}
            record["id"] = str(new_id or next(self._ids))
            self.instances[(project, zone, name)] = record
            return record["id"]

    def operation(self, name: str) -> dict[str, Any]:
        """The current JSON of an operation, by name (any project and zone)."""
        with self._state:
            return copy.deepcopy(
                next(op.body for (_, _, n), op in self.operations.items() if n == name)
            )

    # --- routing ----------------------------------------------------------------------

    def route(self, request: Request) -> Response:
        with self._state:
            return self._route(request)

    def _route(self, request: Request) -> Response:
        method, path = request.method, request.path
        if match := self._INSTANCE.match(path):
            key: Key = match.groups()  # type: ignore[assignment]
            if method == "GET":
                return self._get_instance(key)
            if method == "DELETE":
                return self._delete(key, request)
        elif (match := self._FAULTY.match(path)) and method == "POST":
            return self._report_faulty(match.groups(), request)  # type: ignore[arg-type]
        elif match := self._OPERATION.match(path):
            project, zone, name, wait = match.groups()
            if (method, bool(wait)) in {("GET", False), ("POST", True)}:
                return self._poll(project, zone, name)
        return self.error(404, f"no route {method} {path}")

    # --- instances --------------------------------------------------------------------

    def _not_found(self, key: Key) -> Response:
        project, zone, name = key
        return self.error(
            404, f"The resource 'projects/{project}/zones/{zone}/instances/{name}' was not found"
        )

    def _get_instance(self, key: Key) -> Response:
        record = self.instances.get(key)
        if record is None:
            return self._not_found(key)
        project, zone, name = key
        instance: dict[str, Any] = {
            "kind": "compute#instance",
            "name": name,
            "zone": f"{BASE}/projects/{project}/zones/{zone}",
            "selfLink": _instance_link(key),
            "status": "RUNNING",
        }
        for k, v in record.items():
            if k != "physicalHost":
                instance[k] = copy.deepcopy(v)
        instance.update(compute_defaults(record))
        if record.get("physicalHost"):
            instance["resourceStatus"] = {"physicalHost": record["physicalHost"]}
        return Response.json(instance)

    def _delete(self, key: Key, request: Request) -> Response:
        request_id = request.param("requestId")
        if (refusal := _request_id_refusal(request_id)) is not None:
            return self.error(400, refusal)
        if (earlier := self._replay(key[0], request_id)) is not None:
            return earlier
        record = self.instances.get(key)
        if record is None:
            return self._not_found(key)
        if record.get("status") == "STOPPING":
            # Compute refuses a second delete (another requestId) while one is running.
            project, zone, name = key
            return self.error(
                400, f"The resource 'projects/{project}/zones/{zone}/instances/{name}' is not ready"
            )
        op = self._start(key, "delete", record["id"], request_id)
        self.deletes.append((*key, request_id))
        if op.body["status"] != "DONE":
            record["status"] = "STOPPING"
        return Response.json(op.body)

    def _report_faulty(self, key: Key, request: Request) -> Response:
        request_id = request.param("requestId")
        if (refusal := _request_id_refusal(request_id)) is not None:
            return self.error(400, refusal)
        if (earlier := self._replay(key[0], request_id)) is not None:
            return earlier
        record = self.instances.get(key)
        if record is None:
            return self._not_found(key)
        try:
            body = request.json()
        except ValueError:
            return self.error(400, "Invalid JSON payload received.")
        if not isinstance(body, dict):
            return self.error(400, "Invalid JSON payload received.")
        required, schedules, behaviors = _report_rules()
        schedule = body.get("disruptionSchedule")
        if schedule is None and required:
            return self.error(400, "Required field 'resource.disruptionSchedule' not specified")
        if schedule is not None and schedule not in schedules:
            return self.error(
                400,
                f"Invalid value for field 'resource.disruptionSchedule': {schedule!r}. "
                f"Only {', '.join(sorted(schedules))} is allowed.",
            )
        for reason in body.get("faultReasons") or []:
            if reason.get("behavior", "BEHAVIOR_UNSPECIFIED") not in behaviors:
                return self.error(
                    400,
                    f"Invalid value for field 'resource.faultReasons.behavior': "
                    f"{reason.get('behavior')!r}.",
                )
        refusal = self.report_refusal(key)
        if refusal is not None:
            return self.error(400, refusal)
        return Response.json(self.report(key, body, request_id).body)

    def report_refusal(self, key: Key) -> str | None:
        """Why Compute refuses a report for this VM ("Troubleshoot the faulty host API",
        docs.cloud.google.com/ai-hypercomputer/docs/troubleshooting/troubleshoot-faulty-host-api):
        not RUNNING, or not created from a reservation (``scheduling.provisioningModel``,
        STANDARD when the record says nothing, as Compute's default)."""
        record = self.instances.get(key) or {}
        if record.get("status", "RUNNING") != "RUNNING":
            return "INSTANCE_SHOULD_BE_RUNNING"
        model = (record.get("scheduling") or {}).get("provisioningModel", "STANDARD")
        affinity = (record.get("reservationAffinity") or {}).get("consumeReservationType")
        if model != "RESERVATION_BOUND" and affinity != "SPECIFIC_RESERVATION":
            return "INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED"
        return None

    def report(self, key: Key, body: dict[str, Any], request_id: str | None) -> _Operation:
        """Accept a report (the route above, or GKE's report-and-replace) as an operation."""
        with self._state:
            op = self._start(key, "reportHostAsFaulty", self.instances[key]["id"], request_id)
            self.fault_reports.append((*key, request_id, body))
            return op

    # --- operations -------------------------------------------------------------------

    def _replay(self, project: str, request_id: str | None) -> Response | None:
        if request_id is None:
            return None
        op = self._by_request_id.get((project, request_id))
        return None if op is None else Response.json(op.body)

    def _start(self, key: Key, kind: str, target_id: str, request_id: str | None) -> _Operation:
        project, zone, name = key
        number = next(self._op_numbers)
        op_name = f"operation-{1_779_264_000_000 + number}-{number:013x}-5d1b2c3a-9f8e7d6c"
        zone_url = f"{BASE}/projects/{project}/zones/{zone}"
        body: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(7_000_000_000_000_000_000 + number),
            "name": op_name,
            "zone": zone_url,
            "operationType": kind,
            "targetLink": _instance_link(key),
            "targetId": target_id,
            "status": "RUNNING",
            "user": "remediator@example.iam.gserviceaccount.com",
            "progress": 0,
            "insertTime": "2026-05-20T08:15:00.000-07:00",
            "startTime": "2026-05-20T08:15:00.100-07:00",
            "selfLink": f"{zone_url}/operations/{op_name}",
        }
        error = self.operation_errors.get((name, kind), self.operation_errors.get(name))
        polls = self.running_polls_for.get(name, self.running_polls)
        op = _Operation(body, key, target_id, polls, copy.deepcopy(error))
        self.operations[(project, zone, op_name)] = op
        if request_id is not None:
            self._by_request_id[(project, request_id)] = op
        if polls <= 0:
            self._finish(op)
        return op

    def _poll(self, project: str, zone: str, name: str) -> Response:
        op = self.operations.get((project, zone, name))
        if op is None:
            return self.error(
                404,
                f"The resource 'projects/{project}/zones/{zone}/operations/{name}' was not found",
            )
        if op.body["status"] != "DONE":
            op.polls_left -= 1
            if op.polls_left <= 0:
                self._finish(op)
            else:
                op.body["progress"] = 50
        return Response.json(op.body)

    def _finish(self, op: _Operation) -> None:
        op.body.update(status="DONE", progress=100, endTime="2026-05-20T08:15:30.000-07:00")
        record = self.instances.get(op.key)
        current = record is not None and record["id"] == op.target_id
        if op.error is not None:
            error = dict(op.error)
            op.body["httpErrorStatusCode"] = int(error.pop("httpErrorStatusCode", 400))
            op.body["httpErrorMessage"] = str(error.pop("httpErrorMessage", "BAD REQUEST"))
            op.body["error"] = {"errors": [error]}
            if current and record is not None and record.get("status") == "STOPPING":
                record["status"] = "RUNNING"
            return
        if op.body["operationType"] == "delete" and current:
            del self.instances[op.key]
            self.deleted.append((*op.key, op.target_id))


def _request_id_refusal(request_id: str | None) -> str | None:
    """compute.v1.json, ``requestId`` of every mutating method: "The request ID must be a valid
    UUID with the exception that zero UUID is not supported"."""
    if request_id is None:
        return None
    try:
        if uuid.UUID(request_id).int != 0:
            return None
    except ValueError:
        pass
    return (
        f"Invalid value for field 'requestId': {request_id!r}. The request ID must be a valid "
        "UUID with the exception that zero UUID is not supported."
    )


@functools.cache
def _report_rules() -> tuple[bool, frozenset[str], frozenset[str]]:
    """What ``reportHostAsFaulty`` takes, as compute.v1.json (google-api-python-client
    2.202.0) says: ``disruptionSchedule`` "Required field, only allows IMMEDIATE" (the enum
    also lists DISRUPTION_SCHEDULE_UNSPECIFIED, "Not used", and FUTURE; the description
    narrows it), ``faultReasons[].behavior`` one of its enum. Read from the document, so the
    fake follows it when a release of the document allows more."""
    schemas = document("compute.v1")["schemas"]
    prop = schemas["InstancesReportHostAsFaultyRequest"]["properties"]["disruptionSchedule"]
    flags = flags_of(prop)
    schedules = flags.only or frozenset(prop["enum"]) - {"DISRUPTION_SCHEDULE_UNSPECIFIED"}
    reason = schemas["InstancesReportHostAsFaultyRequestFaultReason"]["properties"]
    return flags.required, schedules, frozenset(reason["behavior"]["enum"])


def _instance_link(key: Key) -> str:
    project, zone, name = key
    return f"{BASE}/projects/{project}/zones/{zone}/instances/{name}"
