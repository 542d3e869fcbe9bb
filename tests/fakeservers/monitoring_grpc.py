"""A fake Cloud Monitoring MetricService (gRPC) answering ListTimeSeries from a list."""

from __future__ import annotations

from concurrent import futures
from typing import Any, Self

import grpc
from google.cloud import monitoring_v3

LOCALHOST = "127.0.0.1"


class MonitoringServer:
    def __init__(self, series: list[monitoring_v3.TimeSeries] | None = None) -> None:
        self.series = list(series or [])
        self.requests: list[monitoring_v3.ListTimeSeriesRequest] = []
        #: When set, every call fails with this gRPC status code.
        self.fail_with: grpc.StatusCode | None = None
        self._server: grpc.Server | None = None
        self.port = 0

    def _list(
        self, request: monitoring_v3.ListTimeSeriesRequest, context: grpc.ServicerContext
    ) -> monitoring_v3.ListTimeSeriesResponse:
        self.requests.append(request)
        if self.fail_with is not None:
            context.abort(self.fail_with, f"injected {self.fail_with.name}")
        return monitoring_v3.ListTimeSeriesResponse(time_series=self.series)

    def start(self) -> Self:
        handler = grpc.method_handlers_generic_handler(
            "google.monitoring.v3.MetricService",
            {
                "ListTimeSeries": grpc.unary_unary_rpc_method_handler(
                    self._list,
                    request_deserializer=monitoring_v3.ListTimeSeriesRequest.deserialize,
                    response_serializer=monitoring_v3.ListTimeSeriesResponse.serialize,
                )
            },
        )
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self._server.add_generic_rpc_handlers((handler,))
        self.port = self._server.add_insecure_port(f"{LOCALHOST}:0")
        self._server.start()
        return self

    def client(self) -> Any:
        """A real MetricServiceClient on an insecure channel to this server."""
        from google.cloud.monitoring_v3.services.metric_service.transports import (
            MetricServiceGrpcTransport,
        )

        channel = grpc.insecure_channel(f"{LOCALHOST}:{self.port}")
        return monitoring_v3.MetricServiceClient(
            transport=MetricServiceGrpcTransport(channel=channel)
        )

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None)
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
