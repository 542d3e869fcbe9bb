"""The responder service: log-sink entries in, incidents out; settling diagnoses them.

``handle_entry`` classifies one LogEntry, keys it and hands it to the store, which
groups it into an incident in one transaction (duplicates change nothing); an entry that
concerns no incident is only remembered, so that its redelivery is a duplicate too. ``settle``
(called every minute) expires stale approval requests and diagnoses incidents whose
settle time has passed: claim, collect evidence within the query budget, run the pure
engine, record the host failures, store the diagnosis, notify once per change. A final
incident whose notification failed is due again only to retry that notification.

``settle`` also checks the outcome of remediated incidents (``verify``): each is due every
``LOOPBREAKER_VERIFY_EVERY`` until it is ``verified`` (no restart of the workload in
``LOOPBREAKER_VERIFY_WINDOW``) or ``recurred`` (a restart on the same physical host, or
the recreated VM on that host). It is claimed like a diagnosis (a lease on ``settle_at``
in one store transaction), so concurrent schedules never check one incident twice, and
at most ``LOOPBREAKER_SETTLE_BATCH`` are looked at per run. While remediation is paused
every message carries a banner, and approved requests are not (re)published.

Failures while settling one incident: a TransientError keeps it due (its lease runs out,
or it is re-armed) and the next settle retries; InvalidInput (a broken telemetry file, a
bad setting) stops the retries for that incident, with a note in its audit trail, until
a new signal arrives. Either way it is logged and reported in ``SettleReport.failed``.
Every port comes in through the constructor;
:func:`loopbreaker.app.bootstrap.build_responder` wires them.

The class is assembled here from its halves, each a module of its own:
:mod:`~loopbreaker.responder.ingest` (deliveries in),
:mod:`~loopbreaker.responder.settle` (settling and verification), over
:mod:`~loopbreaker.responder.ports` (the constructor), with the value types in
:mod:`~loopbreaker.responder.outcomes` and the pure functions in
:mod:`~loopbreaker.responder.assessment`. Callers import all of it from here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from loopbreaker.responder.assessment import Assessment, assess, durations, merge_evidence

# Private, but the tests read it from here; the same dict, so it is the one being filled.
from loopbreaker.responder.ingest import _IGNORED_WITHOUT_ID as _IGNORED_WITHOUT_ID
from loopbreaker.responder.ingest import MAX_SHARED_OUTCOMES, Ingesting
from loopbreaker.responder.outcomes import (
    Approvals,
    Clock,
    Diagnose,
    Outcome,
    RenderDiagnosis,
    SettleReport,
    Status,
    policy_of,
    system_clock,
)
from loopbreaker.responder.settle import PUBLISH_RETRY_AFTER, Settling

__all__ = [
    "MAX_SHARED_OUTCOMES",
    "PUBLISH_RETRY_AFTER",
    "Approvals",
    "Assessment",
    "Clock",
    "Diagnose",
    "Outcome",
    "RenderDiagnosis",
    "Responder",
    "SettleReport",
    "Status",
    "assess",
    "durations",
    "merge_evidence",
    "policy_of",
    "system_clock",
]


#: How often Cloud Scheduler calls on_schedule (its finest period), and how much of it one
#: run may spend waiting for settle times, leaving the next run room to start.
SCHEDULE_PERIOD = timedelta(minutes=1)
SCHEDULE_MARGIN = timedelta(seconds=5)
#: Settle passes one run makes at most: a bound on a run, whatever the store says.
MAX_SETTLES_PER_RUN = 60


class Responder(Ingesting, Settling):
    """The one service behind ``on_log_entry``, ``on_schedule`` and ``loopbreaker replay``."""

    def settle_minute(self, sleep: Callable[[float], None]) -> SettleReport:
        """One ``on_schedule`` run: settle now, then each incident at its own settle time
        until shortly before the next run. An incident is diagnosed when its quiet period
        (the storm debounce) has passed, not at the next minute after that."""
        start = self.clock()
        until = start + SCHEDULE_PERIOD - SCHEDULE_MARGIN
        total = self.settle(start)
        for _ in range(MAX_SETTLES_PER_RUN):
            due = self.store.next_settle(self.clock())
            if due is None or due >= until:
                break
            wait = (due - self.clock()).total_seconds()
            if wait > 0:
                sleep(wait)
            total.add(self.settle(max(due, self.clock())))
        return total
