"""Fakes of Google REST APIs: Cloud Logging v2, Compute Engine v1, GKE v1, Managed Prometheus."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

import requests
from contracts.discovery import compute_v1, container_v1, logging_v2

from loopbreaker.diagnosis.lql import LqlSyntaxError, check

from .base import FakeServer, Request, Response
from .lqleval import matches

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


#: Machine families with GPUs attached: they cannot live-migrate, so Compute sets their host
#: maintenance to TERMINATE ("GPU machine types", docs.cloud.google.com/compute/docs/gpus,
#: "VMs with GPUs ... must be set to terminate on host maintenance").
_GPU_FAMILIES = ("a2-", "a3-", "a4-", "a4x-", "g2-", "g4-")


def compute_defaults(record: Mapping[str, Any]) -> dict[str, Any]:
    """``scheduling`` and ``reservationAffinity`` as Compute answers them for every VM, the
    record's own values over Compute's defaults (compute.v1.json, google-api-python-client
    2.202.0: ``Scheduling.automaticRestart`` "By default, this is set to true",
    ``onHostMaintenance`` "For standard instances, the default behavior is MIGRATE",
    ``ReservationAffinity.consumeReservationType`` "ANY_RESERVATION (default)";
    ``provisioningModel`` STANDARD and ``preemptible`` false, as ``gcloud compute instances
    describe`` shows a VM created without them)."""
    machine = str(record.get("machineType", "")).rsplit("/", 1)[-1]
    gpu = machine.startswith(_GPU_FAMILIES)
    scheduling = {
        "automaticRestart": True,
        "onHostMaintenance": "TERMINATE" if gpu else "MIGRATE",
        "preemptible": False,
        "provisioningModel": "STANDARD",
        **(record.get("scheduling") or {}),
    }
    affinity = {
        "consumeReservationType": "ANY_RESERVATION",
        **(record.get("reservationAffinity") or {}),
    }
    return {"scheduling": scheduling, "reservationAffinity": affinity}


class GoogleApiServer(FakeServer):
    """Google JSON error bodies: ``{"error": {"code", "message", "status"}}``."""

    def error(self, status: int, message: str) -> Response:
        return Response.json(
            {
                "error": {
                    "code": status,
                    "message": message,
                    "status": _STATUS_NAMES.get(status, "UNKNOWN"),
                }
            },
            status,
        )


class LoggingServer(GoogleApiServer):
    """``POST /v2/entries:list`` over ``entries``, filtered with the query's own LQL."""

    contract = logging_v2()

    #: The API's page size when the request names none.
    default_page_size = 50

    def __init__(self, entries: list[dict[str, Any]] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entries: list[dict[str, Any]] = list(entries or [])
        #: Filters that the fake rejects as a real server would (400 INVALID_ARGUMENT).
        self.invalid_filters: set[str] = set()

    def route(self, request: Request) -> Response:
        if request.method != "POST" or request.path != "/v2/entries:list":
            return self.error(404, f"no route {request.method} {request.path}")
        body = request.json()
        query = body.get("filter", "")
        if query in self.invalid_filters:
            return self.error(400, "Invalid query filter")
        try:
            check(query)  # the API rejects a malformed filter even when nothing would match
        except LqlSyntaxError as exc:
            return self.error(400, f"Invalid query filter: {exc}")
        selected = [e for e in self.entries if matches(query, e)]
        selected.sort(key=lambda e: e.get("timestamp", ""))
        if str(body.get("orderBy", "")).endswith("desc"):
            selected.reverse()
        start = int(body.get("pageToken") or 0)
        size = int(body.get("pageSize") or self.default_page_size)
        page = selected[start : start + size]
        reply: dict[str, Any] = {"entries": page}
        if start + size < len(selected):
            reply["nextPageToken"] = str(start + size)
        return Response.json(reply)

    def filters_seen(self) -> list[str]:
        return [r.json().get("filter", "") for r in self.requests_to("/v2/entries:list")]


class ComputeServer(GoogleApiServer):
    """``GET /compute/v1/projects/{p}/zones/{z}/instances/{name}``."""

    contract = compute_v1()

    _PATH = re.compile(r"^/compute/v1/projects/([^/]+)/zones/([^/]+)/instances/([^/]+)$")

    def __init__(
        self,
        hosts: Mapping[tuple[str, str, str], str | dict[str, Any] | None] | None = None,
        maintenance: Mapping[tuple[str, str, str], dict[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        #: (project, zone, instance) -> physical host (None: an instance without one).
        self.hosts = dict(hosts or {})
        #: (project, zone, instance) -> ``resourceStatus.upcomingMaintenance`` (Compute
        #: Engine API v1 UpcomingMaintenance: type, canReschedule, windowStartTime,
        #: windowEndTime, latestWindowStartTime, maintenanceStatus).
        self.maintenance = dict(maintenance or {})

    def route(self, request: Request) -> Response:
        match = self._PATH.match(request.path)
        if request.method != "GET" or match is None:
            return self.error(404, f"no route {request.method} {request.path}")
        project, zone, name = match.groups()
        if (project, zone, name) not in self.hosts:
            return self.error(
                404,
                f"The resource 'projects/{project}/zones/{zone}/instances/{name}' was not found",
            )
        instance: dict[str, Any] = {
            "kind": "compute#instance",
            "id": str(abs(hash(name)) % 10**18),
            "name": name,
            "zone": f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}",
            "status": "RUNNING",
            **compute_defaults({}),
        }
        host = self.hosts[(project, zone, name)]
        if isinstance(host, dict):  # a whole resourceStatus (physicalHostTopology ...)
            instance["resourceStatus"] = host
        elif host is not None:
            instance["resourceStatus"] = {"physicalHost": host}
        upcoming = self.maintenance.get((project, zone, name))
        if upcoming is not None:
            instance.setdefault("resourceStatus", {})["upcomingMaintenance"] = upcoming
        return Response.json(instance)


class GkeServer(GoogleApiServer):
    """``GET /v1/projects/{p}/locations/{l}/clusters/{c}`` returning endpoint and CA."""

    contract = container_v1()

    _PATH = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/clusters/([^/]+)$")

    def __init__(self, clusters: Mapping[tuple[str, str, str], tuple[str, bytes]]) -> None:
        super().__init__()
        #: (project, location, cluster) -> (endpoint host[:port], CA certificate PEM)
        self.clusters = dict(clusters)

    def route(self, request: Request) -> Response:
        match = self._PATH.match(request.path)
        if request.method != "GET" or match is None or match.groups() not in self.clusters:
            return self.error(404, f"cluster not found: {request.path}")
        endpoint, ca_pem = self.clusters[match.groups()]  # type: ignore[index]
        return Response.json(
            {
                "name": match.group(3),
                "location": match.group(2),
                "endpoint": endpoint,
                "status": "RUNNING",
                "masterAuth": {"clusterCaCertificate": base64.b64encode(ca_pem).decode()},
            }
        )


class ManagedPrometheusProxy(GoogleApiServer):
    """The Managed Prometheus URL shape in front of a real Prometheus, or canned answers.

    ``/v1/projects/{p}/location/global/prometheus/api/v1/{query,query_range}``; with
    ``token`` set, requests without ``Authorization: Bearer <token>`` get a 401.
    """

    _PATH = re.compile(r"^/v1/projects/([^/]+)/location/global/prometheus(/api/v1/[a-z_]+)$")

    def __init__(
        self, *, upstream: str | None = None, token: str | None = None, project: str = "P"
    ) -> None:
        super().__init__()
        self.upstream = upstream
        self.token = token
        self.project = project
        #: Canned ``data`` objects keyed by the exact PromQL text (when no upstream).
        self.answers: dict[str, dict[str, Any]] = {}
        #: Queries answered with a Prometheus 400 bad_data error.
        self.bad_queries: dict[str, str] = {}

    def prefix(self) -> str:
        return f"{self.url}/v1/projects/{self.project}/location/global/prometheus"

    def route(self, request: Request) -> Response:
        match = self._PATH.match(request.path)
        if match is None or match.group(1) != self.project:
            return self.error(404, f"no route {request.path}")
        if (
            self.token is not None
            and request.headers.get("authorization") != f"Bearer {self.token}"
        ):
            return self.error(401, "Request had invalid authentication credentials.")
        query = request.param("query", "") or ""
        if query in self.bad_queries:
            return Response.json(
                {"status": "error", "errorType": "bad_data", "error": self.bad_queries[query]},
                400,
            )
        if self.upstream is not None:
            params = {k: v[0] for k, v in request.query.items()}
            upstream = requests.get(self.upstream + match.group(2), params=params, timeout=10)
            return Response(upstream.status_code, upstream.content, "application/json")
        if query not in self.answers:
            return Response.json(
                {"status": "success", "data": {"resultType": "matrix", "result": []}}
            )
        return Response.json({"status": "success", "data": self.answers[query]})
