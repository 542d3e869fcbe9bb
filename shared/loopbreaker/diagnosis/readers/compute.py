"""Node -> physical host from Compute Engine ``instances.get`` (``resourceStatus.physicalHost``),
and the same answer's ``resourceStatus.upcomingMaintenance``.

The REST transport of google-cloud-compute is used, so ``api_endpoint`` may point at a local
fake. ``physicalHost`` is an opaque id; it is kept as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import requests

from loopbreaker.diagnosis import maintenance
from loopbreaker.diagnosis.readers import HostLookupResult
from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials
from loopbreaker.diagnosis.readers.retry import DEFAULT_TIMEOUT, RetryPolicy, network_reason
from loopbreaker.model import HostPlace, NodeInfo
from loopbreaker.model.evidence import NodeMaintenance

#: instances.get calls per diagnosis at most (one per node without a host label).
DEFAULT_MAX_LOOKUPS = 64


class ComputeHostLookup:
    """``InstancesClient.get`` per node; stops at the first auth or network failure."""

    def __init__(
        self,
        project: str | None,
        *,
        credentials: GoogleCredentials | None = None,
        api_endpoint: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        max_lookups: int = DEFAULT_MAX_LOOKUPS,
    ) -> None:
        self._project = project
        self._credentials = credentials or GoogleCredentials()
        self._api_endpoint = api_endpoint
        self._timeout = timeout
        self._retry = retry or RetryPolicy()
        self._max_lookups = max_lookups
        self._client: Any = None

    @property
    def source(self) -> str:
        return "compute:instances.get"

    def hosts(self, nodes: Sequence[NodeInfo]) -> HostLookupResult:
        found: dict[str, str] = {}
        planned: dict[str, NodeMaintenance] = {}
        asked = 0
        for node in nodes:
            project = node.project or self._project
            if not project or not node.zone:
                continue  # no providerID and no zone label: nothing to ask for
            if asked >= self._max_lookups:
                return HostLookupResult(found, f"stopped after {asked} lookups (cap)", planned)
            asked += 1
            try:
                host, upcoming = self._instance(project, node.zone, node.instance or node.name)
            except _Stop as exc:
                return HostLookupResult(found, exc.reason, planned)
            if host:
                found[node.name] = host
            if upcoming is not None:
                planned[node.name] = upcoming
        return HostLookupResult(found, maintenance=planned)

    def _instance(
        self, project: str, zone: str, instance: str
    ) -> tuple[str | None, NodeMaintenance | None]:
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc
        from google.protobuf import json_format

        attempt = 0
        while True:
            attempt += 1
            try:
                result = self._get_client().get(
                    project=project,
                    zone=zone,
                    instance=instance,
                    timeout=self._timeout,
                    retry=None,  # our RetryPolicy; the library's default would retry longer
                )
            except gexc.NotFound:
                # A preempted or deleted VM: its host is unknown, not an error.
                return None, None
            except (gexc.Unauthorized, gexc.Forbidden) as exc:
                raise _Stop(f"HTTP {exc.code}: {_message(exc)}") from exc
            except (gexc.TooManyRequests, gexc.ServerError) as exc:
                if attempt >= self._retry.attempts:
                    raise _Stop(f"HTTP {exc.code} after {attempt} attempts") from exc
                self._retry.sleep(self._retry.delay(attempt))
                continue
            except gexc.GoogleAPICallError as exc:
                raise _Stop(f"HTTP {exc.code}: {_message(exc)}") from exc
            except auth_exc.GoogleAuthError as exc:
                # The transport's AuthorizedSession refreshes once on a 401 (not
                # configurable); a refresh that fails ends here, never in a loop.
                raise _Stop(f"authentication failed: {exc}") from exc
            except requests.Timeout as exc:
                raise _Stop(f"timed out after {self._timeout:g}s") from exc
            except requests.RequestException as exc:
                raise _Stop(f"cannot reach Compute Engine: {network_reason(exc)}") from exc
            except json_format.ParseError as exc:
                raise _Stop(f"malformed response: {exc}") from exc
            # The host id alone names the machine, as the node's topology-host label does;
            # newer responses put block and sub-block before it ("b/s/h").
            status = result.resource_status
            if status is None:
                return None, None
            topo = status.physical_host_topology
            fields = {"host": topo.host, "block": topo.block, "subblock": topo.subblock}
            place = HostPlace.parse(status.physical_host or None, fields if topo else None)
            return (place.host if place else None), _upcoming(status)

    def _get_client(self) -> Any:
        if self._client is None:
            from google.cloud import compute_v1

            options = {"api_endpoint": self._api_endpoint} if self._api_endpoint else None
            self._client = compute_v1.InstancesClient(
                credentials=self._credentials.get(self.source),
                client_options=options,
                transport="rest",
            )
        return self._client


class _Stop(Exception):  # noqa: N818 - control flow inside this module only
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _upcoming(status: Any) -> NodeMaintenance | None:
    """``resourceStatus.upcomingMaintenance`` (google-cloud-compute 1.57
    ``compute_v1.UpcomingMaintenance``: ``type_``, ``can_reschedule``,
    ``window_start_time``, ``window_end_time``, ``latest_window_start_time``,
    ``maintenance_status``)."""
    if "upcoming_maintenance" not in status:
        return None
    um = status.upcoming_maintenance
    return maintenance.from_compute(
        {
            "type": um.type_,
            "canReschedule": um.can_reschedule if "can_reschedule" in um else None,
            "windowStartTime": um.window_start_time,
            "windowEndTime": um.window_end_time,
            "latestWindowStartTime": um.latest_window_start_time,
            "maintenanceStatus": um.maintenance_status,
        }
    )


def _message(exc: Any) -> str:
    message = str(getattr(exc, "message", None) or exc)
    method, _, rest = message.partition(" ")
    if method in ("GET", "POST") and ": " in rest:
        message = rest.split(": ", 1)[1]
    return message[:300]
