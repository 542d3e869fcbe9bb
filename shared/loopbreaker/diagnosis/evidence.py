"""The EvidenceProvider port: where a diagnosis of an incident gets its telemetry.

``collect(context, budget)`` returns Evidence and may spend at most ``budget`` queries
(PromQL, Logging). Implementations: :class:`TelemetryDirEvidence` (offline files, spends
nothing), :class:`NoEvidence` (nothing wired: the diagnosis runs on the incident's own
signals and says what is missing), and the live sources wired in bootstrap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from loopbreaker.model import Context, Evidence, EvidenceKind, SourceStatus


class QueryBudget:
    """Counts the queries one diagnosis spends and refuses those beyond its limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0
        self.refused = 0

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.spent)

    def take(self, count: int = 1) -> bool:
        """Spend ``count`` queries if they fit; False (and nothing spent) otherwise."""
        if self.spent + count > self.limit:
            self.refused += count
            return False
        self.spent += count
        return True


class EvidenceProvider(Protocol):
    def collect(self, context: Context, budget: QueryBudget) -> Evidence: ...


class TelemetryDirEvidence:
    """Evidence from an offline telemetry directory (see :mod:`loopbreaker.diagnosis.telemetry`)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def collect(self, context: Context, budget: QueryBudget) -> Evidence:
        from loopbreaker.diagnosis import telemetry

        return telemetry.load_directory(self.directory)


_METRIC_KINDS = (
    EvidenceKind.RESTARTS,
    EvidenceKind.INTERRUPTIONS,
    EvidenceKind.NODE_CONDITIONS,
    EvidenceKind.POD_PHASES,
    EvidenceKind.UNSCHEDULABLE,
    EvidenceKind.POD_REASONS,
    EvidenceKind.MEMORY,
    EvidenceKind.POD_INFO,
    EvidenceKind.NODES,
    EvidenceKind.PODS,
)


class NoEvidence:
    """No telemetry source configured: every kind but the incident's own logs is missing."""

    def __init__(self, reason: str = "no telemetry source configured") -> None:
        self.reason = reason

    def collect(self, context: Context, budget: QueryBudget) -> Evidence:
        return Evidence(
            sources={kind: SourceStatus("none", False, self.reason) for kind in _METRIC_KINDS}
        )
