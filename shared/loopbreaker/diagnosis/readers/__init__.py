"""Adapters that read live telemetry, behind small role interfaces (ports).

Ports are named by role, implementations by mechanism:

    MetricsReader   raw samples of a range selector    PrometheusReader (any Prometheus or
                                                        Managed Prometheus)
    LogReader       classified log entries of a window  CloudLoggingReader
    ClusterReader   Kubernetes nodes and pods           KubernetesReader
    HostLookup      node -> physical host               ComputeHostLookup, MonitoringHostLookup

Every adapter raises :class:`loopbreaker.errors.SourceUnavailable` for auth, network, timeout
and malformed-response failures, so callers only need the loopbreaker error tree:
:class:`SourceUnreachable` (auth, no connection: stop asking this source) and
:class:`QueryRejected` (HTTP 400/422: the query text is wrong) refine it. The ports
are read-only, so there is no dry-run flavour: the fakes live in ``tests/fakes.py``.

Importing this package is cheap: the google-cloud-* and kubernetes libraries are imported
inside the methods that need them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from loopbreaker.errors import SourceUnavailable
from loopbreaker.model import Context, NodeInfo, PodInfo, Series, Signal
from loopbreaker.model.evidence import NodeMaintenance


class SourceUnreachable(SourceUnavailable):
    """Auth or connection failure: every further request to this source would fail too.

    Callers stop asking the source (no authentication retry loop) and mark every kind of
    evidence it would have provided unavailable with the same reason.
    """


class QueryRejected(SourceUnavailable):
    """The server refused the query itself (HTTP 400/422): the query text is wrong."""

    def __init__(
        self, source: str, reason: str, status: int, error_type: str | None = None
    ) -> None:
        super().__init__(source, reason)
        self.status = status
        self.error_type = error_type


class MetricsReader(Protocol):
    """Reads the raw samples of one selector, as a range-vector selector returns them."""

    @property
    def source(self) -> str: ...

    def raw_series(self, selector: str, start: datetime, end: datetime) -> tuple[Series, ...]: ...


@dataclass(frozen=True)
class LogReadResult:
    """What one pass over the workflow's log filters produced."""

    signals: tuple[Signal, ...]
    entries_read: int
    #: (query id, reason) for each filter that could not be read completely.
    failures: tuple[tuple[str, str], ...] = ()
    #: True when the entry cap stopped the read before every filter was exhausted.
    truncated: bool = False
    #: (where, reason) for entries that were not valid LogEntries.
    rejected: tuple[tuple[str, str], ...] = ()

    @property
    def partial(self) -> bool:
        return bool(self.failures) or self.truncated


class LogReader(Protocol):
    """Runs the workflow's log filters over the context's window."""

    @property
    def source(self) -> str: ...

    def read(self, context: Context) -> LogReadResult: ...


class ClusterReader(Protocol):
    """Lists the Kubernetes objects the engine looks at."""

    @property
    def source(self) -> str: ...

    def nodes(self) -> tuple[NodeInfo, ...]: ...

    def pods(self, namespace: str | None) -> tuple[PodInfo, ...]: ...


@dataclass(frozen=True)
class HostLookupResult:
    """Hosts found for some nodes; ``failure`` says why the lookup stopped early, if it did."""

    hosts: Mapping[str, str]
    failure: str | None = None
    #: Compute Engine's ``upcomingMaintenance`` of the nodes asked about, where it has one.
    maintenance: Mapping[str, NodeMaintenance] = field(default_factory=dict)


class HostLookup(Protocol):
    """Finds the physical host behind nodes whose labels do not name it."""

    @property
    def source(self) -> str: ...

    def hosts(self, nodes: Sequence[NodeInfo]) -> HostLookupResult:
        """Return ``{node name: physical host}`` for the nodes it could resolve."""
        ...


__all__ = [
    "ClusterReader",
    "HostLookup",
    "HostLookupResult",
    "LogReadResult",
    "LogReader",
    "MetricsReader",
    "QueryRejected",
    "SourceUnreachable",
]
