"""CloudLoggingReader through google-cloud-logging's REST transport against a local fake."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from fakes import RecordingSleep
from fakeservers import Fault, LoggingServer

from loopbreaker.diagnosis.readers import QueryRejected
from loopbreaker.diagnosis.readers.google_auth import anonymous
from loopbreaker.diagnosis.readers.logging_reader import LOG_QUERY_ORDER, CloudLoggingReader
from loopbreaker.diagnosis.readers.retry import RetryPolicy
from loopbreaker.errors import SourceUnavailable
from loopbreaker.model import Context, SignalKind, WorkloadKind

PROJECT, CLUSTER, WORKLOAD = "p", "c", "w"
CONTEXT = Context(CLUSTER, WORKLOAD, datetime(2026, 5, 20, 8, 15, tzinfo=UTC), PROJECT, "l", "ns")


def _container(insert_id: str, text: str, at: str, job: str, pod: str) -> dict[str, Any]:
    return {
        "insertId": insert_id,
        "logName": f"projects/{PROJECT}/logs/stderr",
        "timestamp": at,
        "severity": "ERROR",
        "textPayload": text,
        "resource": {
            "type": "k8s_container",
            "labels": {
                "project_id": PROJECT,
                "cluster_name": CLUSTER,
                "namespace_name": "ns",
                "pod_name": f"{WORKLOAD}-slice-{job}-{pod}-abcde",
                "container_name": "trainer",
            },
        },
        "labels": {
            "k8s-pod/jobset_sigs_k8s_io/jobset-name": WORKLOAD,
            "k8s-pod/jobset_sigs_k8s_io/job-index": job,
            "k8s-pod/batch_kubernetes_io/job-completion-index": pod,
        },
    }


NCCL = "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1) ran for 600081 ms"

ENTRIES: list[dict[str, Any]] = [
    {
        "insertId": "np1",
        "logName": f"projects/{PROJECT}/logs/container.googleapis.com%2Fcluster-autoscaler",
        "timestamp": "2026-05-20T08:01:00Z",
        "severity": "INFO",
        "textPayload": "PreemptionEvent: Node 'gke-c-pool-1' in node pool 'pool' was preempted.",
        "resource": {
            "type": "gke_nodepool",
            "labels": {"cluster_name": CLUSTER, "node_pool_name": "pool", "project_id": PROJECT},
        },
    },
    {
        "insertId": "se1",
        "logName": f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Fsystem_event",
        "timestamp": "2026-05-20T08:02:00.123456789Z",
        "severity": "INFO",
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "methodName": "compute.instances.hostError",
            "resourceName": f"projects/{PROJECT}/zones/z/instances/gke-c-pool-2",
            "serviceName": "compute.googleapis.com",
        },
        "resource": {"type": "gce_instance", "labels": {"instance_id": "42", "zone": "z"}},
    },
    {
        "insertId": "nf1",
        "logName": f"projects/{PROJECT}/logs/kubelet",
        "timestamp": "2026-05-20T08:03:00Z",
        "severity": "ERROR",
        "textPayload": "kernel panic - not syncing: Fatal exception",
        "resource": {"type": "k8s_node", "labels": {"cluster_name": CLUSTER, "node_name": "n2"}},
    },
    {
        "insertId": "sc1",
        "logName": f"projects/{PROJECT}/logs/events",
        "timestamp": "2026-05-20T08:04:00Z",
        "severity": "WARNING",
        "jsonPayload": {
            "reason": "FailedScheduling",
            "message": "0/4 nodes are available: 4 Insufficient google.com/tpu.",
        },
        "resource": {
            "type": "k8s_pod",
            "labels": {
                "cluster_name": CLUSTER,
                "namespace_name": "ns",
                "pod_name": f"{WORKLOAD}-slice-1-0-xxxxx",
            },
        },
    },
    _container("co1", NCCL, "2026-05-20T08:05:00Z", "0", "0"),
    _container("wk1", "RuntimeError: connection reset by peer", "2026-05-20T08:06:00Z", "1", "3"),
    _container("wk2", "ChildFailedError: worker died", "2026-05-20T08:07:00Z", "1", "2"),
    # Outside the window: never returned.
    _container("old", NCCL, "2026-05-20T06:00:00Z", "0", "0"),
]


@pytest.fixture
def server() -> Iterator[LoggingServer]:
    with LoggingServer(ENTRIES) as fake:
        yield fake


def make_reader(
    server: LoggingServer, *, sleep: RecordingSleep | None = None, **kwargs: Any
) -> CloudLoggingReader:
    return CloudLoggingReader(
        PROJECT,
        credentials=anonymous(),
        api_endpoint=server.url,
        timeout=0.4,
        retry=RetryPolicy(attempts=3, base_delay=0.1, sleep=sleep or RecordingSleep()),
        **kwargs,
    )


def test_reads_every_filter_in_order_and_classifies(server: LoggingServer) -> None:
    result = make_reader(server).read(CONTEXT)
    kinds = [s.kind for s in result.signals]
    assert kinds == [
        SignalKind.PREEMPTION,
        SignalKind.HOST_ERROR,
        SignalKind.KERNEL_PANIC,
        SignalKind.UNSCHEDULABLE,
        SignalKind.NCCL_TIMEOUT,  # the coordinator, read before the other workers
        SignalKind.CONNECTION_RESET,
        SignalKind.WORKER_CRASH,
    ]
    assert not result.partial
    assert result.failures == ()
    # The coordinator entry matched worker_logs too; it was de-duplicated.
    assert result.entries_read == 8
    filters = server.filters_seen()
    # A JobSet has no restart Events of its own: every other filter runs.
    assert len(filters) == len(LOG_QUERY_ORDER) - 1
    assert 'logName="projects/p/logs/cloudaudit.googleapis.com%2Fsystem_event"' in filters[1]
    assert all('timestamp >= "2026-05-20T07:45:00Z"' in f for f in filters)
    body = server.requests[0].json()
    assert body["resourceNames"] == ["projects/p"]
    assert body["orderBy"] == "timestamp asc"


def test_kubeflow_jobs_read_their_restart_events_first_and_their_own_replicas() -> None:
    context = replace(CONTEXT, workload_kind=WorkloadKind.TFJOB)
    reader = CloudLoggingReader(PROJECT, credentials=anonymous(), api_endpoint="http://127.0.0.1:9")
    filters = dict(reader.filters(context))
    assert list(filters)[0] == "restart_events"
    assert 'jsonPayload.involvedObject.kind="TFJob"' in filters["restart_events"]
    assert '"TFJobRestarting" OR "JobRestarting"' in filters["restart_events"]
    for qid in ("coordinator_logs", "worker_logs"):
        assert f'labels."k8s-pod/training_kubeflow_org/job-name"="{WORKLOAD}"' in filters[qid]
        assert "jobset" not in filters[qid]
    assert '"chief"' in filters["coordinator_logs"]
    jobset = dict(reader.filters(CONTEXT))
    assert "restart_events" not in jobset and "jobset-name" in jobset["worker_logs"]


def test_pages_are_followed(server: LoggingServer) -> None:
    result = make_reader(server, page_size=1).read(CONTEXT)
    assert len(result.signals) == 7
    tokens = [r.json().get("pageToken") for r in server.requests]
    assert "1" in tokens  # worker_logs needed a second page


def test_cap_stops_reading_and_keeps_coordinator_first(server: LoggingServer) -> None:
    result = make_reader(server, max_entries=5).read(CONTEXT)
    assert result.truncated and result.partial
    assert result.entries_read == 5
    assert [s.kind for s in result.signals][-1] is SignalKind.NCCL_TIMEOUT
    # Every query before worker_logs (restart_events is a Kubeflow job's): worker_logs and
    # the JobSet restart events after it never asked.
    order = list(LOG_QUERY_ORDER)
    assert len(server.filters_seen()) == order.index("worker_logs") - 1


@pytest.mark.parametrize("fault", [Fault.FORBIDDEN, Fault.UNAUTHORIZED])
def test_auth_error_is_unavailable_and_stops_at_once(server: LoggingServer, fault: Fault) -> None:
    server.inject(fault, times=10)
    sleep = RecordingSleep()
    with pytest.raises(SourceUnavailable, match=f"HTTP {fault.value}") as info:
        make_reader(server, sleep=sleep).read(CONTEXT)
    assert info.value.source == "cloud-logging:projects/p"
    assert len(server.requests) == 1
    assert sleep.calls == []


def test_auth_error_after_some_filters_keeps_what_was_read(server: LoggingServer) -> None:
    server.inject(Fault.FORBIDDEN, times=10, after=2)
    result = make_reader(server).read(CONTEXT)
    assert [s.kind for s in result.signals] == [SignalKind.PREEMPTION, SignalKind.HOST_ERROR]
    assert len(server.requests) == 3  # no retry of the 403, no further filter
    assert result.failures[0] == ("node_fault_logs", "HTTP 403 injected fault 403")
    assert [qid for qid, _ in result.failures[1:]] == list(LOG_QUERY_ORDER[4:])
    assert all(why.startswith("not read: HTTP 403") for _, why in result.failures[1:])


@pytest.mark.parametrize("fault", [Fault.TOO_MANY_REQUESTS, Fault.SERVER_ERROR, Fault.UNAVAILABLE])
def test_transient_errors_are_retried(server: LoggingServer, fault: Fault) -> None:
    server.inject(fault, times=2)
    sleep = RecordingSleep()
    result = make_reader(server, sleep=sleep).read(CONTEXT)
    assert len(result.signals) == 7 and not result.partial
    assert sleep.calls == [0.1, 0.2]


def test_one_failing_filter_makes_logs_partial(server: LoggingServer) -> None:
    server.inject(Fault.SERVER_ERROR, times=3)  # every attempt of the first filter
    result = make_reader(server).read(CONTEXT)
    assert result.partial
    assert [qid for qid, _ in result.failures] == ["nodepool_logs"]
    assert "HTTP 500 after 3 attempts" in result.failures[0][1]
    assert SignalKind.PREEMPTION not in {s.kind for s in result.signals}
    assert SignalKind.NCCL_TIMEOUT in {s.kind for s in result.signals}


def test_a_timeout_stops_the_reader(server: LoggingServer) -> None:
    server.inject(Fault.TIMEOUT)
    with pytest.raises(SourceUnavailable, match="nodepool_logs: timed out after 0.4s"):
        make_reader(server).read(CONTEXT)
    assert len(server.requests) == 1  # no filter after the first waits again


def test_malformed_body_fails_only_that_filter(server: LoggingServer) -> None:
    server.inject(Fault.MALFORMED)
    result = make_reader(server).read(CONTEXT)
    (failure,) = result.failures
    assert failure[0] == "nodepool_logs" and "malformed response" in failure[1]


def test_rejected_filter_is_reported(server: LoggingServer) -> None:
    reader = make_reader(server)
    server.invalid_filters.add(reader.filters(CONTEXT)[2][1])
    result = reader.read(CONTEXT)
    assert result.failures == (("node_fault_logs", "filter rejected: Invalid query filter"),)


def test_every_filter_failing_is_unavailable(server: LoggingServer) -> None:
    server.inject(Fault.SERVER_ERROR, times=100)
    with pytest.raises(SourceUnavailable, match="nodepool_logs: HTTP 500 after 3 attempts"):
        make_reader(server).read(CONTEXT)


def test_unreachable_server_stops_after_one_request(server: LoggingServer) -> None:
    url = server.url
    server.stop()
    reader = CloudLoggingReader(PROJECT, credentials=anonymous(), api_endpoint=url, timeout=0.4)
    with pytest.raises(SourceUnavailable, match="cannot reach Cloud Logging: Connection refused"):
        reader.read(CONTEXT)


def test_read_one(server: LoggingServer) -> None:
    reader = make_reader(server)
    # The filter goes to the server unchanged (no default time restriction is added).
    window = 'AND timestamp >= "2026-05-20T00:00:00Z"'
    assert reader.read_one(f'resource.type="k8s_node" {window}') == 1
    assert reader.read_one(f'resource.type="nothing" {window}') == 0
    assert server.requests[-1].json()["pageSize"] == 1
    server.invalid_filters.add("bad(")
    with pytest.raises(QueryRejected, match="Invalid query filter"):
        reader.read_one("bad(")
