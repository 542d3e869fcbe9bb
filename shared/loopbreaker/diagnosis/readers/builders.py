"""The real adapters, built lazily from the options (one ADC lookup shared among them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from loopbreaker.diagnosis.readers.options import Origin, Readers, SourceOptions
from loopbreaker.errors import SourceUnavailable
from loopbreaker.model import Context

if TYPE_CHECKING:
    from loopbreaker.diagnosis.readers import (
        ClusterReader,
        HostLookup,
        LogReader,
        MetricsReader,
    )
    from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials


def cluster_label(origin: Origin, context: Context) -> str:
    if origin is Origin.GKE:
        return (
            f"kubernetes:gke/projects/{context.project}/locations/{context.location}"
            f"/clusters/{context.cluster}"
        )
    return "kubernetes:kubeconfig"


class Builder:
    """Builds the real adapters lazily, sharing one ADC lookup among them."""

    def __init__(
        self,
        context: Context,
        options: SourceOptions,
        readers: Readers,
        credentials: GoogleCredentials | None,
    ) -> None:
        self.context = context
        self.options = options
        self.readers = readers
        self._credentials = credentials

    @property
    def credentials(self) -> GoogleCredentials:
        if self._credentials is None:
            from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials

            self._credentials = GoogleCredentials()
        return self._credentials

    def metrics(self, origin: Origin) -> tuple[MetricsReader | None, str]:
        if self.readers.metrics is not None:
            return self.readers.metrics, self.readers.metrics.source
        from loopbreaker.diagnosis.readers.prometheus import GMP_ENDPOINT, PrometheusReader

        if origin is Origin.PROMETHEUS and self.options.prometheus_url:
            token = self.options.prometheus_bearer_token
            reader = PrometheusReader(
                self.options.prometheus_url,
                token_provider=(lambda: token) if token is not None else None,
                basic_auth=self.options.prometheus_basic_auth,
                timeout=self.options.timeout,
            )
            return reader, reader.source
        project = self.context.project
        if not project:
            return None, "managed-prometheus"
        reader = PrometheusReader.managed(
            project,
            credentials=self.credentials,
            endpoint=self.options.gmp_endpoint or GMP_ENDPOINT,
            timeout=self.options.timeout,
        )
        return reader, reader.source

    def logs(self) -> LogReader | None:
        if self.readers.logs is not None:
            return self.readers.logs
        if not self.context.project:
            return None
        from loopbreaker.diagnosis.readers.logging_reader import CloudLoggingReader

        return CloudLoggingReader(
            self.context.project,
            credentials=self.credentials,
            api_endpoint=self.options.logging_endpoint,
            max_entries=self.options.max_log_entries,
            timeout=self.options.timeout,
        )

    def cluster(self, origin: Origin) -> ClusterReader:
        """The Kubernetes reader; SourceUnavailable when GKE cannot be reached."""
        if self.readers.cluster is not None:
            return self.readers.cluster
        from loopbreaker.diagnosis.readers.kube import GKE_ENDPOINT, KubernetesReader

        if origin is Origin.KUBECONFIG and self.options.kubeconfig is not None:
            return KubernetesReader.from_kubeconfig(
                self.options.kubeconfig,
                context=self.options.kube_context,
                timeout=self.options.timeout,
            )
        project, location = self.context.project, self.context.location
        if not project or not location:  # plan() only picks GKE with both
            raise SourceUnavailable("kubernetes", "GKE needs --project and --location")
        credentials = self.credentials
        label = cluster_label(Origin.GKE, self.context)
        return KubernetesReader.from_gke(
            project,
            location,
            self.context.cluster,
            token_provider=lambda: credentials.token(label),
            container_endpoint=self.options.gke_endpoint or GKE_ENDPOINT,
            timeout=self.options.timeout,
        )

    def host_lookups(self) -> Sequence[HostLookup]:
        if self.readers.host_lookups is not None:
            return self.readers.host_lookups
        project = self.context.project
        if not project:
            return ()
        from loopbreaker.diagnosis.readers.compute import ComputeHostLookup
        from loopbreaker.diagnosis.readers.monitoring import MonitoringHostLookup

        return (
            ComputeHostLookup(
                project,
                credentials=self.credentials,
                api_endpoint=self.options.compute_endpoint,
                timeout=self.options.timeout,
            ),
            MonitoringHostLookup(
                project,
                self.context.cluster,
                self.context.start_time,
                self.context.end_time,
                credentials=self.credentials,
                timeout=self.options.timeout,
            ),
        )
