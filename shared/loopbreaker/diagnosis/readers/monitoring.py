"""Node -> physical host from Cloud Monitoring time-series metadata.

``kubernetes.io/node/cpu/total_cores`` on ``k8s_node`` carries the node's labels as
``metadata.user_labels``; the topology host is one of them. The client is gRPC only, so the
adapter is thin and :func:`hosts_from_time_series` (the mapping) is tested on its own.
Which key holds the host in ``user_labels`` is unverified; the known spellings are tried.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from loopbreaker.diagnosis.readers import HostLookupResult
from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials
from loopbreaker.diagnosis.readers.retry import DEFAULT_TIMEOUT
from loopbreaker.model import NodeInfo

HOST_METRIC = "kubernetes.io/node/cpu/total_cores"
#: Spellings of the topology-host user label, most likely first.
HOST_LABEL_KEYS = (
    "gce_topology_host",
    "cloud.google.com/gce-topology-host",
    "cloud_google_com_gce_topology_host",
)


def hosts_from_time_series(series: Iterable[Any]) -> dict[str, str]:
    """``{node_name: host}`` from TimeSeries messages (or objects shaped like them)."""
    out: dict[str, str] = {}
    for ts in series:
        resource = getattr(ts, "resource", None)
        metadata = getattr(ts, "metadata", None)
        node = dict(getattr(resource, "labels", {}) or {}).get("node_name")
        labels = dict(getattr(metadata, "user_labels", {}) or {})
        host = next((labels[k] for k in HOST_LABEL_KEYS if labels.get(k)), None)
        if node and host:
            out[str(node)] = str(host)
    return out


def host_filter(cluster: str) -> str:
    return (
        f'metric.type="{HOST_METRIC}" AND resource.type="k8s_node" '
        f'AND resource.labels.cluster_name="{cluster}"'
    )


class MonitoringHostLookup:
    """One ``ListTimeSeries`` (headers only) for the whole cluster."""

    def __init__(
        self,
        project: str,
        cluster: str,
        start: datetime,
        end: datetime,
        *,
        credentials: GoogleCredentials | None = None,
        client: Any = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._project = project
        self._cluster = cluster
        self._start = start
        self._end = end
        self._credentials = credentials or GoogleCredentials()
        self._client = client
        self._timeout = timeout

    @property
    def source(self) -> str:
        return f"cloud-monitoring:projects/{self._project}"

    def hosts(self, nodes: Sequence[NodeInfo]) -> HostLookupResult:
        from google.api_core import exceptions as gexc
        from google.cloud import monitoring_v3

        from loopbreaker.errors import SourceUnavailable

        wanted = {n.name for n in nodes}
        try:
            client = self._client or monitoring_v3.MetricServiceClient(
                credentials=self._credentials.get(self.source)
            )
            request = monitoring_v3.ListTimeSeriesRequest(
                name=f"projects/{self._project}",
                filter=host_filter(self._cluster),
                interval=monitoring_v3.TimeInterval(start_time=self._start, end_time=self._end),
                view=monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.HEADERS,
            )
            found = hosts_from_time_series(
                client.list_time_series(request=request, timeout=self._timeout, retry=None)
            )
        except SourceUnavailable as exc:
            return HostLookupResult({}, exc.reason)
        except gexc.GoogleAPICallError as exc:
            return HostLookupResult({}, f"{type(exc).__name__}: {exc.message}")
        return HostLookupResult({k: v for k, v in found.items() if k in wanted})
