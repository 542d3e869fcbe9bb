"""Pause through the CLI, end to end: the refused request goes out again after resume.

``loopbreaker pause`` records the pause in the store; the executor refuses the approved
request (nothing reaches the local Kubernetes, Compute Engine and Support servers) and
marks it unpublished; ``on_schedule`` does not republish while paused, and messages carry
the banner; after ``loopbreaker resume`` the next ``on_schedule`` publishes the same
request once, and it remediates.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import chatkit as K
import remedkit as R
from fakes import FakeClock, FakeEvidence, FakeNotifier, FakeQueue

from loopbreaker.app.bootstrap import build_responder
from loopbreaker.cli.main import main
from loopbreaker.incidents import State
from loopbreaker.remediation.executor import Result
from loopbreaker.remediation.rules import RemediationPolicy

LIVE = RemediationPolicy(dry_run=False)


def test_pause_and_resume_from_the_cli_hold_and_release_the_same_request(tmp_path: Path) -> None:
    path = tmp_path / "incidents.sqlite"
    incident, request = R.approve_faulty(path)
    assert incident.approval is not None
    clock = FakeClock(incident.approval.at + timedelta(minutes=1))
    assert (
        main(["pause", "--reason", "GPU fleet upgrade", "--by", "oncall", "--store", str(path)])
        == 0
    )
    with R.lab(path, clock, tmp_path) as lab:
        assert lab.remediator(LIVE).handle(dict(request)).result is Result.PAUSED
        assert lab.kube.mutations == [] and lab.compute.deletes == []
        assert lab.support.created == []
        assert lab.kube.event_reasons() == ["LoopbreakerRefused"]
        queue, notifier = FakeQueue(), FakeNotifier()
        responder = build_responder(
            K.chat_settings(),
            store=lab.store,
            notifier=notifier,
            evidence=FakeEvidence(),
            clock=clock,
            queue=queue,
        )
        clock.advance(minutes=5)
        responder.settle(clock())
        assert queue.published == []  # not while paused
        held = lab.incident(incident.id)
        assert held.state is State.APPROVED and held.approval is not None
        assert held.approval.published_at is None

        assert main(["resume", "--by", "oncall", "--store", str(path)]) == 0
        clock.advance(minutes=1)
        report = responder.settle(clock())
        assert report.published == [incident.id]
        [again] = queue.published
        assert again == request  # the same request: same approval id, same dedup id
        clock.advance(minutes=1)
        done = lab.remediator(LIVE).handle(dict(again))
        assert done.result is Result.REMEDIATED, done
        assert lab.compute.deletes and lab.incident(incident.id).state is State.REMEDIATED
        assert "LoopbreakerCordoned" in lab.kube.event_reasons()
        # A second schedule publishes nothing more.
        assert responder.settle(clock()).published == []
