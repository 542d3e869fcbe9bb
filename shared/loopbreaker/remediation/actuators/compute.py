"""Compute Engine VMs through google-cloud-compute (REST transport, endpoint overridable).

``instances.delete`` and ``instances.reportHostAsFaulty`` carry a ``requestId`` derived
from incident and approval, so a repeat of a completed request is ignored by the
server; each then waits for its zone operation and raises ActionFailed with the
operation's error when it has one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials
from loopbreaker.errors import ActionFailed, SourceUnavailable
from loopbreaker.model import HostPlace
from loopbreaker.remediation.actuators import HostReport
from loopbreaker.remediation.rules import InstanceState

#: How long to wait for a zone operation in all (each ``wait`` call returns within ~2 min).
OPERATION_TIMEOUT = 300.0
SOURCE = "compute:instances"


class ComputeVms:
    """:class:`loopbreaker.remediation.actuators.Vms` on ``compute_v1.InstancesClient``."""

    def __init__(
        self,
        *,
        api_endpoint: str | None = None,
        credentials: GoogleCredentials | None = None,
        operation_timeout: float = OPERATION_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._endpoint = api_endpoint
        self._credentials = credentials or GoogleCredentials()
        self._operation_timeout = operation_timeout
        self._clock = clock
        self._instances: Any = None
        self._operations: Any = None

    def _clients(self) -> tuple[Any, Any]:
        if self._instances is None:
            from google.cloud import compute_v1

            options = {"api_endpoint": self._endpoint} if self._endpoint else None
            try:
                credentials = self._credentials.get(SOURCE)
            except SourceUnavailable as exc:
                raise ActionFailed(f"no credentials for Compute Engine: {exc.reason}") from exc
            self._instances = compute_v1.InstancesClient(
                credentials=credentials, client_options=options, transport="rest"
            )
            self._operations = compute_v1.ZoneOperationsClient(
                credentials=credentials, client_options=options, transport="rest"
            )
        return self._instances, self._operations

    def get_instance(self, project: str, zone: str, name: str) -> InstanceState | None:
        from google.api_core import exceptions as gexc

        instances, _ = self._clients()
        try:
            # No library retry loop (it would retry 503s for up to 10 minutes).
            found = instances.get(
                project=project, zone=zone, instance=name, retry=None, timeout=30.0
            )
        except gexc.NotFound:
            return None
        except gexc.GoogleAPICallError as exc:
            raise ActionFailed(f"cannot read VM {name}: {_text(exc)}", status=_status(exc)) from exc
        except gexc.GoogleAPIError as exc:
            raise ActionFailed(f"cannot read VM {name}: {exc}") from exc
        scheduling = found.scheduling if "scheduling" in found else None
        affinity = found.reservation_affinity if "reservation_affinity" in found else None
        return InstanceState(
            name=found.name,
            id=str(found.id),
            status=found.status,
            place=place_of(found),
            machine_type=found.machine_type.rsplit("/", 1)[-1] or None,
            provisioning_model=(scheduling.provisioning_model or None) if scheduling else None,
            reservation_type=(affinity.consume_reservation_type or None) if affinity else None,
        )

    def delete_instance(
        self, project: str, zone: str, name: str, request_id: str, expected_id: str
    ) -> str:
        from google.cloud import compute_v1

        instances, _ = self._clients()
        # request_id is only settable on the request object, not as a flattened keyword.
        request = compute_v1.DeleteInstanceRequest(
            project=project, zone=zone, instance=name, request_id=request_id
        )
        return self._run(
            f"delete VM {name}",
            lambda: instances.delete_unary(request=request, timeout=60.0),
            project,
            zone,
            expected_id,
        )

    def report_host_faulty(
        self,
        project: str,
        zone: str,
        name: str,
        request_id: str,
        expected_id: str,
        report: HostReport,
    ) -> str:
        from google.cloud import compute_v1

        instances, _ = self._clients()
        body = compute_v1.InstancesReportHostAsFaultyRequest(
            disruption_schedule=report.schedule.value,
            fault_reasons=[
                compute_v1.InstancesReportHostAsFaultyRequestFaultReason(
                    behavior=report.behavior.value, description=report.description
                )
            ],
        )
        return self._run(
            f"report the host of VM {name} as faulty",
            lambda: instances.report_host_as_faulty_unary(
                request=compute_v1.ReportHostAsFaultyInstanceRequest(
                    project=project,
                    zone=zone,
                    instance=name,
                    request_id=request_id,
                    instances_report_host_as_faulty_request_resource=body,
                ),
                timeout=60.0,
            ),
            project,
            zone,
            expected_id,
        )

    def _run(
        self, what: str, start: Callable[[], Any], project: str, zone: str, expected_id: str
    ) -> str:
        from google.api_core import exceptions as gexc
        from google.cloud import compute_v1

        _, operations = self._clients()
        done = compute_v1.Operation.Status.DONE
        try:
            operation = start()
            deadline = self._clock() + self._operation_timeout
            while operation.status != done:
                if self._clock() > deadline:
                    raise ActionFailed(f"cannot {what}: operation {operation.name} still running")
                operation = operations.wait(
                    project=project, zone=zone, operation=operation.name, retry=None, timeout=130.0
                )
        except gexc.GoogleAPICallError as exc:
            raise ActionFailed(f"cannot {what}: {_text(exc)}", status=_status(exc)) from exc
        except gexc.GoogleAPIError as exc:
            raise ActionFailed(f"cannot {what}: {exc}") from exc
        target = str(operation.target_id or "")
        if target and target != expected_id:
            # The VM was recreated between our last read and the call: say so loudly.
            raise ActionFailed(
                f"cannot {what}: operation {operation.name} acted on VM id {target}, not the "
                f"approved {expected_id}; check the VM now"
            )
        errors = list(operation.error.errors) if operation.error else []
        if errors:
            detail = "; ".join(f"{e.code}: {e.message}" for e in errors)
            raise ActionFailed(f"cannot {what}: operation {operation.name} failed: {detail}")
        return str(operation.name)


def _status(exc: Any) -> int | None:
    code = getattr(exc, "code", None)
    return int(code) if isinstance(code, int) else None


def _text(exc: Any) -> str:
    return str(getattr(exc, "message", None) or exc)[:300]


def place_of(instance: Any) -> HostPlace | None:
    """``resourceStatus.physicalHostTopology``, else ``physicalHost``, of a compute_v1
    Instance (proto-plus leaves unset fields empty)."""
    status = instance.resource_status
    if status is None:
        return None
    topo = status.physical_host_topology
    fields = {"host": topo.host, "block": topo.block, "subblock": topo.subblock} if topo else {}
    return HostPlace.parse(status.physical_host or None, fields)
