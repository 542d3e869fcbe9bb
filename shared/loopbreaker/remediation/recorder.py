"""The executor's vocabulary and the recording it shares with every step.

What one remediation acts through (:class:`Actuators`), what it reports
(:class:`Report`), and :class:`RemediatorCore`: recording a step on the incident, posting
progress to the chat thread, writing Events on the node, finishing. The steps are in
:mod:`loopbreaker.remediation.steps`, their order in
:mod:`loopbreaker.remediation.executor`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from loopbreaker import incidents
from loopbreaker.approval.requests import Approval, Target
from loopbreaker.chat import notify
from loopbreaker.chat.notify import Notifier
from loopbreaker.errors import ActionFailed, InvalidInput, TransientError
from loopbreaker.incidents import Incident, PauseRecord, State
from loopbreaker.incidents.remediation import Outcome, Step, StepRecord
from loopbreaker.incidents.routes import Routes, route_of
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.logs import event, get_logger
from loopbreaker.remediation.actuators import (
    NodeEvent,
    NodeEvents,
    Nodes,
    Recorder,
    SupportCases,
    Vms,
)
from loopbreaker.remediation.changes import add_step, finish, step_event
from loopbreaker.remediation.rules import RemediationPolicy

#: What a step did: its outcome, a sentence for humans, and the API calls it made.
StepResult = tuple[Outcome, str, tuple[str, ...]]
StepAction = Callable[[Incident, Approval, datetime, "Actuators"], StepResult]


@dataclass(frozen=True)
class Actuators:
    """What one remediation acts through: real, or dry-run with its recorder."""

    nodes: Nodes
    vms: Vms
    support: SupportCases | None = None
    #: Set for dry-run actuators: the mutating calls they would have made.
    recorder: Recorder | None = None
    #: Where the Events about the node go (none: not written).
    events: NodeEvents | None = None

    @property
    def dry_run(self) -> bool:
        return self.recorder is not None


#: Builds the actuators for one incident's target (the cluster endpoint depends on it).
ActuatorFactory = Callable[[Incident, Target], Actuators]


class Result(StrEnum):
    REMEDIATED = "remediated"
    FAILED = "failed"
    PLANNED = "planned"
    #: A redelivery of a finished remediation: nothing done.
    DUPLICATE = "duplicate"
    #: Not the incident's approval (or no such incident): nothing changed.
    IGNORED = "ignored"
    #: Remediation is paused: refused before any mutating call, the incident unchanged.
    PAUSED = "paused"


@dataclass(frozen=True)
class Report:
    result: Result
    incident_id: str | None
    reason: str = ""
    steps: tuple[StepRecord, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "result": self.result.value,
            "incident_id": self.incident_id,
            "reason": self.reason,
            "steps": [s.to_dict() for s in self.steps],
        }


class Stop(Exception):  # noqa: N818 - control flow between the executor's modules only
    """A step ends the remediation as failed (a drain that timed out)."""

    def __init__(self, step: Step, reason: str, calls: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.step = step
        self.reason = reason
        self.calls = calls


class RemediatorCore:
    """State, recording and Events shared by the executor and its steps."""

    def __init__(
        self,
        *,
        store: IncidentStore,
        actuators: ActuatorFactory,
        support_parent: str | None,
        notifier: Notifier,
        clock: Callable[[], datetime],
        policy: RemediationPolicy,
        sleep: Callable[[float], None] | None = None,
        logger: logging.Logger | None = None,
        verify_window: timedelta = timedelta(hours=2),
        verify_every: timedelta = timedelta(minutes=10),
        routes: Routes | None = None,
    ) -> None:
        import time

        self.store = store
        self.actuators = actuators
        self.support_parent = support_parent
        self.notifier = notifier
        self.clock = clock
        self.policy = policy
        self._sleep = sleep or time.sleep
        self._log = logger or get_logger("remediation")
        self.verify_window = verify_window
        self.verify_every = verify_every
        #: LOOPBREAKER_ROUTES: the thread's message keeps its route's name (the Route fact).
        self.routes = routes

    # --- Events -------------------------------------------------------------------------

    def _emit(
        self,
        kit: Actuators,
        incident: Incident,
        approval: Approval,
        reason: str,
        action: str,
        what: str,
        *,
        warning: bool = False,
    ) -> None:
        """Write one Event on the approved node; a failure is logged, never raised."""
        if kit.events is None:
            return
        name = approval.actor_name
        who = f"{name} ({approval.actor})" if name and name != approval.actor else approval.actor
        note = (
            f"{what} | incident {incident.id}, approved by {who} via "
            f"{approval.platform.value}{_chat_link(incident)}"
        )
        try:
            record = NodeEvent(
                approval.target.node, reason, action, note, self.clock(), warning=warning
            )
            kit.events.node_event(record)
        except (ActionFailed, TransientError, InvalidInput, OSError, ValueError) as exc:
            event(
                self._log,
                logging.WARNING,
                f"could not write Event {reason} on node {approval.target.node}: {exc}",
                labels=incident.labels(),
                event="node_event_failed",
                reason=reason,
                error=type(exc).__name__,
            )

    def _emit_step(
        self, kit: Actuators, incident: Incident, approval: Approval, step: StepRecord
    ) -> None:
        found = step_event(step)
        if found is not None:
            reason, action, warning = found
            self._emit(kit, incident, approval, reason, action, step.detail, warning=warning)

    def _get(self, incident_id: str) -> Incident:
        found = self.store.get(incident_id)
        if found is None:
            raise TransientError(f"incident {incident_id} vanished")
        return found

    # --- recording --------------------------------------------------------------------

    def _record(self, incident: Incident, step: StepRecord) -> Incident:
        updated = self.store.update(incident.id, lambda i: add_step(i, step))
        current = updated.incident or incident
        event(
            self._log,
            logging.WARNING if step.outcome is Outcome.FAILED else logging.INFO,
            f"{step.step.value}: {step.outcome.value}: {step.detail}",
            labels=current.labels(),
            event="remediation_step",
            step=step.step.value,
            outcome=step.outcome.value,
            calls=list(step.calls),
        )
        self._post(current)
        return current

    def _finish(self, incident: Incident, to: State, note: str) -> Report:
        now = self.clock()
        done = self.store.update(incident.id, lambda i: finish(i, to, note, now))
        current = done.incident or incident
        if to is State.REMEDIATED:
            # on_schedule checks the outcome from now on (see responder.verify).
            first = now + self.verify_every
            watched = self.store.update(
                incident.id,
                lambda i: incidents.start_verification(i, now, self.verify_window, first),
            )
            current = watched.incident or current
        self._post(current)
        steps = current.remediation.steps if current.remediation else ()
        result = Result.REMEDIATED if to is State.REMEDIATED else Result.FAILED
        return Report(result, current.id, note, steps)

    def _post(self, incident: Incident, pause: PauseRecord | None = None) -> None:
        route = route_of(self.routes, incident)
        message = notify.render(incident, pause=pause, route=route)
        if message.fingerprint == incident.notified_fingerprint:
            return
        try:
            where = self.notifier.post(message, incident.chat)
        except (TransientError, InvalidInput) as exc:
            # The chat thread is informational; a failed post never stops a remediation.
            event(
                self._log,
                logging.WARNING,
                f"could not post the remediation progress of {incident.id}: {exc}",
                labels=incident.labels(),
                event="chat_update_failed",
            )
            return
        self.store.update(
            incident.id, lambda i: incidents.mark_notified(i, message.fingerprint, where)
        )


def _chat_link(incident: Incident) -> str:
    """Where the incident's thread is, for an Event note (platform ids, not a secret)."""
    where = incident.chat or {}
    if where.get("message"):
        return f"; chat {where['message']}"
    if where.get("channel") and where.get("ts"):
        return f"; chat {where.get('platform', 'slack')} {where['channel']}/{where['ts']}"
    return ""
