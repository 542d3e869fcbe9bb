"""The records an incident keeps about its remediation (pure): each step, the watch on the
outcome, and remediation pauses. Split off :mod:`loopbreaker.incidents.records`, which
re-exports them."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from loopbreaker.approval.repair import RepairPath
from loopbreaker.errors import InvalidInput
from loopbreaker.timeutil import format_rfc3339, parse_rfc3339


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class Step(StrEnum):
    RECHECK = "recheck"
    CORDON = "cordon"
    DRAIN = "drain"
    DELETE_VM = "delete_vm"
    REPORT_FAULTY = "report_host_faulty"
    #: The ``gke`` path: label the node for GKE's report-and-replace, then follow it.
    HAND_TO_GKE = "hand_to_gke"
    AWAIT_GKE = "await_gke"
    SUPPORT_CASE = "support_case"


class Outcome(StrEnum):
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"
    #: Dry run: what would have been done.
    PLANNED = "planned"


@dataclass(frozen=True)
class StepRecord:
    step: Step
    outcome: Outcome
    at: datetime
    detail: str
    #: The API calls made (or, in a dry run, that would be made), e.g. "PATCH /api/v1/nodes/n".
    calls: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step.value,
            "outcome": self.outcome.value,
            "at": format_rfc3339(self.at),
            "detail": self.detail,
            "calls": list(self.calls),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepRecord:
        return cls(
            Step(data["step"]),
            Outcome(data["outcome"]),
            parse_rfc3339(data["at"]),
            data.get("detail", ""),
            tuple(data.get("calls", ())),
        )


@dataclass(frozen=True)
class RemediationRecord:
    """What the executor did for an incident, step by step (stored on the incident)."""

    request_id: str
    dry_run: bool
    started_at: datetime
    steps: tuple[StepRecord, ...] = ()
    lease_until: datetime | None = None
    drain_started_at: datetime | None = None
    finished_at: datetime | None = None
    support_case: str | None = None
    delete_request_id: str | None = None
    #: The ``gke`` path: when the node was labelled, and the last report-and-replace status
    #: seen with when it was first seen (the stall timer spans deliveries).
    handed_at: datetime | None = None
    gke_status: str | None = None
    gke_status_at: datetime | None = None
    #: The branch the re-check settled on (the approved path, or the fallback the card's
    #: rule names), and why; None before the re-check, and on records from before branches.
    path: RepairPath | None = None
    path_why: str | None = None

    def done(self, step: Step) -> StepRecord | None:
        """The step's successful record, if it completed (a redelivery skips it)."""
        for record in self.steps:
            if record.step is step and record.outcome in (Outcome.DONE, Outcome.SKIPPED):
                return record
        return None

    def with_step(self, record: StepRecord) -> RemediationRecord:
        return replace(self, steps=(*self.steps, record))

    def to_dict(self) -> dict[str, Any]:
        def ts(value: datetime | None) -> str | None:
            return format_rfc3339(value) if value else None

        return {
            "request_id": self.request_id,
            "dry_run": self.dry_run,
            "started_at": format_rfc3339(self.started_at),
            "steps": [s.to_dict() for s in self.steps],
            "lease_until": ts(self.lease_until),
            "drain_started_at": ts(self.drain_started_at),
            "finished_at": ts(self.finished_at),
            "support_case": self.support_case,
            "delete_request_id": self.delete_request_id,
            "handed_at": ts(self.handed_at),
            "gke_status": self.gke_status,
            "gke_status_at": ts(self.gke_status_at),
            "path": self.path.value if self.path else None,
            "path_why": self.path_why,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RemediationRecord:
        def ts(name: str) -> datetime | None:
            value = data.get(name)
            return parse_rfc3339(value) if value else None

        return cls(
            request_id=data["request_id"],
            dry_run=bool(data["dry_run"]),
            started_at=parse_rfc3339(data["started_at"]),
            steps=tuple(StepRecord.from_dict(s) for s in data.get("steps", ())),
            lease_until=ts("lease_until"),
            drain_started_at=ts("drain_started_at"),
            finished_at=ts("finished_at"),
            support_case=data.get("support_case"),
            delete_request_id=data.get("delete_request_id"),
            handed_at=ts("handed_at"),
            gke_status=data.get("gke_status"),
            gke_status_at=ts("gke_status_at"),
            path=_path(data.get("path")),
            path_why=data.get("path_why"),
        )


def _path(value: object) -> RepairPath | None:
    """A stored branch; None when absent or unknown (a record from another version)."""
    try:
        return RepairPath(value) if isinstance(value, str) and value else None
    except ValueError:
        return None


class Verdict(StrEnum):
    """What the outcome check of a remediation found."""

    #: Still inside the window, nothing attributable seen yet.
    WATCHING = "watching"
    VERIFIED = "verified"
    RECURRED = "recurred"


@dataclass(frozen=True)
class VerificationRecord:
    """The watch on a remediated workload: since when, until when, what each check saw."""

    since: datetime
    until: datetime
    #: The physical host the remediation took the VM off (a repeat offender if seen again).
    host: str | None
    #: The workload(s) watched (``namespace/name`` as the incident named them).
    workloads: tuple[str, ...] = ()
    verdict: Verdict = Verdict.WATCHING
    checks: int = 0
    last_check: datetime | None = None
    #: A sentence per finding (restart on host X at T, new VM on host Y, ...).
    findings: tuple[str, ...] = ()
    #: The new incident opened for a restart of another cause, if any.
    other_incident: str | None = None
    decided_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        def ts(value: datetime | None) -> str | None:
            return format_rfc3339(value) if value else None

        return {
            "since": format_rfc3339(self.since),
            "until": format_rfc3339(self.until),
            "host": self.host,
            "workloads": list(self.workloads),
            "verdict": self.verdict.value,
            "checks": self.checks,
            "last_check": ts(self.last_check),
            "findings": list(self.findings),
            "other_incident": self.other_incident,
            "decided_at": ts(self.decided_at),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VerificationRecord:
        def ts(name: str) -> datetime | None:
            value = data.get(name)
            return parse_rfc3339(value) if value else None

        return cls(
            since=parse_rfc3339(data["since"]),
            until=parse_rfc3339(data["until"]),
            host=data.get("host"),
            workloads=tuple(data.get("workloads", ())),
            verdict=Verdict(data.get("verdict", Verdict.WATCHING.value)),
            checks=int(data.get("checks", 0)),
            last_check=ts("last_check"),
            findings=tuple(data.get("findings", ())),
            other_incident=data.get("other_incident"),
            decided_at=ts("decided_at"),
        )


@dataclass(frozen=True)
class PauseRecord:
    """One pause of remediation: who, why, from when, until when, and its end if ended."""

    id: str
    by: str
    reason: str
    at: datetime
    until: datetime | None = None
    resumed_at: datetime | None = None
    resumed_by: str | None = None

    def active(self, now: datetime) -> bool:
        return self.resumed_at is None and (self.until is None or self.until > now)

    def ended_at(self) -> datetime | None:
        """When the pause stopped holding (resumed, or its ``until``), None while open."""
        if self.resumed_at is not None:
            return self.resumed_at if self.until is None else min(self.resumed_at, self.until)
        return self.until

    def describe(self) -> str:
        until = f" until {format_rfc3339(self.until)}" if self.until else " until resumed"
        return f"paused by {self.by} at {format_rfc3339(self.at)}{until}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        def ts(value: datetime | None) -> str | None:
            return format_rfc3339(value) if value else None

        return {
            "id": self.id,
            "by": self.by,
            "reason": self.reason,
            "at": format_rfc3339(self.at),
            "until": ts(self.until),
            "resumed_at": ts(self.resumed_at),
            "resumed_by": self.resumed_by,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PauseRecord:
        def ts(name: str) -> datetime | None:
            value = data.get(name)
            return parse_rfc3339(value) if value else None

        return cls(
            id=str(data["id"]),
            by=str(data["by"]),
            reason=str(data.get("reason", "")),
            at=parse_rfc3339(data["at"]),
            until=ts("until"),
            resumed_at=ts("resumed_at"),
            resumed_by=data.get("resumed_by"),
        )


#: Longest pause reason kept (it is shown in every message banner).
MAX_PAUSE_REASON = 500


def new_pause(by: str, reason: str, at: datetime, until: datetime | None) -> PauseRecord:
    """A pause, checked: a reason is required and ``until`` must lie ahead."""
    text = " ".join(reason.split())
    if not text:
        raise InvalidInput("a pause needs a reason (who is asked to wait, and why)")
    if len(text) > MAX_PAUSE_REASON:
        raise InvalidInput(f"the pause reason is longer than {MAX_PAUSE_REASON} characters")
    if not by.strip():
        raise InvalidInput("a pause needs to say who paused")
    if until is not None and until <= at:
        raise InvalidInput(
            # Said the same way for the CLI's --until and chat's until=.
            f"the pause's end {format_rfc3339(until)} is not after now ({format_rfc3339(at)})"
        )
    pause_id = "pause-" + digest(f"{format_rfc3339(at)}/{by}/{text}")[:16]
    return PauseRecord(pause_id, by.strip(), text, at, until)
