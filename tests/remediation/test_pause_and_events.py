"""Pause and Kubernetes Events, through the real clients against the local API servers.

While paused, the executor refuses before any mutating call (nothing reaches the local
Kubernetes, Compute Engine or Support servers but one ``LoopbreakerRefused`` Event) and
leaves the incident ``approved``; after resume the same request remediates. Every step
taken writes an ``events.k8s.io/v1`` Event on the node, and an Event that cannot be
written changes nothing about the outcome.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import chatkit as K
import remedkit as R

from loopbreaker.incidents import Incident, State, Verdict, new_pause
from loopbreaker.remediation.actuators import EVENT_CONTROLLER
from loopbreaker.remediation.executor import Result
from loopbreaker.remediation.rules import RemediationPolicy

LIVE = RemediationPolicy(dry_run=False)
DRY = RemediationPolicy(dry_run=True)


def nothing_mutated(lab: R.Lab) -> bool:
    return (
        lab.kube.mutations == []
        and lab.compute.deletes == []
        and lab.compute.fault_reports == []
        and lab.support.created == []
    )


def test_every_step_writes_an_event_on_the_node(
    lab: R.Lab, approved: tuple[Path, Incident, dict[str, Any]]
) -> None:
    _, incident, request = approved
    report = lab.remediator(LIVE).handle(dict(request))
    assert report.result is Result.REMEDIATED, report
    reasons = lab.kube.event_reasons()
    # The first Event names the repair path and why it was chosen.
    assert reasons[:2] == ["LoopbreakerRemediationStarted", "LoopbreakerCordoned"]
    started = lab.kube.events[0]["note"]
    assert "repair path delete" in started and "machine type" in started
    assert "LoopbreakerEvicted" in reasons
    assert reasons[-3:] == [
        "LoopbreakerDrained",
        "LoopbreakerVMDeleted",
        "LoopbreakerSupportCaseFiled",
    ]
    for written in lab.kube.events:
        # Shaped as events.k8s.io/v1 wants it (the server validated it on create).
        assert written["regarding"] == {"apiVersion": "v1", "kind": "Node", "name": R.NODE}
        assert written["metadata"]["namespace"] == "default"
        assert written["reportingController"] == EVENT_CONTROLLER
        assert written["reason"].startswith("Loopbreaker") and written["reason"].isalnum()
        assert incident.id in written["note"] and K.APPROVER in written["note"]
        assert written["type"] == "Normal"
    # The eviction batch names the pods it evicted.
    evicted = next(e for e in lab.kube.events if e["reason"] == "LoopbreakerEvicted")
    assert "evicted" in evicted["note"] and "pod(s)" in evicted["note"]
    # Remediated, and from now on watched by on_schedule.
    done = lab.incident(incident.id)
    assert done.state is State.REMEDIATED
    assert done.verification is not None and done.verification.verdict is Verdict.WATCHING
    assert done.verification.until - done.verification.since == timedelta(hours=2)
    assert done.settle_at == done.verification.since + timedelta(minutes=10)
    assert "watching the workload" in done.audit[-1].note or any(
        "watching the workload" in a.note for a in done.audit
    )


def test_an_event_that_cannot_be_written_changes_nothing(
    lab: R.Lab, approved: tuple[Path, Incident, dict[str, Any]]
) -> None:
    _, incident, request = approved
    lab.kube.event_script = [500, 403] * 20
    report = lab.remediator(LIVE).handle(dict(request))
    assert report.result is Result.REMEDIATED, report
    assert lab.kube.events == []
    assert {s.step.value: s.outcome.value for s in report.steps} == {
        "recheck": "done",
        "cordon": "done",
        "drain": "done",
        "delete_vm": "done",
        "support_case": "done",
    }
    assert lab.incident(incident.id).state is State.REMEDIATED


def test_paused_refuses_before_any_mutating_call_and_resume_remediates(
    lab: R.Lab, approved: tuple[Path, Incident, dict[str, Any]]
) -> None:
    _, incident, request = approved
    pause = new_pause("oncall@example.com", "GPU fleet upgrade", lab.clock(), None)
    assert lab.store.pause(pause) is None
    report = lab.remediator(LIVE).handle(dict(request))
    assert report.result is Result.PAUSED
    assert "GPU fleet upgrade" in report.reason and "oncall@example.com" in report.reason
    assert nothing_mutated(lab)
    assert lab.kube.event_reasons() == ["LoopbreakerRefused"]
    refused = lab.kube.events[0]
    assert refused["type"] == "Warning" and "GPU fleet upgrade" in refused["note"]
    held = lab.incident(incident.id)
    assert held.state is State.APPROVED and held.remediation is None
    assert held.audit[-1].note.startswith(
        "remediation refused, nothing changed: remediation is paused"
    )
    # The request counts as unpublished again: on_schedule sends it after the resume.
    assert held.approval is not None and held.approval.published_at is None
    # The chat thread says so too, under the pause banner.
    message = lab.notifier.messages[incident.id]
    assert message.banner is not None and "PAUSED" in message.banner
    assert "GPU fleet upgrade" in message.banner
    # A redelivery while still paused is refused the same way.
    assert lab.remediator(LIVE).handle(dict(request)).result is Result.PAUSED
    assert nothing_mutated(lab)

    lab.clock.advance(minutes=5)
    ended = lab.store.resume("oncall@example.com", lab.clock())
    assert ended is not None
    report = lab.remediator(LIVE).handle(dict(request))
    assert report.result is Result.REMEDIATED, report
    assert lab.compute.deletes and lab.kube.mutations
    assert lab.incident(incident.id).state is State.REMEDIATED


def test_a_pause_that_ran_out_no_longer_holds(
    lab: R.Lab, approved: tuple[Path, Incident, dict[str, Any]]
) -> None:
    _, _, request = approved
    now = lab.clock()
    lab.store.pause(new_pause("oncall", "short window", now, now + timedelta(minutes=30)))
    assert lab.remediator(DRY).handle(dict(request)).result is Result.PAUSED  # dry runs too
    lab.clock.advance(minutes=31)
    assert lab.remediator(DRY).handle(dict(request)).result is Result.PLANNED
    assert nothing_mutated(lab)
