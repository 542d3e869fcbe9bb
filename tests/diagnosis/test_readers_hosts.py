"""Node -> physical host: Compute Engine (REST fake) and Cloud Monitoring (gRPC fake)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from fakes import RecordingSleep
from fakeservers import ComputeServer, Fault
from fakeservers.monitoring_grpc import MonitoringServer
from google.api import monitored_resource_pb2  # noqa: F401 - registers the resource type
from google.cloud import monitoring_v3

from loopbreaker.diagnosis.readers.compute import ComputeHostLookup
from loopbreaker.diagnosis.readers.google_auth import anonymous
from loopbreaker.diagnosis.readers.monitoring import (
    HOST_METRIC,
    MonitoringHostLookup,
    hosts_from_time_series,
)
from loopbreaker.diagnosis.readers.retry import RetryPolicy
from loopbreaker.model import NodeInfo

T0 = datetime(2026, 5, 20, 8, 15, tzinfo=UTC)


def n(name: str, zone: str | None = "z1", project: str | None = "proj") -> NodeInfo:
    return NodeInfo(name=name, zone=zone, project=project, instance=name)


@pytest.fixture
def compute() -> Iterator[ComputeServer]:
    hosts = {
        ("proj", "z1", "n1"): "host-a",
        ("proj", "z1", "n2"): "host-b",
        ("proj", "z1", "n4"): None,
    }
    with ComputeServer(hosts) as server:
        yield server


def lookup(server: ComputeServer, **kw: object) -> ComputeHostLookup:
    return ComputeHostLookup(
        "proj",
        credentials=anonymous(),
        api_endpoint=server.url,
        timeout=0.4,
        retry=RetryPolicy(attempts=3, base_delay=0.1, sleep=RecordingSleep()),
        **kw,  # type: ignore[arg-type]
    )


def test_physical_host_from_compute(compute: ComputeServer) -> None:
    result = lookup(compute).hosts([n("n1"), n("n2"), n("gone"), n("n4"), n("nozone", zone=None)])
    assert result.hosts == {"n1": "host-a", "n2": "host-b"}
    assert result.failure is None
    assert [r.path for r in compute.requests] == [
        "/compute/v1/projects/proj/zones/z1/instances/n1",
        "/compute/v1/projects/proj/zones/z1/instances/n2",
        "/compute/v1/projects/proj/zones/z1/instances/gone",  # 404: unknown, not an error
        "/compute/v1/projects/proj/zones/z1/instances/n4",  # no physicalHost reported
    ]


def test_a_topology_host_is_named_by_its_host_id_as_the_node_label_names_it() -> None:
    hosts = {
        # Compute Engine v1 Instance.resourceStatus: "blockId/subBlockId/hostId" ...
        ("proj", "z1", "n1"): "/ce876975be10972b/2b36132664c07e61/e52b0d39807e3564",
        # ... and physicalHostTopology, which wins where present.
        ("proj", "z1", "n2"): {
            "physicalHost": "/b1/s1/stale-host",
            "physicalHostTopology": {
                "cluster": "europe-west4-cluster-1",
                "block": "b1",
                "subblock": "s1",
                "host": "h2",
            },
        },
        ("proj", "z1", "n3"): "opaque-older-id",
    }
    with ComputeServer(hosts) as server:
        result = lookup(server).hosts([n("n1"), n("n2"), n("n3")])
    assert result.hosts == {"n1": "e52b0d39807e3564", "n2": "h2", "n3": "opaque-older-id"}


@pytest.mark.parametrize("fault", [Fault.FORBIDDEN, Fault.UNAUTHORIZED])
def test_auth_failure_stops_all_lookups(compute: ComputeServer, fault: Fault) -> None:
    compute.inject(fault, times=10)
    result = lookup(compute).hosts([n("n1"), n("n2")])
    assert result.hosts == {}
    # A 401 makes the library's session try one token refresh, which anonymous credentials
    # refuse; either way the lookup ends after one request.
    expected = "HTTP 403" if fault is Fault.FORBIDDEN else "authentication failed"
    assert result.failure is not None and result.failure.startswith(expected)
    assert len(compute.requests) == 1


def test_failure_keeps_hosts_found_before(compute: ComputeServer) -> None:
    compute.inject(Fault.TIMEOUT, after=1)
    result = lookup(compute).hosts([n("n1"), n("n2"), n("n3")])
    assert result.hosts == {"n1": "host-a"}
    assert result.failure == "timed out after 0.4s"
    assert len(compute.requests) == 2


def test_transient_errors_are_retried(compute: ComputeServer) -> None:
    compute.inject(Fault.SERVER_ERROR)
    compute.inject(Fault.TOO_MANY_REQUESTS)
    assert lookup(compute).hosts([n("n1"), n("n2")]).hosts == {"n1": "host-a", "n2": "host-b"}


def test_malformed_and_reset_stop(compute: ComputeServer) -> None:
    compute.inject(Fault.MALFORMED)
    assert lookup(compute).hosts([n("n1")]).failure is not None
    compute.inject(Fault.RESET)
    failure = lookup(compute).hosts([n("n1")]).failure
    assert failure is not None and failure.startswith("cannot reach Compute Engine")


def test_lookup_cap(compute: ComputeServer) -> None:
    result = lookup(compute, max_lookups=1).hosts([n("n1"), n("n2")])
    assert result.hosts == {"n1": "host-a"}
    assert result.failure == "stopped after 1 lookups (cap)"


# --- Cloud Monitoring -------------------------------------------------------------------------


def series(node: str, labels: dict[str, str]) -> monitoring_v3.TimeSeries:
    ts = monitoring_v3.TimeSeries()
    ts.metric.type = HOST_METRIC
    ts.resource.type = "k8s_node"
    ts.resource.labels.update({"cluster_name": "c", "node_name": node})
    ts.metadata.user_labels.update(labels)
    return ts


SERIES = [
    series("n1", {"gce_topology_host": "host-a", "gke_nodepool": "pool"}),
    series("n2", {"cloud.google.com/gce-topology-host": "host-b"}),
    series("n3", {"gke_nodepool": "pool"}),  # no host label: not reserved capacity
]


def test_mapping_from_time_series_metadata() -> None:
    assert hosts_from_time_series(SERIES) == {"n1": "host-a", "n2": "host-b"}


def test_monitoring_lookup_through_grpc() -> None:
    with MonitoringServer(SERIES) as server:
        finder = MonitoringHostLookup(
            "proj", "c", T0 - timedelta(minutes=30), T0, client=server.client(), timeout=2
        )
        result = finder.hosts([n("n1"), n("n3")])
        (request,) = server.requests
    assert result.hosts == {"n1": "host-a"}
    assert request.name == "projects/proj"
    assert 'resource.labels.cluster_name="c"' in request.filter
    assert request.view == monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.HEADERS


def test_monitoring_permission_denied_is_a_failure_not_a_crash() -> None:
    with MonitoringServer(SERIES) as server:
        server.fail_with = grpc.StatusCode.PERMISSION_DENIED
        result = MonitoringHostLookup("proj", "c", T0, T0, client=server.client(), timeout=2).hosts(
            [n("n1")]
        )
    assert result.hosts == {}
    assert result.failure is not None and "PermissionDenied" in result.failure
