"""What a diagnosis says: its root cause, findings, steps, suspects, remediation and ticket."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from loopbreaker.timeutil import format_rfc3339

if TYPE_CHECKING:
    from loopbreaker.model.signal import Context


class RootCause(StrEnum):
    NO_RESTART_LOOP = "no_restart_loop"
    SPOT_PREEMPTION = "spot_preemption"
    MAINTENANCE = "maintenance"
    FAULTY_HOST = "faulty_host"
    HOST_ERROR = "host_error"
    CAPACITY = "capacity"
    OUT_OF_MEMORY = "out_of_memory"
    GPU_OUT_OF_MEMORY = "gpu_out_of_memory"
    PRIORITY_PREEMPTION = "priority_preemption"
    NODE_PRESSURE_EVICTION = "node_pressure_eviction"
    IMAGE_PULL = "image_pull"
    APPLICATION = "application"
    UNKNOWN = "unknown"


class RemediationPath(StrEnum):
    NONE = "none"
    AVOID_PREEMPTION = "avoid_preemption"
    PLAN_MAINTENANCE = "plan_maintenance"
    ISOLATE_HOST = "isolate_host"
    WATCH_HOST = "watch_host"
    ADD_CAPACITY = "add_capacity"
    FIX_MEMORY = "fix_memory"
    FIX_GPU_MEMORY = "fix_gpu_memory"
    PROTECT_PRIORITY = "protect_priority"
    RELIEVE_NODE_PRESSURE = "relieve_node_pressure"
    FIX_IMAGE = "fix_image"
    INSPECT_APPLICATION = "inspect_application"


class Risk(StrEnum):
    NONE = "none"
    LOW = "low"
    HIGH = "high"


class StepStatus(StrEnum):
    #: Every kind of evidence the step reads was read whole.
    DONE = "done"
    #: Some of it was read; the rest is missing, only partly read or held nothing.
    PARTIAL = "partial"
    SKIPPED = "skipped"
    #: None of it could be read.
    UNAVAILABLE = "unavailable"


class QueryLanguage(StrEnum):
    PROMQL = "promql"
    LQL = "lql"
    MQL = "mql"


@dataclass(frozen=True)
class Query:
    id: str
    step: int
    language: QueryLanguage
    text: str
    description: str
    deprecated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "step": self.step,
            "language": self.language.value,
            "text": self.text,
            "description": self.description,
            "deprecated": self.deprecated,
        }


@dataclass(frozen=True)
class Finding:
    """One fact that supports or rules out a cause."""

    step: int
    message: str
    cause: RootCause | None = None
    supports: bool = True
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "message": self.message,
            "cause": self.cause.value if self.cause else None,
            "supports": self.supports,
            "source": self.source,
        }


@dataclass(frozen=True)
class StepReport:
    number: int
    title: str
    status: StepStatus
    findings: tuple[Finding, ...]
    queries: tuple[Query, ...]
    sources: tuple[str, ...] = ()
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "title": self.title,
            "status": self.status.value,
            "reason": self.reason,
            "sources": list(self.sources),
            "findings": [f.message for f in self.findings],
            "queries": [q.to_dict() for q in self.queries],
        }


@dataclass(frozen=True)
class FailureEpisode:
    """One failure of one node: its NotReady run and the log lines around it, merged."""

    node: str
    host: str
    start: datetime
    kinds: tuple[str, ...]
    excerpts: tuple[str, ...] = ()
    source: str = "telemetry"
    #: The GPU faults the episode's lines name, with their class ("Xid 79 (hardware: ...)").
    gpu_faults: tuple[str, ...] = ()


@dataclass(frozen=True)
class SuspectHost:
    host: str
    nodes: tuple[str, ...]
    failures: int
    instances: tuple[str, ...] = ()
    zone: str | None = None
    node_pool: str | None = None
    host_known: bool = True
    first_failure: datetime | None = None
    last_failure: datetime | None = None
    episodes: tuple[FailureEpisode, ...] = ()
    #: ``reportHostAsFaulty``'s fault reason the evidence supports (a hardware-class Xid
    #: or an uncorrectable ECC/NVLink error: ``UNRECOVERABLE_GPU_ERROR``), else None.
    fault_reason: str | None = None
    #: GKE's node health prediction label on its nodes, as (node, ``true``/``false``):
    #: supporting evidence shown beside the failures, never a failure itself.
    health_prediction: tuple[tuple[str, str], ...] = ()

    @property
    def gpu_faults(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f for e in self.episodes for f in e.gpu_faults))

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "nodes": list(self.nodes),
            "failures": self.failures,
            "instances": list(self.instances),
            "zone": self.zone,
            "node_pool": self.node_pool,
            "host_known": self.host_known,
            "first_failure": format_rfc3339(self.first_failure) if self.first_failure else None,
            "last_failure": format_rfc3339(self.last_failure) if self.last_failure else None,
            "fault_reason": self.fault_reason,
            "gpu_faults": list(self.gpu_faults),
            "health_prediction": dict(self.health_prediction),
            "episodes": [
                {
                    "node": e.node,
                    "start": format_rfc3339(e.start),
                    "kinds": list(e.kinds),
                    "gpu_faults": list(e.gpu_faults),
                }
                for e in self.episodes
            ],
        }


@dataclass(frozen=True)
class Remediation:
    path: RemediationPath
    risk: Risk
    requires_approval: bool
    actions: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path.value,
            "risk": self.risk.value,
            "requires_approval": self.requires_approval,
            "actions": list(self.actions),
        }


@dataclass(frozen=True)
class TicketDraft:
    """A support case draft for a repeatedly failing physical host."""

    title: str
    summary: str
    physical_host: str
    host_known: bool
    project: str | None
    cluster: str
    zone: str | None
    node_pool: str | None
    nodes: tuple[str, ...]
    instances: tuple[str, ...]
    failures: int
    first_failure: datetime | None
    last_failure: datetime | None
    restart_increase: float | None
    restart_total: float | None
    excerpts: tuple[str, ...]
    queries: tuple[Query, ...]
    requested_action: str
    #: The fault reason for the support case and ``reportHostAsFaulty``, when known.
    fault_reason: str | None = None
    #: What the loop cost, in one sentence (support cases ask for the business impact).
    business_impact: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "summary": self.summary,
            "physical_host": self.physical_host,
            "host_known": self.host_known,
            "project": self.project,
            "cluster": self.cluster,
            "zone": self.zone,
            "node_pool": self.node_pool,
            "nodes": list(self.nodes),
            "instances": list(self.instances),
            "failures": self.failures,
            "first_failure": format_rfc3339(self.first_failure) if self.first_failure else None,
            "last_failure": format_rfc3339(self.last_failure) if self.last_failure else None,
            "restart_increase": self.restart_increase,
            "restart_total": self.restart_total,
            "excerpts": list(self.excerpts),
            "queries": [{"language": q.language.value, "text": q.text} for q in self.queries],
            "requested_action": self.requested_action,
            "fault_reason": self.fault_reason,
            "business_impact": self.business_impact,
        }


@dataclass(frozen=True)
class Cost:
    """What a restart loop cost (:mod:`loopbreaker.diagnosis.cost`); None figures are
    unknown, and ``missing`` says why."""

    accelerator: str | None
    accelerators: int | None
    restarts: int
    downtime_s: float | None
    lost_progress_s: float | None
    accelerator_hours: float | None
    ettr: float | None
    basis: tuple[str, ...]
    missing: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "accelerator": self.accelerator,
            "accelerators": self.accelerators,
            "restarts": self.restarts,
            "downtime_s": _round(self.downtime_s),
            "lost_progress_s": _round(self.lost_progress_s),
            "accelerator_hours": _round(self.accelerator_hours, 2),
            "ettr": _round(self.ettr, 3),
            "basis": list(self.basis),
            "missing": list(self.missing),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cost:
        def number(name: str) -> float | None:
            value = data.get(name)
            return float(value) if isinstance(value, int | float) else None

        count = data.get("accelerators")
        return cls(
            accelerator=data.get("accelerator"),
            accelerators=count if isinstance(count, int) else None,
            restarts=int(data["restarts"]),
            downtime_s=number("downtime_s"),
            lost_progress_s=number("lost_progress_s"),
            accelerator_hours=number("accelerator_hours"),
            ettr=number("ettr"),
            basis=tuple(str(b) for b in data.get("basis") or ()),
            missing=tuple(str(m) for m in data.get("missing") or ()),
        )


def _round(value: float | None, digits: int = 0) -> float | None:
    if value is None:
        return None
    return round(value, digits) if digits else float(round(value))


@dataclass(frozen=True)
class Diagnosis:
    """The outcome of the four-step workflow."""

    context: Context
    restart_loop: bool | None
    restart_increase: float | None
    restart_total: float | None
    root_cause: RootCause
    remediation: Remediation
    suspect_hosts: tuple[SuspectHost, ...]
    steps: tuple[StepReport, ...]
    evidence: tuple[Finding, ...]
    ticket_draft: TicketDraft | None
    missing_evidence: tuple[str, ...]
    summary: str
    queries_run: int = 0
    #: The cost of the restart loop; None when there is no loop.
    cost: Cost | None = None

    @property
    def partial(self) -> bool:
        return bool(self.missing_evidence)
