"""What the source planner is told: modes, options, and the adapters tests hand it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from loopbreaker.model import EvidenceKind

if TYPE_CHECKING:
    from loopbreaker.diagnosis.readers import (
        ClusterReader,
        HostLookup,
        LogReader,
        MetricsReader,
    )

METRIC_KINDS = (
    EvidenceKind.RESTARTS,
    EvidenceKind.INTERRUPTIONS,
    EvidenceKind.NODE_CONDITIONS,
    EvidenceKind.POD_PHASES,
    EvidenceKind.UNSCHEDULABLE,
    EvidenceKind.POD_REASONS,
    EvidenceKind.MEMORY,
    EvidenceKind.POD_INFO,
    EvidenceKind.GPU_XIDS,
)
#: Kinds a cluster may well not export (no dcgm-exporter): missing, they are no gap.
OPTIONAL_KINDS = frozenset({EvidenceKind.GPU_XIDS})
METRIC_ATTR = {
    EvidenceKind.RESTARTS: "restarts",
    EvidenceKind.INTERRUPTIONS: "interruptions",
    EvidenceKind.NODE_CONDITIONS: "node_conditions",
    EvidenceKind.POD_PHASES: "pod_phases",
    EvidenceKind.UNSCHEDULABLE: "unschedulable",
    EvidenceKind.POD_REASONS: "pod_reasons",
    EvidenceKind.MEMORY: "memory",
    EvidenceKind.POD_INFO: "pod_info",
    EvidenceKind.GPU_XIDS: "gpu_xids",
}
#: Per-request timeout of the live readers, in seconds (``--source-timeout``).
DEFAULT_SOURCE_TIMEOUT = 30.0
#: Log entries read per diagnosis at most (``--max-log-entries``).
DEFAULT_MAX_LOG_ENTRIES = 2000


class Mode(StrEnum):
    """``auto``: live only when files lack the evidence; ``on``: live wins; ``off``: never."""

    AUTO = "auto"
    ON = "on"
    OFF = "off"


@dataclass(frozen=True)
class SourceOptions:
    telemetry_dir: Path | None = None
    prometheus_url: str | None = None
    #: The label that names the cluster on the Prometheus' series: a label name, ``none``
    #: (a per-cluster Prometheus), or None to find it out from what the server holds.
    prometheus_cluster_label: str | None = None
    #: Auth to ``prometheus_url``, one or neither (as Prometheus' own ``bearer_token_file``
    #: and ``basic_auth``): a bearer token, or (username, password). Never in ``repr()``.
    prometheus_bearer_token: str | None = field(default=None, repr=False)
    prometheus_basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    managed_prometheus: Mode = Mode.AUTO
    live_logs: Mode = Mode.AUTO
    live_kube: Mode = Mode.AUTO
    kubeconfig: Path | None = None
    kube_context: str | None = None
    host_lookup: Mode = Mode.AUTO
    max_log_entries: int = DEFAULT_MAX_LOG_ENTRIES
    timeout: float = DEFAULT_SOURCE_TIMEOUT
    #: Endpoint overrides (private endpoints, local fakes); None = the public Google API.
    logging_endpoint: str | None = None
    compute_endpoint: str | None = None
    gke_endpoint: str | None = None
    gmp_endpoint: str | None = None

    def offline(self) -> SourceOptions:
        """The same options with every ``auto`` fallback to a live reader turned off."""

        def off(mode: Mode) -> Mode:
            return Mode.OFF if mode is Mode.AUTO else mode

        return replace(
            self,
            managed_prometheus=off(self.managed_prometheus),
            live_logs=off(self.live_logs),
            live_kube=off(self.live_kube),
            host_lookup=off(self.host_lookup),
        )


@dataclass
class Readers:
    """Adapters to use instead of building the real ones (tests pass fakes here).

    A field left None is built on demand from the options; ``None`` from a factory means
    "not configured".
    """

    metrics: MetricsReader | None = None
    logs: LogReader | None = None
    cluster: ClusterReader | None = None
    host_lookups: Sequence[HostLookup] | None = None


class Origin(StrEnum):
    FILE = "file"
    PROMETHEUS = "prometheus"
    MANAGED_PROMETHEUS = "managed-prometheus"
    CLOUD_LOGGING = "cloud-logging"
    KUBECONFIG = "kubeconfig"
    GKE = "gke"
    NONE = "none"
