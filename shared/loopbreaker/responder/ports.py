"""What both halves of the responder share: its ports, policy, logger and counters."""

from __future__ import annotations

import logging
import threading
from collections import Counter

from loopbreaker.approval.requests import ComputeRead
from loopbreaker.chat.notify import Notifier
from loopbreaker.diagnosis import engine, render
from loopbreaker.diagnosis.evidence import EvidenceProvider
from loopbreaker.incidents import PauseRecord
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.logs import get_logger
from loopbreaker.remediation.queue import LogQueue, RemediationQueue
from loopbreaker.responder.outcomes import (
    Approvals,
    Clock,
    Diagnose,
    RenderDiagnosis,
    policy_of,
    system_clock,
)
from loopbreaker.responder.pod_owners import PodWorkloads
from loopbreaker.settings.load import Settings


class ResponderState:
    """The constructor and the counters of :class:`~loopbreaker.responder.service.Responder`.

    Its ingest and settle halves are mixins over this one state, not separate objects, so
    the service stays one instance: one lock, one ``stats``, one pause seen per settle.
    """

    def __init__(
        self,
        *,
        settings: Settings,
        store: IncidentStore,
        notifier: Notifier,
        evidence: EvidenceProvider,
        clock: Clock = system_clock,
        diagnose: Diagnose = engine.diagnose,
        render_diagnosis: RenderDiagnosis = render.diagnosis_to_dict,
        logger: logging.Logger | None = None,
        approvals: Approvals | None = None,
        queue: RemediationQueue | None = None,
        pod_workloads: PodWorkloads | None = None,
        approval_clock: Clock | None = None,
        reject_level: int = logging.ERROR,
        compute: ComputeRead | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.notifier = notifier
        self.evidence = evidence
        #: Reads the target VM when an approval is asked for (None: live sources are off).
        self.compute = compute
        self.clock = clock
        self.approvals = approvals or Approvals()
        #: Dates approval requests (humans decide in real time, even during a replay).
        self.approval_clock = approval_clock or clock
        self.queue: RemediationQueue = queue or LogQueue()
        #: Resolves the workload of pod Events, which carry no pod labels.
        self.pod_workloads = pod_workloads or PodWorkloads(store, default_project=settings.project)
        self._diagnose = diagnose
        self._render = render_diagnosis
        self._policy = policy_of(settings, self.approvals)
        self._notifier_misconfigured = False
        #: The pause in force when this settle began (for the message banner).
        self._pause: PauseRecord | None = None
        #: Incidents diagnosed in the current settle pass, and the workload a node-pool
        #: incident's failure belongs to: what routing may look at again (settle._route).
        self._diagnosed: set[str] = set()
        self._owners: dict[str, tuple[str, str]] = {}
        self._log = logger or get_logger("responder")
        #: The level of the one line per rejected delivery: ERROR in the functions (an
        #: alert watches it); a replay lists its rejections in the summary instead.
        self.reject_level = reject_level
        self._lock = threading.Lock()
        #: Outcome counts since start (accepted, duplicate, rejected, ignored, ...).
        self.stats: Counter[str] = Counter()

    def _count(self, name: str) -> None:
        with self._lock:
            self.stats[name] += 1
