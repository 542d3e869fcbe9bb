"""The responder's value types: clocks, delivery outcomes, the settle report, approvals, policy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from loopbreaker.incidents import Policy
from loopbreaker.model import Context, Diagnosis, Evidence
from loopbreaker.settings.load import Settings

Clock = Callable[[], datetime]
Diagnose = Callable[[Context, Evidence], Diagnosis]
RenderDiagnosis = Callable[[Diagnosis], dict[str, Any]]


def system_clock() -> datetime:
    return datetime.now(UTC)


class Status(StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"
    IGNORED = "ignored"
    #: From a project outside LOOPBREAKER_PROJECTS: acknowledged, and nothing more.
    FOREIGN = "foreign_project"


@dataclass(frozen=True)
class Outcome:
    """What became of one delivery."""

    status: Status
    message_id: str | None = None
    incident_id: str | None = None
    created: bool = False
    kind: str | None = None
    reason: str | None = None
    #: The project of an entry from outside LOOPBREAKER_PROJECTS.
    project: str | None = None


@dataclass
class SettleReport:
    diagnosed: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    notified: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)
    failed: list[dict[str, str]] = field(default_factory=list)
    pruned: int = 0
    #: Remediated incidents looked at, and those concluded this run.
    checked: list[str] = field(default_factory=list)
    verified: list[str] = field(default_factory=list)
    recurred: list[str] = field(default_factory=list)

    def add(self, other: SettleReport) -> None:
        """Count ``other``'s run in this one (a replay settles in several passes)."""
        for name in self.__dataclass_fields__:
            mine = getattr(self, name)
            if isinstance(mine, list):
                mine.extend(getattr(other, name))
            else:
                setattr(self, name, mine + getattr(other, name))

    def to_dict(self) -> dict[str, Any]:
        return {
            "diagnosed": self.diagnosed,
            "expired": self.expired,
            "notified": self.notified,
            "published": self.published,
            "failed": self.failed,
            "pruned": self.pruned,
            "checked": self.checked,
            "verified": self.verified,
            "recurred": self.recurred,
        }


@dataclass(frozen=True)
class Approvals:
    """How approval buttons are made: the signing key (resolved), or why they are off."""

    signing_key: bytes | None = None
    off_reason: str | None = "LOOPBREAKER_ACTION_SIGNING_KEY is not set"

    @classmethod
    def of(cls, settings: Settings) -> Approvals:
        chat = settings.chatops
        if chat.action_signing_key is None:
            return cls(None, "LOOPBREAKER_ACTION_SIGNING_KEY is not set")
        if chat.routes is not None and not chat.routes.any_approvers:
            return cls(None, "no route in LOOPBREAKER_ROUTES names approvers")
        if chat.routes is None and not chat.approvers:
            return cls(None, "LOOPBREAKER_APPROVERS is empty")
        return cls(chat.action_signing_key.get().encode(), None)


def policy_of(settings: Settings, approvals: Approvals | None = None) -> Policy:
    enabled = approvals is not None and approvals.signing_key is not None
    return Policy(
        grouping_window=settings.grouping_window,
        settle_time=settings.settle_time,
        stale_after=settings.stale_after,
        max_signals=settings.max_signals,
        approval_ttl=settings.chatops.approval_ttl if enabled else None,
    )
